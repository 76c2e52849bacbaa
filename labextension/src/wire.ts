/**
 * The session's wire, generated from jupyter_acp/protocol/wire.py (the pydantic models the server's events are
 * checked against): do not edit. Made by
 *
 *   python -m jupyter_acp.protocol.wire --ts > labextension/src/wire.ts
 *
 * tests/test_wire.py fails when this file differs from what that command writes now.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */

/** What every event carries: its place in the session's history, its type and when the server recorded it. */
export interface IEventBase {
  /** the session's event number: increasing, never given twice (gaps after a crash) */
  seq: number;
  type: string;
  /** when the server recorded it, seconds since the epoch */
  ts: number;
  /**
   * a replay's event older than its page that still matters (a pending permission or question, the running turn's
   * start), sent first
   */
  pinned?: boolean;
  /**
   * the event was larger than JupyterACP.max_event_bytes: only its scalar fields are kept, and this says what was cut
   */
  cut?: string;
}

/** Who did it (`protocol/actor.py`): a person by their Jupyter identity, or what acted when no person did. */
export interface IActor {
  /** user: a person; magic: the %%acp magic in a kernel; server: the server itself; agent: the agent */
  kind: 'user' | 'magic' | 'server' | 'agent';
  /** user: the identity's username */
  username?: string;
  /** user: the name the panel shows */
  display_name?: string;
  /** user: the identity's colour (a CSS colour or variable); null: none */
  color?: string | null;
}

/** What a turn changed in the notebook, ready for its review. */
export interface IReview {
  changes: number;
  /** the checkpoint taken before the turn */
  checkpoint: string;
  /** the session reviews after each turn (Review after) */
  after: boolean;
}

/** How a terminal's command ended (ACP's TerminalExitStatus). */
export interface IExitStatus {
  exitCode: number | null;
  signal: string | null;
}

/**
 * Which switch made a `session_config`: the panel says it in the conversation ("Mode set to Plan") from the state the
 * event carries, whatever state the reader had before (a page of a long history starts anywhere).
 */
export interface ISwitched {
  kind: 'mode' | 'option';
  /** the mode picker ('mode') or the config option's id */
  id: string;
  value: string | boolean;
}

/** A prompt was accepted: the user's words (ACP content blocks) open a turn. */
export interface ITurnStartedEvent extends IEventBase {
  type: 'turn_started';
  turn_id: string;
  prompt: { [key: string]: any }[];
  /** who sent the prompt (absent: not said, e.g. an older server's event) */
  actor?: IActor;
}

/** An agent's `session/update` as it sent it (text chunks of one message that arrive together are joined). */
export interface ISessionUpdateEvent extends IEventBase {
  type: 'session_update';
  /** the ACP update: sessionUpdate, and its fields */
  update: { [key: string]: any };
}

/** A question for the user: the agent's `session/request_permission`, or the gate's own about a tool call. */
export interface IPermissionRequestEvent extends IEventBase {
  type: 'permission_request';
  request_id: string;
  turn_id: string | null;
  /** the ACP tool call the question is about */
  tool_call: { [key: string]: any };
  /** ACP permission options: optionId, name, kind (fixed_by_admin) */
  options: { [key: string]: any }[];
  /** agent: the agent asked; client: the server's gate asks */
  source: 'agent' | 'client';
  /** client: an agent's request the server asks in its own words */
  wording?: 'client';
}

/** The question's end: the option chosen, or cancelled (with why, when the server cancelled it). */
export interface IPermissionResolvedEvent extends IEventBase {
  type: 'permission_resolved';
  request_id: string;
  option_id?: string;
  cancelled?: boolean;
  /** timeout, withdrawn (the agent's $/cancel_request) */
  reason?: string;
  /**
   * who answered (a person), or cancelled it (the server, the agent) (absent: not said, e.g. an older server's event)
   */
  actor?: IActor;
}

