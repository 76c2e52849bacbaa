/**
 * Review and rewind in the front end: what ties the review view (view.ts), the cells' provenance marks (marks.ts)
 * and "Review after" (policy.ts) to the panel, the notebook and JupyterLab's commands and notifications.
 *
 * A turn's review opens from its footer in the panel ("Review 4 changes"), from a notification when a turn of a
 * conversation not on screen ends with changes to review, from a mark's "Show the change", and from the command
 * "Review the Agent's Last Turn" (palette). A turn run under "Review after" ends with its review open.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget, Notification } from '@jupyterlab/apputils';
import type { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { button } from '../dom';
import { trans } from '../i18n';
import type { IAcpEvent, ITurnEndItem } from '../model';
import type { SessionView } from '../session';
import { IRequester, ReviewApi } from './api';
import { reviewLabel } from './diff';
import { ProvenanceMarks } from './marks';
import { PolicyPicker } from './policy';
import { agentTitle, IAgentEntry } from './provenance';
import { ReviewView } from './view';

export const REVIEW_COMMAND = 'jupyter-acp:review-turn';
export const REMOVE_MARKS_COMMAND = 'jupyter-acp:remove-agent-marks';

/** A turn's review opened by "Review after" this long after it ended still counts as live (seconds). */
const LIVE = 120;

/** What review needs of the agent panel. */
export interface IReviewPanel {
  readonly id: string;
  /** the conversation on screen */
  readonly shownView: SessionView | null;
  /** scroll the conversation on screen to the turn's prompt; false when it is not in it */
  revealTurn(turnId: string): Promise<boolean>;
  /** re-render the conversation (a footer's count arrived) */
  rerender(view: SessionView): void;
  flash(text: string, level?: string): void;
  renderChrome(): void;
}

export interface IReviewOptions {
  app: JupyterFrontEnd;
  requester: IRequester & { agents(): Promise<{ name: string; title: string }[]> };
  tracker: INotebookTracker;
  languages: IEditorLanguageRegistry | null;
}

interface IOpenArgs {
  sessionId: string;
  notebook: string;
  turnId: string;
  prompt?: string;
  agent?: string;
  focusCell?: string | null;
  readOnly?: boolean;
  activate?: boolean;
}

function promptOf(view: SessionView, turnId: string): string {
  const item = view.model.items.find(i => i.kind === 'user' && i.turnId === turnId);
  return item && item.kind === 'user' ? item.text : '';
}

function textOfPrompt(blocks: unknown): string {
  return Array.isArray(blocks)
    ? blocks
        .map(b =>
          b && typeof b === 'object' && (b as { type?: string }).type === 'text' ? (b as { text?: string }).text : ''
        )
        .filter(Boolean)
        .join(' ')
    : '';
}

export class ReviewController {
  readonly api: ReviewApi;
  readonly policy: PolicyPicker;
  readonly marks: ProvenanceMarks;
  private _panel: IReviewPanel | null = null;
  /** changes left to review per `session:turn` (-1: being asked) */
  private _counts = new Map<string, number>();
  /** sessions whose server answered 404 for the changes route: asked no more */
  private _noRoute = new Set<string>();
  private _opened = new Map<string, MainAreaWidget<ReviewView>>();
  private _autoOpened = new Set<string>();
  private _titles: Record<string, string> = {};
  /** each session's running turn at the last poll (the background notification sees turns end) */
  private _running = new Map<string, string>();
  private _notified = new Set<string>();

  constructor(private readonly _o: IReviewOptions) {
    this.api = new ReviewApi(_o.requester);
    this.policy = new PolicyPicker({
      api: this.api,
      flash: (text, level) => this._panel?.flash(text, level),
      renderChrome: () => this._panel?.renderChrome()
    });
    this.marks = new ProvenanceMarks({
      tracker: _o.tracker,
      titles: () => this._titles,
      openTurn: (notebook, entry) => void this.openTurn(notebook, entry),
      showChange: (notebook, entry, cellId) => void this.showChange(notebook, entry, cellId)
    });
    void _o.requester
      .agents()
      .then(list => {
        for (const a of list) {
          this._titles[a.name] = a.title;
        }
      })
      .catch(() => undefined);
  }

  attach(panel: IReviewPanel): void {
    this._panel = panel;
  }

