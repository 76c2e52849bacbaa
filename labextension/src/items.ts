/**
 * The shapes of the chat's state: the server's events and the items the panel renders (one per message, tool call,
 * plan, turn end, notice, audit, question), kept apart from the reducer that makes them (`model.ts`).
 */

import { trans } from './i18n';
import type { IActor } from './wire';

/* eslint-disable @typescript-eslint/no-explicit-any */

export interface IAcpEvent {
  seq: number;
  type: string;
  ts?: number;
  [key: string]: any;
}

export interface IPermissionOption {
  optionId: string;
  name: string;
  kind: string;
  /** Why the server's admin does not let users pick this option (an "always" answer), when they may not. */
  fixed_by_admin?: string;
}

export interface IPermission {
  requestId: string;
  turnId: string | null;
  options: IPermissionOption[];
  source?: string;
  /**
   * `client`: an agent's request the server asks in its own words (the gate's title and preview, the agent's
   * options), its "allow" approving that call at the gate too.
   */
  wording?: string;
  /**
   * Set once resolved: the option chosen, or cancelled; `actor`: who answered (or cancelled it), `at`: when (the
   * event's time, seconds), for the card's "Bob Dylan allowed · 14:02".
   */
  resolved?: { optionId?: string; cancelled?: boolean; actor?: IActor; at?: number };
  /**
   * The server's own question when it asks on a card of the agent's (`_meta.jupyter_acp.agent_call`): its title,
   * preview and arguments, which the agent's later updates of that card cannot change.
   */
  own?: { title: string; content: any[]; rawInput?: any };
}

export interface IPlanEntry {
  content: string;
  priority?: string;
  status?: string;
}

interface IItemBase {
  id: string;
  turnId: string | null;
  version: number;
}

export interface IUserItem extends IItemBase {
  kind: 'user';
  text: string;
  attachments: string[];
  /** The prompt's image blocks (thumbnails). */
  images?: { mimeType: string; data: string }[];
  /** Who sent it (the `turn_started` event's `actor`) and when (seconds): a prompt of someone else is marked so. */
  actor?: IActor;
  at?: number;
}
export interface ITextItem extends IItemBase {
  kind: 'message' | 'thought';
  text: string;
  /**
   * An answer still streaming (its turn runs and nothing followed it): more text may come, so the sidebar renders
   * its complete blocks once and only the open one again; when it ends (its version changes) it is rendered whole.
   */
  open?: boolean;
}
export interface IToolItem extends IItemBase {
  kind: 'tool';
  toolCallId: string;
  title: string;
  toolKind: string;
  status: string;
  rawInput?: any;
  rawOutput?: any;
  content: any[];
  locations: any[];
  permissions: IPermission[];
  /** one of the notebook's own tools, as a third-party agent named it (`owntools.ts`): the card reads as its call */
  own?: { name: string; args?: any };
  /**
   * A command the agent ran itself (claude-agent-acp's Bash, codex-acp's shell), as its updates' `_meta`
   * (`terminal_info`, `terminal_output`, `terminal_exit`) told it: kept with this card only, so no agent can
   * write into the card of a terminal of the client's.
   */
  agentTerminal?: ITerminalState;
}
export interface IPlanItem extends IItemBase {
  kind: 'plan';
  entries: IPlanEntry[];
}
export interface ITurnEndItem extends IItemBase {
  kind: 'turn_end';
  stopReason?: string;
  error?: string;
  errorKind?: string;
  toolCallsServed?: number;
  /** the notebook's tools reached the agent over MCP (an agent may ignore those: zero calls then says so) */
  overMcp?: boolean;
  /** when the turn started and ended (the server's event times, seconds): the turn footer's duration */
  startedAt?: number;
  endedAt?: number;
  /**
   * the turn ended with this many changes to review (the event's `review`); `after`: some went ahead unasked under
   * "Review after", so the review opens by itself
   */
  review?: { changes: number; after?: boolean };
}
export interface INoticeItem extends IItemBase {
  kind: 'notice';
  text: string;
  level: string;
  phase?: string;
  /** a revert notice's own fields: the turn reverted (null: edits outside a turn), changes undone, the cell */
  revert?: { turnId: string | null; edits: number; cellId?: string };
  /** who made the change it tells (an agent switch, a revert, a rewind, new settings) and when (seconds) */
  actor?: IActor;
  at?: number;
}

