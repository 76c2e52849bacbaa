/**
 * The server's HTTP API and event stream, through ServerConnection so auth and XSRF work under any
 * base URL.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { IAcpEvent } from './model';
import { OpError, openStream } from './stream';
import type { IAnswer, ICancelAnswer, IPermissionAnswer, IPromptAnswer, SocketOp } from './wire';

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
  /** Where it came from: default, configuration (an admin's presets) or user (enabled from the panel). */
  origin?: string;
  /** Why the server's admin does not let users enable it (a detected agent), when they may not. */
  fixed_by_admin?: string;
  /** What the agent's prompts may carry (`image`, `audio`, `embeddedContext`); null until it has started. */
  prompt_capabilities?: { image?: boolean; audio?: boolean; embeddedContext?: boolean } | null;
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
  /** Tools of the client's gate that run without asking in this session ("always allow"). */
  always_allowed?: string[];
  /** What the server's admin does not let users pick here: "always" answers by kind and modes, with the reason. */
  fixed_by_admin?: { options?: Record<string, string>; modes?: Record<string, string> };
}

/** One of the notebook's conversations (ours), or one of the agent's own past sessions (`kind: 'agent'`). */
/** A notebook's current agent (`chosen`: false while it is on the configured default). */
export interface ICurrentAgent {
  notebook: string;
  agent: string;
  chosen: boolean;
  default_agent: string;
  agents: string[];
  previous?: string;
  session?: ISessionInfo;
}

