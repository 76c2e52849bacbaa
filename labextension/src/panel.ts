/**
 * The sidebar: a chat bound to the notebook in focus.
 *
 * One `SessionView` per agent session (its model, its live stream and its DOM), kept while the
 * sidebar lives, so switching notebooks is instant and each conversation keeps streaming. The view
 * renders the model's items in order and re-renders only items whose `version` changed.
 */
import { NotebookActions, NotebookPanel, INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry, MimeModel, IRenderMime } from '@jupyterlab/rendermime';
import {
  LabIcon,
  addIcon,
  bugIcon,
  closeIcon,
  copyIcon,
  deleteIcon,
  editIcon,
  fileIcon,
  inspectorIcon,
  linkIcon,
  listIcon,
  refreshIcon,
  runIcon,
  searchIcon,
  stopIcon,
  undoIcon
} from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { AcpApi, ApiError, IAgentInfo, ISessionInfo } from './api';
import { EventStream, StreamState } from './stream';
import {
  ChatModel,
  IPermission,
  IPicker,
  IPlanItem,
  IToolItem,
  ITurnEndItem,
  IUserItem,
  INoticeItem,
  ITextItem,
  IAuditItem,
  Item,
  cssMayFetch,
  isRemoteUrl,
  lineDiff,
  optionOrder,
  toolLabel
} from './model';

/* eslint-disable @typescript-eslint/no-explicit-any */

export interface IPanelOptions {
  tracker: INotebookTracker;
  rendermime: IRenderMimeRegistry;
  api?: AcpApi;
}

export interface IPanelSettings {
  defaultAgent: string;
  includeSelection: boolean;
}

const AGENT_KEY = 'jupyter-acp:agent:';

const KIND_ICONS: Record<string, LabIcon> = {
  read: fileIcon,
  edit: editIcon,
  delete: deleteIcon,
  move: linkIcon,
  search: searchIcon,
  execute: runIcon,
  think: inspectorIcon,
  fetch: refreshIcon,
  switch_mode: listIcon,
  other: bugIcon
};

/**
 * What a permission button says: its ACP kind decides, never the agent's wording (an option named
 * "Reject" may carry kind allow_once: hole 3). The agent's name is shown as secondary text.
 */
const KIND_LABEL: Record<string, string> = {
  allow_once: 'Allow once',
  allow_always: 'Always allow',
  reject_once: 'Reject',
  reject_always: 'Always reject'
};

function kindClass(kind: string | undefined): string {
  return kind?.startsWith('reject') ? 'jp-mod-reject' : kind?.startsWith('allow') ? 'jp-mod-allow' : 'jp-mod-neutral';
}

/** The agent's wording adds something only when it is not (part of) the kind's label already. */
function saysMore(name: string | undefined, label: string): boolean {
  const norm = (t: string) => t.toLowerCase().replace(/[^a-z]/g, '');
  return !!name && !!norm(name) && !norm(label).includes(norm(name));
}

const STATUS_LABEL: Record<string, string> = {
  pending: 'pending',
  in_progress: 'running',
  completed: 'done',
  failed: 'failed',
  cancelled: 'cancelled',
  ended: 'no result'
};

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function button(label: string, cls: string, onClick: () => void, icon?: LabIcon, title?: string): HTMLButtonElement {
  const b = el('button', `jp-ACP-button ${cls}`);
  b.type = 'button';
  if (icon) {
    b.appendChild(icon.element({ tag: 'span', className: 'jp-ACP-buttonIcon' }));
  }
  if (label) {
    b.appendChild(el('span', 'jp-ACP-buttonLabel', label));
  }
  b.title = title ?? label;
  b.setAttribute('aria-label', title ?? label);
  b.addEventListener('click', e => {
    e.preventDefault();
    onClick();
  });
  return b;
}