/** An `audit` event of a refused action: which rule refused, and how the user can change it. */
export interface IAuditItem extends IItemBase {
  kind: 'audit';
  text: string;
  tool?: string;
  action?: string;
  rule?: string;
}

/** An agent terminal (``terminal/create``) as its last `terminal_output` event described it. */
export interface ITerminalState {
  terminalId: string;
  /** the Jupyter terminal's name (JupyterLab opens it with `terminal:open`) */
  name: string;
  command: string;
  args: string[];
  cwd: string;
  /** the tail of its output */
  output: string;
  truncated: boolean;
  exitStatus: { exitCode?: number | null; signal?: string | null } | null;
  released: boolean;
}

/**
 * An agent's question (`elicitation/create`): a form from a JSON schema, or a URL the user opens. Answered
 * through `POST .../elicitations/{id}`; `resolved` once answered, cancelled or (URL mode) completed.
 */
export interface IElicitationItem extends IItemBase {
  kind: 'elicitation';
  elicitationId: string;
  mode: string;
  message: string;
  schema?: any;
  url?: string;
  urlHost?: string;
  resolved?: { action: string; content?: any; reason?: string; by?: string; actor?: IActor; at?: number };
  /** URL mode: the agent said the out-of-band step is done (`elicitation/complete`) */
  completed?: boolean;
}

export type Item =
  IUserItem | ITextItem | IToolItem | IPlanItem | ITurnEndItem | INoticeItem | IAuditItem | IElicitationItem;

/**
 * A tool name as the user reads it: `client_edit_cell` -> "Edit cell". The names are the server's
 * tool names (the gate's always-allow set and audit events carry them).
 */
export function toolLabel(name: string): string {
  const known: Record<string, string> = {
    client_execute_cells: trans.__('Run cells'),
    client_execute_code: trans.__('Run code'),
    client_edit_cell: trans.__('Edit cell'),
    client_insert_cell: trans.__('Insert cell'),
    client_delete_cells: trans.__('Delete cells'),
    client_move_cell: trans.__('Move cell'),
    'fs/write_text_file': trans.__('Write files'),
    'fs/read_text_file': trans.__('Read files')
  };
  const n = String(name ?? '');
  if (known[n]) {
    return known[n];
  }
  const words = n
    .replace(/^client_|^mcp__[^_]+__/, '')
    .replace(/[_/.-]+/g, ' ')
    .trim();
  return words ? words[0].toUpperCase() + words.slice(1) : n;
}

export interface ICommand {
  name: string;
  description?: string;
  input?: any;
}

/** The agent's last `usage_update`: context window tokens used / size, and the session's cost so far. */
export interface IUsage {
  used: number;
  size: number;
  cost?: { amount: number; currency: string };
}

/** An ACP `usage_update` read defensively: null when it carries no usable figures. */
export function usageOf(u: any): IUsage | null {
  const used = Number(u?.used);
  const size = Number(u?.size);
  if (!Number.isFinite(used) || !Number.isFinite(size) || used < 0 || size <= 0) {
    return null;
  }
  const out: IUsage = { used, size };
  const amount = Number(u?.cost?.amount);
  if (u?.cost && Number.isFinite(amount)) {
    out.cost = { amount, currency: String(u.cost.currency ?? 'USD') };
  }
  return out;
}

export type Phase = 'unknown' | 'starting' | 'ready' | 'error';

/** The agent's session modes (ACP `modes`). */
export interface IModes {
  currentModeId?: string;
  availableModes?: { id: string; name?: string; description?: string }[];
}

/** One choice of a picker; `group` is set for options the agent grouped. */
export interface IChoice {
  value: string;
  name: string;
  description?: string;
  group?: string;
}

/**
 * A control the header shows for the session: the agent's mode, or one of its config options.
 * `kind: 'mode'` switches through `POST .../mode`, the others through `POST .../config`.
 */
export interface IPicker {
  kind: 'mode' | 'select' | 'boolean';
  id: string;
  name: string;
  description?: string;
  category?: string;
  value: string | boolean;
  choices: IChoice[];
}

export interface IAgentProblem {
  kind: string; // needs_login | agent_failed | timeout | agent_error | ...
  text: string;
}