  // -- the turn's footer -----------------------------------------------------------------------
  /**
   * "Review N changes" on a turn's end, or null while the count is not known or is zero. The count comes with the
   * `turn_ended` event of a turn run under "Review after", or from the changes route (asked once per turn, only for
   * turns that called a tool: a turn without tool calls changed nothing).
   */
  footer(view: SessionView, item: ITurnEndItem): HTMLElement | null {
    const turnId = item.turnId;
    if (!turnId) {
      return null;
    }
    const key = `${view.info.id}:${turnId}`;
    let n = this._counts.get(key);
    if (n === undefined && item.review) {
      n = item.review.changes;
      this._counts.set(key, n);
    }
    if (n === undefined) {
      const used = view.model.items.some(i => i.kind === 'tool' && i.turnId === turnId);
      if (used && !this._noRoute.has(view.info.id)) {
        this._counts.set(key, -1);
        void this._count(view, turnId);
      }
      return null;
    }
    this._maybeAutoOpen(view, item, n);
    if (n <= 0) {
      return null;
    }
    const label = reviewLabel(n);
    const b = button(
      label,
      'jp-ACP-linkButton jp-ACP-reviewOpen',
      () => void this.open(this._argsOf(view, turnId, { activate: true })),
      undefined,
      trans.__('%1: see what this turn changed in the notebook, keep or discard it, or rewind to before it', label)
    );
    b.dataset.turn = turnId;
    return b;
  }

  private async _count(view: SessionView, turnId: string): Promise<void> {
    const key = `${view.info.id}:${turnId}`;
    try {
      const changes = await this.api.changes(view.info.id, turnId);
      this._counts.set(key, changes.changes.length);
    } catch (err) {
      this._counts.set(key, 0);
      // a server without the route answers Jupyter's bare 404 ("Not Found"): ask no more for this session; the
      // route's own 404 (a turn it has no record of) names the turn, and the next turn is asked again
      const e = err as { status?: number; message?: string };
      if (e?.status === 404 && /^not found$/i.test(String(e.message ?? '').trim())) {
        this._noRoute.add(view.info.id);
      }
    }
    this._panel?.rerender(view);
  }

  /** A turn run under "Review after" ends with its review open (once; only a turn that just ended). */
  private _maybeAutoOpen(view: SessionView, item: ITurnEndItem, n: number): void {
    const key = `${view.info.id}:${item.turnId}`;
    if (!item.review?.after || n <= 0 || this._autoOpened.has(key)) {
      return;
    }
    this._autoOpened.add(key);
    const ended = item.endedAt ?? 0;
    const last = [...view.model.items].reverse().find(i => i.kind === 'turn_end');
    if (last !== item || Date.now() / 1000 - ended > LIVE || this._panel?.shownView !== view) {
      return;
    }
    void this.open(this._argsOf(view, item.turnId!, { activate: false }));
  }

  private _argsOf(view: SessionView, turnId: string, extra: Partial<IOpenArgs>): IOpenArgs {
    return {
      sessionId: view.info.id,
      notebook: view.info.notebook,
      turnId,
      prompt: promptOf(view, turnId),
      agent: view.info.agent,
      readOnly: view.readOnly,
      ...extra
    };
  }

  /** The review view changed what is left: the footer of that turn follows. */
  private _changed(sessionId: string, turnId: string, left: number): void {
    this._counts.set(`${sessionId}:${turnId}`, left);
    const view = this._panel?.shownView;
    if (view && view.info.id === sessionId) {
      this._panel?.rerender(view);
    }
  }

  // -- opening the review ----------------------------------------------------------------------
  async open(args: IOpenArgs): Promise<ReviewView> {
    const key = `${args.sessionId}:${args.turnId}`;
    const existing = this._opened.get(key);
    if (existing && !existing.isDisposed) {
      existing.content.focusCell(args.focusCell ?? null);
      if (args.activate !== false) {
        this._o.app.shell.activateById(existing.id);
      }
      void existing.content.load();
      return existing.content;
    }
    const nb = this._notebook(args.notebook);
    const content = new ReviewView({
      api: this.api,
      sessionId: args.sessionId,
      notebook: args.notebook,
      turnId: args.turnId,
      prompt: args.prompt ?? '',
      agent: args.agent ? agentTitle(args.agent, this._titles) : trans.__('the agent'),
      languages: this._o.languages,
      language: this._language(nb),
      readOnly: args.readOnly,
      onChanged: (turnId, left) => this._changed(args.sessionId, turnId, left),
      revealCell: cellId => this.revealCell(args.notebook, cellId)
    });
    content.focusCell(args.focusCell ?? null);
    const widget = new MainAreaWidget({ content });
    widget.id = content.id + '-tab';
    widget.addClass('jp-ACP-reviewTab');
    const name = args.notebook.split('/').pop() ?? args.notebook;
    widget.title.label = trans.__('Review: %1', name);
    widget.title.caption = trans.__("The agent's changes of one turn in %1", args.notebook);
    widget.title.closable = true;
    this._opened.set(key, widget);
    widget.disposed.connect(() => this._opened.delete(key));
    // beside the notebook; another turn's review of the same notebook goes in the same place, as a tab
    const sibling = [...this._opened.values()].find(
      w => w !== widget && !w.isDisposed && w.isAttached && w.content.notebook === args.notebook
    );
    this._o.app.shell.add(
      widget,
      'main',
      sibling
        ? { mode: 'tab-after', ref: sibling.id }
        : nb
          ? { mode: 'split-right', ref: nb.id }
          : { mode: 'split-right' }
    );
    if (args.activate !== false) {
      this._o.app.shell.activateById(widget.id);
    }
    await content.load();
    return content;
  }

