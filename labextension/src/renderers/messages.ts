/** The conversation's words: the user's prompts, the agent's answers and thoughts, refused actions. */
import { MimeModel } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime';
import { addIcon, copyIcon, editIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { settledEnd } from '../blocks';
import { later } from './later';
import { button, el } from '../dom';
import type { IAuditItem, ITextItem, IUserItem, Item } from '../model';
import type { IEntry, SessionView } from '../session';
import type { IRenderContext } from './context';
import { byLine } from './people';

/** A refused action: a small muted line with the rule that refused and how to change it. */
export function renderAudit(item: IAuditItem, entry: IEntry): void {
  const n = entry.node;
  n.className = 'jp-ACP-item jp-ACP-audit';
  n.textContent = '';
  n.setAttribute('role', 'note');
  n.appendChild(el('span', 'jp-ACP-auditMark', '⊘'));
  n.appendChild(el('span', 'jp-ACP-auditText', item.text));
  if (item.tool) {
    n.dataset.tool = item.tool;
  }
}

const THUMB_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];

/**
 * A prompt's image as a thumbnail (click: full width, again: small). Only the prompt image types with base64
 * data become an image; an image the history could not keep (cut to fit JupyterACP.max_event_bytes) says so.
 */
export function promptThumbnail(image: { mimeType: string; data: string }, n: number): HTMLElement {
  if (!THUMB_TYPES.includes(image.mimeType) || !/^[A-Za-z0-9+/]+={0,2}$/.test(image.data)) {
    const gone = el('span', 'jp-ACP-attachment jp-ACP-imageGone', 'image not kept');
    gone.title = image.data.includes('[cut:')
      ? 'This image was larger than the history keeps (JupyterACP.max_event_bytes); the agent received it whole.'
      : `This image (${image.mimeType || 'no type'}) cannot be shown.`;
    return gone;
  }
  const img = el('img', 'jp-ACP-userImage');
  img.src = `data:${image.mimeType};base64,${image.data}`;
  img.alt = `image ${n} sent with the prompt`;
  img.title = 'Click to enlarge';
  img.tabIndex = 0;
  const toggle = () => {
    const big = img.classList.toggle('jp-mod-expanded');
    img.title = big ? 'Click to shrink' : 'Click to enlarge';
  };
  img.addEventListener('click', toggle);
  img.addEventListener('keydown', e => {
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      toggle();
    }
  });
  return img;
}

export function renderUser(ctx: IRenderContext, item: IUserItem, entry: IEntry): void {
  const n = entry.node;
  n.className = 'jp-ACP-item jp-ACP-user';
  n.textContent = '';
  // someone else's prompt (a shared session) or the magic's: who sent it and when, above their words
  const by = byLine(item.actor, ctx.me(), item.at, 'jp-ACP-userBy');
  if (by) {
    n.classList.add('jp-mod-other');
    n.appendChild(by);
  }
  if (item.text) {
    n.appendChild(el('div', 'jp-ACP-userText', item.text));
  }
  if (item.images?.length) {
    const strip = el('div', 'jp-ACP-userImages');
    item.images.forEach((image, i) => strip.appendChild(promptThumbnail(image, i + 1)));
    n.appendChild(strip);
  }
  if (item.attachments.length) {
    const chips = el('div', 'jp-ACP-attachments');
    for (const a of item.attachments) {
      chips.appendChild(el('span', 'jp-ACP-attachment', a));
    }
    n.appendChild(chips);
  }
}

export function renderMessage(ctx: IRenderContext, view: SessionView, item: ITextItem, entry: IEntry): void {
  const n = entry.node;
  if (item.open && !entry.renderer) {
    renderStreaming(ctx, view, item, entry);
    return;
  }
  let first = false;
  if (!entry.renderer) {
    n.className = 'jp-ACP-item jp-ACP-message';
    entry.renderer = ctx.rendermime.createRenderer('text/markdown');
    entry.renderer.addClass('jp-ACP-markdown');
    // before what the answer showed while it streamed: that goes when this is drawn
    Widget.attach(entry.renderer, n, streams.get(entry)?.box ?? null);
    first = !streams.has(entry); // drawn for the first time, complete (history): it waits its turn (below)
  }
  if (entry.rendering) {
    entry.dirty = true; // one render in flight; render the latest text when it lands
    return;
  }
  entry.rendering = true;
  const renderer = entry.renderer;
  const render = (): Promise<void> => {
    if (renderer.isDisposed) {
      entry.rendering = false; // the item left the drawn window before its turn came
      return Promise.resolve();
    }
    const text = (view.model.get(item.id) as ITextItem | undefined)?.text ?? item.text;
    return renderer
      .renderModel(new MimeModel({ data: { 'text/markdown': text }, trusted: false }))
      .catch(() => {
        renderer.node.textContent = text;
      })
      .then(() => {
        endStreaming(entry); // first: the code buttons' tab stop is counted among the log's blocks (roveCodeButtons)
        decorateCode(ctx, renderer.node);
        entry.rendering = false;
        if (entry.dirty) {
          entry.dirty = false;
          renderMessage(ctx, view, view.model.get(item.id) as ITextItem, entry);
        } else {
          keepPlace(ctx, view);
        }
      });
  };
  if (first) {
    later(render);
  } else {
    void render();
  }
}

