/**
 * Work in other notebooks, made visible: a badge on the Agent panel's sidebar icon and on each
 * notebook's tab (the number of permission requests waiting, or a dot while a turn runs), and a
 * JupyterLab notification with Allow / Reject / Open for a request the panel does not show.
 *
 * How it learns of other sessions: the panel streams only the conversations of notebooks it showed,
 * and a session can run without the panel (the `%acp` magic, another browser tab). The server's
 * `GET /jupyter-acp/sessions` already lists every session with its running turn and the ids of its
 * pending permission requests, so this polls it (every 2.5 s while the page is visible, 15 s when it
 * is not): one small request, no new server route or stream to keep alive, and it sees sessions of
 * every origin. A request's options and title are read once, from that session's recent events.
 */
import { Notification } from '@jupyterlab/apputils';
import type { INotebookTracker } from '@jupyterlab/notebook';
import type { Title, Widget } from '@lumino/widgets';

import type { AcpApi } from './api';
import { requestTitle } from './asking';
import { trans } from './i18n';
import { IAcpEvent, IPermissionOption, optionOrder } from './model';
import { ISessionActivity, activityOf, badgeOf, byNotebook, INotebookActivity, total } from './summary';

export interface IActivityHost {
  api: AcpApi;
  /** The panel's sidebar title (its icon gets the badge). */
  title: Title<Widget>;
  /** The session the user sees now: the panel shows it and is visible (else null). */
  shownSession(): string | null;
  /** Open the notebook and its conversation in the panel. */
  reveal(notebook: string): Promise<void>;
}

const BADGE_CLASSES = ['jp-ACP-badged', 'jp-mod-acpPending', 'jp-mod-acpRunning'];
const FAST = 2500;
const SLOW = 15000;

/** A permission request waiting in some session, with what a notification offers. */
interface IWaiting {
  session: ISessionActivity;
  requestId: string;
  notification: string | null;
}

export class ActivityMonitor {
  /** The last poll's sessions (tests and the panel read it). */
  sessions: ISessionActivity[] = [];
  /** Each poll's session list as the server sent it (review: a turn that ended with changes to review). */
  onPoll: ((list: unknown[]) => void) | null = null;
  private _timer: number | null = null;
  private _disposed = false;
  private _polling = false;
  private _again = false;
  private _waiting = new Map<string, IWaiting>();
  private _badged = new Set<Title<Widget>>();
  private _baseCaption: string;

  constructor(
    private readonly _host: IActivityHost,
    private readonly _tracker: INotebookTracker
  ) {
    this._baseCaption = _host.title.caption;
    this._tracker.widgetAdded.connect(() => this._render(), this);
    document.addEventListener('visibilitychange', this._onVisibility);
    this._schedule(1000);
  }

  /** Poll now (the panel saw something change). */
  refresh(): void {
    this._schedule(0);
  }

