/** A tool card: kind icon, title and status; diffs and images always shown; arguments and output on a click. */
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
  ended: 'no result'
};

export function renderTool(ctx: IRenderContext, view: SessionView, item: IToolItem, entry: IEntry): void {
  const n = entry.node;
  n.className = `jp-ACP-item jp-ACP-tool jp-mod-${item.status}`;
  n.dataset.status = item.status;
  n.dataset.toolCallId = item.toolCallId;
  n.textContent = '';
  const pending = item.permissions.some(p => !p.resolved);
  const head = el('button', 'jp-ACP-toolHead');
  head.type = 'button';
  head.setAttribute('aria-expanded', String(!!entry.open));
  head.appendChild((KIND_ICONS[item.toolKind] ?? bugIcon).element({ tag: 'span', className: 'jp-ACP-toolIcon' }));
  head.appendChild(el('span', 'jp-ACP-toolTitle', item.title));
  head.appendChild(el('span', `jp-ACP-badge jp-mod-${item.status}`, STATUS_LABEL[item.status] ?? item.status));
  head.title = `${item.toolKind} tool call: show arguments and output`;
  head.addEventListener('click', () => {
    entry.open = !entry.open;
    renderTool(ctx, view, view.model.get(item.id) as IToolItem, entry);
  });
  n.appendChild(head);

  // Diffs (cell or file edits) and images are shown even when collapsed; they are the point.
  const visible = el('div', 'jp-ACP-toolVisible');
  for (const c of item.content) {
    if (c?.type === 'diff') {
      visible.appendChild(diff(c));
    } else if (c?.type === 'content' && c.content?.type === 'image') {
      const src = c.content.data
        ? `data:${c.content.mimeType ?? 'image/png'};base64,${c.content.data}`
        : typeof c.content.uri === 'string'
          ? c.content.uri
          : '';
      if (src) {
        visible.appendChild(mediaElement(ctx.sanitizer, src, 'img', `image from ${item.title}`, 'jp-ACP-toolImage'));
      }
    } else if (c?.type === 'content' && c.content?.type === 'resource_link' && typeof c.content.uri === 'string') {
      const a = el('a', 'jp-ACP-resourceLink', String(c.content.name ?? c.content.title ?? c.content.uri));
      a.href = c.content.uri;
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      a.title = c.content.uri;
      visible.appendChild(a);
    }
  }
  if (visible.childElementCount) {
    n.appendChild(visible);
  }

  if (entry.open) {
    const details = el('div', 'jp-ACP-toolDetails');
    if (item.rawInput !== undefined) {
      details.append(el('div', 'jp-ACP-detailLabel', 'Arguments'), el('pre', 'jp-ACP-pre', pretty(item.rawInput)));
    }
    const texts = item.content
      .filter(c => c?.type === 'content' && c.content?.type === 'text')
      .map(c => c.content.text as string);
    const terminals = item.content.filter(c => c?.type === 'terminal');
    if (texts.length) {
      details.append(el('div', 'jp-ACP-detailLabel', 'Output'), textPreview(texts.join('\n')));
    }
    for (const t of terminals) {
      details.append(el('div', 'jp-ACP-detailLabel', `Terminal ${t.terminalId}`));
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