export interface IConversationInfo {
  /** null: the current conversation before its first event */
  id: string | null;
  kind: 'ours' | 'agent';
  /** the agent's own title for it (`session_info_update`), else the first prompt ("" before it) */
  title: string;
  agent: string;
  started?: number;
  ended?: number | null;
  turns?: number;
  /** the agent's own date of its session (ISO 8601) */
  updated_at?: string | null;
  current: boolean;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

/**
 * An op on the session's open WebSocket (a warm turn costs no extra HTTP request), its refusal as an ApiError;
 * null when no stream of the session is open (the caller uses the HTTP route).
 */
function viaStream<T extends IAnswer>(sessionId: string, frame: SocketOp): Promise<T> | null {
  const sent = openStream(sessionId)?.op(frame);
  if (!sent) {
    return null;
  }
  return sent.then(
    answer => answer as unknown as T,
    err => {
      throw err instanceof OpError ? new ApiError(err.message, err.status) : err;
    }
  );
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

  /** The notebook's current agent: the one the panel shows and `%%acp` naming none uses (one server-side fact). */
  currentAgent(notebook: string): Promise<ICurrentAgent> {
    return this.request('notebooks/current-agent' + URLExt.objectToQueryString({ path: notebook }));
  }

  /** Change it (the panel's picker): every panel on the notebook and the magic follow. */
  setCurrentAgent(notebook: string, agent: string): Promise<ICurrentAgent> {
    return this.request('notebooks/current-agent' + URLExt.objectToQueryString({ path: notebook }), {
      method: 'PUT',
      body: JSON.stringify({ agent, by: 'panel' })
    });
  }

  openSession(notebook: string, agent?: string): Promise<ISessionInfo> {
    const body: any = { notebook };
    if (agent) {
      body.agent = agent;
    }
    return this.request('sessions', { method: 'POST', body: JSON.stringify(body) });
  }

  prompt(sessionId: string, blocks: any[]): Promise<{ turn_id: string }> {
    const sent = viaStream<IPromptAnswer>(sessionId, { op: 'prompt', prompt: blocks });
    return (
      sent ?? this.request(`sessions/${sessionId}/prompt`, { method: 'POST', body: JSON.stringify({ prompt: blocks }) })
    );
  }

  /** A new conversation for the notebook: the agent forgets; the transcript keeps a marker. */
  reset(sessionId: string): Promise<ISessionInfo> {
    return this.request(`sessions/${sessionId}/reset`, { method: 'POST', body: '{}' });
  }

  /** Switch the agent's mode; answers the session description (with `modes`, `config_options`). */
  setMode(sessionId: string, modeId: string): Promise<ISessionInfo> {
    return this.request(`sessions/${sessionId}/mode`, { method: 'POST', body: JSON.stringify({ mode_id: modeId }) });
  }

  /** Change one of the agent's session options (a string for selects, a boolean for toggles). */
  setConfig(sessionId: string, configId: string, value: string | boolean): Promise<ISessionInfo> {
    return this.request(`sessions/${sessionId}/config`, {
      method: 'POST',
      body: JSON.stringify({ config_id: configId, value })
    });
  }

  cancel(sessionId: string): Promise<{ cancelled: boolean }> {
    const sent = viaStream<ICancelAnswer>(sessionId, { op: 'cancel' });
    return sent ?? this.request(`sessions/${sessionId}/cancel`, { method: 'POST', body: '{}' });
  }

  answer(sessionId: string, requestId: string, optionId: string): Promise<unknown> {
    const sent = viaStream<IPermissionAnswer>(sessionId, {
      op: 'permission',
      request_id: requestId,
      option_id: optionId
    });
    return (
      sent ??
      this.request(`sessions/${sessionId}/permissions/${encodeURIComponent(requestId)}`, {
        method: 'POST',
        body: JSON.stringify({ option_id: optionId })
      })
    );
  }

  /** Answer an agent's question (elicitation): accept (with the form's content), decline or cancel. */
  elicit(sessionId: string, elicitationId: string, action: string, content?: unknown): Promise<unknown> {
    return this.request(`sessions/${sessionId}/elicitations/${encodeURIComponent(elicitationId)}`, {
      method: 'POST',
      body: JSON.stringify(content === undefined ? { action } : { action, content })
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

  /** One page of the current conversation's events after `after`, oldest first. */
  events(sessionId: string, after: number, limit?: number): Promise<IAcpEvent[]> {
    const query = limit ? { after, limit, conversation: 'current' } : { after, conversation: 'current' };
    return this.request(`sessions/${sessionId}/events` + URLExt.objectToQueryString(query));
  }

  /** The current conversation's newest `limit` events with seq < `before`, oldest first (older history). */
  eventsBefore(sessionId: string, before: number, limit: number): Promise<IAcpEvent[]> {
    return this.request(
      `sessions/${sessionId}/events` + URLExt.objectToQueryString({ before, limit, conversation: 'current' })
    );
  }

  /** The notebook's conversations, newest first, then the agent's own past sessions of its folder. */
  conversations(sessionId: string): Promise<IConversationInfo[]> {
    return this.request(`sessions/${sessionId}/conversations`);
  }

  /** One page of an earlier conversation's events after `after`, oldest first (read-only). */
  conversationEvents(sessionId: string, cid: string, after: number): Promise<IAcpEvent[]> {
    return this.request(
      `sessions/${sessionId}/conversations/${encodeURIComponent(cid)}/events` + URLExt.objectToQueryString({ after })
    );
  }

  /** Make a conversation the current one again; answers the session description. */
  resumeConversation(sessionId: string, cid: string): Promise<ISessionInfo> {
    return this.request(`sessions/${sessionId}/conversations/${encodeURIComponent(cid)}/resume`, {
      method: 'POST',
      body: '{}'
    });
  }

  /** A new current conversation from the end of that turn (the earlier one stays in the history). */
  forkConversation(sessionId: string, turnId: string): Promise<ISessionInfo> {
    return this.request(`sessions/${sessionId}/fork`, { method: 'POST', body: JSON.stringify({ turn_id: turnId }) });
  }

  /** Remove an earlier conversation and its events (never the current one), and the agent's own copy where it
   * offers `session/delete` (`agent_error`: why it kept it; ours is gone anyway). */
  deleteConversation(
    sessionId: string,
    cid: string
  ): Promise<{ deleted: string; events: number; agent_deleted?: boolean; agent_error?: string | null }> {
    return this.request(`sessions/${sessionId}/conversations/${encodeURIComponent(cid)}`, { method: 'DELETE' });
  }

  /** Stop always allowing `tool` in this session (every tool when none is given). */
  revokeAlwaysAllow(sessionId: string, tool?: string): Promise<{ always_allowed: string[] }> {
    const query = tool ? URLExt.objectToQueryString({ tool }) : '';
    return this.request(`sessions/${sessionId}/always-allow${query}`, { method: 'DELETE' });
  }

  streamUrl(sessionId: string, after: number): string {
    // the current conversation (the earlier ones are in the history menu)
    let url =
      URLExt.join(this.settings.wsUrl, 'jupyter-acp', 'sessions', sessionId, 'stream') +
      `?after=${after}&conversation=current`;
    const s = this.settings as any;
    if (s.token && s.appendToken) {
      url += `&token=${encodeURIComponent(s.token)}`;
    }
    return url;
  }
}
