/**
 * ACP content as text a user reads, and the checks that keep agent content from fetching anything by itself
 * (remote URLs, CSS that loads): pure functions the model and the renderers share.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */

import { trans } from './i18n';

/** Text of ACP content blocks, as a user would read it. */
export function blocksText(blocks: any): {
  text: string;
  attachments: string[];
  images: { mimeType: string; data: string }[];
} {
  const parts: string[] = [];
  const attachments: string[] = [];
  const images: { mimeType: string; data: string }[] = [];
  if (!Array.isArray(blocks)) {
    return { text: typeof blocks === 'string' ? blocks : '', attachments, images };
  }
  for (const b of blocks) {
    if (!b || typeof b !== 'object') {
      continue;
    }
    if (b.type === 'text' && typeof b.text === 'string') {
      parts.push(b.text);
    } else if (b.type === 'resource' && b.resource) {
      attachments.push(String(b.resource.title ?? b.resource.uri ?? trans.__('resource')));
    } else if (b.type === 'resource_link') {
      attachments.push(String(b.title ?? b.name ?? b.uri ?? trans.__('link')));
    } else if (b.type === 'image') {
      images.push({ mimeType: String(b.mimeType ?? ''), data: typeof b.data === 'string' ? b.data : '' });
    }
  }
  return { text: parts.join('\n'), attachments, images };
}

/** Text of one ACP content block (an update's `content`). */
export function chunkText(content: any): string {
  if (!content) {
    return '';
  }
  if (typeof content === 'string') {
    return content;
  }
  if (content.type === 'text' && typeof content.text === 'string') {
    return content.text;
  }
  if (content.type === 'resource_link' && typeof content.uri === 'string') {
    return `[${mdLabel(String(content.name ?? content.title ?? content.uri))}](${mdUrl(content.uri)})`;
  }
  if (content.type === 'image') {
    // rendered as markdown: a remote URI becomes a click-to-load link (see the sidebar's sanitizer)
    const src =
      typeof content.data === 'string' && content.data
        ? `data:${content.mimeType ?? 'image/png'};base64,${content.data}`
        : typeof content.uri === 'string'
          ? content.uri
          : '';
    return src ? `\n\n![image](${mdUrl(src)})\n\n` : '';
  }
  return '';
}

/** A link text for markdown: brackets and backslashes escaped. */
function mdLabel(text: string): string {
  return text.replace(/[\\[\]]/g, m => '\\' + m);
}

/** A URL for a markdown link target: `<...>` form, so spaces and parentheses cannot end it early. */
function mdUrl(url: string): string {
  return '<' + url.replace(/[<>\n\r]/g, encodeURIComponent) + '>';
}

/**
 * Whether loading `url` from a page at `base` would send a request to another origin (an exfiltration
 * channel for an agent: `?d=SECRET`). `data:` is local; anything unparsable or of another origin is
 * remote, including `javascript:` and `blob:` of another origin.
 */
export function isRemoteUrl(url: string, base: string): boolean {
  const u = String(url ?? '').trim();
  if (!u) {
    return false;
  }
  let parsed: URL;
  try {
    parsed = new URL(u, base);
  } catch {
    return true;
  }
  if (parsed.protocol === 'data:') {
    return false;
  }
  try {
    return parsed.origin !== new URL(base).origin || parsed.origin === 'null';
  } catch {
    return true;
  }
}

/** A CSS text that may fetch something (`url()`, `image-set()`, `@import`, escapes hiding them). */
export function cssMayFetch(css: string): boolean {
  return /url\s*\(|image-set|image\s*\(|src\s*\(|@import|expression\s*\(|\\/i.test(String(css ?? ''));
}