  dispose(): void {
    this._disposed = true;
    document.removeEventListener('visibilitychange', this._onVisibility);
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
    }
    for (const w of this._waiting.values()) {
      if (w.notification) {
        Notification.dismiss(w.notification);
      }
    }
  }

  private _onVisibility = (): void => {
    if (!document.hidden) {
      this.refresh();
    }
  };

  private _schedule(delay: number): void {
    if (this._disposed) {
      return;
    }
    if (this._polling) {
      this._again = true; // one poll at a time: the next one follows at once
      return;
    }
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
    }
    this._timer = window.setTimeout(() => void this._poll(), delay);
  }

  private async _poll(): Promise<void> {
    this._timer = null;
    this._polling = true;
    this._again = false;
    try {
      const list = await this._host.api.request<unknown[]>('sessions');
      this.sessions = (Array.isArray(list) ? list : []).map(activityOf).filter(s => s.id);
      this.onPoll?.(Array.isArray(list) ? list : []);
      this._render();
      await this._notify();
    } catch {
      // the server is away: keep the last badges, try again
    }
    this._polling = false;
    this._schedule(this._again ? 0 : document.hidden ? SLOW : FAST);
  }

  // -- badges ----------------------------------------------------------------------------------
  private _render(): void {
    const map = byNotebook(this.sessions);
    const seen = new Set<Title<Widget>>();
    this._badge(this._host.title, total(map), seen, this._baseCaption);
    this._tracker.forEach(nb => {
      if (!nb.isDisposed) {
        this._badge(nb.title, map.get(nb.context.localPath), seen);
      }
    });
    for (const t of this._badged) {
      if (!seen.has(t)) {
        this._badge(t, undefined, seen);
      }
    }
    this._badged = new Set([...this._badged].filter(t => seen.has(t) && t.className.includes('jp-ACP-badged')));
  }

  private _badge(
    title: Title<Widget>,
    activity: INotebookActivity | undefined,
    seen: Set<Title<Widget>>,
    baseCaption?: string
  ): void {
    seen.add(title);
    const badge = badgeOf(activity);
    const classes = title.className.split(/\s+/).filter(c => c && !BADGE_CLASSES.includes(c));
    const data: Record<string, string> = { ...title.dataset };
    delete data['acp-badge'];
    if (badge) {
      classes.push('jp-ACP-badged', activity!.pending ? 'jp-mod-acpPending' : 'jp-mod-acpRunning');
      data['acp-badge'] = badge.text;
      this._badged.add(title);
    }
    const className = classes.join(' ');
    if (className !== title.className) {
      title.className = className;
    }
    if ((title.dataset as Record<string, string>)['acp-badge'] !== data['acp-badge']) {
      title.dataset = data;
    }
    if (baseCaption !== undefined) {
      const caption = badge
        ? trans._p('the sidebar caption, then its badge in words', '%1 (%2)', baseCaption, badge.words)
        : baseCaption;
      if (title.caption !== caption) {
        title.caption = caption;
      }
    }
  }

  // -- notifications ---------------------------------------------------------------------------
  private async _notify(): Promise<void> {
    const shown = this._host.shownSession();
    const now = new Map<string, ISessionActivity>();
    for (const s of this.sessions) {
      for (const r of s.pending) {
        now.set(r, s);
      }
    }
    // answered, cancelled or expired: the notification goes
    for (const [id, w] of this._waiting) {
      if (!now.has(id)) {
        if (w.notification) {
          Notification.dismiss(w.notification);
        }
        this._waiting.delete(id);
      }
    }
    for (const [requestId, session] of now) {
      let w = this._waiting.get(requestId);
      if (!w) {
        w = { session, requestId, notification: null };
        this._waiting.set(requestId, w);
      }
      if (session.id === shown) {
        // the card is in front of the user: no toast on top of it
        if (w.notification) {
          Notification.dismiss(w.notification);
          w.notification = null;
        }
        continue;
      }
      if (!w.notification) {
        w.notification = 'pending'; // one notification per request, even if this poll is slow
        w.notification = await this._show(session, requestId);
      }
    }
  }

  /** The session's recent events (the request, and the tool call it names). */
  private async _recent(session: ISessionActivity): Promise<IAcpEvent[]> {
    try {
      const info = await this._host.api.request<{ last_seq: number }>(`sessions/${session.id}`);
      return await this._host.api.eventsBefore(session.id, info.last_seq + 1, 200);
    } catch {
      return [];
    }
  }

  private async _show(session: ISessionActivity, requestId: string): Promise<string> {
    const events = await this._recent(session);
    const event = events.find(e => e.type === 'permission_request' && String(e.request_id) === requestId) ?? null;
    const name = session.notebook.split('/').pop() || session.notebook;
    // the card's title: an agent's request often names only a tool call it announced before
    const what = requestTitle(events, requestId, String(event?.tool_call?.title ?? '') || trans.__('a tool'));
    const options: IPermissionOption[] = Array.isArray(event?.options) ? event!.options : [];
    const ordered = optionOrder(options);
    const allow = ordered.find(o => o.kind === 'allow_once') ?? ordered.find(o => o.kind?.startsWith('allow'));
    const reject = ordered.find(o => o.kind === 'reject_once') ?? ordered.find(o => o.kind?.startsWith('reject'));
    const actions: Notification.IAction[] = [];
    const answer = (optionId: string, label: string) => {
      this._host.api.answer(session.id, requestId, optionId).then(
        () => this.refresh(),
        err =>
          Notification.error(
            trans.__(
              'Could not answer “%1” in %2 (%3): %4. Open the conversation to see it.',
              what,
              name,
              label,
              (err as Error).message
            ),
            { autoClose: 8000 }
          )
      );
    };
    if (allow) {
      actions.push({
        label: trans.__('Allow once'),
        caption: trans.__("Allow “%1” this once (the agent's option “%2”)", what, allow.name),
        displayType: 'accent',
        callback: () => answer(allow.optionId, trans.__('Allow once'))
      });
    }
    if (reject) {
      actions.push({
        label: trans.__('Reject'),
        caption: trans.__("Reject “%1” (the agent's option “%2”)", what, reject.name),
        displayType: 'warn',
        callback: () => answer(reject.optionId, trans.__('Reject'))
      });
    }
    actions.push({
      label: trans.__('Open'),
      caption: trans.__('Open %1 and its conversation with the agent', session.notebook),
      displayType: 'link',
      callback: () => void this._host.reveal(session.notebook)
    });
    return Notification.warning(trans.__('The agent in %1 asks to run “%2”.', name, what), {
      autoClose: false,
      actions,
      data: { 'jupyter-acp': { session: session.id, request: requestId } }
    });
  }
}
