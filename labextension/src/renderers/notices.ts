/**
 * The end of a turn (errors, stop reasons, its duration, "Revert agent edits", "Fork from here"), the running
 * turn's footer (elapsed time, Stop) and the session's notices.
 */
import { stopIcon, undoIcon } from '@jupyterlab/ui-components';

import { TurnClock } from '../clock';
import { button, el } from '../dom';
import type { INoticeItem, ITurnEndItem } from '../model';
import type { IEntry, SessionView } from '../session';
import type { IRenderContext } from './context';
import { renderError } from './errors';
import { byLine } from './people';

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
      // the visible words lead the accessible name (WCAG 2.5.3, "label in name")
      "Revert agent edits: Undo the agent's edits of this turn (your own edits stay)"
    );
    n.appendChild(b);
  };
  const review = () => {
    const b = ctx.reviewFooter?.(view, item);
    if (b) {
      n.appendChild(b);
    }
  };
  if (item.error) {
    renderError(ctx, view, item, n);
    review();
    revert();
    return;
  }
  const parts: string[] = [];
  const took = item.startedAt !== undefined && item.endedAt !== undefined ? item.endedAt - item.startedAt : null;
  if (took !== null && took >= 0) {
    parts.push(`Took ${duration(took)}`);
    n.classList.add('jp-ACP-turnFooter');
  }
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
  review();
  revert();
  if (item.turnId) {
    // a new conversation from here; the server's notice (conversation_forked) then shows it afresh
    const turnId = item.turnId;
    const fork = button(
      'Fork from here',
      'jp-ACP-linkButton jp-ACP-fork',
      () => {
        fork.disabled = true;
        ctx.api
          .forkConversation(view.info.id, turnId)
          .then(() => ctx.flash('A new conversation from this point; the earlier one is in the history.', 'info'))
          .catch(err => {
            fork.disabled = false;
            ctx.flash(`Could not fork: ${(err as Error).message}`);
          });
      },
      undefined,
      'Fork from here: a new conversation that starts as this one was after this turn'
    );
    n.appendChild(fork);
  }
  n.hidden = n.childElementCount === 0;
  n.dataset.stopReason = item.stopReason ?? '';
}

/**
 * A notice in words: the server's "reverted the agent's edits of turn 3f2a… (1 change(s))" names the
 * turn by the prompt that started it, never by its internal id.
 */
export function noticeText(view: SessionView, text: string, item?: INoticeItem): string {
  const plural = (n: string) => `${n} change${n === '1' ? '' : 's'}`;
  if (item?.revert) {
    // the notice's own fields (turn_id, edits, cell_id): the text never needs an id
    const { turnId, edits, cellId } = item.revert;
    if (cellId) {
      return `Reverted the agent's edits of one cell (${plural(String(edits))}); the rest of the turn stays.`;
    }
    return `Reverted the agent's edits${whichTurn(view, turnId ?? '(outside a turn)')} (${plural(String(edits))}).`;
  }
  const reverted = /^reverted the agent's edits of turn (.+?) \((\d+) change\(s\)\)$/.exec(text);
  if (reverted) {
    return `Reverted the agent's edits${whichTurn(view, reverted[1])} (${plural(reverted[2])}).`;
  }
  return text.replace(/\bturn [0-9a-f]{8,}\b/g, 'a turn').replace(/(\d+) change\(s\)/g, (_, n) => plural(n));
}

export function renderNotice(ctx: IRenderContext, view: SessionView, item: INoticeItem, entry: IEntry): void {
  const n = entry.node;
  n.className = `jp-ACP-item jp-ACP-notice jp-mod-${item.level}`;
  // "starting agent…" drives the status line; in the log it is noise
  n.hidden = item.phase === 'agent_starting';
  if (item.phase === 'session_reset') {
    n.classList.add('jp-ACP-divider');
  }
  n.textContent = noticeText(view, item.text, item);
  // an agent switch, a revert, a rewind, new settings: who made it (when not the viewer) and when
  const by = byLine(item.actor, ctx.me(), item.at, 'jp-ACP-noticeBy');
  if (by) {
    n.appendChild(by);
  }
}

