/**
 * One session's live event stream, reconnecting with backoff from the last seq seen.
 *
 * No JupyterLab imports (node's test runner drives it with a fake socket).
 */
import { IAcpEvent } from './model';

export type StreamState = 'connecting' | 'open' | 'reconnecting' | 'closed';

/**
 * One session's live event stream. Reconnects with backoff, asking for the events after the last
 * seq seen, so nothing is lost or doubled.
 */
export class EventStream {
  state: StreamState = 'connecting';
  onState: ((s: StreamState) => void) | null = null;
  private _ws: WebSocket | null = null;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _delay = 500;
  private _closed = false;

  constructor(
    private readonly _url: (after: number) => string,
    private readonly _lastSeq: () => number,
    private readonly _onEvents: (events: IAcpEvent[]) => void,
    private readonly _socket: (url: string) => WebSocket = url => new WebSocket(url)
  ) {
    this._connect();
  }

  private _set(state: StreamState): void {
    this.state = state;
    this.onState?.(state);
  }

  private _connect(): void {
    if (this._closed) {
      return;
    }
    const ws = this._socket(this._url(this._lastSeq()));
    this._ws = ws;
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
    if (this._timer !== null) {
      clearTimeout(this._timer);
    }
    const ws = this._ws;
    this._ws = null;
    ws?.close();
    this._set('closed');
  }
}
