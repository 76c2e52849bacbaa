/** The end of a turn (errors, stop reasons, "Revert agent edits") and the session's notices. */
import { undoIcon } from '@jupyterlab/ui-components';

import { button, el } from '../dom';
import type { INoticeItem, ITurnEndItem } from '../model';
import type { IEntry, SessionView } from '../session';
import type { IRenderContext } from './context';
import { renderError } from './errors';

export function renderTurnEnd(ctx: IRenderContext, view: SessionView, item: ITurnEndItem, entry: IEntry): void {
  const n = entry.node;
  n.className = 'jp-ACP-item jp-ACP-turnEnd';
  n.textContent = '';
  n.hidden = false;
  const revert = () => {
    if (!item.turnId || !view.revertible.has(item.turnId)) {
      return;
    }
    const b = button(
      'Revert agent edits',
      'jp-ACP-linkButton jp-ACP-revert',
      () => {
        b.disabled = true;
        ctx.api
          .revert(view.info.id, item.turnId)
          .then(() => view.refreshRevertible(() => ctx.scheduleRender(view)))
          .catch(err => {
            // it can no longer work (reverted elsewhere, the document reloaded, the server restarted):
            // say why, and ask the server which turns still can (the button goes if this one cannot)
            b.disabled = false;
            ctx.flash(`Could not revert: ${(err as Error).message}`);
            void view.refreshRevertible(() => ctx.scheduleRender(view));
          });
      },
      undoIcon,
      "Undo the agent's edits of this turn (your own edits stay)"
    );
    n.appendChild(b);
  };
  if (item.error) {
    renderError(ctx, view, item, n);
    revert();
    return;
  }
  const parts: string[] = [];
  if (item.stopReason === 'cancelled') {
    parts.push('Stopped');
  } else if (item.stopReason && item.stopReason !== 'end_turn') {
    parts.push(`Ended: ${item.stopReason.replace(/_/g, ' ')}`);
  }
  if (item.toolCallsServed) {
    parts.push(`${item.toolCallsServed} tool call${item.toolCallsServed === 1 ? '' : 's'} served`);
  } else if (item.overMcp && item.toolCallsServed === 0 && !item.stopReason?.startsWith('cancel')) {
    // the seed's signal: the agent was given the notebook's tools (over MCP) and used none of them
    parts.push('No notebook tool used');
    n.title =
      "The agent answered without the notebook's tools. If it should have read or run cells, ask it to use the " +
      '`jupyter` tools (client_read_cells, client_execute_cells, ...).';
  }
  if (parts.length) {
    n.appendChild(el('span', 'jp-ACP-turnEndText', parts.join(' · ')));
  }
  revert();
  n.hidden = n.childElementCount === 0;
  n.dataset.stopReason = item.stopReason ?? '';
}

/**
 * A notice in words: the server's "reverted the agent's edits of turn 3f2a… (1 change(s))" names the
 * turn by the prompt that started it, never by its internal id.
 */
export function noticeText(view: SessionView, text: string): string {
  const plural = (n: string) => `${n} change${n === '1' ? '' : 's'}`;
  const reverted = /^reverted the agent's edits of turn (.+?) \((\d+) change\(s\)\)$/.exec(text);
  if (reverted) {
    const turn = reverted[1];
    const prompt = view.model.items.find(i => i.kind === 'user' && i.turnId === turn);
    const words = prompt && prompt.kind === 'user' ? prompt.text.trim().replace(/\s+/g, ' ') : '';
    const which = words
      ? ` for “${words.length > 60 ? words.slice(0, 59) + '…' : words}”`
      : turn === '(outside a turn)'
        ? ' made outside a turn'
        : '';
    return `Reverted the agent's edits${which} (${plural(reverted[2])}).`;
  }
  return text.replace(/\bturn [0-9a-f]{8,}\b/g, 'a turn').replace(/(\d+) change\(s\)/g, (_, n) => plural(n));
}

export function renderNotice(view: SessionView, item: INoticeItem, entry: IEntry): void {
  const n = entry.node;
  n.className = `jp-ACP-item jp-ACP-notice jp-mod-${item.level}`;
  // "starting agent…" drives the status line; in the log it is noise
  n.hidden = item.phase === 'agent_starting';
  if (item.phase === 'session_reset') {
    n.classList.add('jp-ACP-divider');
  }
  n.textContent = noticeText(view, item.text);
}
