/**
 * A failed turn as one line (what happened and what to do), an action (Retry; a terminal to log in),
 * and the agent's raw words under Details: never a provider's stack of exception names up front.
 */
import { refreshIcon } from '@jupyterlab/ui-components';

import { button, el } from '../dom';
import { requestModelForm } from '../setup';
import type { ITurnEndItem } from '../model';
import type { SessionView } from '../session';
import type { IRenderContext } from './context';

/** One line for an error: from its kind, and for an agent's own error from its words. */
export function describeError(kind: string | undefined, raw: string): string {
  switch (kind) {
    case 'needs_login':
      return 'The agent needs you to log in: use the login card at the top (or the steps under Details), then Retry.';
    case 'agent_failed':
      return 'The agent crashed. Retry restarts it and resumes the conversation.';
    case 'timeout':
      return 'The agent went silent and the turn was ended. Retry, or pick another agent.';
  }
  if (/authenticat|api[ _-]?key|unauthori[sz]ed|\b401\b|permission denied|invalid.*token/i.test(raw)) {
    return "The model provider refused the agent's API key. Check the key the agent uses, then Retry.";
  }
  if (/rate.?limit|\b429\b|quota|overloaded|\b529\b/i.test(raw)) {
    return 'The model provider is limiting requests (rate or quota). Wait a moment, then Retry.';
  }
  if (/context.{0,20}(length|window)|too many tokens|maximum context|prompt is too long/i.test(raw)) {
    return 'The conversation is too long for the model. Start a new conversation (+ above).';
  }
  if (/connect|timed? ?out|unreachable|name resolution|ENOTFOUND|ECONNREFUSED|network/i.test(raw)) {
    return 'The agent could not reach its model provider. Check the connection (or the API base), then Retry.';
  }
  if (/model.{0,30}(not found|does not exist|unknown)|no such model/i.test(raw)) {
    return "The model provider does not know the agent's model. Pick another model, then Retry.";
  }
  return 'The agent reported an error. Retry, or read Details.';
}

/** The error card of a failed turn, into `n` (the turn-end line). */
export function renderError(ctx: IRenderContext, view: SessionView, item: ITurnEndItem, n: HTMLElement): void {
  n.classList.add('jp-mod-error');
  n.dataset.errorKind = item.errorKind ?? '';
  const raw = item.error ?? '';
  const row = el('div', 'jp-ACP-errorRow');
  row.setAttribute('role', 'alert');
  row.appendChild(el('span', 'jp-ACP-errorTitle', describeError(item.errorKind, raw)));
  const prompt = view.model.items.find(i => i.kind === 'user' && i.turnId === item.turnId && i.turnId !== null);
  const last = [...view.model.items].reverse().find(i => i.kind === 'turn_end');
  if (prompt && prompt.kind === 'user' && last === item && prompt.text.trim()) {
    // Retry sends the same words again (with what the composer attaches now: selection, @variables)
    const retry = button(
      'Retry',
      'jp-ACP-errorAction',
      () => ctx.resend(prompt.text),
      refreshIcon,
      // the visible word leads the accessible name (WCAG 2.5.3, "label in name")
      `Retry: send “${prompt.text.length > 80 ? prompt.text.slice(0, 79) + '…' : prompt.text}” again`
    );
    row.appendChild(retry);
  }
  if (!item.errorKind || item.errorKind === 'agent_error') {
    const line = describeError(item.errorKind, raw);
    if (/API key|does not know the agent's model/.test(line)) {
      // the built-in agent's model and key are set in the panel: open its form (setup.ts)
      row.appendChild(
        button('Change the model or key', 'jp-ACP-errorAction', () => requestModelForm(view.info.agent), undefined)
      );
    }
  }
  if (item.errorKind === 'needs_login' && ctx.canOpenTerminal()) {
    row.appendChild(
      button(
        'Open a terminal',
        'jp-ACP-errorAction',
        () => ctx.openTerminal(),
        undefined,
        'Open a terminal to log in as Details says'
      )
    );
  }
  n.appendChild(row);
  if (raw) {
    const details = el('details', 'jp-ACP-errorDetails');
    details.append(el('summary', '', 'Details'), el('pre', 'jp-ACP-pre jp-ACP-errorText', raw));
    n.appendChild(details);
  }
}
