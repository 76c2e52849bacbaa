/**
 * The `IAcpHost` service (tokens.ts): what the sidebar does for its user, offered to other extensions.
 *
 * Built from narrow parts (the three API calls it makes, the session the panel shows, the shell's reveal) rather than
 * from the panel and the application, so node's test runner drives it with fakes and the panel keeps its own state.
 * No JupyterLab imports (the lumino ones load in node).
 */
import { Signal } from '@lumino/signaling';

import type { AcpApi, ISessionInfo } from './api';
import type { IAcpEvent } from './model';
import { EventStream } from './stream';
import type {
  IAcpContentBlock,
  IAcpHost,
  IObserveOptions,
  IPromptSent,
  ISendOptions,
  ISessionObserver
} from './tokens';

/** What the service needs of the extension. */
export interface IHostParts {
  /** The server's API: the session a notebook has, a prompt, a stream's URL. */
  api: Pick<AcpApi, 'openSession' | 'prompt' | 'streamUrl'>;
  /** The session the sidebar shows now. */
  shownSession(): ISessionInfo | null;
  /** Show the sidebar, the notebook (opened) first when one is given. */
  reveal(notebook?: string): Promise<void>;
  /** Opens a WebSocket (a fake one in tests). */
  socket?: (url: string) => WebSocket;
}

/**
 * One observer's stream of a session's events: its own EventStream, so it needs no panel and ends on its own.
 *
 * The stream module keeps one open socket per session for ops (stream.ts `openStream`): the observer's, once open,
 * becomes that one, and the panel's prompts ride it; after the observer is disposed they take the HTTP route. The
 * server answers both alike; only an op in flight when the observer closes is reported as cut off (its events tell).
 */
class SessionObserver implements ISessionObserver {
  readonly events: Signal<ISessionObserver, readonly IAcpEvent[]> = new Signal(this);
  readonly historyMoved: Signal<ISessionObserver, void> = new Signal(this);
  readonly ready: Promise<void>;
  private _lastSeq: number;
  private _stream: EventStream;
  private _disposed = false;

  constructor(
    readonly sessionId: string,
    after: number,
    parts: IHostParts
  ) {
    this._lastSeq = after;
    let opened: () => void = () => undefined;
    this.ready = new Promise(resolve => (opened = resolve));
    this._stream = new EventStream(
      from => parts.api.streamUrl(sessionId, from),
      () => this._lastSeq,
      events => this._receive(events),
      parts.socket,
      false // an observer's socket: the panel's ops keep riding the panel's own
    );
    this._stream.onState = state => {
      if (state === 'open') {
        opened();
      }
    };
    this._stream.onMoved = () => {
      this._lastSeq = 0; // the frames that follow replay the history from its start
      this.historyMoved.emit();
    };
  }

  get lastSeq(): number {
    return this._lastSeq;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._stream.dispose();
    Signal.clearData(this);
  }

  /** Emit what is new: a reconnection asks from the last seq, but a batch under way may repeat its tail. */
  private _receive(events: IAcpEvent[]): void {
    if (this._disposed) {
      return;
    }
    const fresh = events.filter(e => typeof e.seq !== 'number' || e.seq > this._lastSeq);
    for (const e of fresh) {
      if (typeof e.seq === 'number') {
        this._lastSeq = Math.max(this._lastSeq, e.seq);
      }
    }
    if (fresh.length) {
      this.events.emit(fresh);
    }
  }
}

/** The service the plugin provides under `IAcpHost`. */
export class AcpHost implements IAcpHost {
  private _changed = new Signal<IAcpHost, ISessionInfo | null>(this);
  private _shownId: string | null;

  constructor(private readonly _parts: IHostParts) {
    this._shownId = _parts.shownSession()?.id ?? null;
  }

  get currentSession(): ISessionInfo | null {
    return this._parts.shownSession();
  }

  get currentSessionChanged(): Signal<IAcpHost, ISessionInfo | null> {
    return this._changed;
  }

  /**
   * The panel's chrome changed (it calls this on every change of what it shows): emit `currentSessionChanged` when
   * the session is another one. Comparing ids here, rather than in the panel, keeps the panel unaware of the service.
   */
  panelChanged(): void {
    const now = this._parts.shownSession();
    const id = now?.id ?? null;
    if (id !== this._shownId) {
      this._shownId = id;
      this._changed.emit(now);
    }
  }

  openPanel(notebook?: string): Promise<void> {
    return this._parts.reveal(notebook);
  }

  session(notebook: string, options: ISendOptions = {}): Promise<ISessionInfo> {
    return this._parts.api.openSession(notebook, options.agent);
  }

  async sendPrompt(
    notebook: string,
    prompt: string | IAcpContentBlock[],
    options: ISendOptions = {}
  ): Promise<IPromptSent> {
    const blocks: IAcpContentBlock[] = typeof prompt === 'string' ? [{ type: 'text', text: prompt }] : prompt;
    if (!blocks.length || (typeof prompt === 'string' && !prompt.trim())) {
      throw new Error('An empty prompt: give the agent some text or at least one content block.');
    }
    const session = await this.session(notebook, options);
    const { turn_id } = await this._parts.api.prompt(session.id, blocks);
    return { session, turnId: turn_id };
  }

  observe(sessionId: string, options: IObserveOptions = {}): ISessionObserver {
    return new SessionObserver(sessionId, Math.max(0, options.after ?? 0), this._parts);
  }
}
