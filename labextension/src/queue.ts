/**
 * Prompts sent while the agent works: queued in the panel, sent when the turn ends.
 *
 * Client-side on purpose: the server runs one turn per session and answers a prompt sent during a
 * turn with 409 (sessions/connections/turns.py `prompt`), and the prompt's blocks (the included selection,
 * `@variables`, images) are read in this browser when the user presses Enter. The queue is kept in
 * localStorage per session, so a reload of the page loses nothing: the reloaded panel sends it when
 * the turn it waited for has ended.
 */
import { el, button } from './dom';
import { trans } from './i18n';
import type { AcpApi } from './api';
import type { SessionView } from './session';

/* eslint-disable @typescript-eslint/no-explicit-any */

export interface IQueued {
  id: string;
  text: string;
  blocks: any[];
  /** "Send now (stop current)": the running turn was asked to stop; this one goes first. */
  urgent?: boolean;
}

const KEY = 'jupyter-acp:queue:';

function load(sessionId: string): IQueued[] {
  try {
    const v = JSON.parse(window.localStorage.getItem(KEY + sessionId) ?? '[]');
    return Array.isArray(v) ? v.filter(q => q && typeof q.id === 'string' && Array.isArray(q.blocks)) : [];
  } catch {
    return [];
  }
}

function save(sessionId: string, items: IQueued[]): void {
  try {
    if (items.length) {
      window.localStorage.setItem(KEY + sessionId, JSON.stringify(items));
    } else {
      window.localStorage.removeItem(KEY + sessionId);
    }
  } catch {
    // storage full (images): the queue still works for this page
  }
}

export interface IQueueHost {
  readonly api: AcpApi;
  flash(text: string, level?: string): void;
  scheduleRender(view: SessionView): void;
}

/** The queued prompts of every conversation of the panel, and their bubbles at the end of each log. */
export class PromptQueue {
  private _items = new Map<string, IQueued[]>();
  private _sending = new Set<string>();
  private _nodes = new WeakMap<SessionView, HTMLElement>();

  constructor(private readonly _host: IQueueHost) {}

  items(view: SessionView): IQueued[] {
    const id = view.info.id;
    let list = this._items.get(id);
    if (!list) {
      list = load(id);
      this._items.set(id, list);
    }
    return list;
  }

  private _set(view: SessionView, list: IQueued[]): void {
    this._items.set(view.info.id, list);
    save(view.info.id, list);
    this._host.scheduleRender(view);
  }

  add(view: SessionView, text: string, blocks: any[]): void {
    const id = `q${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
    this._set(view, [...this.items(view), { id, text, blocks }]);
  }

  remove(view: SessionView, id: string): void {
    this._set(
      view,
      this.items(view).filter(q => q.id !== id)
    );
  }

  /** "Send now (stop current)": stop the running turn; this prompt is the next one sent. */
  async sendNow(view: SessionView, id: string): Promise<void> {
    const list = this.items(view);
    const item = list.find(q => q.id === id);
    if (!item) {
      return;
    }
    this._set(view, [{ ...item, urgent: true }, ...list.filter(q => q !== item)]);
    if (!view.model.runningTurn) {
      void this.pump(view);
      return;
    }
    view.stopping = view.model.runningTurn;
    try {
      await this._host.api.cancel(view.info.id);
    } catch (err) {
      view.stopping = null;
      this._host.flash(trans.__('Could not stop the running turn: %1', (err as Error).message));
    }
    this._host.scheduleRender(view);
  }

  /**
   * Send the first queued prompt once the conversation is idle: its events replayed up to the
   * session's last seq (a reloaded page does not send before it knows a turn still runs), no turn
   * running, no login asked.
   */
  async pump(view: SessionView): Promise<void> {
    const id = view.info.id;
    const model = view.model;
    if (
      this._sending.has(id) ||
      model.runningTurn ||
      model.lastSeq < (view.info.last_seq ?? 0) ||
      view.stream?.state !== 'open' ||
      model.problem?.kind === 'needs_login'
    ) {
      return;
    }
    // another tab of this browser may have sent it already: read the stored queue again
    const stored = load(id);
    this._items.set(id, stored);
    const next = stored[0];
    if (!next) {
      return;
    }
    this._sending.add(id);
    this._set(view, stored.slice(1));
    try {
      view.stick = true;
      await this._host.api.prompt(id, next.blocks);
    } catch (err) {
      // put it back first in line: a 409 means a turn started meanwhile (another tab, the magic)
      this._set(view, [next, ...this.items(view)]);
      if ((err as any)?.status !== 409) {
        this._host.flash(trans.__('Could not send the queued prompt: %1', (err as Error).message));
      }
    } finally {
      this._sending.delete(id);
    }
  }

  /** The queued bubbles, kept after everything else in the log. */
  render(view: SessionView): void {
    let box = this._nodes.get(view);
    if (!box) {
      box = el('div', 'jp-ACP-queuedList');
      box.setAttribute('aria-label', trans.__('Queued prompts'));
      this._nodes.set(view, box);
    }
    const list = this.items(view);
    if (view.log.lastChild !== box) {
      view.log.appendChild(box);
    }
    const key = list.map(q => q.id + (q.urgent ? '!' : '')).join(',');
    if (box.dataset.key === key) {
      return;
    }
    box.dataset.key = key;
    box.textContent = '';
    box.hidden = !list.length;
    for (const q of list) {
      const bubble = el('div', 'jp-ACP-item jp-ACP-user jp-ACP-queued');
      bubble.dataset.queueId = q.id;
      const head = el(
        'div',
        'jp-ACP-queuedHead',
        q.urgent ? trans.__('Next, once the agent stops') : trans.__('Queued: sent when the agent finishes')
      );
      const text = el('div', 'jp-ACP-queuedText', q.text || trans.__('(attachments only)'));
      const extra = q.blocks.filter(b => b?.type !== 'text').length;
      if (extra) {
        // the selection, @variables and images read when Enter was pressed go with it
        text.appendChild(el('span', 'jp-ACP-muted', trans._n(' + %1 attachment', ' + %1 attachments', extra)));
      }
      const actions = el('div', 'jp-ACP-queuedActions');
      if (!q.urgent) {
        actions.appendChild(
          button(
            trans.__('Send now (stop current)'),
            'jp-ACP-linkButton jp-ACP-queuedSendNow',
            () => void this.sendNow(view, q.id),
            undefined,
            trans.__('Send now (stop current): stop the running turn and send this prompt next')
          )
        );
      }
      actions.appendChild(
        button(
          trans.__('Remove'),
          'jp-ACP-linkButton jp-ACP-queuedRemove',
          () => this.remove(view, q.id),
          undefined,
          trans.__('Remove: this queued prompt is not sent')
        )
      );
      bubble.append(head, text, actions);
      box.appendChild(bubble);
    }
  }
}
