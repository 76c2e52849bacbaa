/**
 * A tool card: kind icon, title and status; diffs, terminals, plots and HTML outputs always shown; arguments and
 * output on a click; the permission cards of the call.
 */
import { MimeModel } from '@jupyterlab/rendermime';
import {
  LabIcon,
  bugIcon,
  deleteIcon,
  editIcon,
  fileIcon,
  inspectorIcon,
  linkIcon,
  listIcon,
  refreshIcon,
  runIcon,
  searchIcon
} from '@jupyterlab/ui-components';

import { el, pretty } from '../dom';
import type { IToolItem } from '../model';
import { mediaElement } from '../sanitizer';
import type { IEntry, SessionView } from '../session';
import type { IRenderContext } from './context';
import { diff, textPreview } from './diff';
import { permission } from './permissions';
import { renderTerminal } from './terminal';
import { callContent, callTitle, ownKind } from '../owntools';

/* eslint-disable @typescript-eslint/no-explicit-any */

const KIND_ICONS: Record<string, LabIcon> = {
  read: fileIcon,
  edit: editIcon,
  delete: deleteIcon,
  move: linkIcon,
  search: searchIcon,
  execute: runIcon,
  think: inspectorIcon,
  fetch: refreshIcon,
  switch_mode: listIcon,
  other: bugIcon
};

const STATUS_LABEL: Record<string, string> = {
  pending: 'pending',
  in_progress: 'running',
  completed: 'done',
  failed: 'failed',
  cancelled: 'cancelled',
  rejected: 'rejected',
  ended: 'no result'
};

/**
 * The user rejected this call (a permission answered with a reject option) and it did not run: its
 * badge says "rejected", not the "failed" agents report for it.
 */
export function wasRejected(item: IToolItem): boolean {
  if (item.status === 'completed' || item.status === 'in_progress') {
    return false;
  }
  // the client's gate asked in a card of its own: the tool's MCP result names the rule that refused
  const rule = item.rawOutput?.structuredContent?.rule;
  if (item.status === 'failed' && typeof rule === 'string' && /reject/.test(rule)) {
    return true;
  }
  return item.permissions.some(p => {
    const answer = p.resolved;
    if (!answer || answer.cancelled) {
      return false;
    }
    const opt = p.options.find(o => o.optionId === answer.optionId);
    return !!opt?.kind?.startsWith('reject');
  });
}

/** An embedded HTML resource (a DataFrame's table). */
function isHtml(block: any): boolean {
  return (
    block?.type === 'resource' && block.resource?.mimeType === 'text/html' && typeof block.resource.text === 'string'
  );
}

function disposeRenderer(entry: IEntry): void {
  if (entry.renderer) {
    try {
      entry.renderer.dispose();
    } catch {
      // detached with its node already
    }
    entry.renderer = undefined;
  }
}