/** A turn named by the prompt that started it, never by its internal id. */
function whichTurn(view: SessionView, turn: string): string {
  const prompt = view.model.items.find(i => i.kind === 'user' && i.turnId === turn);
  const words = prompt && prompt.kind === 'user' ? prompt.text.trim().replace(/\s+/g, ' ') : '';
  return words
    ? ` for “${words.length > 60 ? words.slice(0, 59) + '…' : words}”`
    : turn === '(outside a turn)'
      ? ' made outside a turn'
      : '';
}

/** 4 s, 1 min 05 s, 1 h 02 min. */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  const m = Math.floor(s / 60);
  if (m < 60) {
    return `${m} min ${String(s % 60).padStart(2, '0')} s`;
  }
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`;
}

/**
 * The running turn's footer, after the log's items: "Working · 12 s" ticking, and Stop. Hidden when
 * no turn runs (the turn's end then shows its duration and its actions).
 */
/** The running turn waits for the user: a permission card or an agent's question is unanswered. */
function waitsForUser(view: SessionView): boolean {
  const model = view.model;
  if (model.pendingPermissions().length) {
    return true;
  }
  for (let i = model.items.length - 1; i >= 0; i--) {
    const item = model.items[i];
    if (item.turnId !== model.runningTurn) {
      break; // the running turn's items are the last ones
    }
    if (item.kind === 'elicitation' && !item.resolved) {
      return true;
    }
  }
  return false;
}

export class TurnFooter {
  private _nodes = new WeakMap<
    SessionView,
    { node: HTMLElement; time: HTMLElement; timer: number | null; clock: TurnClock }
  >();

  constructor(private readonly _stop: (view: SessionView) => void) {}

  /** Place the footer after `after` in the view's log and show it while a turn runs. */
  render(view: SessionView, after: Node): void {
    let f = this._nodes.get(view);
    if (!f) {
      const node = el('div', 'jp-ACP-item jp-ACP-turnFooter jp-ACP-runningFooter');
      const time = el('span', 'jp-ACP-turnElapsed');
      time.setAttribute('aria-live', 'off'); // a ticking clock is not announced
      const stop = button(
        'Stop',
        'jp-ACP-linkButton jp-ACP-footerStop',
        () => this._stop(view),
        stopIcon,
        'Stop the agent (Esc)'
      );
      node.append(el('span', 'jp-ACP-spinner'), time, stop);
      f = { node, time, timer: null, clock: new TurnClock() };
      this._nodes.set(view, f);
    }
    const { node } = f;
    if (after.nextSibling !== node) {
      view.log.insertBefore(node, after.nextSibling);
    }
    const turn = view.model.runningTurn;
    node.hidden = !turn;
    if (!turn) {
      if (f.timer !== null) {
        window.clearInterval(f.timer);
        f.timer = null;
      }
      return;
    }
    const started = view.model.turnStarts.get(turn);
    const tick = (footer: typeof f) => {
      const stopping = view.stopping && view.stopping === view.model.runningTurn;
      // the clock pauses while the agent waits for the user (a permission card, a question)
      const waiting = !stopping && waitsForUser(view);
      const secs = started !== undefined ? footer!.clock.read(turn, started, Date.now() / 1000, waiting) : null;
      const doing = stopping ? 'Stopping' : waiting ? 'Waiting for you' : 'Working';
      footer!.time.textContent = doing + (secs !== null ? ` · ${duration(secs)}` : '');
      footer!.node.classList.toggle('jp-mod-waiting', waiting);
      if (!view.model.runningTurn || !view.log.isConnected) {
        window.clearInterval(footer!.timer ?? undefined);
        footer!.timer = null;
      }
    };
    tick(f);
    if (f.timer === null) {
      const footer = f;
      footer.timer = window.setInterval(() => tick(footer), 1000);
    }
  }
}