/**
 * The open block of a streaming answer is rendered as markdown up to this many characters; a longer one (a long
 * paragraph still arriving) shows as plain text, appended to, until it is complete: rendering it costs its length
 * on each frame.
 */
export const TAIL_MARKDOWN_CHARS = 2000;

/** What a streaming answer shows: its complete blocks rendered once each, then its open block. */
interface IStreaming {
  box: HTMLElement;
  /** The text the complete blocks show (a prefix of the answer). */
  settled: string;
  pieces: IRenderMime.IRenderer[];
  /** The open block: plain text, or a markdown renderer's node. */
  tail: HTMLElement;
  tailRenderer: IRenderMime.IRenderer | null;
  /** The open block's text the tail shows (or is being rendered to show). */
  tailText: string;
  /** The open block's text to show once the tail's render in flight lands. */
  tailWanted: string;
  tailBusy: boolean;
  /** The answer ended (rendered whole) or was replaced: late renders draw nothing. */
  gone: boolean;
}

const streams = new WeakMap<IEntry, IStreaming>();

/**
 * A streaming answer (its item open): each block is rendered when complete, once (blocks.ts says where), with the
 * code buttons of its code blocks; the open block after them is re-rendered as the answer grows. The same renderers
 * and sanitizer as the whole answer: agent text is untrusted here as there. When the answer ends, renderMessage
 * renders it whole (the DOM of an answer that never streamed) and this goes.
 */
function renderStreaming(ctx: IRenderContext, view: SessionView, item: ITextItem, entry: IEntry): void {
  const text = item.text;
  let s = streams.get(entry);
  if (!s || !text.startsWith(s.settled)) {
    endStreaming(entry); // the answer was rebuilt other than by appending (a history merge): start over
    const n = entry.node;
    n.className = 'jp-ACP-item jp-ACP-message jp-mod-streaming';
    n.textContent = '';
    const box = el('div', 'jp-ACP-streaming');
    const tail = el('div', 'jp-ACP-streamTail');
    box.appendChild(tail);
    n.appendChild(box);
    s = {
      box,
      settled: '',
      pieces: [],
      tail,
      tailRenderer: null,
      tailText: '',
      tailWanted: '',
      tailBusy: false,
      gone: false
    };
    streams.set(entry, s);
  }
  const stream = s;
  const end = settledEnd(text, stream.settled.length);
  if (end > stream.settled.length) {
    const source = text.slice(stream.settled.length, end);
    stream.settled = text.slice(0, end);
    const piece = ctx.rendermime.createRenderer('text/markdown');
    piece.addClass('jp-ACP-markdown');
    Widget.attach(piece, stream.box, stream.tail);
    stream.pieces.push(piece);
    piece
      .renderModel(new MimeModel({ data: { 'text/markdown': source }, trusted: false }))
      .catch(() => {
        piece.node.textContent = source;
      })
      .then(() => {
        if (!stream.gone) {
          decorateCode(ctx, piece.node);
          keepPlace(ctx, view);
        }
      });
  }
  renderTail(ctx, view, stream, text.slice(end));
}

