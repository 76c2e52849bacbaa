/**
 * The sidebar: a chat bound to the notebook in focus.
 *
 * One `SessionView` per agent session (its model, its live stream and its DOM), kept while the
 * sidebar lives, so switching notebooks is instant and each conversation keeps streaming. The view
 * renders the model's items in order and re-renders only items whose `version` changed.
 *
 * This module binds the sidebar to the notebook and its session, and runs the render loop; the
 * items' renderers are in `renderers/`, the header's pickers in `pickers.ts`, the input in
 * `composer.ts`, the sanitizer in `sanitizer.ts`; the header's parts (history, usage, set-up card, queue, cell
 * marks, activity badges) in their own modules, hooked here. (About 700 lines, over the 400 of the others on
 * purpose: binding to the notebook, the render loop with its scroll anchoring, and the chrome share the panel's
 * state — the view on screen, the bind token, the transient message — and split apart they would pass that
 * state back and forth.)
 */
import { NotebookActions, NotebookPanel, INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { addIcon } from '@jupyterlab/ui-components';
import type { CommandRegistry } from '@lumino/commands';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { AcpApi, ApiError, ISessionInfo } from './api';
import { CellMarks } from './cellmarks';
import { Composer, IPanelSettings } from './composer';
import { button, el } from './dom';
import { drawnState, firstDrawn, IDrawnState, revealAbove, revealFrom } from './drawn';
import { HistoryMenu } from './history';
import { Pickers } from './pickers';
import { IRenderContext, renderItem } from './renderers';
import { isLiveThought } from './renderers/messages';
import { TurnFooter } from './renderers/notices';
import { PlanStrip } from './renderers/plans';
import { renderStatus } from './renderers/status';
import { PromptQueue } from './queue';
import type { ReviewController } from './review';
import { NoFetchSanitizer, onRemoteClick } from './sanitizer';
import { IEntry, SessionView } from './session';
import { SetupCard } from './setup';
import { decorateShortcuts, UsageMeter } from './usage';
import { warmMarkdown, warmWhenIdle } from './warm';

export type { IPanelSettings } from './composer';
export { NoFetchSanitizer } from './sanitizer';

export interface IPanelOptions {
  tracker: INotebookTracker;
  rendermime: IRenderMimeRegistry;
  api?: AcpApi;
  /** JupyterLab's commands (an error's actions: open a terminal). */
  commands?: CommandRegistry;
  /** Review and rewind (review/): the turn footer's "Review N changes", "Review after" in the header. */
  review?: ReviewController;
  /**
   * The viewer's username (JupyterLab's `serviceManager.user.identity`; null while unknown): in a shared session the
   * log names who else prompted and answered, and says "You" for the viewer.
   */
  me?: () => string | null;
}

/** How far from the window's right edge JupyterLab's toasts open (this sidebar's width, when it is on the right). */
const TOAST_OFFSET = '--jp-ACP-toast-offset';

export class AgentPanel extends Widget {
  readonly api: AcpApi;
  settings: IPanelSettings = { defaultAgent: '', includeSelection: true };

  private _tracker: INotebookTracker;
  private _rendermime: IRenderMimeRegistry;
  private _sanitizer: NoFetchSanitizer;
  private _notebook: NotebookPanel | null = null;
  private _views = new Map<string, SessionView>();
  private _view: SessionView | null = null;
  private _bindToken = 0;
  /** The bind in flight: a second one for the same notebook (and no agent named) joins it. */
  private _binding: { path: string | null; agent?: string; done: Promise<void> } | null = null;
  private _renderScheduled = false;
  /** A message for a few seconds; one said while a turn ran (`turn`) goes when that turn ends. */
  private _transient: { text: string; level: string; turn: string | null } | null = null;
  /** What the renderers see of the panel. */
  private _ctx: IRenderContext;
  private _pickers: Pickers;
  private _composer: Composer;
  /** The history menu: earlier conversations, read-only, resumed, deleted (history.ts). */
  private _history: HistoryMenu;
  /** The session's last seq when each view was made: a conversation change after it (another tab) replays. */
  private _bornAt = new WeakMap<SessionView, number>();
  /** Which of each conversation's items are drawn (drawn.ts): the latest, and older ones as the user scrolls up. */
  private _drawn = new WeakMap<SessionView, IDrawnState>();
  /** The built-in agent's model form and an agent's login card (setup.ts). */
  private _setup: SetupCard;
  /**
   * Long turns (the user leaves the agent working): the plan strip above the input, the running turn's footer,
   * queued prompts, cell marks.
   */
  private _planStrip = new PlanStrip();
  private _footer = new TurnFooter(view => {
    if (view === this._view) {
      void this._composer.cancel();
    }
  });
  private _queue: PromptQueue;
  private _marks: CellMarks;
  private _review: ReviewController | null;

  // DOM
  private _header = el('div', 'jp-ACP-header');
  private _title = el('div', 'jp-ACP-title');
  private _status = el('div', 'jp-ACP-status');
  private _body = el('div', 'jp-ACP-body');
  private _empty = el('div', 'jp-ACP-empty');
  private _newChat: HTMLButtonElement;
  private _usage = new UsageMeter();
  private _commands: CommandRegistry | undefined;
  /** Called after each render of the shown conversation (the background badges refresh). */
  onActivity: (() => void) | null = null;
  private _activity = '';

  constructor(options: IPanelOptions) {
    super();
    this.addClass('jp-ACP-panel');
    this.api = options.api ?? new AcpApi();
    this._tracker = options.tracker;
    this._commands = options.commands;
    this._review = options.review ?? null;
    // the sidebar's own rendermime: agent content fetches nothing from another server without a click
    this._sanitizer = new NoFetchSanitizer(options.rendermime.sanitizer);
    this._rendermime = options.rendermime.clone({ sanitizer: this._sanitizer });
    this._body.addEventListener('click', e => onRemoteClick(this._sanitizer, e));
    this._ctx = {
      api: this.api,
      rendermime: this._rendermime,
      sanitizer: this._sanitizer,
      me: () => options.me?.() ?? null,
      isShown: view => view === this._view,
      scheduleRender: view => this._scheduleRender(view),
      flash: (text, level) => this._flash(text, level),
      insertCell: source => this._insertCell(source),
      replaceCell: source => this._replaceCell(source),
      resend: text => {
        this._composer.input.value = text;
        void this._composer.sendPrompt();
      },
      canOpenTerminal: () => !!options.commands?.hasCommand('terminal:create-new'),
      openTerminal: name =>
        void options.commands?.execute(name ? 'terminal:open' : 'terminal:create-new', name ? { name } : {}),
      reviewFooter: (view, item) => this._review?.footer(view, item) ?? null
    };
    const panel = this; // eslint-disable-line @typescript-eslint/no-this-alias
    const host = {
      api: this.api,
      get settings() {
        return panel.settings;
      },
      get view() {
        return panel._view;
      },
      get notebook() {
        return panel._notebook;
      },
      path: () => this._path(),
      flash: (text: string, level?: string) => this._flash(text, level),
      renderChrome: () => this._renderChrome(),
      queue: (view: SessionView, text: string, blocks: unknown[]) => this._queue.add(view, text, blocks),
      hold: (view: SessionView, text: string) => this._setup.hold(view, text)
    };
    this._queue = new PromptQueue({
      api: this.api,
      flash: (text: string, level?: string) => this._flash(text, level),
      scheduleRender: view => this._scheduleRender(view)
    });
    this._marks = new CellMarks({
      api: this.api,
      tracker: options.tracker,
      flash: (text: string, level?: string) => this._flash(text, level)
    });
    this._pickers = new Pickers(host);
    this._composer = new Composer(host);
    this._setup = new SetupCard({
      api: this.api,
      commands: options.commands,
      get view() {
        return panel._view;
      },
      flash: (text: string, level?: string) => this._flash(text, level),
      renderChrome: () => this._renderChrome(),
      resend: (text: string) => this._ctx.resend(text),
      agentsChanged: () => void this._pickers.loadAgents()
    });

    this._history = new HistoryMenu({
      api: this.api,
      get view() {
        return panel._view;
      },
      ctx: this._ctx,
      node: this.node,
      flash: (text: string, level?: string) => this._flash(text, level),
      reload: () => this._reload()
    });

    // header: notebook name, agent picker, the session's mode and options
    const titleRow = el('div', 'jp-ACP-titleRow');
    this._newChat = button(
      '',
      'jp-ACP-iconButton jp-ACP-newChat',
      () => void this._reset(),
      addIcon,
      'New conversation (the agent forgets this one)'
    );
    titleRow.append(this._title, this._usage.node, this._history.button, this._newChat);
    const pickRow = el('label', 'jp-ACP-pickRow');
    pickRow.append(el('span', 'jp-ACP-pickLabel', 'Agent'), this._pickers.agentSelect);
    this._pickers.agentSelect.addEventListener('change', () => this._pickAgent(this._pickers.agentSelect.value));
    titleRow.append(this._history.menu);
    this._header.append(
      titleRow,
      pickRow,
      this._pickers.enabled,
      this._pickers.options,
      ...(this._review ? [this._review.policy.node] : []),
      this._pickers.optionsError,
      this._pickers.policy
    );

    this._status.setAttribute('role', 'status');
    this._empty.append(
      el('div', 'jp-ACP-emptyTitle', 'No notebook in focus'),
      el(
        'p',
        '',
        'The agent works on one notebook at a time: open or click a notebook and its conversation appears here. ' +
          'Each notebook keeps its own agent session and history.'
      )
    );

    this.node.append(
      this._header,
      this._status,
      this._setup.node,
      this._body,
      this._history.archive,
      this._planStrip.node,
      this._composer.node
    );

    this._tracker.currentChanged.connect(() => this._follow(), this);
    this._tracker.widgetAdded.connect((_, nb) => nb.disposed.connect(() => this._forget()), this);
    this._tracker.activeCellChanged.connect(() => this._composer.updateChip(), this);
    void this._pickers.loadAgents();
    warmWhenIdle(this._rendermime); // the first answer shown does not wait for the markdown parser to load (warm.ts)
    this._follow();
    this._review?.attach(this);
  }

  /** The sidebar's width changed (its split handle, the window): JupyterLab's toasts stay clear of it. */
  protected onResize(msg: Widget.ResizeMessage): void {
    super.onResize(msg);
    this._placeToasts();
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    document.body.style.removeProperty(TOAST_OFFSET);
  }

  /**
   * JupyterLab's toasts open at the window's bottom right: over this sidebar's input and Send when it is open on the
   * right. While it is, they open left of it (style/base.css reads the offset).
   */
  private _placeToasts(): void {
    const r = this.node.getBoundingClientRect();
    if (this.isVisible && r.width > 0 && r.right >= window.innerWidth - 80) {
      document.body.style.setProperty(TOAST_OFFSET, `${Math.round(window.innerWidth - r.left)}px`);
    } else {
      document.body.style.removeProperty(TOAST_OFFSET);
    }
  }

  /** Shown again (the sidebar was collapsed while answers arrived): follow the latest, as before. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._placeToasts();
    const view = this._view;
    if (view) {
      if (view.stick) {
        view.log.scrollTop = view.log.scrollHeight;
      }
      this._scheduleRender(view); // and check whether a short history page needs the next one
    }
  }

  /** Apply user settings (Settings Editor). */
  configure(settings: Partial<IPanelSettings>): void {
    this.settings = { ...this.settings, ...settings };
    this._composer.updateChip();
  }

  get currentSession(): ISessionInfo | null {
    return this._view?.info ?? null;
  }

  /** The prompt input (the "open and focus" command). */
  focusInput(): void {
    this._composer.input.focus();
  }

  /** A new conversation for the notebook shown (palette command). */
  newConversation(): Promise<void> {
    return this._reset();
  }

  /** Stop the shown conversation's turn (palette command); false when nothing runs. */
  stop(): boolean {
    if (!this._view?.model.runningTurn) {
      return false;
    }
    void this._composer.cancel();
    return true;
  }

  /**
   * Answer the shown conversation's oldest pending permission request with its "allow once" (or
   * "reject") option, as its card's button would; says why when there is none.
   */
  answerPending(family: 'allow' | 'reject'): void {
    const view = this._view;
    const perm = view?.model.pendingPermissions()[0];
    if (!view || !perm) {
      this._flash('No permission request is waiting in this conversation.', 'warning');
      return;
    }
    const card = this._body.querySelector<HTMLElement>(
      `.jp-ACP-permission[data-request-id="${CSS.escape(perm.requestId)}"]`
    );
    const buttons = [...(card?.querySelectorAll<HTMLButtonElement>('button[data-option-kind]') ?? [])];
    const pick =
      buttons.find(b => b.dataset.optionKind === `${family}_once`) ??
      buttons.find(b => b.dataset.optionKind?.startsWith(family));
    if (!pick) {
      this._flash(
        `The agent offered no “${family}” option for this request: answer with one of its own buttons.`,
        'warning'
      );
      return;
    }
    pick.click();
  }

  /** The conversation on screen (review opens its turns). */
  get shownView(): SessionView | null {
    return this._view;
  }

  /**
   * Scroll the conversation on screen to a turn's prompt, loading older history until it shows (a mark's "Open in
   * the conversation"); false when the turn is not in this conversation.
   */
  async revealTurn(turnId: string): Promise<boolean> {
    const view = this._view;
    for (let page = 0; view && view === this._view && page < 50; page++) {
      const prompt = view.model.items.find(i => i.kind === 'user' && i.turnId === turnId);
      if (prompt) {
        revealFrom(view.model.items, this._drawnOf(view), prompt.id); // an older turn is drawn to be shown
      }
      this._render(view);
      const node = view.log.querySelector<HTMLElement>(`[data-kind="user"][data-turn="${CSS.escape(turnId)}"]`);
      if (node) {
        view.stick = false;
        node.scrollIntoView({ block: 'start' });
        node.classList.add('jp-ACP-highlighted');
        window.setTimeout(() => node.classList.remove('jp-ACP-highlighted'), 2500);
        return true;
      }
      if (view.model.olderBefore === null) {
        return false;
      }
      await view.loadOlder(() => undefined);
    }
    return false;
  }

  /** Render the turn ends of `view` again (their "Review N changes" count changed). */
  rerender(view: SessionView): void {
    for (const item of view.model.items) {
      const entry = item.kind === 'turn_end' ? view.nodes.get(item.id) : undefined;
      if (entry) {
        entry.version = -1;
      }
    }
    this._scheduleRender(view);
  }

  /** A message in the status line for a few seconds. */
  flash(text: string, level?: string): void {
    this._flash(text, level);
  }

  /** The header, the status line and the buttons again. */
  renderChrome(): void {
    this._renderChrome();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    for (const v of this._views.values()) {
      v.dispose();
    }
    this._views.clear();
    super.dispose();
  }

  // -- binding to the notebook -----------------------------------------------------------------
  private _follow(): void {
    const nb = this._tracker.currentWidget;
    if (nb === this._notebook && nb) {
      return;
    }
    if (this._notebook) {
      this._notebook.context.pathChanged.disconnect(this._onRename, this);
    }
    this._notebook = nb;
    if (nb) {
      nb.context.pathChanged.connect(this._onRename, this);
      void nb.context.ready.then(() => {
        if (this._notebook === nb) {
          void this._bind(undefined, true); // the path known for sure now: the bind below, if it is still running
        }
      });
    }
    void this._bind();
  }

  /** Close the streams of conversations whose notebook is no longer open in this tab. */
  private _forget(): void {
    const open = new Set<string>();
    this._tracker.forEach(p => {
      if (!p.isDisposed) {
        open.add(p.context.localPath);
      }
    });
    for (const [id, view] of this._views) {
      if (view !== this._view && !open.has(view.info.notebook)) {
        view.dispose();
        this._views.delete(id);
      }
    }
  }

  private _onRename(): void {
    void this._bind();
  }

  private _path(): string | null {
    const nb = this._notebook;
    if (!nb || nb.isDisposed) {
      return null;
    }
    return nb.context.localPath;
  }

  /**
   * Show the notebook's conversation (``agent``: that agent's, else the notebook's current one). ``join``: the same
   * bind again (the notebook's context became ready while its session opens): a bind in flight for the same path
   * is joined, instead of dropped for a second open of the same session; one that has shown it is enough.
   */
  private _bind(agent?: string, join = false): Promise<void> {
    const path = this._path();
    const pending = this._binding;
    if (join && !agent && path && pending && pending.path === path && !pending.agent) {
      return pending.done;
    }
    if (join && !agent && path && !pending && this._view?.info.notebook === path) {
      return Promise.resolve(); // that bind has shown it already (a change of agent since comes as a notice)
    }
    const done = this._bindNow(path, agent);
    const binding = { path, agent, done };
    this._binding = binding;
    void done.finally(() => {
      if (this._binding === binding) {
        this._binding = null;
      }
    });
    return done;
  }

  private async _bindNow(path: string | null, agent?: string): Promise<void> {
    const token = ++this._bindToken;
    this._transient = null;
    if (!path) {
      this._show(null);
      return;
    }
    this._title.textContent = path.split('/').pop() ?? path;
    this._title.title = path;
    void warmMarkdown(this._rendermime); // in parallel with the requests, if the idle warm-up has not run yet
    try {
      // the notebook's current agent, kept by the server (the magic's %acp use changes it too). With no preferred
      // agent in the settings the session open asks for none: the server opens the notebook's current agent, and
      // the lookup's round trip before it is saved (the answer names the agent)
      const preferred = this.settings.defaultAgent;
      const choice = agent ?? (preferred ? await this._pickers.currentAgent(path, preferred) : undefined);
      if (token !== this._bindToken) {
        return;
      }
      if (this._view && this._view.info.notebook === path && this._view.info.agent === choice && !agent) {
        this._show(this._view);
        return;
      }
      const { info, readOnly } = await this._openOrWatch(path, choice);
      if (token !== this._bindToken) {
        return;
      }
      let view = this._views.get(info.id);
      if (!view) {
        const created = new SessionView(info, this.api, () => {
          this._scheduleRender(created);
          void this._queue.pump(created); // a queued prompt goes once the turn has ended
          this._marks.changed(created);
        });
        created.onCurrentAgent = name => {
          if (created === this._view && name !== created.info.agent) {
            void this._bind(); // another tab or %acp use changed the notebook's agent: show that one's
          }
        };
        created.log.addEventListener('scroll', () => {
          if (created.log.scrollTop < 80 && created.hiddenAbove > 0) {
            this._revealAbove(created); // what the model holds above is drawn before the server is asked
          }
        });
        view = created;
        this._views.set(info.id, view);
        this._bornAt.set(view, info.last_seq);
        void view.refreshRevertible(() => this._scheduleRender(created));
      } else {
        view.info = info;
        view.setAlwaysAllowed(info);
      }
      view.readOnly = readOnly;
      this._show(view);
    } catch (err) {
      if (token !== this._bindToken) {
        return;
      }
      this._show(null, `Could not open an agent session for ${path}: ${(err as Error).message}`);
    }
  }

  /**
   * The notebook's session: opened (``write``), or, for a user the server lets only read (a read-only JupyterHub
   * share), the one that already exists, watched: the conversation shows, nothing can be sent. A notebook nobody has
   * talked to yet has no session to watch: the refusal is shown.
   */
  private async _openOrWatch(path: string, agent?: string): Promise<{ info: ISessionInfo; readOnly: boolean }> {
    try {
      return { info: await this.api.openSession(path, agent), readOnly: false };
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 403) {
        throw err;
      }
      // the session to watch is the one of the notebook's current agent (asked now if the open did not name one)
      const [existing, current] = await Promise.all([
        this.api.sessions(path).catch(() => [] as ISessionInfo[]),
        agent
          ? Promise.resolve(agent)
          : this.api.currentAgent(path).then(
              c => c.agent,
              () => undefined
            )
      ]);
      const info = existing.find(s => s.agent === current) ?? existing[0];
      if (!info) {
        throw err;
      }
      return { info, readOnly: true };
    }
  }

  private _show(view: SessionView | null, error?: string): void {
    if (view !== this._view) {
      this._history.close();
    }
    if (this._view && this._view !== view) {
      this._view.log.remove();
      this._view.draft = this._composer.input.value; // each conversation keeps its unsent draft
      this._composer.input.value = view?.draft ?? '';
    }
    this._view = view;
    this._body.textContent = '';
    delete this.node.dataset.agent;
    delete this.node.dataset.session;
    delete this.node.dataset.stream;
    const hasNotebook = !!this._path();
    this.node.classList.toggle('jp-ACP-noNotebook', !hasNotebook);
    if (!view) {
      if (error) {
        const box = el('div', 'jp-ACP-empty jp-ACP-error');
        box.append(el('div', 'jp-ACP-emptyTitle', 'No agent session'), el('p', '', error));
        this._body.appendChild(box);
      } else if (!hasNotebook) {
        this._title.textContent = 'Agent';
        this._title.title = '';
        this._body.appendChild(this._empty);
      }
      this._renderChrome();
      return;
    }
    this._body.appendChild(view.log);
    this.node.dataset.agent = view.info.agent;
    this.node.dataset.session = view.info.id;
    this._pickers.syncAgentSelect();
    this._render(view);
    view.log.scrollTop = view.log.scrollHeight;
    void view.refreshRevertible(() => this._scheduleRender(view)); // edits reverted while away
    this._composer.updateChip();
    this._forget();
  }

  private _pickAgent(name: string): void {
    const path = this._path();
    if (!path || !name) {
      return;
    }
    delete this.node.dataset.agent;
    this._pickers.agentSelect.disabled = true;
    // the notebook's current agent changes on the server: the magic and other tabs follow
    void this._pickers.choose(path, name).then(ok => (ok ? this._bind(name) : this._bind()));
  }

  /**
   * The viewer's identity became known (JupyterLab asks the server once, at start): items already drawn that name
   * someone (prompts, cards, notices, questions) are drawn again, so the viewer's own read "You", not their name.
   */
  identityKnown(): void {
    const named = new Set(['user', 'notice', 'tool', 'elicitation']);
    for (const view of this._views.values()) {
      for (const entry of view.nodes.values()) {
        if (named.has(entry.node.dataset.kind ?? '')) {
          entry.version = -1;
        }
      }
    }
    if (this._view) {
      this._scheduleRender(this._view);
    }
  }

  // -- rendering -------------------------------------------------------------------------------
  private _scheduleRender(view: SessionView): void {
    if (view !== this._view) {
      return; // rendered when shown
    }
    if (this._renderScheduled) {
      return;
    }
    this._renderScheduled = true;
    requestAnimationFrame(() => {
      this._renderScheduled = false;
      if (this._view) {
        this._render(this._view);
      }
    });
  }

  private _render(view: SessionView): void {
    const changed = view.model.conversationChangedAt;
    if (changed !== null && changed > (this._bornAt.get(view) ?? Infinity)) {
      this._bornAt.delete(view);
      void this._reload(); // another conversation is current (resumed or deleted elsewhere): show it afresh
      return;
    }
    // the live connection's state, for other extensions' and tests' eyes (ops go over it only when open)
    this.node.dataset.stream = view.stream?.state ?? 'none';
    const stick = view.stick && !view.anchor;
    if (view.epoch !== view.model.epoch) {
      this._resync(view);
    }
    // the drawn window (drawn.ts): items above it have no node (those that had one leave the DOM)
    const items = view.model.items;
    const start = firstDrawn(items, this._drawnOf(view), stick);
    view.hiddenAbove = start;
    for (let i = 0; i < start; i++) {
      const gone = view.nodes.get(items[i].id);
      if (gone) {
        this._drop(view, items[i].id, gone);
      }
    }
    // entries in the model's order, after the hint: live items append, older pages insert above
    let prev: Node = view.hint;
    const lastEnd = [...items].reverse().find(i => i.kind === 'turn_end');
    for (let i = start; i < items.length; i++) {
      const item = items[i];
      let entry = view.nodes.get(item.id);
      if (!entry) {
        entry = { node: el('div'), version: -1 };
        // its kind also gives it style/base.css's `content-visibility: auto` (drawn only when on screen)
        entry.node.dataset.kind = item.kind;
        entry.node.dataset.turn = item.turnId ?? '';
        view.nodes.set(item.id, entry);
      }
      if (prev.nextSibling !== entry.node) {
        view.log.insertBefore(entry.node, prev.nextSibling);
      }
      prev = entry.node;
      // what an item shows beyond its own version: a thought is live while last; only the latest turn end offers Retry
      const live =
        item.kind === 'thought' ? isLiveThought(view, item) : item.kind === 'turn_end' ? item === lastEnd : undefined;
      if (entry.version !== item.version || entry.live !== live) {
        entry.version = item.version;
        entry.live = live;
        renderItem(this._ctx, view, item, entry);
        if (item.kind === 'tool' && item.permissions.length) {
          decorateShortcuts(entry.node, this._commands);
        }
      }
    }
    this._footer.render(view, prev);
    this._queue.render(view);
    this._renderEarlier(view);
    view.hint.hidden = view.model.items.some(i => i.kind === 'user' || i.kind === 'message');
    // screen readers announce the answer once, when it is complete, not every streamed word
    const busy = String(!!view.model.runningTurn && !view.model.pendingPermissions().length);
    if (view.log.getAttribute('aria-busy') !== busy) {
      view.log.setAttribute('aria-busy', busy); // set each frame, it restyled the log each frame
    }
    this._renderChrome();
    if (stick) {
      view.log.scrollTop = view.log.scrollHeight;
    } else {
      view.restoreAnchor();
    }
    // a short history page that does not fill the log cannot be scrolled: load the next one (once
    // the answers are rendered: markdown renders after this returns)
    const more = view.hiddenAbove > 0 || view.model.olderBefore !== null;
    if (more && !view.loadingOlder && !view.olderError && view.autoLoad === null) {
      view.autoLoad = window.setTimeout(() => {
        view.autoLoad = null;
        const log = view.log;
        const visible = log.clientHeight > 0; // a hidden sidebar measures nothing: wait to be shown
        if (view === this._view && visible && log.scrollHeight <= log.clientHeight + 80) {
          this._revealAbove(view);
        }
      }, 400);
    }
  }

  /** Older events were merged: items may have gone (rebuilt under other ids); drop their nodes. */
  private _resync(view: SessionView): void {
    view.epoch = view.model.epoch;
    const live = new Set(view.model.items.map(i => i.id));
    for (const [id, entry] of view.nodes) {
      if (!live.has(id)) {
        this._drop(view, id, entry);
      }
    }
  }

  /** An item's node leaves the log (its item went, or it is above the drawn window). */
  private _drop(view: SessionView, id: string, entry: IEntry): void {
    try {
      entry.renderer?.dispose();
    } catch {
      // detached already
    }
    entry.node.remove();
    view.nodes.delete(id);
  }

  private _drawnOf(view: SessionView): IDrawnState {
    let state = this._drawn.get(view);
    if (!state) {
      state = drawnState();
      this._drawn.set(view, state);
    }
    return state;
  }

  /**
   * The user reached the top of what is drawn (scrolling, "Earlier messages…", a log too short to scroll): draw
   * older items the model holds, keeping what they read in place; when all are drawn, ask the server for a page.
   */
  private _revealAbove(view: SessionView): void {
    if (revealAbove(view.model.items, this._drawnOf(view))) {
      view.keepAnchor();
      this._scheduleRender(view);
    } else if (view.model.olderBefore !== null) {
      void view.loadOlder(() => this._scheduleRender(view));
    }
  }

  /** The line at the top of a long history. */
  private _renderEarlier(view: SessionView): void {
    const box = view.earlier;
    const more = view.hiddenAbove > 0 || view.model.olderBefore !== null;
    // drawn again only when what it says changes: rebuilt each frame, it laid the log out again from its top
    const state = `${more}:${view.loadingOlder}:${view.olderError}`;
    if (box.dataset.state === state) {
      return;
    }
    box.dataset.state = state;
    box.hidden = !more && !view.olderError;
    box.textContent = '';
    if (box.hidden) {
      return;
    }
    if (view.loadingOlder) {
      box.append(el('span', 'jp-ACP-spinner'), el('span', 'jp-ACP-muted', 'Loading earlier messages…'));
    } else if (view.olderError) {
      box.append(
        el('span', 'jp-ACP-muted', `Could not load earlier messages: ${view.olderError}`),
        button('Retry', 'jp-ACP-linkButton', () => void view.loadOlder(() => this._scheduleRender(view)))
      );
    } else {
      box.appendChild(
        button(
          'Earlier messages…',
          'jp-ACP-linkButton jp-ACP-earlierButton',
          () => this._revealAbove(view),
          undefined,
          'Load earlier messages of this conversation (or scroll up)'
        )
      );
    }
  }

  /** Status line, buttons, mode: everything that is not the log. */
  private _renderChrome(): void {
    const view = this._view;
    const model = view?.model;
    const running = !!model?.runningTurn;
    this._composer.stop.hidden = !running;
    this._composer.send.hidden = running;
    const watching = !!view?.readOnly; // read only: the conversation shows, nothing is sent from here
    this._composer.send.disabled = !view || watching;
    this._newChat.disabled = !view || watching;
    this._history.button.disabled = !view;
    this._composer.input.disabled = !view || watching;
    this._composer.input.placeholder = watching
      ? 'Read only: you may watch this conversation, not take part in it'
      : 'Ask the agent… (/ commands, @ variables)';
    this.node.classList.toggle('jp-mod-readOnly', watching);
    this._composer.node.hidden = !this._path();
    this._header.hidden = !this._path();

    this._planStrip.render(this._path() ? (view ?? null) : null);
    this._pickers.renderOptions();
    this._pickers.renderPolicy();
    this._review?.policy.render(view);
    this._usage.render(model?.usage ?? null);
    const activity = `${view?.info.id}:${model?.runningTurn}:${model?.pendingPermissions().length}`;
    if (activity !== this._activity) {
      this._activity = activity; // a turn started or ended, a request came or went: badges follow now
      this.onActivity?.();
    }

    if (this._transient?.turn && this._transient.turn !== (model?.runningTurn ?? null)) {
      this._transient = null; // "the agent is still working" is stale once it is not
    }
    renderStatus(this._status, view, this._transient);
    this._setup.render();
  }

  private _insertCell(source: string): void {
    const nb = this._notebook;
    if (!nb || nb.isDisposed) {
      return;
    }
    const notebook = nb.content;
    NotebookActions.insertBelow(notebook);
    notebook.activeCell?.model.sharedModel.setSource(source.replace(/\n$/, ''));
  }

  private _replaceCell(source: string): void {
    const nb = this._notebook;
    const cell = nb && !nb.isDisposed ? nb.content.activeCell : null;
    if (!cell) {
      this._flash('No active cell to replace: click a cell in the notebook first.', 'warning');
      return;
    }
    cell.model.sharedModel.setSource(source.replace(/\n$/, ''));
  }

  private _flash(text: string, level = 'error'): void {
    this._transient = { text, level, turn: this._view?.model.runningTurn ?? null };
    this._renderChrome();
    setTimeout(() => {
      if (this._transient?.text === text) {
        this._transient = null;
        this._renderChrome();
      }
    }, 6000);
  }

  /** The session's history changed under the view (a conversation resumed or deleted): replay it afresh. */
  private _reload(): Promise<void> {
    const view = this._view;
    if (view) {
      this._views.delete(view.info.id);
      view.dispose();
      this._view = null;
    }
    return this._bind();
  }

  private async _reset(): Promise<void> {
    const view = this._view;
    if (!view) {
      return;
    }
    this._newChat.disabled = true;
    try {
      view.info = await this.api.reset(view.info.id);
      view.stick = true;
    } catch (err) {
      this._flash(`Could not start a new conversation: ${(err as Error).message}`);
    } finally {
      this._newChat.disabled = false;
    }
  }
}