/** The turn's end: the agent's stop reason, or an error and its kind. */
export interface ITurnEndedEvent extends IEventBase {
  type: 'turn_ended';
  turn_id: string;
  tool_calls_served: number;
  /** the session's tool channels (mcp-http, ...) */
  tool_channels?: string[];
  review?: IReview;
  /** ACP's stopReason: end_turn, cancelled, ... */
  stop_reason?: string;
  error?: string;
  /** needs_login, timeout, agent_error, agent_failed, unsupported_content, shutdown, server_lost, internal */
  error_kind?: string;
}

/** The agent's session is open (new, resumed, loaded or re-seeded), with its modes and options. */
export interface ISessionReadyEvent extends IEventBase {
  type: 'session_ready';
  acp_session_id: string | null;
  how: string;
  modes: { [key: string]: any } | null;
  config_options: { [key: string]: any }[] | null;
}

/** The session's modes and options after a switch through the API (the whole state, as the agent has it). */
export interface ISessionConfigEvent extends IEventBase {
  type: 'session_config';
  modes: { [key: string]: any } | null;
  config_options: { [key: string]: any }[] | null;
  /** the switch that made it (absent: an older server) */
  switched?: ISwitched;
  /** who switched the mode or changed the option (absent: not said, e.g. an older server's event) */
  actor?: IActor;
}

/**
 * Something the user should know that is not the agent's words: the agent starting or restarted, a history reloaded,
 * a store failing, a conversation resumed, a review ready. `phase` says which; the other optional fields belong to
 * some phases.
 */
export interface INoticeEvent extends IEventBase {
  type: 'notice';
  text: string;
  /** info or warning (absent: info) */
  level?: string;
  phase?: string;
  /** reverted, review_ready, rewound, restored, ... */
  turn_id?: string;
  /** conversation_resumed, _forked, _deleted, ... */
  conversation_id?: string;
  /** reverted: how many edits were undone */
  edits?: number;
  /** reverted: the one cell reverted */
  cell_id?: string;
  /** review_ready */
  review?: IReview;
  /** rewound, restored */
  checkpoint_id?: string;
  /** rewound, restored: the checkpoint that undoes it */
  undo_checkpoint?: string;
  /** current_agent: the notebook's agent now */
  agent?: string;
  /** current_agent: the one before */
  previous?: string;
  /** current_agent: who changed it (panel, magic, api) */
  by?: string;
  /** request_withdrawn: the agent's request it withdrew */
  method?: string;
  /** store_lost: how many events could not be kept */
  events?: number;
  /** store_lost: the turns those events were of; compacted: how many turns */
  turns?: number | string[];
  /** compacted: how many bytes were dropped */
  bytes?: number;
  /**
   * who did it: current_agent, reverted, rewound, restored, agent_reconfigured (absent: not said, e.g. an older
   * server's event)
   */
  actor?: IActor;
}

/** An action an agent asked (allowed or refused, and by which rule), or a user's review, rewind or policy. */
export interface IAuditEvent extends IEventBase {
  type: 'audit';
  power: string;
  /** the tool's name, or the power's (fs/*, terminal/create, review/keep, ...) */
  action: string;
  channel: string;
  decision: 'allowed' | 'refused';
  rule: string;
  turn_id: string | null;
  call_ids: string[];
  /** a refusal's own words: which rule, and how to change it */
  message?: string;
  /** from the call's arrival to its answer, the user's included */
  took_ms?: number;
  /** a user's action: who */
  user?: string;
  /** review: the cells it put back */
  cell_ids?: string[];
  /** who acted: a user's review, rewind or policy (absent: not said, e.g. an older server's event) */
  actor?: IActor;
}

/** The tools always allowed in this session, and (from the policy route) the session's own policy. */
export interface IPolicyChangedEvent extends IEventBase {
  type: 'policy_changed';
  always_allowed: string[];
  /** review (Review after); null: the configuration's; absent: not changed */
  policy?: string | null;
  /**
   * who changed it (a person's policy or revoke; absent: an answered card's always) (absent: not said, e.g. an older
   * server's event)
   */
  actor?: IActor;
}

