/**
 * One agent session as the sidebar keeps it: its model, its live stream, its rendered log's nodes
 * and the history paging (older pages, gaps after a reconnect).
 */
import type { IRenderMime } from '@jupyterlab/rendermime';

import { AcpApi, ISessionInfo } from './api';
import { el } from './dom';
import { ChatModel } from './model';
import { EventStream } from './stream';

export interface IEntry {
  node: HTMLElement;
  version: number;
  renderer?: IRenderMime.IRenderer;
  rendering?: boolean;
  dirty?: boolean;
  open?: boolean;
  /**
   * What the item showed that does not come from its own version: a thought is live while it is the
   * running turn's last item ("Thinking…"), finished once anything follows it or the turn ends; a
   * failed turn's end offers Retry only while it is the latest turn end.
   */
  live?: boolean;
}

/** Events asked per page of older history. */
const HISTORY_PAGE = 200;

/** One agent session: its model, its stream and its rendered log. */
export class SessionView {
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
  /** Items the model holds above the drawn ones (the panel draws a window of them; scrolling up draws more). */
  hiddenAbove = 0;
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
  /** The user may only watch this conversation (the server refused to open a session for them: read only). */
  readOnly = false;
  /** The turn the user asked to stop (Esc or Stop): the status says "Stopping…" until it ends. */
  stopping: string | null = null;
  private _poll: number | null = null;
  /**
   * The notebook's current agent changed (a `current_agent` notice: the picker of any tab, or `%acp use` in the
   * notebook): the panel showing this conversation switches to that agent's.
   */
  onCurrentAgent: ((agent: string) => void) | null = null;

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
    // The reader's own hand on the log (wheel, touch, keys, the scrollbar): a scroll up meanwhile is theirs.
    let handUntil = 0;
    let holding = false;
    const hand = () => (handUntil = performance.now() + 400);
    for (const type of ['wheel', 'touchmove', 'keydown']) {
      this.log.addEventListener(type, hand, { passive: true });
    }
    this.log.addEventListener('pointerdown', () => ((holding = true), hand()), { passive: true });
    window.addEventListener('pointerup', () => holding && ((holding = false), hand()), { passive: true });
    let lastTop = 0;
    let lastHeight = 0;
    this.log.addEventListener('scroll', () => {
      // Only the reader moving up lets go of the end. A scroll event comes a frame after the scroll, and the page
      // changes meanwhile: an answer's markdown rendered late or a notice arriving during the open grows the log
      // below (the end moves away, no scroll up), items dropped above shrink it (the browser's scroll anchoring
      // scrolls up by as much), both in one frame when a long history's replay lands (bench/panel_history.py: a
      // 300-turn open sat 619 px above its end, its last answer off screen). A scroll up lets go of the end when
      // the reader's hand is on the log, or when nothing in the log changed height since the last event (a script
      // scrolling, as the tests and the bench do); otherwise the end is still what is followed: back to it.
      const top = this.log.scrollTop;
      const height = this.log.scrollHeight;
      const near = height - top - this.log.clientHeight < 48;
      const theirs = holding || performance.now() < handUntil || height === lastHeight;
      if (near) {
        this.stick = true;
      } else if (top < lastTop && theirs) {
        this.stick = false;
      } else if (this.stick && !this.anchor) {
        this.log.scrollTop = height;
      }
      lastTop = this.log.scrollTop;
      lastHeight = height;
      if (this.log.scrollTop < 80 && this.hiddenAbove === 0 && this.model.olderBefore !== null) {
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
        const changed = events.filter(e => e.type === 'notice' && e.phase === 'current_agent' && e.agent).pop();
        if (changed) {
          this.onCurrentAgent?.(String(changed.agent)); // the latest one says where the notebook is now
        }
        if (this.model.gap) {
          void this.fillGap();
        }
        if (events.some(e => e.type === 'turn_ended' || (e.type === 'notice' && /^reverted/.test(e.text ?? '')))) {
          void this.refreshRevertible(onChange);
        }
      }
    );
    this.stream.onMoved = () => this.model.restart(); // the server's history replaces what was shown
    this.stream.onState = state => {
      if (state === 'open') {
        void this.refreshRevertible(onChange); // a restarted server no longer holds older edits
      }
      onChange();
    };
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

  /**
   * Turns whose agent edits can be reverted; their turn-end lines get a "Revert" button. Calls while one is asked
   * share one more request after it (opening a conversation asked up to eight times at once: at its view's making,
   * its showing, its socket's opening, its replay's turn ends), and that one sees every change made before it.
   */
  refreshRevertible(onChange: () => void): Promise<void> {
    if (this._revertAsking) {
      this._revertAgain ??= this._revertAsking.then(() => {
        this._revertAgain = null;
        return this.refreshRevertible(onChange);
      });
      return this._revertAgain;
    }
    const asking = this._askRevertible(onChange).finally(() => {
      this._revertAsking = null;
    });
    this._revertAsking = asking;
    return asking;
  }

  private _revertAsking: Promise<void> | null = null;
  private _revertAgain: Promise<void> | null = null;

  private async _askRevertible(onChange: () => void): Promise<void> {
    let listed: (string | null)[];
    try {
      listed = await this._api.revertible(this.info.id);
    } catch {
      return; // the server is away: the stream's state says so, the next refresh tries again
    }
    const turns = new Set(listed.filter((t): t is string => !!t));
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
