/**
 * What this extension offers other JupyterLab extensions: the `IAcpHost` service.
 *
 * Another extension requires it as it would any JupyterLab service, and drives the agent sidebar and the notebooks'
 * agent sessions through it rather than through the HTTP API by hand (it gets the server's base URL, XSRF and the
 * open WebSocket of a session for free, and the panel shows what it sends):
 *
 * ```ts
 * import { IAcpHost } from 'jupyter-acp-host';
 *
 * const plugin: JupyterFrontEndPlugin<void> = {
 *   id: 'my-extension:plugin',
 *   autoStart: true,
 *   requires: [IAcpHost],
 *   activate: (app, acp: IAcpHost) => {
 *     void acp.sendPrompt('analysis.ipynb', 'Explain the last cell').then(({ session }) => {
 *       const watch = acp.observe(session.id, { after: session.last_seq });
 *       watch.events.connect((_, events) => console.log(events));
 *     });
 *   }
 * };
 * ```
 *
 * Its package.json then lists `jupyter-acp-host` in `dependencies` and in `jupyterlab.sharedPackages` as
 * `{ "bundled": false, "singleton": true }`, so the token it imports is this extension's own object (JupyterLab matches
 * a required service by the token object, not by its name). Code in the page without a build (a test, the browser's
 * console) reaches the same module through the federated container:
 * `(await window._JUPYTERLAB['jupyter-acp-host'].get('./index'))().IAcpHost`.
 *
 * No JupyterLab imports beyond the token's own (node's test runner loads the types' users).
 */
import { Token } from '@lumino/coreutils';
import type { ISignal } from '@lumino/signaling';

import type { ISessionInfo } from './api';
import type { IAcpEvent } from './model';

/** One ACP content block of a prompt (`{type: 'text', text}`, a `resource_link`, an `image`...), as the agent gets it. */
export interface IAcpContentBlock {
  type: string;
  [key: string]: unknown;
}

/** A prompt the server took: the session it went to (as it was before the prompt) and the turn it started. */
export interface IPromptSent {
  /** The session description before the turn; `session.last_seq` is where that turn's events start. */
  session: ISessionInfo;
  turnId: string;
}

/** What to observe of a session. */
export interface IObserveOptions {
  /**
   * Events with a greater seq arrive; 0 (the default) replays the current conversation first, as the sidebar does,
   * so nothing said before the observer existed is missed. Pass the session's `last_seq` for new events only.
   */
  after?: number;
}

/** A live subscription to one session's events (its own WebSocket, reconnecting from the last seq seen). */
export interface ISessionObserver {
  readonly sessionId: string;
  /**
   * The session's events in order, in batches (a replay arrives as few large batches): each event once, even across
   * reconnections. The event types are the server's (README: "Events").
   */
  readonly events: ISignal<ISessionObserver, readonly IAcpEvent[]>;
  /**
   * The server's history no longer holds what this observer saw (its store was replaced): the events that follow
   * replay the session's history from its start, so a consumer that counts or accumulates starts over.
   */
  readonly historyMoved: ISignal<ISessionObserver, void>;
  /** The greatest seq received (where a reconnection resumes). */
  readonly lastSeq: number;
  /** A promise that resolves once the socket is open (the replay then follows). */
  readonly ready: Promise<void>;
  readonly isDisposed: boolean;
  /** Close the socket; no event is emitted after. */
  dispose(): void;
}

/** Options of a prompt sent through the service. */
export interface ISendOptions {
  /** The agent to talk to; by default the notebook's current agent (the one its sidebar shows and `%acp` uses). */
  agent?: string;
}

/**
 * The agent sidebar and the notebooks' agent sessions, for other extensions.
 *
 * Each notebook has one agent session per agent on the server (the sidebar shows the current agent's): the methods
 * take a notebook path, as the server does, and answer the server's own session descriptions. Errors are the server's
 * refusals (an `ApiError` with its status and reason: 409 while a turn runs, 403 for a read-only user...).
 */
export interface IAcpHost {
  /** The session the sidebar shows; null when no notebook is in focus (or its session is not open yet). */
  readonly currentSession: ISessionInfo | null;

  /**
   * The sidebar shows another session: the user focused another notebook, picked another agent, or the session
   * first opened. Emitted with the new one (null: none).
   */
  readonly currentSessionChanged: ISignal<IAcpHost, ISessionInfo | null>;

  /**
   * Show the sidebar; with a notebook path, open that notebook (or bring it to the front) first, so the sidebar binds
   * to its conversation. Resolves once both are shown (the session opens after: `currentSessionChanged`).
   */
  openPanel(notebook?: string): Promise<void>;

  /**
   * The notebook's agent session, opened if need be (the agent starts then): what sending a prompt talks to, and
   * what `observe` takes the id of.
   */
  session(notebook: string, options?: ISendOptions): Promise<ISessionInfo>;

  /**
   * Send a prompt to the notebook's agent session (a string is one text block), as the sidebar's Send does: the
   * sidebar showing that conversation shows it and its answer. Rejects when the server refuses (a turn already runs:
   * 409; the caller may wait for its `turn_ended` and send again).
   */
  sendPrompt(notebook: string, prompt: string | IAcpContentBlock[], options?: ISendOptions): Promise<IPromptSent>;

  /** Follow a session's events until the observer is disposed. */
  observe(sessionId: string, options?: IObserveOptions): ISessionObserver;
}

/** The `IAcpHost` service's token (one object: require this one, from this package). */
export const IAcpHost = new Token<IAcpHost>(
  'jupyter-acp-host:IAcpHost',
  "Drive the agent sidebar and the notebooks' ACP agent sessions: open the panel, send a prompt, observe a session."
);
