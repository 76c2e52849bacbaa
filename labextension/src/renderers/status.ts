/** The status line: the most urgent of reconnecting, errors, starting, working (or a transient message). */
import { button, el } from '../dom';
import type { SessionView } from '../session';
import type { StreamState } from '../stream';

export function renderStatus(
  s: HTMLElement,
  view: SessionView | null,
  transient: { text: string; level: string } | null
): void {
  const model = view?.model;
  const wasOpen = !!s.querySelector<HTMLDetailsElement>('details.jp-ACP-statusDetails')?.open;
  const running = !!model?.runningTurn;
  // the status line: the most urgent of reconnecting, errors, starting, working
  s.textContent = '';
  s.className = 'jp-ACP-status';
  const streamState: StreamState | undefined = view?.stream?.state;
  let text = '';
  let level = 'info';
  let detail = '';
  if (transient) {
    text = transient.text;
    level = transient.level;
  } else if (view && streamState === 'reconnecting') {
    text = 'Reconnecting to the server…';
    level = 'warning';
  } else if (model?.problem?.kind === 'needs_login') {
    text = 'The agent needs you to log in (the ways it offers are below), then Retry';
    level = 'error';
  } else if (view?.startError) {
    text = /needs you to log in|auth/i.test(view.startError)
      ? 'The agent needs you to log in: see Details, then send a prompt'
      : 'The agent could not start: see Details; pick another agent or fix its configuration';
    detail = view.startError;
    level = 'error';
  } else if (model?.problem?.kind === 'agent_failed' && !running) {
    text = 'The agent crashed; your next prompt restarts it';
    level = 'warning';
  } else if (model?.phase === 'starting') {
    text = `Starting agent ${view!.info.agent}…`;
    level = 'busy';
  } else if (running) {
    const waiting = model!.pendingPermissions().length;
    if (view!.stopping && view!.stopping === model!.runningTurn) {
      text = 'Stopping the agent…';
      level = 'busy';
    } else {
      text = waiting ? 'Waiting for your answer…' : 'The agent is working…';
      level = waiting ? 'warning' : 'busy';
    }
  }
  s.hidden = !text;
  s.dataset.state = text ? level : '';
  if (text) {
    s.classList.add(`jp-mod-${level}`);
    if (level === 'busy') {
      s.appendChild(el('span', 'jp-ACP-spinner'));
    }
    s.appendChild(el('span', 'jp-ACP-statusText', text));
    if (detail) {
      // the agent's own words (a stack, a path) under Details: the line above says what to do
      const details = el('details', 'jp-ACP-statusDetails');
      details.append(el('summary', '', 'Details'), el('pre', 'jp-ACP-pre jp-ACP-statusDetail', detail));
      details.open = wasOpen; // the line is rebuilt on every render: an opened Details stays open
      s.appendChild(details);
    }
    if (streamState === 'reconnecting' && !transient) {
      s.appendChild(button('Retry now', 'jp-ACP-linkButton', () => view?.stream?.retry()));
    }
  }
}