  /** The command: the turn named by its arguments, else the latest turn of the conversation on screen. */
  async openFromCommand(args: { session?: string; turn?: string; notebook?: string; cell?: string }): Promise<void> {
    if (args.session && args.turn) {
      await this.open({
        sessionId: args.session,
        notebook: args.notebook ?? this._panel?.shownView?.info.notebook ?? '',
        turnId: args.turn,
        focusCell: args.cell ?? null,
        activate: true
      });
      return;
    }
    const view = this._panel?.shownView;
    if (!view) {
      Notification.warning(trans.__('No conversation to review: open a notebook and its agent panel first.'), {
        autoClose: 6000
      });
      return;
    }
    const ends = view.model.items.filter((i): i is ITurnEndItem => i.kind === 'turn_end' && !!i.turnId).reverse();
    const withChanges = ends.find(e => (this._counts.get(`${view.info.id}:${e.turnId}`) ?? 0) > 0);
    const pick = withChanges ?? ends[0];
    if (!pick) {
      Notification.warning(trans.__('No turn to review yet in this conversation: the agent has not finished one.'), {
        autoClose: 6000
      });
      return;
    }
    await this.open(this._argsOf(view, pick.turnId!, { activate: true, focusCell: args.cell ?? null }));
  }

  // -- from a cell's mark ----------------------------------------------------------------------
  /** "Open in the conversation": the panel, on this notebook, scrolled to the turn's prompt. */
  async openTurn(notebook: string, entry: IAgentEntry): Promise<void> {
    const panel = this._panel;
    if (!panel) {
      return;
    }
    this._o.app.shell.activateById(panel.id);
    const view = await this._shownFor(notebook);
    if (!view) {
      Notification.warning(trans.__("The agent panel did not open %1's conversation.", notebook), { autoClose: 6000 });
      return;
    }
    if (entry.sessionId && entry.sessionId !== view.info.id) {
      panel.flash(
        trans.__(
          'That turn is with another agent of this notebook (%1): pick it in the Agent menu to see it.',
          entry.agent.name
        ),
        'warning'
      );
      return;
    }
    if (!(await panel.revealTurn(entry.turnId))) {
      panel.flash(
        trans.__('That turn is not in the conversation shown: it is in an earlier one (the history menu lists them).'),
        'warning'
      );
    }
  }

  /** "Show the change": the turn's review, at this cell. */
  async showChange(notebook: string, entry: IAgentEntry, cellId: string): Promise<void> {
    let sessionId = entry.sessionId;
    const shown = this._panel?.shownView;
    if (!sessionId && shown?.info.notebook === notebook) {
      sessionId = shown.info.id;
    }
    if (!sessionId) {
      Notification.warning(
        trans.__(
          "This cell's record names no agent session, so its turn cannot be opened for review (the entry predates it)."
        ),
        { autoClose: 8000 }
      );
      return;
    }
    await this.open({
      sessionId,
      notebook,
      turnId: entry.turnId,
      prompt: entry.prompt,
      agent: entry.agent.name,
      focusCell: cellId,
      activate: true
    });
  }

  /** Show a cell of the notebook (the review's "Go to cell"). */
  revealCell(notebook: string, cellId: string): void {
    const nb = this._notebook(notebook);
    if (!nb) {
      void this._o.app.commands.execute('docmanager:open', { path: notebook });
      return;
    }
    const index = nb.content.widgets.findIndex(c => c.model.id === cellId);
    this._o.app.shell.activateById(nb.id);
    if (index < 0) {
      Notification.info(trans.__('That cell is no longer in the notebook.'), { autoClose: 5000 });
      return;
    }
    nb.content.activeCellIndex = index;
    void nb.content.scrollToItem(index, 'center');
  }

