/** The end of a turn (errors, stop reasons, "Revert agent edits") and the session's notices. */
import { undoIcon } from '@jupyterlab/ui-components';

import { button, el } from '../dom';
import type { INoticeItem, ITurnEndItem } from '../model';
import type { IEntry, SessionView } from '../session';
import type { IRenderContext } from './context';

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
            b.disabled = false;
            ctx.flash(`Could not revert: ${(err as Error).message}`);
          });
      },
      undoIcon,
      "Undo the agent's edits of this turn (your own edits stay)"
    );
    n.appendChild(b);
  };
  if (item.error) {
    n.classList.add('jp-mod-error');
    n.dataset.errorKind = item.errorKind ?? '';
    const title: Record<string, string> = {
      needs_login: 'The agent needs you to log in',
      agent_failed: 'The agent crashed',
      timeout: 'The agent went silent and the turn was ended',
      agent_error: 'The agent reported an error'
    };
    n.appendChild(el('div', 'jp-ACP-errorTitle', title[item.errorKind ?? ''] ?? 'The turn failed'));
    n.appendChild(el('pre', 'jp-ACP-pre jp-ACP-errorText', item.error));
    if (item.errorKind === 'agent_failed') {
      n.appendChild(el('div', 'jp-ACP-muted', 'Your next prompt restarts the agent and resumes the conversation.'));
    }
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
  }
  if (parts.length) {
    n.appendChild(el('span', 'jp-ACP-turnEndText', parts.join(' · ')));
  }
  revert();
  n.hidden = n.childElementCount === 0;
  n.dataset.stopReason = item.stopReason ?? '';
}

export function renderNotice(item: INoticeItem, entry: IEntry): void {
  const n = entry.node;
  n.className = `jp-ACP-item jp-ACP-notice jp-mod-${item.level}`;
  // "starting agent…" drives the status line; in the log it is noise
  n.hidden = item.phase === 'agent_starting';
  if (item.phase === 'session_reset') {
    n.classList.add('jp-ACP-divider');
  }
  n.textContent = item.text;
}