/** A client terminal's state and the tail of its output (the card that embeds it shows it live). */
export interface ITerminalOutputEvent extends IEventBase {
  type: 'terminal_output';
  terminalId: string;
  /** the Jupyter terminal's name */
  name: string;
  command: string;
  args: string[];
  cwd: string;
  running: boolean;
  exitStatus: IExitStatus | null;
  released: boolean;
  /** a bounded tail */
  output: string;
  truncated: boolean;
  turn_id: string | null;
}

/** An agent's question (`elicitation/create`): a form to fill, or a URL to visit. */
export interface IElicitationRequestEvent extends IEventBase {
  type: 'elicitation_request';
  elicitation_id: string;
  turn_id: string | null;
  mode: 'form' | 'url';
  message: string;
  tool_call_id?: string;
  /** form: the JSON schema of the answer */
  requested_schema?: { [key: string]: any };
  url?: string;
  /** url: the host, as the card shows it */
  url_host?: string;
}

/** The question's end: the user's answer, a cancel (with why), or the agent's `elicitation/complete`. */
export interface IElicitationResolvedEvent extends IEventBase {
  type: 'elicitation_resolved';
  elicitation_id: string;
  action: 'accept' | 'decline' | 'cancel';
  /** accept on a form: the answer */
  content?: { [key: string]: any };
  /** who answered */
  by?: string;
  reason?: string;
  /** url: the agent said the step is complete */
  completed?: boolean;
  /** who answered (absent: not said, e.g. an older server's event) */
  actor?: IActor;
}

/** Every event the server sends, told apart by `type`. */
export type AcpEvent =
  | ITurnStartedEvent
  | ISessionUpdateEvent
  | IPermissionRequestEvent
  | IPermissionResolvedEvent
  | ITurnEndedEvent
  | ISessionReadyEvent
  | ISessionConfigEvent
  | INoticeEvent
  | IAuditEvent
  | IPolicyChangedEvent
  | ITerminalOutputEvent
  | IElicitationRequestEvent
  | IElicitationResolvedEvent;

/** Every event type, in the README's order. */
export const EVENT_TYPES = [
  'turn_started',
  'session_update',
  'permission_request',
  'permission_resolved',
  'turn_ended',
  'session_ready',
  'session_config',
  'notice',
  'audit',
  'policy_changed',
  'terminal_output',
  'elicitation_request',
  'elicitation_resolved'
] as const;

export type AcpEventType = AcpEvent['type'];

/** An operation a client sends on the session's WebSocket, answered by an object carrying its `ref`. */
export interface IOp {
  op: string;
  /** echoed in the answer: a string of at most 64 characters or an integer */
  ref?: string | number | null;
}

/** As `POST .../prompt`: `text` or `prompt` (ACP content blocks), and the prompt's own trace context. */
export interface IPromptOp extends IOp {
  op: 'prompt';
  text?: string;
  prompt?: { [key: string]: any }[];
  traceparent?: string;
  tracestate?: string;
}

/** As `POST .../cancel`. */
export interface ICancelOp extends IOp {
  op: 'cancel';
}

/** As `POST .../permissions/{request_id}`. */
export interface IPermissionOp extends IOp {
  op: 'permission';
  request_id: string;
  option_id: string;
}

/** An operation a client sends on the session's socket. */
export type SocketOp = IPromptOp | ICancelOp | IPermissionOp;

/** The answer to an operation: `ok` and what the route would answer, or why it was refused. */
export interface IAnswer {
  /** the operation's ref (null when it sent none, or one that was not valid) */
  ref: string | number | null;
  ok: boolean;
}

export interface IPromptAnswer extends IAnswer {
  ok: true;
  turn_id: string;
}

export interface ICancelAnswer extends IAnswer {
  ok: true;
  cancelled: boolean;
}

export interface IPermissionAnswer extends IAnswer {
  ok: true;
  request_id: string;
  option_id: string;
}

/** An operation refused: the status its route would answer, and which rule refused it and how to change it. */
export interface IRefused extends IAnswer {
  ok: false;
  status: number;
  error: string;
}

/**
 * The first frame of a stream opened past the server's last seq (its store is not the one the client saw): the client
 * drops what it holds; the server's history from the start follows.
 */
export interface IHistoryMoved {
  history_moved: true;
  after: number;
  seq: number;
  text: string;
}
