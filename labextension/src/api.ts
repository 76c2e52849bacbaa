/**
 * The server's HTTP API and event stream, through ServerConnection so auth and XSRF work under any
 * base URL.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { IAcpEvent } from './model';

/* eslint-disable @typescript-eslint/no-explicit-any */

export interface IAgentInfo {
  name: string;
  title: string;
  configured: boolean;
  default: boolean;
  available: boolean;
  command?: string;
  state?: string;
  error?: string | null;
  suggested_config?: any;
}

export interface ISessionInfo {
  id: string;
  notebook: string;
  agent: string;
  cwd: string;
  state: string;
  turn_id: string | null;
  last_seq: number;
  error: string | null;
  modes?: any;
  config_options?: any;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

export class AcpApi {
  readonly settings = ServerConnection.makeSettings();

  async request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const url = URLExt.join(this.settings.baseUrl, 'jupyter-acp', path);
    const response = await ServerConnection.makeRequest(url, init, this.settings);
    const body = await response.text();
    let data: any = null;
    try {
      data = body ? JSON.parse(body) : null;
    } catch {
      data = body;
    }
    if (!response.ok) {
      const message = (data && (data.message || data.reason)) || response.statusText || `HTTP ${response.status}`;
      throw new ApiError(String(message), response.status);
    }
    return data as T;
  }

  agents(): Promise<IAgentInfo[]> {
    return this.request('agents');
  }

  sessions(notebook: string): Promise<ISessionInfo[]> {
    return this.request('sessions' + URLExt.objectToQueryString({ notebook }));
  }

  openSession(notebook: string, agent?: string): Promise<ISessionInfo> {
    const body: any = { notebook };
    if (agent) {
      body.agent = agent;
    }
    return this.request('sessions', { method: 'POST', body: JSON.stringify(body) });
  }

  prompt(sessionId: string, blocks: any[]): Promise<{ turn_id: string }> {
    return this.request(`sessions/${sessionId}/prompt`, { method: 'POST', body: JSON.stringify({ prompt: blocks }) });
  }

  cancel(sessionId: string): Promise<{ cancelled: boolean }> {
    return this.request(`sessions/${sessionId}/cancel`, { method: 'POST', body: '{}' });
  }

  answer(sessionId: string, requestId: string, optionId: string): Promise<unknown> {
    return this.request(`sessions/${sessionId}/permissions/${encodeURIComponent(requestId)}`, {
      method: 'POST',
      body: JSON.stringify({ option_id: optionId })
    });
  }

  /** Turns whose agent edits can still be reverted (null: edits outside a turn). */
  async revertible(sessionId: string): Promise<(string | null)[]> {
    try {
      return (await this.request<{ turns: (string | null)[] }>(`sessions/${sessionId}/revert`)).turns ?? [];
    } catch {
      return []; // a server without the notebook tools
    }
  }

  revert(sessionId: string, turnId: string | null): Promise<{ turn_id: string | null; edits: number }> {
    return this.request(`sessions/${sessionId}/revert`, { method: 'POST', body: JSON.stringify({ turn_id: turnId }) });
  }

  events(sessionId: string, after: number): Promise<IAcpEvent[]> {
    return this.request(`sessions/${sessionId}/events?after=${after}`);
  }

  streamUrl(sessionId: string, after: number): string {
    let url = URLExt.join(this.settings.wsUrl, 'jupyter-acp', 'sessions', sessionId, 'stream') + `?after=${after}`;
    const s = this.settings as any;
    if (s.token && s.appendToken) {
      url += `&token=${encodeURIComponent(s.token)}`;
    }
    return url;
  }
}

export type StreamState = 'connecting' | 'open' | 'reconnecting' | 'closed';

/**
 * One session's live event stream. Reconnects with backoff, asking for the events after the last
 * seq seen, so nothing is lost or doubled.
 */
export class EventStream {
  state: StreamState = 'connecting';
  onState: ((s: StreamState) => void) | null = null;
  private _ws: WebSocket | null = null;
  private _timer: number | null = null;
  private _delay = 500;
  private _closed = false;

  constructor(
    private readonly _api: AcpApi,
    private readonly _sessionId: string,
    private readonly _lastSeq: () => number,
    private readonly _onEvents: (events: IAcpEvent[]) => void
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
    const ws = new WebSocket(this._api.streamUrl(this._sessionId, this._lastSeq()));
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
      this._timer = window.setTimeout(() => this._connect(), this._delay);
      this._delay = Math.min(this._delay * 2, 8000);
    };
  }

  /** Reconnect now (e.g. the user clicked "retry"). */
  retry(): void {
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
      this._timer = null;
    }
    if (!this._ws) {
      this._connect();
    }
  }

  dispose(): void {
    this._closed = true;
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
    }
    const ws = this._ws;
    this._ws = null;
    ws?.close();
    this._set('closed');
  }
}