export function renderTool(ctx: IRenderContext, view: SessionView, item: IToolItem, entry: IEntry): void {
  const n = entry.node;
  n.className = `jp-ACP-item jp-ACP-tool jp-mod-${item.status}`;
  n.dataset.status = item.status;
  n.dataset.toolCallId = item.toolCallId;
  disposeRenderer(entry); // an HTML output's renderer of the previous rendering
  n.textContent = '';
  const pending = item.permissions.some(p => !p.resolved);
  const head = el('button', 'jp-ACP-toolHead');
  head.type = 'button';
  head.setAttribute('aria-expanded', String(!!entry.open));
  // one of the notebook's own tools, however the agent named it: titled and previewed as the built-in agent's
  const title = item.own ? callTitle(item.own.name, item.own.args) : item.title;
  const preview = item.own ? callContent(item.own.args) : [];
  const kind = item.own && item.toolKind === 'other' ? ownKind(item.own.name) : item.toolKind;
  head.appendChild((KIND_ICONS[kind] ?? bugIcon).element({ tag: 'span', className: 'jp-ACP-toolIcon' }));
  head.appendChild(el('span', 'jp-ACP-toolTitle', title));
  const shown = wasRejected(item) ? 'rejected' : item.status;
  n.classList.toggle('jp-mod-rejected', shown === 'rejected');
  head.appendChild(el('span', `jp-ACP-badge jp-mod-${shown}`, STATUS_LABEL[shown] ?? shown));
  head.title =
    `${title} (${kind} tool call` +
    (title !== item.title ? `, the agent's “${item.title}”` : '') +
    '): show arguments and output';
  head.addEventListener('click', () => {
    entry.open = !entry.open;
    renderTool(ctx, view, view.model.get(item.id) as IToolItem, entry);
  });
  n.appendChild(head);

  // Diffs (cell or file edits) and images are shown even when collapsed; they are the point.
  const visible = el('div', 'jp-ACP-toolVisible');
  const seen = new Set<string>();
  const image = (block: any) => {
    const src = block.data
      ? `data:${block.mimeType ?? 'image/png'};base64,${block.data}`
      : typeof block.uri === 'string'
        ? block.uri
        : '';
    if (src && !seen.has(src)) {
      seen.add(src);
      const img = mediaElement(ctx.sanitizer, src, 'img', `image from ${item.title}`, 'jp-ACP-toolImage');
      img.title = 'Click to see it at full size';
      img.addEventListener('click', () => img.classList.toggle('jp-mod-full'));
      visible.appendChild(img);
    }
  };
  const html: string[] = [];
  if (!item.content.some(c => c?.type === 'diff')) {
    for (const c of preview) {
      if (c.type === 'diff') {
        visible.appendChild(diff(c)); // the change the call makes, as the built-in agent's card shows it
      }
    }
  }
  const mine = item.agentTerminal;
  let shownMine = false;
  for (const c of item.content) {
    if (c?.type === 'terminal' && typeof c.terminalId === 'string') {
      // a terminal of the client's: its command and live output, and the way to open it in JupyterLab; else the
      // command the agent ran itself, as its card told it
      const client = view.model.terminals.get(c.terminalId);
      const own = !client && mine?.terminalId === c.terminalId ? mine : undefined;
      shownMine = shownMine || !!own;
      visible.appendChild(renderTerminal(ctx, c.terminalId, client ?? own, !!own));
    } else if (c?.type === 'diff') {
      visible.appendChild(diff(c));
    } else if (c?.type === 'content' && c.content?.type === 'image') {
      image(c.content);
    } else if (c?.type === 'content' && isHtml(c.content)) {
      html.push(String(c.content.resource.text));
    } else if (c?.type === 'content' && c.content?.type === 'resource_link' && typeof c.content.uri === 'string') {
      const a = el('a', 'jp-ACP-resourceLink', String(c.content.name ?? c.content.title ?? c.content.uri));
      a.href = c.content.uri;
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      a.title = c.content.uri;
      visible.appendChild(a);
    }
  }
  if (mine && !shownMine) {
    visible.appendChild(renderTerminal(ctx, mine.terminalId, mine, true)); // output before the card names it
  }
  // a tool's MCP result (the built-in agent reports it as rawOutput): the plots of agent-run code
  // are its image blocks, HTML outputs (DataFrames) its text/html resources
  const result = item.rawOutput;
  if (result && typeof result === 'object' && Array.isArray(result.content)) {
    for (const block of result.content) {
      if (block?.type === 'image') {
        image(block);
      } else if (isHtml(block)) {
        html.push(String(block.resource.text));
      }
    }
  }
  if (html.length) {
    // JupyterLab's HTML renderer, untrusted: its sanitizer (the sidebar's, which fetches nothing)
    const box = el('div', 'jp-ACP-toolHtml');
    const renderer = ctx.rendermime.createRenderer('text/html');
    entry.renderer = renderer;
    box.appendChild(renderer.node); // not attached as a widget: the card may be rebuilt (or off screen)
    void renderer.renderModel(new MimeModel({ data: { 'text/html': html.join('\n') }, trusted: false }));
    visible.appendChild(box);
  }
  if (visible.childElementCount) {
    n.appendChild(visible);
  }

  if (entry.open) {
    const details = el('div', 'jp-ACP-toolDetails');
    const code = preview.filter(c => c.type === 'content').map(c => c.content.text as string);
    if (code.length) {
      details.append(el('div', 'jp-ACP-detailLabel', 'Code'), textPreview(code.join('\n')));
    }
    if (item.rawInput !== undefined) {
      details.append(el('div', 'jp-ACP-detailLabel', 'Arguments'), el('pre', 'jp-ACP-pre', pretty(item.rawInput)));
    }
    const texts = item.content
      .filter(c => c?.type === 'content' && c.content?.type === 'text')
      .map(c => c.content.text as string);
    if (texts.length) {
      details.append(el('div', 'jp-ACP-detailLabel', 'Output'), textPreview(texts.join('\n')));
    }
    // an MCP-style result repeats the output above: show only what it adds
    let result = item.rawOutput;
    if (texts.length && result && typeof result === 'object' && Array.isArray(result.content)) {
      result = result.structuredContent ?? undefined;
    }
    if (result !== undefined && result !== null) {
      details.append(el('div', 'jp-ACP-detailLabel', 'Result'), el('pre', 'jp-ACP-pre', pretty(result)));
    }
    if (item.locations.length) {
      details.append(
        el('div', 'jp-ACP-detailLabel', 'Locations'),
        el('pre', 'jp-ACP-pre', item.locations.map(l => `${l.path}${l.line ? ':' + l.line : ''}`).join('\n'))
      );
    }
    if (!details.childElementCount) {
      details.appendChild(el('div', 'jp-ACP-muted', 'No arguments or output.'));
    }
    n.appendChild(details);
  }

  for (const perm of item.permissions) {
    n.appendChild(permission(ctx, view, item, perm));
  }
  n.classList.toggle('jp-mod-asking', pending);
}