  /** Remove every agent mark from the notebook in focus (the user's own edit, saved like any other). */
  removeMarks(): void {
    const nb = this._o.tracker.currentWidget;
    if (!nb) {
      Notification.warning(trans.__('Open the notebook whose agent marks you want to remove first.'), {
        autoClose: 6000
      });
      return;
    }
    const name = nb.context.localPath.split('/').pop();
    const n = ProvenanceMarks.strip(nb);
    Notification.info(
      n
        ? trans._n(
            'Removed the agent marks of %1 cell from %2; save the notebook to keep it so (Undo puts them back).',
            'Removed the agent marks of %1 cells from %2; save the notebook to keep it so (Undo puts them back).',
            n,
            name
          )
        : trans.__('%1 has no agent marks.', name),
      { autoClose: 6000 }
    );
  }

  // -- the background notification -------------------------------------------------------------
  /**
   * Each poll of the session list (activity.ts): a session whose turn ended since the last poll, not on screen, with
   * a review waiting (its `turn_ended` event says `review: {changes: N}`), gets a notification with "Review".
   */
  sessionsPolled(list: unknown[], shown: string | null): void {
    for (const raw of list) {
      const s = raw as { id?: string; notebook?: string; agent?: string; turn_id?: string | null; last_seq?: number };
      if (!s?.id) {
        continue;
      }
      const before = this._running.get(s.id);
      if (s.turn_id) {
        this._running.set(s.id, s.turn_id);
      } else {
        this._running.delete(s.id);
      }
      if (before && before !== s.turn_id && s.id !== shown) {
        void this._notifyEnded(s as { id: string; notebook?: string; agent?: string; last_seq?: number }, before);
      }
    }
  }

  private async _notifyEnded(
    s: { id: string; notebook?: string; agent?: string; last_seq?: number },
    turnId: string
  ): Promise<void> {
    const key = `${s.id}:${turnId}`;
    if (this._notified.has(key)) {
      return;
    }
    this._notified.add(key);
    let events: IAcpEvent[] = [];
    try {
      const info = await this._o.requester.request<{ last_seq: number }>(`sessions/${encodeURIComponent(s.id)}`);
      events = await this._o.requester.request<IAcpEvent[]>(
        `sessions/${encodeURIComponent(s.id)}/events?before=${info.last_seq + 1}&limit=60&conversation=current`
      );
    } catch {
      return;
    }
    const ended = events.find(e => e.type === 'turn_ended' && e.turn_id === turnId);
    const n = Number(ended?.review?.changes ?? 0);
    if (!ended || !(n > 0)) {
      return;
    }
    this._counts.set(key, n);
    const notebook = String(s.notebook ?? '');
    const name = notebook.split('/').pop() || notebook;
    const prompt = textOfPrompt(events.find(e => e.type === 'turn_started' && e.turn_id === turnId)?.prompt);
    const agent = s.agent ? agentTitle(s.agent, this._titles) : trans.__('The agent');
    Notification.info(trans.__('%1 finished in %2: %3.', agent, name, reviewLabel(n).toLowerCase()), {
      autoClose: false,
      actions: [
        {
          label: trans.__('Review'),
          caption: trans.__('Open the review of this turn of %1', notebook),
          displayType: 'accent',
          callback: () => void this.open({ sessionId: s.id, notebook, turnId, prompt, agent: s.agent, activate: true })
        }
      ],
      data: { 'jupyter-acp': { session: s.id, turn: turnId, review: n } }
    });
  }

  // -- helpers ---------------------------------------------------------------------------------
  private _notebook(path: string): NotebookPanel | null {
    return this._o.tracker.find(nb => !nb.isDisposed && nb.context.localPath === path) ?? null;
  }

  private _language(nb: NotebookPanel | null): string {
    const info = nb?.content.model?.getMetadata('language_info') as { name?: string } | undefined;
    return info?.name || nb?.content.model?.defaultKernelLanguage || 'python';
  }

  /** The panel's conversation once it shows `notebook` (it follows the notebook in focus; a few seconds at most). */
  private async _shownFor(notebook: string): Promise<SessionView | null> {
    for (let i = 0; i < 50; i++) {
      const view = this._panel?.shownView;
      if (view && view.info.notebook === notebook) {
        return view;
      }
      await new Promise(resolve => setTimeout(resolve, 100));
    }
    return null;
  }
}