function pretty(value: any): string {
  if (typeof value === 'string') {
    return value;
  }
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

// -- nothing fetched without a click (issue 11, hole 7) --------------------------------------------
/** Elements that load or embed something by themselves: never rendered from agent content. */
const DROPPED_TAGS = new Set([
  'script', 'style', 'link', 'meta', 'base', 'iframe', 'frame', 'frameset', 'object', 'embed', 'applet',
  'portal', 'noscript', 'template', 'svg', 'math', 'param', 'fencedframe'
]);
/** Attributes that make the browser fetch a URL (or send one on a click we did not design). */
const URL_ATTRS = ['src', 'srcset', 'poster', 'background', 'lowsrc', 'dynsrc', 'data', 'codebase', 'action',
  'formaction', 'ping', 'manifest', 'icon', 'longdesc', 'xlink:href', 'href', 'imagesrcset', 'attributionsrc'];
const MEDIA_LABEL: Record<string, string> = { img: 'image', video: 'video', audio: 'audio' };

function hostOf(url: string): string {
  try {
    return new URL(url, document.baseURI).host || url;
  } catch {
    return url;
  }
}

/**
 * A click-to-load link in place of remote media. `data-acp-url` is what the sidebar's click handler
 * loads; `href` lets the user open it in a tab instead.
 */
function remoteLinkHtml(doc: Document, url: string, media: string, alt: string): HTMLAnchorElement {
  const a = doc.createElement('a');
  a.className = 'jp-ACP-remote';
  a.dataset.acpUrl = url;
  a.dataset.acpMedia = media;
  if (alt) {
    a.dataset.acpAlt = alt;
  }
  a.setAttribute('href', url);
  a.setAttribute('target', '_blank');
  a.setAttribute('rel', 'noopener noreferrer');
  const what = MEDIA_LABEL[media] ?? 'content';
  a.title =
    `The agent's ${what} is on another server: ${url}\nNothing was loaded. Loading it tells that server ` +
    'you are reading this (and whatever the URL carries). Click to load.';
  a.textContent = `Load ${what}${alt ? ` “${alt}”` : ''} from ${hostOf(url)}`;
  return a;
}

/**
 * The sidebar's sanitizer: JupyterLab's, then every URL that would be fetched with no click and is
 * not of this server (or `data:`) is taken out. Remote images, video and audio become click-to-load
 * links; styles that may fetch, frames, embeds and link tags go. The HTML is worked on in an inert
 * document (one with no browsing context loads nothing), so not even the check fetches.
 */
export class NoFetchSanitizer implements IRenderMime.ISanitizer {
  /** URLs the user clicked to load (this page's lifetime): they render as media from then on. */
  readonly approved = new Set<string>();
  readonly allowCommandLinker = false;

  constructor(private readonly _base: IRenderMime.ISanitizer) {}

  get allowNamedProperties(): boolean {
    return false;
  }

  getAutolink(): boolean {
    return this._base.getAutolink ? this._base.getAutolink() : true;
  }

  sanitize(dirty: string, options?: IRenderMime.ISanitizerOptions): string {
    return this.neutralise(this._base.sanitize(dirty, options));
  }

  /** Whether `url` may be fetched without asking: this server's, `data:`, or clicked already. */
  allowed(url: string): boolean {
    return !isRemoteUrl(url, document.baseURI) || this.approved.has(url.trim());
  }

  neutralise(html: string): string {
    const doc = document.implementation.createHTMLDocument('');
    const root = doc.createElement('div');
    root.innerHTML = html;
    for (const node of Array.from(root.querySelectorAll('*'))) {
      if (!root.contains(node)) {
        continue; // inside something already replaced
      }
      const tag = node.localName;
      if (DROPPED_TAGS.has(tag)) {
        node.remove();
        continue;
      }
      if (tag === 'img' || (tag === 'input' && (node.getAttribute('type') ?? '').toLowerCase() === 'image')) {
        const src = (node.getAttribute('src') ?? '').trim();
        if (src && !this.allowed(src)) {
          node.replaceWith(remoteLinkHtml(doc, src, 'img', node.getAttribute('alt') ?? ''));
          continue;
        }
      } else if (tag === 'video' || tag === 'audio') {
        const urls = [node.getAttribute('src') ?? '', ...Array.from(node.querySelectorAll('source[src], track[src]'), c => c.getAttribute('src') ?? '')]
          .map(u => u.trim())
          .filter(Boolean);
        const remote = urls.find(u => !this.allowed(u));
        if (remote) {
          node.replaceWith(remoteLinkHtml(doc, urls[0] && !this.allowed(urls[0]) ? urls[0] : remote, tag, ''));
          continue;
        }
      }
      for (const attr of Array.from(node.attributes)) {
        const name = attr.name.toLowerCase();
        if (name.startsWith('on') || name.startsWith('data-commandlinker')) {
          node.removeAttribute(attr.name);
        } else if (name === 'style' && cssMayFetch(attr.value)) {
          node.removeAttribute(attr.name);
        } else if (name === 'srcset' || name === 'imagesrcset') {
          node.removeAttribute(attr.name); // no use in a sidebar, and a list of URLs to check
        } else if (URL_ATTRS.includes(name)) {
          if ((name === 'href' && (tag === 'a' || tag === 'area')) || this.allowed(attr.value)) {
            continue; // a link is followed on a click only
          }
          node.removeAttribute(attr.name);
        }
      }
      if (tag === 'a' || tag === 'area') {
        node.setAttribute('rel', 'noopener noreferrer');
      }
    }
    return root.innerHTML;
  }
}

interface IEntry {
  node: HTMLElement;
  version: number;
  renderer?: IRenderMime.IRenderer;
  rendering?: boolean;
  dirty?: boolean;
  open?: boolean;
}

/** Events asked per page of older history. */
const HISTORY_PAGE = 200;

/** One agent session: its model, its stream and its rendered log. */
class SessionView {
  readonly model = new ChatModel();
  readonly log = el('div', 'jp-ACP-log');
  readonly hint = el('div', 'jp-ACP-hint');
  /** "Earlier messages…" at the top of a long history: scrolling up (or a click) loads a page. */
  readonly earlier = el('div', 'jp-ACP-earlier');
  nodes = new Map<string, IEntry>();
  /** The model's epoch the DOM follows; a new one (older events merged) re-syncs the log. */
  epoch = 0;
  loadingOlder = false;
  olderError: string | null = null;
  /** A pending check whether the log is too short to scroll (then the next page loads by itself). */
  autoLoad: number | null = null;
  /** The reading position (distance from the bottom) to keep while older history lands above it. */
  anchor: { fromBottom: number; until: number } | null = null;
  private _filling = false;
  stream: EventStream | null = null;
  stick = true;
  startError: string | null = null;
  historyIndex = -1;
  revertible = new Set<string>();
  draft = '';
  private _poll: number | null = null;

  constructor(
    public info: ISessionInfo,
    private readonly _api: AcpApi,
    onChange: () => void
  ) {
    this.hint.append(
      el('div', 'jp-ACP-emptyTitle', 'Ask about this notebook'),
      el(
        'p',
        '',
        'The agent sees this notebook: it can read and edit its cells, run code in its kernel and look at variables. ' +
          'Select cells or text to include them, type @ to attach a variable, and review each edit before it happens.'
      )
    );
    this.earlier.hidden = true;
    this.log.append(this.earlier, this.hint);
    this.log.setAttribute('role', 'log');
    this.log.setAttribute('aria-live', 'polite');
    this.log.setAttribute('aria-label', 'Conversation with the agent');
    this.log.addEventListener('scroll', () => {
      this.stick = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 48;
      if (this.log.scrollTop < 80 && this.model.olderBefore !== null) {
        void this.loadOlder(onChange);
      }
    });
    this.model.onChange = onChange;
    this.setAlwaysAllowed(info);
    // the pickers show at once; the replayed events then bring the same state, in order
    this.model.setConfig(info.modes ?? undefined, info.config_options ?? undefined);
    if (info.state === 'starting') {
      this.model.phase = 'starting';
    } else if (info.state === 'ready' || info.state === 'busy') {
      this.model.phase = 'ready';
    }
    this.stream = new EventStream(
      after => _api.streamUrl(info.id, after),
      () => this.model.lastSeq,
      events => {
        this.model.applyAll(events);
        if (this.model.gap) {
          void this.fillGap();
        }
        if (events.some(e => e.type === 'turn_ended' || (e.type === 'notice' && /^reverted/.test(e.text ?? '')))) {
          void this.refreshRevertible(onChange);
        }
      }
    );
    this.stream.onState = () => onChange();
    this.watchStart(onChange);
  }

  /** The session description's always-allowed tools (the events then keep them current). */
  setAlwaysAllowed(info: ISessionInfo): void {
    if (Array.isArray(info.always_allowed)) {
      this.model.alwaysAllowed = info.always_allowed.map(String);
    }
  }

  /**
   * Load the page of history before the oldest event shown, and keep what the user was reading where
   * it was on screen (the page lands above it).
   */
  async loadOlder(onChange: () => void): Promise<void> {
    const before = this.model.olderBefore;
    if (before === null || this.loadingOlder) {
      return;
    }
    this.loadingOlder = true;
    this.olderError = null;
    onChange();
    try {
      const page = await this._api.eventsBefore(this.info.id, before, HISTORY_PAGE);
      if (!this.stick) {
        this.keepAnchor(); // the user scrolled up to read: the page lands above what they read
      }
      this.model.addOlder(Array.isArray(page) ? page : [], before);
    } catch (err) {
      this.olderError = (err as Error).message;
    } finally {
      this.loadingOlder = false;
      onChange();
    }
  }

  /**
   * Remember how far from the bottom the user reads: older history lands above, so the same distance
   * from the bottom is the same place in the conversation (whatever items were rebuilt).
   */
  keepAnchor(): void {
    this.anchor = { fromBottom: this.log.scrollHeight - this.log.scrollTop, until: Date.now() + 2000 };
    this.stick = false;
  }

  /** Put the reading position back (older content above it changed the heights). */
  restoreAnchor(): void {
    const a = this.anchor;
    if (!a) {
      return;
    }
    if (Date.now() > a.until) {
      this.anchor = null;
      return;
    }
    this.log.scrollTop = this.log.scrollHeight - a.fromBottom;
  }

  /** A reconnect replayed only the latest page: fetch the events between, in pages. */
  async fillGap(): Promise<void> {
    if (this._filling) {
      return;
    }
    this._filling = true;
    try {
      for (let round = 0; this.model.gap && round < 50; round++) {
        const { after, before } = this.model.gap;
        const page = await this._api.events(this.info.id, after, HISTORY_PAGE);
        const inside = (Array.isArray(page) ? page : []).filter(e => e.seq > after && e.seq < before);
        if (!inside.length) {
          this.model.gap = null; // nothing stored there (or no longer): nothing to wait for
          break;
        }
        this.model.merge(inside);
      }
    } catch {
      // the stream's state says whether the server is there; the next reconnect tries again
    } finally {
      this._filling = false;
    }
  }

  /** Turns whose agent edits can be reverted; their turn-end lines get a "Revert" button. */
  async refreshRevertible(onChange: () => void): Promise<void> {
    const turns = new Set((await this._api.revertible(this.info.id)).filter((t): t is string => !!t));
    const changed = turns.size !== this.revertible.size || [...turns].some(t => !this.revertible.has(t));
    if (!changed) {
      return;
    }
    this.revertible = turns;
    for (const item of this.model.items) {
      if (item.kind === 'turn_end') {
        const entry = this.nodes.get(item.id);
        if (entry) {
          entry.version = -1;
        }
      }
    }
    onChange();
  }

  /**
   * A failed warm-up leaves no event (the error is recorded on the session and reported on the
   * next prompt): poll the session while the agent starts, to show the failure right away.
   */
  watchStart(onChange: () => void): void {
    if (this._poll !== null) {
      return;
    }
    let tries = 0;
    const tick = async () => {
      this._poll = null;
      tries++;
      try {
        const info = await this._api.request<ISessionInfo>(`sessions/${this.info.id}`);
        this.info = info;
        this.setAlwaysAllowed(info);
        if (info.state === 'error' && info.error) {
          this.startError = info.error;
          onChange();
          return;
        }
        if (info.state !== 'starting') {
          this.startError = null;
          if (this.model.phase === 'starting' || this.model.phase === 'unknown') {
            this.model.phase = info.state === 'error' ? 'error' : 'ready';
          }
          onChange();
          return;
        }
      } catch {
        // the server is away; the stream's reconnect state says so
      }
      if (tries < 120) {
        this._poll = window.setTimeout(tick, Math.min(500 * tries, 3000));
      }
    };
    this._poll = window.setTimeout(tick, 300);
  }

  dispose(): void {
    if (this._poll !== null) {
      window.clearTimeout(this._poll);
    }
    if (this.autoLoad !== null) {
      window.clearTimeout(this.autoLoad);
    }
    this.stream?.dispose();
    for (const entry of this.nodes.values()) {
      try {
        entry.renderer?.dispose();
      } catch {
        // a renderer attached inside a log that is no longer in the page cannot detach: nothing to do
      }
    }
    this.log.remove();
  }
}

export class AgentPanel extends Widget {
  readonly api: AcpApi;
  settings: IPanelSettings = { defaultAgent: '', includeSelection: true };

  private _tracker: INotebookTracker;
  private _rendermime: IRenderMimeRegistry;
  private _sanitizer: NoFetchSanitizer;
  private _notebook: NotebookPanel | null = null;
  private _views = new Map<string, SessionView>();
  private _view: SessionView | null = null;
  private _agents: IAgentInfo[] = [];
  private _bindToken = 0;
  private _renderScheduled = false;
  private _transient: { text: string; level: string } | null = null;
  private _includeSelection: boolean | null = null;
  private _menuIndex = 0;
  private _completeToken = 0;
  private _kinds = new Map<string, string>();

  // DOM
  private _header = el('div', 'jp-ACP-header');
  private _title = el('div', 'jp-ACP-title');
  private _agentSelect = el('select', 'jp-ACP-agentSelect');
  private _options = el('div', 'jp-ACP-options');
  private _optionsError = el('div', 'jp-ACP-optionsError');
  private _optionsSig = '';
  /** "Always allowed: Edit cell ×, Run cells ×": the session's standing approvals, revocable. */
  private _policy = el('div', 'jp-ACP-policy');
  private _policySig = '';
  /** Switches waiting for the server, by `session:picker`. */
  private _pending = new Set<string>();
  /** The last refused switch, shown under the pickers until dismissed or a switch succeeds. */
  private _optionError: { session: string; text: string } | null = null;
  private _status = el('div', 'jp-ACP-status');
  private _body = el('div', 'jp-ACP-body');
  private _empty = el('div', 'jp-ACP-empty');
  private _composer = el('div', 'jp-ACP-composer');
  private _menu = el('div', 'jp-ACP-slashMenu');
  private _input = el('textarea', 'jp-ACP-input');
  private _chip = el('button', 'jp-ACP-chip');
  private _send: HTMLButtonElement;
  private _stop: HTMLButtonElement;
  private _newChat: HTMLButtonElement;

  constructor(options: IPanelOptions) {
    super();
    this.addClass('jp-ACP-panel');
    this.api = options.api ?? new AcpApi();
    this._tracker = options.tracker;
    // the sidebar's own rendermime: agent content fetches nothing from another server without a click
    this._sanitizer = new NoFetchSanitizer(options.rendermime.sanitizer);
    this._rendermime = options.rendermime.clone({ sanitizer: this._sanitizer });
    this._body.addEventListener('click', e => this._onRemoteClick(e));

    // header: notebook name, agent picker, the session's mode and options
    const titleRow = el('div', 'jp-ACP-titleRow');
    this._newChat = button('', 'jp-ACP-iconButton jp-ACP-newChat', () => void this._reset(), addIcon, 'New conversation (the agent forgets this one)');
    titleRow.append(this._title, this._newChat);
    const pickRow = el('label', 'jp-ACP-pickRow');
    pickRow.append(el('span', 'jp-ACP-pickLabel', 'Agent'), this._agentSelect);
    this._agentSelect.setAttribute('aria-label', 'Agent for this notebook');
    this._agentSelect.addEventListener('change', () => this._pickAgent(this._agentSelect.value));
    this._options.setAttribute('role', 'group');
    this._options.setAttribute('aria-label', "The agent's session options");
    this._options.hidden = true;
    this._optionsError.setAttribute('role', 'alert');
    this._optionsError.hidden = true;
    this._policy.setAttribute('role', 'group');
    this._policy.setAttribute('aria-label', 'Tools that run without asking in this notebook');
    this._policy.hidden = true;
    this._header.append(titleRow, pickRow, this._options, this._optionsError, this._policy);

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

    // composer
    this._input.rows = 3;
    this._input.placeholder = 'Ask the agent… (Enter to send, Shift+Enter for a new line, / for commands, @ for variables)';
    this._input.setAttribute('aria-label', 'Message to the agent');
    this._input.addEventListener('keydown', e => this._onKey(e));
    this._input.addEventListener('input', () => this._updateMenu());
    this._menu.setAttribute('role', 'listbox');
    this._menu.setAttribute('aria-label', 'Agent commands');
    this._menu.hidden = true;
    this._chip.type = 'button';
    this._chip.addEventListener('click', () => {
      this._includeSelection = !this._selectionOn();
      this._updateChip();
    });
    this._send = button('Send', 'jp-mod-accept jp-ACP-send', () => void this._sendPrompt(), undefined, 'Send (Enter)');
    this._stop = button('Stop', 'jp-mod-warn jp-ACP-stop', () => void this._cancel(), stopIcon, 'Stop the agent');
    const row = el('div', 'jp-ACP-composerRow');
    row.append(this._chip, el('span', 'jp-ACP-spacer'), this._stop, this._send);
    this._composer.append(this._menu, this._input, row);

    this.node.append(this._header, this._status, this._body, this._composer);

    this._tracker.currentChanged.connect(() => this._follow(), this);
    this._tracker.widgetAdded.connect((_, nb) => nb.disposed.connect(() => this._forget()), this);
    this._tracker.activeCellChanged.connect(() => this._updateChip(), this);
    void this._loadAgents();
    this._follow();
  }

  /** Shown again (the sidebar was collapsed while answers arrived): follow the latest, as before. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
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
    this._updateChip();
  }

  get currentSession(): ISessionInfo | null {
    return this._view?.info ?? null;
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
          void this._bind();
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

  private async _bind(agent?: string): Promise<void> {
    const token = ++this._bindToken;
    const path = this._path();
    this._transient = null;
    if (!path) {
      this._show(null);
      return;
    }
    this._title.textContent = path.split('/').pop() ?? path;
    this._title.title = path;
    try {
      let choice = agent ?? window.localStorage.getItem(AGENT_KEY + path) ?? undefined;
      if (!choice) {
        const existing = await this.api.sessions(path);
        if (token !== this._bindToken) {
          return;
        }
        existing.sort((a, b) => b.last_seq - a.last_seq);
        choice = existing[0]?.agent ?? (this.settings.defaultAgent || undefined);
      }
      if (this._view && this._view.info.notebook === path && this._view.info.agent === choice && !agent) {
        this._show(this._view);
        return;
      }
      const info = await this.api.openSession(path, choice);
      if (token !== this._bindToken) {
        return;
      }
      let view = this._views.get(info.id);
      if (!view) {
        const created = new SessionView(info, this.api, () => this._scheduleRender(created));
        view = created;
        this._views.set(info.id, view);
        void view.refreshRevertible(() => this._scheduleRender(created));
      } else {
        view.info = info;
        view.setAlwaysAllowed(info);
      }
      this._show(view);
    } catch (err) {
      if (token !== this._bindToken) {
        return;
      }
      const stored = window.localStorage.getItem(AGENT_KEY + path);
      if (stored && err instanceof ApiError && err.status < 500 && !agent) {
        // the remembered agent is gone from the configuration: fall back to the default
        window.localStorage.removeItem(AGENT_KEY + path);
        void this._bind();
        return;
      }
      this._show(null, `Could not open an agent session for ${path}: ${(err as Error).message}`);
    }
  }

  private _show(view: SessionView | null, error?: string): void {
    if (this._view && this._view !== view) {
      this._view.log.remove();
      this._view.draft = this._input.value; // each conversation keeps its unsent draft
      this._input.value = view?.draft ?? '';
    }
    this._view = view;
    this._body.textContent = '';
    delete this.node.dataset.agent;
    delete this.node.dataset.session;
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
    this._syncAgentSelect();
    this._render(view);
    view.log.scrollTop = view.log.scrollHeight;
    this._updateChip();
    this._forget();
  }

  private async _loadAgents(): Promise<void> {
    try {
      this._agents = await this.api.agents();
    } catch {
      this._agents = [];
    }
    this._syncAgentSelect();
  }

  private _syncAgentSelect(): void {
    const sel = this._agentSelect;
    const current = this._view?.info.agent ?? '';
    sel.textContent = '';
    const configured = this._agents.filter(a => a.configured);
    const detected = this._agents.filter(a => !a.configured);
    for (const a of configured) {
      const o = el('option', '', a.title + (a.available ? '' : ' (not installed)'));
      o.value = a.name;
      o.disabled = !a.available;
      sel.appendChild(o);
    }
    if (detected.length) {
      const g = el('optgroup');
      g.label = 'Detected on PATH (add to JupyterACP.agents to use)';
      for (const a of detected) {
        const o = el('option', '', a.title);
        o.value = a.name;
        o.disabled = true;
        g.appendChild(o);
      }
      sel.appendChild(g);
    }
    if (current && !configured.some(a => a.name === current)) {
      const o = el('option', '', current);
      o.value = current;
      sel.appendChild(o);
    }
    sel.value = current;
    sel.disabled = !this._view;
  }

  private _pickAgent(name: string): void {
    const path = this._path();
    if (!path || !name) {
      return;
    }
    window.localStorage.setItem(AGENT_KEY + path, name);
    delete this.node.dataset.agent;
    this._agentSelect.disabled = true;
    void this._bind(name);
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
    const stick = view.stick && !view.anchor;
    if (view.epoch !== view.model.epoch) {
      this._resync(view);
    }
    // entries in the model's order, after the hint: live items append, older pages insert above
    let prev: Node = view.hint;
    for (const item of view.model.items) {
      let entry = view.nodes.get(item.id);
      if (!entry) {
        entry = { node: el('div'), version: -1 };
        entry.node.dataset.kind = item.kind;
        entry.node.dataset.turn = item.turnId ?? '';
        view.nodes.set(item.id, entry);
      }
      if (prev.nextSibling !== entry.node) {
        view.log.insertBefore(entry.node, prev.nextSibling);
      }
      prev = entry.node;
      if (entry.version !== item.version) {
        entry.version = item.version;
        this._renderItem(view, item, entry);
      }
    }
    this._renderEarlier(view);
    view.hint.hidden = view.model.items.some(i => i.kind === 'user' || i.kind === 'message');
    // screen readers announce the answer once, when it is complete, not every streamed word
    view.log.setAttribute('aria-busy', String(!!view.model.runningTurn && !view.model.pendingPermissions().length));
    this._renderChrome();
    if (stick) {
      view.log.scrollTop = view.log.scrollHeight;
    } else {
      view.restoreAnchor();
    }
    // a short history page that does not fill the log cannot be scrolled: load the next one (once
    // the answers are rendered: markdown renders after this returns)
    if (view.model.olderBefore !== null && !view.loadingOlder && !view.olderError && view.autoLoad === null) {
      view.autoLoad = window.setTimeout(() => {
        view.autoLoad = null;
        const log = view.log;
        const visible = log.clientHeight > 0; // a hidden sidebar measures nothing: wait to be shown
        if (view === this._view && visible && view.model.olderBefore !== null && log.scrollHeight <= log.clientHeight + 80) {
          void view.loadOlder(() => this._scheduleRender(view));
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
        try {
          entry.renderer?.dispose();
        } catch {
          // detached already
        }
        entry.node.remove();
        view.nodes.delete(id);
      }
    }
  }

  /** The line at the top of a long history. */
  private _renderEarlier(view: SessionView): void {
    const box = view.earlier;
    const more = view.model.olderBefore !== null;
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
        button('Earlier messages…', 'jp-ACP-linkButton jp-ACP-earlierButton', () => void view.loadOlder(() => this._scheduleRender(view)), undefined,
          'Load earlier messages of this conversation (or scroll up)')
      );
    }
  }

  private _renderItem(view: SessionView, item: Item, entry: IEntry): void {
    try {
      this._renderItemUnsafe(view, item, entry);
    } catch (err) {
      // one item the sidebar cannot show must not take the conversation with it
      console.warn('jupyter-acp-host: could not render an item', item.kind, err);
      entry.node.className = 'jp-ACP-item jp-ACP-notice jp-mod-warning';
      entry.node.textContent = `(this ${item.kind} could not be shown: ${(err as Error).message})`;
    }
  }

  private _renderItemUnsafe(view: SessionView, item: Item, entry: IEntry): void {
    switch (item.kind) {
      case 'user':
        return this._renderUser(item, entry);
      case 'message':
        return this._renderMessage(view, item, entry);
      case 'thought':
        return this._renderThought(view, item, entry);
      case 'tool':
        return this._renderTool(view, item, entry);
      case 'plan':
        return this._renderPlan(item, entry);
      case 'turn_end':
        return this._renderTurnEnd(view, item, entry);
      case 'notice':
        return this._renderNotice(item, entry);
      case 'audit':
        return this._renderAudit(item, entry);
      default:
        entry.node.hidden = true; // a kind this view does not know
    }
  }

  /** A refused action: a small muted line with the rule that refused and how to change it. */
  private _renderAudit(item: IAuditItem, entry: IEntry): void {
    const n = entry.node;
    n.className = 'jp-ACP-item jp-ACP-audit';
    n.textContent = '';
    n.setAttribute('role', 'note');
    n.appendChild(el('span', 'jp-ACP-auditMark', '⊘'));
    n.appendChild(el('span', 'jp-ACP-auditText', item.text));
    if (item.tool) {
      n.dataset.tool = item.tool;
    }
  }

  private _renderUser(item: IUserItem, entry: IEntry): void {
    const n = entry.node;
    n.className = 'jp-ACP-item jp-ACP-user';
    n.textContent = '';
    n.appendChild(el('div', 'jp-ACP-userText', item.text));
    if (item.attachments.length) {
      const chips = el('div', 'jp-ACP-attachments');
      for (const a of item.attachments) {
        chips.appendChild(el('span', 'jp-ACP-attachment', a));
      }
      n.appendChild(chips);
    }
  }

  private _renderMessage(view: SessionView, item: ITextItem, entry: IEntry): void {
    const n = entry.node;
    if (!entry.renderer) {
      n.className = 'jp-ACP-item jp-ACP-message';
      entry.renderer = this._rendermime.createRenderer('text/markdown');
      entry.renderer.addClass('jp-ACP-markdown');
      Widget.attach(entry.renderer, n);
    }
    if (entry.rendering) {
      entry.dirty = true; // one render in flight; render the latest text when it lands
      return;
    }
    entry.rendering = true;
    const text = item.text;
    const renderer = entry.renderer;
    renderer
      .renderModel(new MimeModel({ data: { 'text/markdown': text }, trusted: false }))
      .catch(() => {
        renderer.node.textContent = text;
      })
      .then(() => {
        this._decorateCode(renderer.node);
        entry.rendering = false;
        if (entry.dirty) {
          entry.dirty = false;
          this._renderMessage(view, view.model.get(item.id) as ITextItem, entry);
        } else if (view.anchor && view === this._view) {
          view.restoreAnchor();
        } else if (view.stick && view === this._view) {
          view.log.scrollTop = view.log.scrollHeight;
        }
      });
  }

  /** Copy and "insert as cell below" on every code block of a rendered answer. */
  private _decorateCode(root: HTMLElement): void {
    root.querySelectorAll('pre').forEach(pre => {
      if (pre.parentElement?.classList.contains('jp-ACP-code')) {
        return;
      }
      const wrap = el('div', 'jp-ACP-code');
      pre.replaceWith(wrap);
      const bar = el('div', 'jp-ACP-codeBar');
      const code = () => pre.textContent ?? '';
      const copy = button(
        '',
        'jp-ACP-iconButton',
        () => {
          void navigator.clipboard?.writeText(code()).then(() => {
            copy.classList.add('jp-mod-done');
            setTimeout(() => copy.classList.remove('jp-mod-done'), 1200);
          });
        },
        copyIcon,
        'Copy code'
      );
      const insert = button('', 'jp-ACP-iconButton', () => this._insertCell(code()), addIcon, 'Insert as a cell below');
      bar.append(copy, insert);
      wrap.append(bar, pre);
    });
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

  private _renderThought(view: SessionView, item: ITextItem, entry: IEntry): void {
    let details = entry.node.querySelector('details');
    if (!details) {
      entry.node.className = 'jp-ACP-item jp-ACP-thought';
      details = el('details');
      const summary = el('summary', 'jp-ACP-thoughtSummary', 'Thinking');
      details.append(summary, el('div', 'jp-ACP-thoughtText'));
      entry.node.appendChild(details);
    }
    const running = view.model.runningTurn === item.turnId && view.model.items[view.model.items.length - 1] === item;
    details.querySelector('summary')!.textContent = running ? 'Thinking…' : 'Thought';
    details.querySelector('.jp-ACP-thoughtText')!.textContent = item.text;
  }

  private _renderTool(view: SessionView, item: IToolItem, entry: IEntry): void {
    const n = entry.node;
    n.className = `jp-ACP-item jp-ACP-tool jp-mod-${item.status}`;
    n.dataset.status = item.status;
    n.dataset.toolCallId = item.toolCallId;
    n.textContent = '';
    const pending = item.permissions.some(p => !p.resolved);
    const head = el('button', 'jp-ACP-toolHead');
    head.type = 'button';
    head.setAttribute('aria-expanded', String(!!entry.open));
    head.appendChild((KIND_ICONS[item.toolKind] ?? bugIcon).element({ tag: 'span', className: 'jp-ACP-toolIcon' }));
    head.appendChild(el('span', 'jp-ACP-toolTitle', item.title));
    head.appendChild(el('span', `jp-ACP-badge jp-mod-${item.status}`, STATUS_LABEL[item.status] ?? item.status));
    head.title = `${item.toolKind} tool call: show arguments and output`;
    head.addEventListener('click', () => {
      entry.open = !entry.open;
      this._renderTool(view, view.model.get(item.id) as IToolItem, entry);
    });
    n.appendChild(head);

    // Diffs (cell or file edits) and images are shown even when collapsed; they are the point.
    const visible = el('div', 'jp-ACP-toolVisible');
    for (const c of item.content) {
      if (c?.type === 'diff') {
        visible.appendChild(this._diff(c));
      } else if (c?.type === 'content' && c.content?.type === 'image') {
        const src = c.content.data
          ? `data:${c.content.mimeType ?? 'image/png'};base64,${c.content.data}`
          : typeof c.content.uri === 'string'
            ? c.content.uri
            : '';
        if (src) {
          visible.appendChild(this._media(src, 'img', `image from ${item.title}`, 'jp-ACP-toolImage'));
        }
      } else if (c?.type === 'content' && c.content?.type === 'resource_link' && typeof c.content.uri === 'string') {
        const a = el('a', 'jp-ACP-resourceLink', String(c.content.name ?? c.content.title ?? c.content.uri));
        a.href = c.content.uri;
        a.target = '_blank';
        a.rel = 'noopener noreferrer';
        a.title = c.content.uri;
        visible.appendChild(a);
      }
    }
    if (visible.childElementCount) {
      n.appendChild(visible);
    }

    if (entry.open) {
      const details = el('div', 'jp-ACP-toolDetails');
      if (item.rawInput !== undefined) {
        details.append(el('div', 'jp-ACP-detailLabel', 'Arguments'), el('pre', 'jp-ACP-pre', pretty(item.rawInput)));
      }
      const texts = item.content
        .filter(c => c?.type === 'content' && c.content?.type === 'text')
        .map(c => c.content.text as string);
      const terminals = item.content.filter(c => c?.type === 'terminal');
      if (texts.length) {
        details.append(el('div', 'jp-ACP-detailLabel', 'Output'), this._textPreview(texts.join('\n')));
      }
      for (const t of terminals) {
        details.append(el('div', 'jp-ACP-detailLabel', `Terminal ${t.terminalId}`));
      }
      // an MCP-style result repeats the output above: show only what it adds
      let result = item.rawOutput;
      if (texts.length && result && typeof result === 'object' && Array.isArray(result.content)) {
        result = result.structuredContent ?? undefined;
      }
      if (result !== undefined && result !== null) {
        details.append(el('div', 'jp-ACP-detailLabel', 'Result'), el('pre', 'jp-ACP-pre', pretty(result)));
      }
      if (item.locations.length) {
        details.append(
          el('div', 'jp-ACP-detailLabel', 'Locations'),
          el('pre', 'jp-ACP-pre', item.locations.map(l => `${l.path}${l.line ? ':' + l.line : ''}`).join('\n'))
        );
      }
      if (!details.childElementCount) {
        details.appendChild(el('div', 'jp-ACP-muted', 'No arguments or output.'));
      }
      n.appendChild(details);
    }

    for (const perm of item.permissions) {
      n.appendChild(this._permission(view, item, perm));
    }
    n.classList.toggle('jp-mod-asking', pending);
  }

  /**
   * An image, video or audio element for `url`, or a click-to-load link when it is on another server
   * and was not clicked yet (the tool card's share of hole 7).
   */
  private _media(url: string, media: string, alt: string, cls = ''): HTMLElement {
    if (!this._sanitizer.allowed(url)) {
      const a = remoteLinkHtml(document, url, media, alt);
      if (cls) {
        a.dataset.acpClass = cls;
      }
      return a;
    }
    if (media === 'video' || media === 'audio') {
      const m = el(media, cls);
      m.controls = true;
      m.src = url;
      return m;
    }
    const img = el('img', cls);
    img.src = url;
    img.alt = alt || 'image';
    return img;
  }

  /** A click on a click-to-load link: load that URL (and remember the user's choice for this page). */
  private _onRemoteClick(e: MouseEvent): void {
    const target = e.target as Element | null;
    const link = target?.closest?.('a.jp-ACP-remote') as HTMLAnchorElement | null;
    const url = link?.dataset.acpUrl;
    if (!link || !url || (e.button ?? 0) !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) {
      return; // a modified click opens the link in a tab, as links do
    }
    e.preventDefault();
    e.stopPropagation();
    this._sanitizer.approved.add(url.trim());
    const media = this._media(url, link.dataset.acpMedia ?? 'img', link.dataset.acpAlt ?? '', link.dataset.acpClass ?? '');
    media.classList.add('jp-ACP-loadedRemote');
    link.replaceWith(media);
  }

  private _diff(c: any): HTMLElement {
    const box = el('div', 'jp-ACP-diff');
    box.appendChild(el('div', 'jp-ACP-diffPath', String(c.path ?? '')));
    const pre = el('pre', 'jp-ACP-diffBody');
    for (const { op, line } of lineDiff(c.oldText, String(c.newText ?? ''))) {
      const row = el('div', `jp-ACP-diffLine jp-mod-${op === '+' ? 'add' : op === '-' ? 'del' : 'ctx'}`);
      row.textContent = `${op} ${line}`;
      pre.appendChild(row);
    }
    box.appendChild(pre);
    return box;
  }

  /** A text that may be a unified diff: colour its lines. */
  private _textPreview(text: string): HTMLElement {
    const pre = el('pre', 'jp-ACP-pre jp-ACP-preview');
    const isDiff = /^(---|\+\+\+|@@) /m.test(text);
    for (const line of text.split('\n')) {
      const row = el('div', 'jp-ACP-diffLine');
      if (isDiff && line.startsWith('+') && !line.startsWith('+++')) {
        row.classList.add('jp-mod-add');
      } else if (isDiff && line.startsWith('-') && !line.startsWith('---')) {
        row.classList.add('jp-mod-del');
      }
      row.textContent = line;
      pre.appendChild(row);
    }
    return pre;
  }

  private _permission(view: SessionView, tool: IToolItem, perm: IPermission): HTMLElement {
    const box = el('div', 'jp-ACP-permission');
    box.dataset.requestId = perm.requestId;
    if (perm.resolved) {
      box.classList.add('jp-mod-resolved');
      let text: string;
      if (perm.resolved.cancelled) {
        text = 'Permission request cancelled (the turn ended or was stopped).';
      } else {
        const opt = perm.options.find(o => o.optionId === perm.resolved!.optionId);
        const kind = opt?.kind ?? '';
        const name = opt?.name ?? perm.resolved.optionId ?? '';
        const label = KIND_LABEL[kind];
        text = label
          ? `${kind.startsWith('reject') ? 'Rejected' : 'Allowed'}: ${label}` +
            (saysMore(name, label) && perm.source !== 'client' ? ` (the agent's option “${name}”)` : '')
          : `Answered “${name}” (an option of unknown kind ${kind || 'none'})`;
        if (kind === 'allow_always' && perm.source === 'client') {
          text += " in this notebook's session (× in the header undoes it)";
        }
        box.classList.add(kind.startsWith('reject') ? 'jp-mod-rejected' : kind.startsWith('allow') ? 'jp-mod-allowed' : 'jp-mod-neutral');
      }
      box.appendChild(el('div', 'jp-ACP-permissionResult', text));
      return box;
    }
    box.setAttribute('role', 'group');
    box.setAttribute('aria-label', `Permission requested: ${tool.title}`);
    box.appendChild(el('div', 'jp-ACP-permissionQuestion', `The agent asks to run “${tool.title}”.`));
    // what the tool would do: the agent's preview (a diff, a command) if any, else its arguments
    const preview = tool.content
      .filter(c => c?.type === 'content' && c.content?.type === 'text')
      .map(c => c.content.text as string)
      .join('\n');
    if (preview) {
      box.appendChild(this._textPreview(preview));
    } else if (tool.rawInput !== undefined && !tool.content.some(c => c?.type === 'diff')) {
      box.appendChild(el('pre', 'jp-ACP-pre', pretty(tool.rawInput)));
    }
    const row = el('div', 'jp-ACP-permissionOptions');
    for (const opt of optionOrder(perm.options)) {
      const known = KIND_LABEL[opt.kind];
      const label = known ?? `“${opt.name}”`;
      const more = known && saysMore(opt.name, known);
      let title = known
        ? `${label}. ${perm.source === 'client' ? 'In full' : 'The agent calls this option'}: “${opt.name}”.`
        : `The agent's option “${opt.name}” has an unknown kind (${opt.kind || 'none'}): what it does is up to the agent.`;
      if (opt.kind === 'allow_always') {
        title +=
          perm.source === 'client'
            ? " This tool then runs without asking in this notebook's session; × in the panel's header undoes it."
            : ' The agent keeps this choice itself: what "always" covers is up to the agent.';
      }
      const b = button(label, `jp-ACP-option jp-ACP-permissionOption ${kindClass(opt.kind)}`, () => {
        row.querySelectorAll('button').forEach(x => ((x as HTMLButtonElement).disabled = true));
        this.api.answer(view.info.id, perm.requestId, opt.optionId).catch(err => {
          row.querySelectorAll('button').forEach(x => ((x as HTMLButtonElement).disabled = false));
          this._flash(`Could not answer: ${(err as Error).message}`, 'error');
        });
      });
      b.dataset.optionId = opt.optionId;
      b.dataset.optionKind = opt.kind;
      b.title = title;
      b.setAttribute('aria-label', more ? `${label} (${perm.source === 'client' ? '' : "the agent's words: "}“${opt.name}”)` : label);
      if (more) {
        b.appendChild(el('span', 'jp-ACP-optionAgentName', `“${opt.name}”`));
      }
      row.appendChild(b);
    }
    if (!perm.options.length) {
      row.appendChild(el('span', 'jp-ACP-muted', 'The agent offered no options.'));
    }
    box.appendChild(row);
    return box;
  }

  private _renderPlan(item: IPlanItem, entry: IEntry): void {
    const n = entry.node;
    n.className = 'jp-ACP-item jp-ACP-plan';
    n.textContent = '';
    n.appendChild(el('div', 'jp-ACP-planTitle', 'Plan'));
    const ul = el('ul', 'jp-ACP-planList');
    ul.setAttribute('aria-label', 'Plan');
    for (const e of item.entries) {
      const status = e.status ?? 'pending';
      const li = el('li', `jp-ACP-planEntry jp-mod-${status}`);
      const mark = status === 'completed' ? '✓' : status === 'in_progress' ? '◐' : '○';
      li.append(el('span', 'jp-ACP-planMark', mark), el('span', '', e.content));
      li.setAttribute('aria-label', `${e.content} (${status.replace('_', ' ')})`);
      ul.appendChild(li);
    }
    n.appendChild(ul);
  }

  private _renderTurnEnd(view: SessionView, item: ITurnEndItem, entry: IEntry): void {
    const n = entry.node;
    n.className = 'jp-ACP-item jp-ACP-turnEnd';
    n.textContent = '';
    n.hidden = false;
    const revert = () => {
      if (!item.turnId || !view.revertible.has(item.turnId)) {
        return;
      }
      const b = button('Revert agent edits', 'jp-ACP-linkButton jp-ACP-revert', () => {
        b.disabled = true;
        this.api
          .revert(view.info.id, item.turnId)
          .then(() => view.refreshRevertible(() => this._scheduleRender(view)))
          .catch(err => {
            b.disabled = false;
            this._flash(`Could not revert: ${(err as Error).message}`);
          });
      }, undoIcon, "Undo the agent's edits of this turn (your own edits stay)");
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

  private _renderNotice(item: INoticeItem, entry: IEntry): void {
    const n = entry.node;
    n.className = `jp-ACP-item jp-ACP-notice jp-mod-${item.level}`;
    // "starting agent…" drives the status line; in the log it is noise
    n.hidden = item.phase === 'agent_starting';
    if (item.phase === 'session_reset') {
      n.classList.add('jp-ACP-divider');
    }
    n.textContent = item.text;
  }

  /** Status line, buttons, mode: everything that is not the log. */
  private _renderChrome(): void {
    const view = this._view;
    const model = view?.model;
    const running = !!model?.runningTurn;
    this._stop.hidden = !running;
    this._send.hidden = running;
    this._send.disabled = !view;
    this._newChat.disabled = !view;
    this._input.disabled = !view;
    this._composer.hidden = !this._path();
    this._header.hidden = !this._path();

    this._renderOptions();
    this._renderPolicy();

    // the status line: the most urgent of reconnecting, errors, starting, working
    const s = this._status;
    s.textContent = '';
    s.className = 'jp-ACP-status';
    const streamState: StreamState | undefined = view?.stream?.state;
    let text = '';
    let level = 'info';
    let detail = '';
    if (this._transient) {
      text = this._transient.text;
      level = this._transient.level;
    } else if (view && streamState === 'reconnecting') {
      text = 'Reconnecting to the server…';
      level = 'warning';
    } else if (model?.problem?.kind === 'needs_login') {
      text = 'The agent needs you to log in (how: see below), then send the prompt again';
      level = 'error';
    } else if (view?.startError) {
      text = /needs you to log in|auth/i.test(view.startError)
        ? 'The agent needs you to log in'
        : 'The agent could not start';
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
      text = waiting ? 'Waiting for your answer…' : 'The agent is working…';
      level = waiting ? 'warning' : 'busy';
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
        s.appendChild(el('pre', 'jp-ACP-pre jp-ACP-statusDetail', detail));
      }
      if (streamState === 'reconnecting' && !this._transient) {
        s.appendChild(button('Retry now', 'jp-ACP-linkButton', () => view?.stream?.retry()));
      }
    }
  }

  /**
   * The agent's mode and config options as compact pickers. Rebuilt only when something they show
   * changes (the chrome re-renders on every streamed chunk; rebuilding would close an open select).
   */
  private _renderOptions(): void {
    const view = this._view;
    const pickers = view ? view.model.pickers() : [];
    const running = !!view?.model.runningTurn;
    const sid = view?.info.id ?? '';
    const error = this._optionError && this._optionError.session === sid ? this._optionError.text : '';
    const pending = [...this._pending].filter(k => k.startsWith(sid + ':'));
    const sig = JSON.stringify([sid, pickers, running, pending, error]);
    if (sig === this._optionsSig) {
      return;
    }
    this._optionsSig = sig;
    this._options.textContent = '';
    this._options.hidden = !pickers.length;
    for (const p of pickers) {
      this._options.appendChild(this._picker(view!, p, running));
    }
    const box = this._optionsError;
    box.textContent = '';
    box.hidden = !error;
    if (error) {
      box.append(
        el('span', 'jp-ACP-optionsErrorText', error),
        button('', 'jp-ACP-iconButton jp-ACP-dismiss', () => {
          this._optionError = null;
          this._renderOptions();
        }, closeIcon, 'Dismiss')
      );
    }
  }

  /**
   * What "Always allow" let run without asking in this notebook's session, one chip per tool; × asks
   * the server to stop (the policy_changed event then updates every browser).
   */
  private _renderPolicy(): void {
    const view = this._view;
    const tools = view?.model.alwaysAllowed ?? [];
    const sig = JSON.stringify([view?.info.id ?? '', tools]);
    if (sig === this._policySig) {
      return;
    }
    this._policySig = sig;
    const box = this._policy;
    box.textContent = '';
    box.hidden = !view || !tools.length;
    if (!view || !tools.length) {
      return;
    }
    const label = el('span', 'jp-ACP-policyLabel', 'Always allowed:');
    label.title = "These tools run without asking in this notebook's session (you chose “Always allow”). × makes them ask again.";
    box.appendChild(label);
    const revoke = (tool: string | undefined, what: string) => {
      box.querySelectorAll('button').forEach(b => ((b as HTMLButtonElement).disabled = true));
      this.api
        .revokeAlwaysAllow(view.info.id, tool)
        .then(res => {
          view.model.alwaysAllowed = Array.isArray(res?.always_allowed)
            ? res.always_allowed.map(String)
            : (view.model.alwaysAllowed ?? []).filter(t => tool !== undefined && t !== tool);
        })
        .catch(err => this._flash(`Could not stop always allowing ${what}: ${(err as Error).message}`))
        .finally(() => {
          this._policySig = '';
          this._renderChrome();
        });
    };
    for (const tool of tools) {
      const name = toolLabel(tool);
      const chip = el('span', 'jp-ACP-policyChip');
      chip.dataset.tool = tool;
      chip.title = `${name} (${tool}) runs without asking in this notebook's session`;
      chip.append(
        el('span', 'jp-ACP-policyName', name),
        button('', 'jp-ACP-iconButton jp-ACP-policyRevoke', () => revoke(tool, name), closeIcon, `Stop always allowing ${name}`)
      );
      box.appendChild(chip);
    }
    if (tools.length > 1) {
      box.appendChild(button('Ask for all again', 'jp-ACP-linkButton jp-ACP-policyRevokeAll', () => revoke(undefined, 'these tools'), undefined, 'Stop always allowing every tool'));
    }
  }

  private _picker(view: SessionView, p: IPicker, running: boolean): HTMLElement {
    const key = `${view.info.id}:${p.kind === 'mode' ? 'mode' : 'config:' + p.id}`;
    const pending = this._pending.has(key);
    // While a turn runs the mode can still change: agents apply it from their next step (the
    // built-in agent checks it at each tool call, so "Auto" stops the questions of a long turn).
    // Other options (the model above all) wait for the turn's end: one answer from two models
    // would be confusing, and agents read them when a prompt starts.
    const locked = running && p.kind !== 'mode' && p.category !== 'mode';
    const title = (p.description || p.name) + (locked ? ' (can be changed when the agent is done)' : '');
    if (p.kind === 'boolean') {
      // JupyterLab's own switch (ui-components' Switch): its classes give the native look
      const sw = el('button', 'jp-switch jp-ACP-switch');
      sw.type = 'button';
      sw.setAttribute('role', 'switch');
      sw.setAttribute('aria-checked', String(p.value === true));
      sw.setAttribute('aria-label', p.name);
      sw.dataset.option = p.id;
      sw.title = title;
      sw.disabled = locked || pending;
      sw.setAttribute('aria-busy', String(pending));
      const track = el('div', 'jp-switch-track');
      track.setAttribute('aria-hidden', 'true');
      sw.append(el('span', 'jp-switch-label', p.name), track);
      sw.addEventListener('click', () => void this._switch(view, p, key, !(p.value === true), p.value ? 'off' : 'on'));
      return sw;
    }
    const wrap = el('label', 'jp-ACP-option');
    wrap.dataset.option = p.kind === 'mode' ? 'mode' : p.id;
    wrap.title = title;
    const sel = el('select', 'jp-ACP-optionSelect');
    sel.setAttribute('aria-label', p.kind === 'mode' ? 'Agent mode' : p.name);
    if (p.description) {
      sel.setAttribute('aria-description', p.description);
    }
    let group: HTMLOptGroupElement | null = null;
    for (const c of p.choices) {
      const o = el('option', '', c.name);
      o.value = c.value;
      if (c.description) {
        o.title = c.description;
      }
      if (c.group) {
        if (!group || group.label !== c.group) {
          group = el('optgroup');
          group.label = c.group;
          sel.appendChild(group);
        }
        group.appendChild(o);
      } else {
        group = null;
        sel.appendChild(o);
      }
    }
    sel.value = String(p.value);
    sel.disabled = locked || pending || p.choices.length < 2;
    sel.setAttribute('aria-busy', String(pending));
    sel.addEventListener('change', () => {
      const choice = p.choices.find(c => c.value === sel.value);
      void this._switch(view, p, key, sel.value, choice?.name ?? sel.value);
    });
    wrap.append(el('span', 'jp-ACP-optionLabel', p.kind === 'mode' ? 'Mode' : p.name), sel);
    return wrap;
  }

  /** Ask the server to switch; the answer (and the session_config event every watcher gets) updates the pickers. */
  private async _switch(view: SessionView, p: IPicker, key: string, value: string | boolean, label: string): Promise<void> {
    this._pending.add(key);
    if (this._optionError?.session === view.info.id) {
      this._optionError = null;
    }
    this._renderOptions();
    try {
      const info =
        p.kind === 'mode'
          ? await this.api.setMode(view.info.id, String(value))
          : await this.api.setConfig(view.info.id, p.id, value);
      view.model.setConfig(info.modes, info.config_options);
      view.info = { ...view.info, ...info };
    } catch (err) {
      const what = p.kind === 'mode' ? 'mode' : p.name;
      const status = err instanceof ApiError ? err.status : 0;
      const reason = (err as Error).message.replace(/^the agent refused the (mode|option):\s*/i, '');
      const kept = typeof p.value === 'boolean' ? (p.value ? 'on' : 'off') : (p.choices.find(c => c.value === p.value)?.name ?? p.value);
      this._optionError = {
        session: view.info.id,
        text:
          status === 502
            ? `The agent refused ${what} “${label}”: ${reason}. It stays “${kept}”.`
            : `Could not set ${what} to “${label}”: ${reason}. It stays “${kept}”.`
      };
    } finally {
      this._pending.delete(key);
      this._optionsSig = ''; // a refused switch puts the control back on the agent's value
      this._renderChrome();
    }
  }

  private _flash(text: string, level = 'error'): void {
    this._transient = { text, level };
    this._renderChrome();
    setTimeout(() => {
      if (this._transient?.text === text) {
        this._transient = null;
        this._renderChrome();
      }
    }, 6000);
  }

  // -- composer --------------------------------------------------------------------------------
  private _selectionOn(): boolean {
    return this._includeSelection ?? this.settings.includeSelection;
  }

  /** The selection in the bound notebook: selected text in the active cell, else the selected cells. */
  private _selection(): { label: string; block: any } | null {
    const nb = this._notebook;
    if (!nb || nb.isDisposed) {
      return null;
    }
    const notebook = nb.content;
    const cell = notebook.activeCell;
    if (!cell) {
      return null;
    }
    const path = nb.context.localPath;
    const index = notebook.activeCellIndex;
    const editor = cell.editor;
    let text = '';
    if (editor) {
      const sel = editor.getSelection();
      const a = editor.getOffsetAt(sel.start);
      const b = editor.getOffsetAt(sel.end);
      if (a !== b) {
        text = editor.model.sharedModel.getSource().slice(Math.min(a, b), Math.max(a, b));
      }
    }
    if (text) {
      return {
        label: `Selection in cell ${index + 1}`,
        block: {
          type: 'resource',
          resource: {
            uri: `${path}#cell=${cell.model.id}`,
            title: `selection in cell ${index + 1}`,
            mimeType: 'text/plain',
            text
          }
        }
      };
    }
    const selected = notebook.widgets
      .map((c, i) => ({ c, i }))
      .filter(({ c }) => notebook.isSelectedOrActive(c));
    const parts = selected.map(({ c, i }) => `# cell ${i + 1} (${c.model.type}, id ${c.model.id})\n${c.model.sharedModel.getSource()}`);
    const label = selected.length > 1 ? `Cells ${selected[0].i + 1}–${selected[selected.length - 1].i + 1}` : `Cell ${index + 1}`;
    return {
      label,
      block: {
        type: 'resource',
        resource: {
          uri: `${path}#cell=${selected.map(({ c }) => c.model.id).join(',')}`,
          title: label.toLowerCase(),
          mimeType: 'text/x-python',
          text: parts.join('\n\n')
        }
      }
    };
  }

  private _updateChip(): void {
    const on = this._selectionOn();
    const sel = this._notebook ? this._selection() : null;
    this._chip.textContent = '';
    this._chip.className = 'jp-ACP-chip' + (on ? ' jp-mod-on' : '');
    this._chip.setAttribute('aria-pressed', String(on));
    const label = sel ? sel.label : 'No cell selected';
    this._chip.appendChild(el('span', 'jp-ACP-chipMark', on ? '✓' : '+'));
    this._chip.appendChild(el('span', '', on ? `Include: ${label}` : 'Include selection'));
    this._chip.title = on
      ? 'The selected cell or text goes with your prompt. Click to leave it out.'
      : 'Click to send the selected cell or text with your prompt.';
    this._chip.setAttribute('aria-label', on ? `Including ${label} with the prompt; click to leave it out` : 'Include the selection with the prompt');
  }

  private _onKey(e: KeyboardEvent): void {
    const input = this._input;
    if (!this._menu.hidden) {
      const items = Array.from(this._menu.children) as HTMLElement[];
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        this._menuIndex = (this._menuIndex + (e.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length;
        this._highlightMenu();
        return;
      }
      if ((e.key === 'Tab' || e.key === 'Enter') && items.length) {
        e.preventDefault();
        items[this._menuIndex]?.click();
        return;
      }
      if (e.key === 'Escape') {
        this._menu.hidden = true;
        return;
      }
    }
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void this._sendPrompt();
      return;
    }
    const view = this._view;
    if (!view) {
      return;
    }
    const history = view.model.promptHistory();
    if (e.key === 'ArrowUp' && !input.value.slice(0, input.selectionStart).includes('\n') && history.length) {
      if (input.value && view.historyIndex === -1) {
        return; // do not throw away a draft
      }
      e.preventDefault();
      view.historyIndex = view.historyIndex === -1 ? history.length - 1 : Math.max(0, view.historyIndex - 1);
      input.value = history[view.historyIndex];
    } else if (e.key === 'ArrowDown' && view.historyIndex !== -1 && !input.value.slice(input.selectionEnd).includes('\n')) {
      e.preventDefault();
      view.historyIndex++;
      if (view.historyIndex >= history.length) {
        view.historyIndex = -1;
        input.value = '';
      } else {
        input.value = history[view.historyIndex];
      }
    } else if (e.key === 'Escape' && view.model.runningTurn) {
      void this._cancel();
    }
  }

  private _updateMenu(): void {
    const commands = this._view?.model.commands ?? [];
    const value = this._input.value;
    const m = /^\/(\S*)$/.exec(value);
    if (m && commands.length) {
      const matches = commands.filter(c => c.name.startsWith(m[1]));
      this._fillMenu(
        matches.map(c => ({ label: '/' + c.name, detail: c.description ?? '', apply: () => `/${c.name} ` })),
        'Agent commands'
      );
      return;
    }
    const caret = this._input.selectionStart ?? value.length;
    const at = /(^|\s)@([A-Za-z_][A-Za-z0-9_]*)?$/.exec(value.slice(0, caret));
    if (at) {
      void this._completeVariable(at[2] ?? '', caret);
      return;
    }
    this._fillMenu([], '');
  }

  private _fillMenu(items: { label: string; detail: string; apply: () => string }[], label: string): void {
    this._menu.textContent = '';
    this._menu.setAttribute('aria-label', label);
    for (const it of items) {
      const opt = el('div', 'jp-ACP-slashItem');
      opt.setAttribute('role', 'option');
      opt.append(el('span', 'jp-ACP-slashName', it.label), el('span', 'jp-ACP-muted', it.detail));
      opt.addEventListener('mousedown', e => e.preventDefault());
      opt.addEventListener('click', () => {
        this._input.value = it.apply();
        this._menu.hidden = true;
        this._input.focus();
      });
      this._menu.appendChild(opt);
    }
    this._menuIndex = 0;
    this._menu.hidden = items.length === 0;
    this._highlightMenu();
  }

  /** `@name`: complete kernel variable names (the kernel's own completer; runs no user code). */
  private async _completeVariable(prefix: string, caret: number): Promise<void> {
    const kernel = this._notebook?.sessionContext.session?.kernel;
    if (!kernel) {
      this._fillMenu([], '');
      return;
    }
    const token = ++this._completeToken;
    let names: string[] = [];
    try {
      const reply = await kernel.requestComplete({ code: prefix, cursor_pos: prefix.length });
      const content: any = reply.content;
      if (content.status === 'ok') {
        const meta = content.metadata?._jupyter_types_experimental as any[] | undefined;
        const kinds = new Map<string, string>((meta ?? []).map(x => [x.text, x.type]));
        names = (content.matches as string[])
          .filter(n => /^[A-Za-z_][A-Za-z0-9_]*$/.test(n))
          .filter(n => !kinds.size || ['instance', 'statement', 'module', 'function', 'class'].includes(kinds.get(n) ?? 'instance'))
          .filter(n => !kinds.size || kinds.get(n) !== 'keyword')
          .slice(0, 20);
        this._kinds = kinds;
      }
    } catch {
      names = [];
    }
    if (token !== this._completeToken) {
      return;
    }
    const value = this._input.value;
    const before = value.slice(0, caret).replace(/@[A-Za-z0-9_]*$/, '');
    const after = value.slice(caret);
    this._fillMenu(
      names.map(n => ({
        label: '@' + n,
        detail: this._kinds.get(n) ?? 'variable',
        apply: () => `${before}@${n} ${after.replace(/^\s+/, '')}`
      })),
      'Kernel variables'
    );
  }

  /** A bounded summary of each `@name` in the prompt (the kernel's inspector: type, value, length). */
  private async _variableBlocks(text: string): Promise<any[]> {
    const kernel = this._notebook?.sessionContext.session?.kernel;
    const path = this._path();
    if (!kernel || !path) {
      return [];
    }
    const names = Array.from(new Set(Array.from(text.matchAll(/(?:^|\s)@([A-Za-z_][A-Za-z0-9_]*)/g), m => m[1])));
    const blocks: any[] = [];
    for (const name of names.slice(0, 8)) {
      try {
        const reply: any = await Promise.race([
          kernel.requestInspect({ code: name, cursor_pos: name.length, detail_level: 0 }),
          new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 3000))
        ]);
        const c = reply.content;
        if (c.status !== 'ok' || !c.found) {
          continue;
        }
        // eslint-disable-next-line no-control-regex
        let summary = String(c.data?.['text/plain'] ?? '').replace(/\u001b\[[0-9;]*m/g, '');
        if (summary.length > 2000) {
          summary = summary.slice(0, 2000) + '\n… (truncated)';
        }
        blocks.push({
          type: 'resource',
          resource: { uri: `kernel:${path}#${name}`, title: `@${name}`, mimeType: 'text/plain', text: summary }
        });
      } catch {
        // the kernel is busy or gone: the name stays in the text, the agent can ask its tools
      }
    }
    return blocks;
  }

  private _highlightMenu(): void {
    Array.from(this._menu.children).forEach((c, i) => {
      c.classList.toggle('jp-mod-active', i === this._menuIndex);
      c.setAttribute('aria-selected', String(i === this._menuIndex));
    });
  }

  private async _sendPrompt(): Promise<void> {
    const view = this._view;
    const text = this._input.value.trim();
    if (!view || !text) {
      return;
    }
    if (view.model.runningTurn) {
      this._flash('The agent is still working: wait, or press Stop.', 'warning');
      return;
    }
    const blocks: any[] = [{ type: 'text', text }];
    if (this._selectionOn()) {
      const sel = this._selection();
      if (sel && sel.block.resource.text.trim()) {
        blocks.push(sel.block);
      }
    }
    if (/(^|\s)@[A-Za-z_]/.test(text)) {
      blocks.push(...(await this._variableBlocks(text)));
    }
    const draft = this._input.value;
    this._input.value = '';
    this._menu.hidden = true;
    view.historyIndex = -1;
    view.stick = true;
    try {
      await this.api.prompt(view.info.id, blocks);
      view.startError = null;
    } catch (err) {
      if (!this._input.value) {
        this._input.value = draft;
      }
      const status = err instanceof ApiError ? err.status : 0;
      this._flash(
        status === 409 ? 'The agent is still working on the previous prompt.' : `Could not send: ${(err as Error).message}`,
        status === 409 ? 'warning' : 'error'
      );
    }
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

  private async _cancel(): Promise<void> {
    const view = this._view;
    if (!view) {
      return;
    }
    this._stop.disabled = true;
    try {
      await this.api.cancel(view.info.id);
    } catch (err) {
      this._flash(`Could not stop: ${(err as Error).message}`);
    } finally {
      this._stop.disabled = false;
    }
  }
}

