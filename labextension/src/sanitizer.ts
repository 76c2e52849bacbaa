/**
 * Nothing fetched without a click (a fetch made by agent content carries what the agent put in its URL, the
 * notebook's secrets among them, to any host): the sidebar's sanitizer, and the media
 * elements and click-to-load links of agent content.
 */
import type { IRenderMime } from '@jupyterlab/rendermime';

import { el } from './dom';
import { cssMayFetch, isRemoteUrl } from './model';

// -- nothing fetched without a click -----------------------------------------------------------------
/** Elements that load or embed something by themselves: never rendered from agent content. */
const DROPPED_TAGS = new Set([
  'script',
  'style',
  'link',
  'meta',
  'base',
  'iframe',
  'frame',
  'frameset',
  'object',
  'embed',
  'applet',
  'portal',
  'noscript',
  'template',
  'svg',
  'math',
  'param',
  'fencedframe'
]);
/** Attributes that make the browser fetch a URL (or send one on a click we did not design). */
const URL_ATTRS = [
  'src',
  'srcset',
  'poster',
  'background',
  'lowsrc',
  'dynsrc',
  'data',
  'codebase',
  'action',
  'formaction',
  'ping',
  'manifest',
  'icon',
  'longdesc',
  'xlink:href',
  'href',
  'imagesrcset',
  'attributionsrc'
];
const MEDIA_LABEL: Record<string, string> = { img: 'image', video: 'video', audio: 'audio' };

function hostOf(url: string): string {
  try {
    return new URL(url, document.baseURI).host || url;
  } catch {
    return url;
  }
}

/**
 * A click-to-load link in place of remote media. `data-acp-url` is what the sidebar's click handler
 * loads; `href` lets the user open it in a tab instead.
 */
function remoteLinkHtml(doc: Document, url: string, media: string, alt: string): HTMLAnchorElement {
  const a = doc.createElement('a');
  a.className = 'jp-ACP-remote';
  a.dataset.acpUrl = url;
  a.dataset.acpMedia = media;
  if (alt) {
    a.dataset.acpAlt = alt;
  }
  a.setAttribute('href', url);
  a.setAttribute('target', '_blank');
  a.setAttribute('rel', 'noopener noreferrer');
  const what = MEDIA_LABEL[media] ?? 'content';
  a.title =
    `The agent's ${what} is on another server: ${url}\nNothing was loaded. Loading it tells that server ` +
    'you are reading this (and whatever the URL carries). Click to load.';
  a.textContent = `Load ${what}${alt ? ` “${alt}”` : ''} from ${hostOf(url)}`;
  return a;
}

/**
 * The sidebar's sanitizer: JupyterLab's, then every URL that would be fetched with no click and is
 * not of this server (or `data:`) is taken out. Remote images, video and audio become click-to-load
 * links; styles that may fetch, frames, embeds and link tags go. The HTML is worked on in an inert
 * document (one with no browsing context loads nothing), so not even the check fetches.
 */
export class NoFetchSanitizer implements IRenderMime.ISanitizer {
  /** URLs the user clicked to load (this page's lifetime): they render as media from then on. */
  readonly approved = new Set<string>();
  readonly allowCommandLinker = false;

  constructor(private readonly _base: IRenderMime.ISanitizer) {}

  get allowNamedProperties(): boolean {
    return false;
  }

  getAutolink(): boolean {
    return this._base.getAutolink ? this._base.getAutolink() : true;
  }

  sanitize(dirty: string, options?: IRenderMime.ISanitizerOptions): string {
    return this.neutralise(this._base.sanitize(dirty, options));
  }

  /** Whether `url` may be fetched without asking: this server's, `data:`, or clicked already. */
  allowed(url: string): boolean {
    return !isRemoteUrl(url, document.baseURI) || this.approved.has(url.trim());
  }

  neutralise(html: string): string {
    const doc = document.implementation.createHTMLDocument('');
    const root = doc.createElement('div');
    root.innerHTML = html;
    for (const node of Array.from(root.querySelectorAll('*'))) {
      if (!root.contains(node)) {
        continue; // inside something already replaced
      }
      const tag = node.localName;
      if (DROPPED_TAGS.has(tag)) {
        node.remove();
        continue;
      }
      if (tag === 'img' || (tag === 'input' && (node.getAttribute('type') ?? '').toLowerCase() === 'image')) {
        const src = (node.getAttribute('src') ?? '').trim();
        if (src && !this.allowed(src)) {
          node.replaceWith(remoteLinkHtml(doc, src, 'img', node.getAttribute('alt') ?? ''));
          continue;
        }
      } else if (tag === 'video' || tag === 'audio') {
        const urls = [
          node.getAttribute('src') ?? '',
          ...Array.from(node.querySelectorAll('source[src], track[src]'), c => c.getAttribute('src') ?? '')
        ]
          .map(u => u.trim())
          .filter(Boolean);
        const remote = urls.find(u => !this.allowed(u));
        if (remote) {
          node.replaceWith(remoteLinkHtml(doc, urls[0] && !this.allowed(urls[0]) ? urls[0] : remote, tag, ''));
          continue;
        }
      }
      for (const attr of Array.from(node.attributes)) {
        const name = attr.name.toLowerCase();
        if (name.startsWith('on') || name.startsWith('data-commandlinker')) {
          node.removeAttribute(attr.name);
        } else if (name === 'style' && cssMayFetch(attr.value)) {
          node.removeAttribute(attr.name);
        } else if (name === 'srcset' || name === 'imagesrcset') {
          node.removeAttribute(attr.name); // no use in a sidebar, and a list of URLs to check
        } else if (URL_ATTRS.includes(name)) {
          if ((name === 'href' && (tag === 'a' || tag === 'area')) || this.allowed(attr.value)) {
            continue; // a link is followed on a click only
          }
          node.removeAttribute(attr.name);
        }
      }
      if (tag === 'a' || tag === 'area') {
        node.setAttribute('rel', 'noopener noreferrer');
      }
    }
    return root.innerHTML;
  }
}

/**
 * An image, video or audio element for `url`, or a click-to-load link when it is on another server
 * and was not clicked yet (the tool card's share of the same rule).
 */
export function mediaElement(
  sanitizer: NoFetchSanitizer,
  url: string,
  media: string,
  alt: string,
  cls = ''
): HTMLElement {
  if (!sanitizer.allowed(url)) {
    const a = remoteLinkHtml(document, url, media, alt);
    if (cls) {
      a.dataset.acpClass = cls;
    }
    return a;
  }
  if (media === 'video' || media === 'audio') {
    const m = el(media, cls);
    m.controls = true;
    m.src = url;
    return m;
  }
  const img = el('img', cls);
  img.src = url;
  img.alt = alt || 'image';
  return img;
}

/** A click on a click-to-load link: load that URL (and remember the user's choice for this page). */
export function onRemoteClick(sanitizer: NoFetchSanitizer, e: MouseEvent): void {
  const target = e.target as Element | null;
  const link = target?.closest?.('a.jp-ACP-remote') as HTMLAnchorElement | null;
  const url = link?.dataset.acpUrl;
  if (!link || !url || (e.button ?? 0) !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) {
    return; // a modified click opens the link in a tab, as links do
  }
  e.preventDefault();
  e.stopPropagation();
  sanitizer.approved.add(url.trim());
  const media = mediaElement(
    sanitizer,
    url,
    link.dataset.acpMedia ?? 'img',
    link.dataset.acpAlt ?? '',
    link.dataset.acpClass ?? ''
  );
  media.classList.add('jp-ACP-loadedRemote');
  link.replaceWith(media);
}
