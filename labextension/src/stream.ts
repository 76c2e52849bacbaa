/**
 * One session's live event stream, reconnecting with backoff from the last seq seen.
 *
 * No JupyterLab imports (node's test runner drives it with a fake socket).
 */
import { IAcpEvent } from './model';
import type { IHistoryMoved, SocketOp } from './wire';

export type StreamState = 'connecting' | 'open' | 'reconnecting' | 'closed';

/** The server's answer to an op sent on the socket (`ok: false` carries the HTTP-like status and why). */
export interface IOpAnswer {
  ref: number;
  ok: boolean;
  status?: number;
  error?: string;
  [key: string]: unknown;
}

/** An op the server refused (same status and words as the HTTP route would answer). */
export class OpError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

/** The first frame of a stream whose `after` is past the server's last seq (`seq`): declared with the wire. */
export type { IHistoryMoved };

/** The open streams by session id: prompts, cancels and permission answers ride them when they are open. */
const streams = new Map<string, EventStream>();

/** The session's stream when one is open (else the caller uses the HTTP route). */
export function openStream(sessionId: string): EventStream | null {
  const s = streams.get(sessionId);
  return s && s.state === 'open' ? s : null;
}

const SESSION_IN_URL = /\/sessions\/([0-9a-f]{32})\/stream/;

/**
 * One session's live event stream. Reconnects with backoff, asking for the events after the last
 * seq seen, so nothing is lost or doubled.
 */
export class EventStream {
  state: StreamState = 'connecting';
  onState: ((s: StreamState) => void) | null = null;
  /**
   * The server's history does not hold the events this client saw (its store was replaced or restored): the
   * handler drops what the client holds; the frames that follow replay the server's history from the start.
   */
  onMoved: ((moved: IHistoryMoved) => void) | null = null;
  private _ws: WebSocket | null = null;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _delay = 500;
  private _closed = false;
  private _ref = 0;
  private _pending = new Map<number, { resolve: (a: IOpAnswer) => void; reject: (e: Error) => void }>();
  private _key: string | null = null;

  constructor(
    private readonly _url: (after: number) => string,
    private readonly _lastSeq: () => number,
    private readonly _onEvents: (events: IAcpEvent[]) => void,
    private readonly _socket: (url: string) => WebSocket = url => new WebSocket(url),
    /**
     * Whether the panel's ops (prompt, cancel, answers) may ride this socket: the panel's own stream, not another
     * extension's observer (`IAcpHost.observe`), whose socket closes when that extension is done with it.
     */
    private readonly _carriesOps = true
  ) {
    this._connect();
  }

  /**
   * Send an op (one of the wire's `SocketOp`s, its `ref` set here) on the open socket; resolves with the server's
   * answer, rejects with an OpError when it refuses, or with a plain Error when the socket closes first (the op
   * may or may not have run: the events tell). Null when the socket is not open: send it over HTTP instead.
   */
  op(frame: SocketOp): Promise<IOpAnswer> | null {
    const ws = this._ws;
    if (!ws || this.state !== 'open') {
      return null;
    }
    const ref = ++this._ref;
    try {
      ws.send(JSON.stringify({ ...frame, ref }));
    } catch {
      return null;
    }
    return new Promise<IOpAnswer>((resolve, reject) => {
      this._pending.set(ref, {
        resolve: answer =>
          answer.ok ? resolve(answer) : reject(new OpError(answer.error || 'refused', answer.status ?? 0)),
        reject
      });
    });
  }

  private _failPending(): void {
    const pending = this._pending;
    this._pending = new Map();
    for (const p of pending.values()) {
      p.reject(new Error('the connection to the server closed before it answered; the conversation shows what ran'));
    }
  }

  private _set(state: StreamState): void {
    this.state = state;
    this.onState?.(state);
  }

  private _connect(): void {
    if (this._closed) {
      return;
    }
    const url = this._url(this._lastSeq());
    const ws = this._socket(url);
    this._ws = ws;
    const key = SESSION_IN_URL.exec(url)?.[1] ?? null;
    if (key && !this._key && this._carriesOps) {
      this._key = key;
      streams.set(key, this);
    }
    let queue: IAcpEvent[] = [];
    let scheduled = false;
    ws.onopen = () => {
      this._delay = 500;
      this._set('open');
    };
    ws.onmessage = msg => {
      try {
        // a frame holds one event or a batch of them
        const data = JSON.parse(String(msg.data));
        if (!Array.isArray(data) && data && typeof data === 'object' && 'ok' in data && !('seq' in data)) {
          // the answer to an op this client sent
          const p = this._pending.get(data.ref);
          if (p) {
            this._pending.delete(data.ref);
            p.resolve(data as IOpAnswer);
          }
          return;
        }
        if (!Array.isArray(data) && data && data.history_moved === true) {
          queue = [];
          this.onMoved?.(data as IHistoryMoved);
          return;
        }
        if (Array.isArray(data)) {
          queue.push(...data);
        } else {
          queue.push(data);
        }
      } catch {
        return;
      }
      // Batch a burst (a replay of a long history) into one render.
      if (!scheduled) {
        scheduled = true;
        setTimeout(() => {
          scheduled = false;
          const batch = queue;
          queue = [];
          this._onEvents(batch);
        }, 0);
      }
    };
    ws.onclose = () => {
      if (this._ws !== ws) {
        return;
      }
      this._ws = null;
      this._failPending();
      if (this._closed) {
        return;
      }
      this._set('reconnecting');
      this._timer = setTimeout(() => this._connect(), this._delay);
      this._delay = Math.min(this._delay * 2, 8000);
    };
  }

  /** Reconnect now (e.g. the user clicked "retry"). */
  retry(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
    if (!this._ws) {
      this._connect();
    }
  }

  dispose(): void {
    this._closed = true;
    if (this._key && streams.get(this._key) === this) {
      streams.delete(this._key);
    }
    this._failPending();
    if (this._timer !== null) {
      clearTimeout(this._timer);
    }
    const ws = this._ws;
    this._ws = null;
    ws?.close();
    this._set('closed');
  }
}