/** The open block of a streaming answer: markdown while short (one render in flight, the latest text next), else text. */
function renderTail(ctx: IRenderContext, view: SessionView, s: IStreaming, text: string): void {
  s.tailWanted = text;
  if (s.tailBusy || text === s.tailText) {
    return;
  }
  if (text.length > TAIL_MARKDOWN_CHARS || !text.trim()) {
    if (s.tailRenderer) {
      s.tailRenderer.dispose();
      s.tailRenderer = null;
      s.tail.textContent = '';
    }
    s.tail.classList.add('jp-mod-plain');
    plainTail(s, text);
    return;
  }
  if (!s.tailRenderer) {
    s.tail.textContent = '';
    s.tail.classList.remove('jp-mod-plain');
    s.tailRenderer = ctx.rendermime.createRenderer('text/markdown');
    s.tailRenderer.addClass('jp-ACP-markdown');
    Widget.attach(s.tailRenderer, s.tail);
  }
  const renderer = s.tailRenderer;
  s.tailBusy = true;
  s.tailText = text;
  renderer
    .renderModel(new MimeModel({ data: { 'text/markdown': text }, trusted: false }))
    .catch(() => {
      renderer.node.textContent = text;
    })
    .then(() => {
      s.tailBusy = false;
      if (s.gone) {
        return;
      }
      if (s.tailWanted !== s.tailText) {
        renderTail(ctx, view, s, s.tailWanted);
      } else {
        keepPlace(ctx, view);
      }
    });
}

/**
 * A plain-text open block holds lines of this many characters or so each, one element each: appending to a long
 * text node lays out (and paints) all of it again on every frame; a full line is cut at a newline (or a space,
 * where the text has none) and left alone.
 */
const PLAIN_LINE_CHARS = 1024;

/** The open block as plain text: what arrived appended to its last line, a line longer than the limit cut. */
function plainTail(s: IStreaming, text: string): void {
  let last = s.tail.lastElementChild as HTMLElement | null;
  if (!last || !text || !text.startsWith(s.tailText)) {
    s.tail.textContent = '';
    s.tailText = '';
    last = null;
  }
  if (!text) {
    return;
  }
  if (!last) {
    last = el('div', 'jp-ACP-streamLine');
    last.appendChild(document.createTextNode(''));
    s.tail.appendChild(last);
  }
  let line = last.firstChild as Text;
  line.appendData(text.slice(s.tailText.length)); // what arrived, not the whole block again
  s.tailText = text;
  while (line.length > PLAIN_LINE_CHARS) {
    const data = line.data;
    let cut = data.lastIndexOf('\n', PLAIN_LINE_CHARS);
    if (cut < PLAIN_LINE_CHARS / 2) {
      cut = data.lastIndexOf(' ', PLAIN_LINE_CHARS);
    }
    if (cut <= 0) {
      cut = data.search(/[ \n]/); // one word longer than a line: cut after it
    }
    if (cut <= 0) {
      return;
    }
    line.data = data.slice(0, cut); // the cut newline or space is where the line ends
    const next = el('div', 'jp-ACP-streamLine');
    line = document.createTextNode(data.slice(cut + 1));
    next.appendChild(line);
    s.tail.appendChild(next);
  }
}

/** The streamed view of an answer goes (rendered whole now, or replaced). */
function endStreaming(entry: IEntry): void {
  const s = streams.get(entry);
  if (!s) {
    return;
  }
  streams.delete(entry);
  s.gone = true;
  for (const piece of s.pieces) {
    piece.dispose();
  }
  s.tailRenderer?.dispose();
  s.box.remove();
}

/** Views whose scroll position is put back at the next frame. */
const placing = new WeakSet<SessionView>();

/**
 * A rendered answer changed the log's height: keep the reading place (the end it follows, or the anchor above which
 * older history lands) once per frame, not once per answer: each placement measures the whole log, and a history
 * page renders many answers at once.
 */
function keepPlace(ctx: IRenderContext, view: SessionView): void {
  if (placing.has(view)) {
    return;
  }
  placing.add(view);
  requestAnimationFrame(() => {
    placing.delete(view);
    if (!ctx.isShown(view)) {
      return;
    }
    if (view.anchor) {
      view.restoreAnchor();
    } else if (view.stick) {
      view.log.scrollTop = view.log.scrollHeight;
    }
  });
}

