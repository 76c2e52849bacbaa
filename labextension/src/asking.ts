/**
 * What a permission request asks, in the words its card in the conversation uses: a toast for another notebook's
 * request names the same thing the card does.
 *
 * An agent's request often names only the tool call it announced before (`toolCall: {toolCallId}`, its title in an
 * earlier `tool_call` update): the request alone says nothing a person can decide on. The card reads the call as the
 * conversation built it; so does this, from the same events, through the same model.
 *
 * No JupyterLab imports (node's test runner checks it).
 */
import { ChatModel, IAcpEvent } from './model';
import { callTitle } from './owntools';

/** The title the request's card shows (`fallback` when the events do not hold the request or it names nothing). */
export function requestTitle(events: IAcpEvent[], requestId: string, fallback = 'a tool'): string {
  const model = new ChatModel();
  model.applyAll(events);
  for (const item of model.items) {
    if (item.kind !== 'tool') {
      continue;
    }
    const perm = item.permissions.find(p => p.requestId === requestId);
    if (perm) {
      // the card's own choice (renderers/permissions.ts, renderers/tools.ts): the gate's words, else the call's
      const title = perm.own?.title || (item.own ? callTitle(item.own.name, item.own.args) : item.title);
      return title || fallback;
    }
  }
  return fallback;
}