/** Copy and "insert as cell below" on every code block of a rendered answer. */
export function decorateCode(ctx: IRenderContext, root: HTMLElement): void {
  root.querySelectorAll('pre').forEach(pre => {
    if (pre.parentElement?.classList.contains('jp-ACP-code')) {
      return;
    }
    const wrap = el('div', 'jp-ACP-code');
    pre.replaceWith(wrap);
    pre.tabIndex = 0; // a long line scrolls it sideways: the keyboard reaches it (axe scrollable-region-focusable)
    const lang = codeLanguage(pre);
    wrap.dataset.lang = lang;
    const bar = el('div', 'jp-ACP-codeBar');
    const code = () => pre.textContent ?? '';
    const copy = button(
      'Copy',
      'jp-ACP-codeButton',
      () => {
        void navigator.clipboard?.writeText(code()).then(() => {
          copy.classList.add('jp-mod-done');
          setTimeout(() => copy.classList.remove('jp-mod-done'), 1200);
        });
      },
      copyIcon,
      'Copy code'
    );
    const insert = button(
      'Insert',
      'jp-ACP-codeButton',
      () => ctx.insertCell(code()),
      addIcon,
      'Insert as a cell below'
    );
    const replace = button(
      'Replace',
      'jp-ACP-codeButton',
      () => ctx.replaceCell(code()),
      editIcon,
      "Replace the active cell's source with this code"
    );
    bar.append(el('span', 'jp-ACP-codeLang', lang || 'code'), copy, insert, replace);
    wrap.append(bar, pre);
    for (const b of [copy, insert, replace]) {
      b.tabIndex = -1; // one tab stop for all of them (roveCodeButtons): the arrows move inside
    }
  });
  const log = root.closest<HTMLElement>('.jp-ACP-log');
  if (log) {
    roveCodeButtons(log);
  } else {
    root.querySelectorAll<HTMLButtonElement>('.jp-ACP-codeButton').forEach(b => (b.tabIndex = 0));
  }
}

const CODE_BUTTON = '.jp-ACP-codeButton';
const STEPS: Record<string, number> = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };

/**
 * The conversation's code-block buttons (Copy, Insert, Replace of every block) are one tab stop, as a toolbar is:
 * Tab and Shift+Tab pass them in one step, the arrows (Home, End) move among them. The stop is the button last
 * focused, else the latest block's Copy (the nearest to the input, where Shift+Tab comes from).
 */
function roveCodeButtons(log: HTMLElement): void {
  const buttons = () => [...log.querySelectorAll<HTMLButtonElement>(CODE_BUTTON)];
  if (!log.dataset.codeKeys) {
    log.dataset.codeKeys = 'true';
    log.addEventListener('focusin', e => {
      const target = e.target as HTMLElement;
      if (target.matches?.(CODE_BUTTON)) {
        buttons().forEach(b => (b.tabIndex = b === target ? 0 : -1));
        log.dataset.codeFocused = 'true';
      }
    });
    log.addEventListener('keydown', e => {
      const target = e.target as HTMLElement;
      if (!target.matches?.(CODE_BUTTON)) {
        return;
      }
      const all = buttons();
      const i = all.indexOf(target as HTMLButtonElement);
      const next = e.key === 'Home' ? 0 : e.key === 'End' ? all.length - 1 : e.key in STEPS ? i + STEPS[e.key] : null;
      if (next === null || i < 0) {
        return;
      }
      e.preventDefault();
      all[Math.max(0, Math.min(all.length - 1, next))].focus();
    });
  }
  const all = buttons();
  const stop = all.find(b => b.tabIndex === 0);
  if (!stop || !log.dataset.codeFocused) {
    // never focused yet: the stop follows the latest block
    const latest = all.length >= 3 ? all[all.length - 3] : all[0];
    all.forEach(b => (b.tabIndex = b === latest ? 0 : -1));
  }
}

/** The language of a rendered code block (`language-python` on its code element), if the answer named one. */
function codeLanguage(pre: HTMLElement): string {
  const names = [pre.className, pre.querySelector('code')?.className ?? ''].join(' ');
  return /(?:^|\s)(?:language|lang)-([\w+#.-]+)/.exec(names)?.[1] ?? pre.dataset.lang ?? '';
}

/** A thought still being thought: the running turn's latest item (anything after it finishes it). */
export function isLiveThought(view: SessionView, item: Item): boolean {
  return (
    item.kind === 'thought' &&
    !!view.model.runningTurn &&
    view.model.runningTurn === item.turnId &&
    view.model.items[view.model.items.length - 1] === item
  );
}

export function renderThought(view: SessionView, item: ITextItem, entry: IEntry): void {
  let details = entry.node.querySelector('details');
  if (!details) {
    entry.node.className = 'jp-ACP-item jp-ACP-thought';
    details = el('details');
    const summary = el('summary', 'jp-ACP-thoughtSummary', 'Thinking');
    details.append(summary, el('div', 'jp-ACP-thoughtText'));
    entry.node.appendChild(details);
  }
  const running = isLiveThought(view, item);
  const summary = details.querySelector('summary')!;
  summary.textContent = running ? 'Thinking…' : 'Thought';
  summary.classList.toggle('jp-mod-running', running);
  details.querySelector('.jp-ACP-thoughtText')!.textContent = item.text;
}
