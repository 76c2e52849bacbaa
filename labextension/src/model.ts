/**
 * The chat's state, reduced from the server's event stream.
 *
 * Pure TypeScript (no DOM, no JupyterLab imports) so node's test runner can exercise it. The view
 * renders `items` in order; every item carries a `version` bumped on each change, so the view
 * re-renders only what changed. Events are applied at most once (by `seq`), so a reconnect that
 * replays from the last seen seq, or a replay that overlaps, is harmless.
 *
 * The shapes live in `items.ts`, content helpers in `content.ts`, pickers and options in `options.ts` (all
 * re-exported here). Over 400 lines on purpose: `ChatModel` is one reducer (every event type changes the same item
 * list, turn and history state), and splitting its cases apart would scatter one state machine.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */

import { blocksText, chunkText } from './content';
import type {
  IAcpEvent,
  IAgentProblem,
  IAuditItem,
  ICommand,
  IElicitationItem,
  IModes,
  INoticeItem,
  IPermission,
  IPermissionOption,
  IPicker,
  IPlanEntry,
  IPlanItem,
  ITerminalState,
  ITextItem,
  IToolItem,
  ITurnEndItem,
  IUsage,
  IUserItem,
  Item,
  Phase
} from './items';
import { toolLabel, usageOf } from './items';
import { pickersOf, switchedText } from './options';
import { IActor, actorOf } from './people';
import { ownToolOfUpdate } from './owntools';
import type { AcpEvent, IElicitationRequestEvent, IElicitationResolvedEvent, IPermissionRequestEvent } from './wire';

/** The most output of a command the agent ran itself that its card keeps (the end of it). */
export const AGENT_TERMINAL_CHARS = 256 * 1024;

export * from './items';
export * from './content';
export * from './options';

/** An event's `actor` and time, as an item keeps them (absent keys when the event names nobody: an older server's). */
function whoAndWhen(e: { actor?: unknown; ts?: number }): { actor?: IActor; at?: number } {
  const actor = actorOf(e.actor);
  return actor ? { actor, ...(typeof e.ts === 'number' ? { at: e.ts } : {}) } : {};
}

export class ChatModel {
  items: Item[] = [];
  lastSeq = 0;
  runningTurn: string | null = null;
  /** When each turn started (the server's `turn_started` time, seconds): the turn footer's clock. */
  turnStarts = new Map<string, number>();
  phase: Phase = 'unknown';
  problem: IAgentProblem | null = null;
  commands: ICommand[] = [];
  modes: IModes | null = null;
  configOptions: any[] | null = null;
  /** Tools of the client's gate that run without asking in this session (null: not known yet). */
  alwaysAllowed: string[] | null = null;
  /** The session's own policy from its `policy_changed` events (`review`: Review after; undefined: none seen). */
  sessionPolicy: string | null | undefined = undefined;
  /** Agent terminals by id (`terminal_output` events): the tool cards that embed one show its output live. */
  terminals = new Map<string, ITerminalState>();
  /** The agent's last usage report (`usage_update`) in this conversation; null: none yet, or a new conversation. */
  usage: IUsage | null = null;
  /**
   * Older history exists on the server: the next page is `events?before=olderBefore`. The stream
   * replays only the latest page of a long history; null once the first event is loaded.
   */
  olderBefore: number | null = null;
  /** Events missing between two seqs (a reconnect after a long absence replays only the latest page). */
  gap: { after: number; before: number } | null = null;
  /** Seq of the last notice that another conversation became current or one was deleted (the view replays). */
  conversationChangedAt: number | null = null;
  /** Bumped when the items were rebuilt from all events (older ones merged in): the view re-syncs. */
  epoch = 0;
  /** Called after every applied batch; the view schedules a render. */
  onChange: (() => void) | null = null;

  /** Every event applied, in seq order (older pages are merged in and the items rebuilt). */
  private _events: IAcpEvent[] = [];
  private _byId = new Map<string, Item>();
  private _tools = new Map<string, IToolItem>();
  private _perms = new Map<string, { tool: IToolItem; perm: IPermission }>();

  /** The seq of the oldest event loaded (0: none). */
  get firstSeq(): number {
    return this._events.find(e => typeof e.seq === 'number')?.seq ?? 0;
  }

  /**
   * Forget every event (the server's history moved: it does not hold what this model shows); the server's replay
   * from the start follows.
   */
  restart(): void {
    this._openText = null;
    this.items = [];
    this._byId.clear();
    this._tools.clear();
    this._perms.clear();
    this._events = [];
    this.lastSeq = 0;
    this.runningTurn = null;
    this.turnStarts.clear();
    this.olderBefore = null;
    this.gap = null;
    this.epoch++;
    this.onChange?.();
  }

  /** Apply events in order; returns how many were new. */
  applyAll(events: IAcpEvent[]): number {
    this._noteGap(events);
    let n = 0;
    for (const e of events) {
      if (this.apply(e, false)) {
        n++;
      }
    }
    if (n && this.onChange) {
      this.onChange();
    }
    return n;
  }

  /** Apply one event. Events at or below the last seq seen are ignored (replays overlap). */
  apply(event: IAcpEvent, notify = true): boolean {
    if (!event || typeof event !== 'object') {
      return false;
    }
    if (typeof event.seq === 'number') {
      if (event.seq <= this.lastSeq) {
        return false;
      }
      this.lastSeq = event.seq;
    }
    this._events.push(event);
    this._safeReduce(event);
    if (notify && this.onChange) {
      this.onChange();
    }
    return true;
  }

  /**
   * Merge events older than some already applied (a page of history, a gap filled): all events are
   * reduced again in seq order, so turns and tool cards come out as if they had arrived in order.
   * State that only the newest events decide (running turn, phase, options, always-allowed) is kept.
   * Returns how many events were new.
   */
  merge(events: IAcpEvent[]): number {
    const known = new Set(this._events.map(e => e.seq));
    const fresh = events
      .filter(e => e && typeof e === 'object' && typeof e.seq === 'number' && !known.has(e.seq))
      .sort((a, b) => a.seq - b.seq);
    const unique = fresh.filter((e, i) => i === 0 || e.seq !== fresh[i - 1].seq);
    if (!unique.length) {
      return 0;
    }
    if (unique[0].seq > this.lastSeq) {
      return this.applyAll(unique);
    }
    const all = [...this._events, ...unique].sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
    const keep = {
      runningTurn: this.runningTurn,
      phase: this.phase,
      problem: this.problem,
      commands: this.commands,
      modes: this.modes,
      configOptions: this.configOptions,
      alwaysAllowed: this.alwaysAllowed,
      sessionPolicy: this.sessionPolicy,
      usage: this.usage
    };
    this.items = [];
    this._byId.clear();
    this._tools.clear();
    this._perms.clear();
    this._events = [];
    this.lastSeq = 0;
    this.runningTurn = null;
    this._openText = null;
    for (const e of all) {
      this.apply(e, false);
    }
    Object.assign(this, keep);
    const open = this._openText as ITextItem | null; // set again by the replay
    if (open && open.turnId !== this.runningTurn) {
      this._settle(); // its turn is over by the newest events
    }
    this.epoch++;
    if (this.gap && unique.some(e => e.seq > this.gap!.after && e.seq < this.gap!.before)) {
      const inside = all.filter(e => e.seq > this.gap!.after && e.seq < this.gap!.before);
      const last = inside[inside.length - 1]?.seq ?? this.gap.after;
      this.gap = last + 1 >= this.gap.before ? null : { after: last, before: this.gap.before };
    }
    this.onChange?.();
    return unique.length;
  }

  /**
   * A page of older history arrived (`events?before=B`, oldest first): merge it and note where the
   * next one starts. An empty page, or one reaching seq 1, means there is nothing older.
   */
  addOlder(events: IAcpEvent[], before: number): number {
    const page = events.filter(e => e && typeof e.seq === 'number' && e.seq < before);
    const first = page.reduce((m, e) => Math.min(m, e.seq), before);
    this.olderBefore = page.length && first > 1 ? first : null;
    const n = this.merge(page);
    if (!n) {
      this.onChange?.(); // the "earlier messages" line goes even when the page held nothing new
    }
    return n;
  }

  /**
   * The stream replays the latest page of a long history: its first (not pinned) event's seq is past
   * the last seq seen + 1. From nothing, that is older history; after a reconnect, a gap.
   */
  private _noteGap(events: IAcpEvent[]): void {
    const first = events.find(e => e && typeof e.seq === 'number' && !e.pinned && e.seq > this.lastSeq);
    if (!first || first.seq <= this.lastSeq + 1) {
      return;
    }
    const hasUnpinned = this._events.some(e => !e.pinned);
    if (!hasUnpinned) {
      this.olderBefore = this.olderBefore === null ? first.seq : Math.min(this.olderBefore, first.seq);
    } else if (!this.gap) {
      this.gap = { after: this.lastSeq, before: first.seq };
    }
  }

  /** One event; a malformed one is skipped with a warning, never breaks the rest. */
  private _safeReduce(event: IAcpEvent): void {
    try {
      this._reduce(event);
    } catch (err) {
      console.warn('jupyter-acp-host: skipped an event the sidebar could not read', event?.type, err);
    }
  }

  get(id: string): Item | undefined {
    return this._byId.get(id);
  }

  /** Permission requests still waiting for an answer. */
  pendingPermissions(): IPermission[] {
    const out: IPermission[] = [];
    for (const { perm } of this._perms.values()) {
      if (!perm.resolved) {
        out.push(perm);
      }
    }
    return out;
  }

  /**
   * The session's modes and config options as the agent last described them (an event, or the
   * answer of a switch). `undefined` leaves a field as it was; `null` clears it.
   */
  setConfig(modes: IModes | null | undefined, configOptions: any[] | null | undefined): void {
    if (modes !== undefined) {
      this.modes = modes && typeof modes === 'object' ? modes : null;
    }
    if (configOptions !== undefined) {
      this.configOptions = Array.isArray(configOptions) ? configOptions : null;
    }
  }

  /** The header's pickers: see `pickersOf`. */
  pickers(): IPicker[] {
    return pickersOf(this.modes, this.configOptions);
  }

  /** Prompts the user sent, oldest first (for Up-arrow recall). */
  promptHistory(): string[] {
    return this.items.filter((i): i is IUserItem => i.kind === 'user').map(i => i.text);
  }

  // -- reduction -------------------------------------------------------------------------------
  private _add<T extends Item>(item: T): T {
    this._settle(); // anything after a streaming answer ends it
    this.items.push(item);
    this._byId.set(item.id, item);
    return item;
  }

  /** Ids follow from the events, so rebuilding the items (older history merged) keeps them. */
  private _newId(prefix: string, seq: number): string {
    let id = `${prefix}-${seq}`;
    for (let n = 2; this._byId.has(id); n++) {
      id = `${prefix}-${seq}-${n}`;
    }
    return id;
  }

  private _touch(item: Item): void {
    item.version++;
  }

  /** The answer still streaming, if any (`ITextItem.open`). */
  private _openText: ITextItem | null = null;

  /** The streaming answer ends (another item follows it, its turn ended): its new version renders it whole. */
  private _settle(): void {
    const open = this._openText;
    if (open) {
      this._openText = null;
      open.open = false;
      this._touch(open);
    }
  }

  private _reduce(raw: IAcpEvent): void {
    // What the server sends, typed by `wire.ts` (generated from the models the server's events are checked against),
    // so each case reads its event's own fields; a type this sidebar does not know (a newer server) reaches default.
    const e = raw as AcpEvent;
    const seq = typeof e.seq === 'number' ? e.seq : 0;
    switch (e.type) {
      case 'turn_started': {
        const { text, attachments, images } = blocksText(e.prompt);
        this.runningTurn = e.turn_id ?? null;
        if (e.turn_id && typeof e.ts === 'number') {
          this.turnStarts.set(e.turn_id, e.ts);
        }
        if (this.problem && this.problem.kind !== 'needs_login') {
          this.problem = null;
        }
        this._add<IUserItem>({
          kind: 'user',
          id: this._newId('user', seq),
          turnId: e.turn_id ?? null,
          version: 0,
          text,
          attachments,
          images,
          ...whoAndWhen(e)
        });
        break;
      }
      case 'session_update':
        this._update(e.update ?? {}, seq);
        break;
      case 'permission_request':
        this._permissionRequest(e, seq);
        break;
      case 'permission_resolved': {
        const entry = this._perms.get(String(e.request_id));
        if (entry) {
          // who answered (or cancelled) it and when: the card's byline
          entry.perm.resolved = {
            ...(e.cancelled ? { cancelled: true } : { optionId: e.option_id ?? undefined }),
            ...whoAndWhen(e)
          };
          this._touch(entry.tool);
        }
        break;
      }
      case 'elicitation_request':
      case 'elicitation_resolved':
        this._elicitation(e, seq);
        break;
      case 'turn_ended': {
        const turnId = e.turn_id ?? null;
        if (this._openText && (this._openText.turnId === turnId || turnId === null)) {
          this._settle();
        }
        if (this.runningTurn === turnId || turnId === null) {
          this.runningTurn = null;
        }
        // Questions of an ended turn can no longer be answered.
        for (const item of this.items) {
          if (item.kind === 'elicitation' && !item.resolved && (item.turnId === turnId || turnId === null)) {
            item.resolved = { action: 'cancel', reason: 'the turn ended' };
            this._touch(item);
          }
        }
        // Permissions of an ended turn can no longer be answered.
        for (const { tool, perm } of this._perms.values()) {
          if (!perm.resolved && (perm.turnId === turnId || turnId === null)) {
            perm.resolved = { cancelled: true };
            this._touch(tool);
          }
        }
        // Tool calls left running when the turn ends did not finish.
        for (const tool of this._tools.values()) {
          if (tool.turnId === turnId && (tool.status === 'pending' || tool.status === 'in_progress')) {
            tool.status = e.error ? 'failed' : e.stop_reason === 'cancelled' ? 'cancelled' : 'ended';
            this._touch(tool);
          }
        }
        if (e.error) {
          const kind = String(e.error_kind ?? 'agent_error');
          this.problem = { kind, text: String(e.error) };
          if (kind === 'needs_login' || kind === 'agent_failed') {
            this.phase = 'error';
          }
        } else if (this.problem && this.problem.kind !== 'needs_login') {
          this.problem = null;
        }
        this._add<ITurnEndItem>({
          kind: 'turn_end',
          id: this._newId('end', seq),
          turnId,
          version: 0,
          stopReason: e.stop_reason ?? undefined,
          error: e.error ?? undefined,
          errorKind: e.error_kind ?? undefined,
          toolCallsServed: typeof e.tool_calls_served === 'number' ? e.tool_calls_served : undefined,
          overMcp:
            Array.isArray(e.tool_channels) &&
            e.tool_channels.some((c: unknown) => c === 'mcp-http' || c === 'mcp-stdio'),
          startedAt: turnId ? this.turnStarts.get(turnId) : undefined,
          endedAt: typeof e.ts === 'number' ? e.ts : undefined,
          review:
            typeof e.review?.changes === 'number'
              ? { changes: e.review.changes, after: e.review.after === true }
              : undefined
        });
        break;
      }
      case 'session_ready':
        this.phase = 'ready';
        if (this.problem && this.problem.kind === 'needs_login') {
          this.problem = null;
        }
        this.setConfig(e.modes, e.config_options);
        break;
      case 'session_config': {
        // a switch through the API (this browser's or another's): the whole state, as the agent has it
        this.setConfig(e.modes, e.config_options);
        // a switch is a line in the conversation (what, and who when not the viewer): the agent works differently
        // from here
        const changed = switchedText(e.switched, pickersOf(e.modes, e.config_options));
        if (changed) {
          this._add({
            kind: 'notice',
            id: this._newId('notice', seq),
            turnId: this.runningTurn,
            version: 0,
            text: changed,
            level: 'info',
            phase: 'session_config',
            ...whoAndWhen(e)
          });
        }
        break;
      }
      case 'terminal_output': {
        const id = String(e.terminalId ?? '');
        if (!id) {
          break;
        }
        this.terminals.set(id, {
          terminalId: id,
          name: String(e.name ?? ''),
          command: String(e.command ?? ''),
          args: Array.isArray(e.args) ? e.args.map(String) : [],
          cwd: String(e.cwd ?? ''),
          output: String(e.output ?? ''),
          truncated: !!e.truncated,
          exitStatus: e.exitStatus && typeof e.exitStatus === 'object' ? e.exitStatus : null,
          released: !!e.released
        });
        for (const tool of this._tools.values()) {
          if (tool.content.some(c => c?.type === 'terminal' && c.terminalId === id)) {
            this._touch(tool);
          }
        }
        break;
      }
      case 'policy_changed':
        this.alwaysAllowed = Array.isArray(e.always_allowed) ? e.always_allowed.map(String) : [];
        if ('policy' in e) {
          this.sessionPolicy = typeof e.policy === 'string' ? e.policy : null;
        }
        break;
      case 'audit': {
        if (e.decision !== 'refused') {
          break; // allowed actions are the tool cards themselves
        }
        // `action` is the tool's name (or the power's, fs/*); `message` the refusal's own words (which
        // rule, and how the user can change it); `rule` its short name. `tool`, `text` and `reason` are no
        // fields of the server's audit events (wire.ts): read from the loose event, as before, for any that has them
        const name = raw.tool ?? e.action;
        const what = name ? toolLabel(String(name)) : 'an action';
        const message = e.message ?? raw.text ?? raw.reason;
        const rule = e.rule === undefined || e.rule === null ? undefined : String(e.rule);
        this._add<IAuditItem>({
          kind: 'audit',
          id: this._newId('audit', seq),
          turnId: e.turn_id ?? this.runningTurn,
          version: 0,
          text: `Refused: ${what}` + (message ? ` — ${String(message)}` : '') + (rule ? ` (rule: ${rule})` : ''),
          tool: name === undefined || name === null ? undefined : String(name),
          action: e.action ?? undefined,
          rule
        });
        break;
      }
      case 'notice': {
        if (e.phase === 'agent_starting') {
          this.phase = 'starting';
        }
        if (e.phase === 'session_reset') {
          this.usage = null; // a new conversation: its context starts empty
        }
        if (
          e.phase === 'conversation_resumed' ||
          e.phase === 'conversation_deleted' ||
          e.phase === 'conversation_forked'
        ) {
          this.conversationChangedAt = seq;
        }
        this._add<INoticeItem>({
          kind: 'notice',
          id: this._newId('notice', seq),
          turnId: this.runningTurn,
          version: 0,
          text: String(e.text ?? ''),
          level: String(e.level ?? 'info'),
          phase: e.phase ?? undefined,
          revert:
            e.phase === 'reverted' && typeof e.edits === 'number'
              ? {
                  turnId: typeof e.turn_id === 'string' ? e.turn_id : null,
                  edits: e.edits,
                  cellId: typeof e.cell_id === 'string' ? e.cell_id : undefined
                }
              : undefined,
          ...whoAndWhen(e)
        });
        break;
      }
      default:
        break;
    }
  }

  private _last(): Item | undefined {
    return this.items[this.items.length - 1];
  }

  private _appendText(kind: 'message' | 'thought' | 'user', text: string, seq: number): void {
    if (!text) {
      return;
    }
    const last = this._last();
    if (last && last.kind === kind && last.turnId === this.runningTurn) {
      (last as ITextItem | IUserItem).text += text;
      this._touch(last);
      return;
    }
    if (kind === 'user') {
      this._add<IUserItem>({
        kind: 'user',
        id: this._newId('user', seq),
        turnId: this.runningTurn,
        version: 0,
        text,
        attachments: []
      });
    } else {
      const item = this._add<ITextItem>({
        kind,
        id: this._newId(kind, seq),
        turnId: this.runningTurn,
        version: 0,
        text
      });
      if (kind === 'message' && this.runningTurn !== null) {
        item.open = true;
        this._openText = item;
      }
    }
  }

  private _update(u: any, seq: number): void {
    switch (u.sessionUpdate) {
      case 'agent_message_chunk':
        this._appendText('message', chunkText(u.content), seq);
        break;
      case 'agent_thought_chunk':
        this._appendText('thought', chunkText(u.content), seq);
        break;
      case 'user_message_chunk':
        this._appendText('user', chunkText(u.content), seq);
        break;
      case 'tool_call':
      case 'tool_call_update':
        this._upsertTool(u, seq);
        break;
      case 'plan': {
        const entries: IPlanEntry[] = Array.isArray(u.entries) ? u.entries : [];
        const existing = [...this.items]
          .reverse()
          .find((i): i is IPlanItem => i.kind === 'plan' && i.turnId === this.runningTurn);
        if (existing) {
          existing.entries = entries;
          this._touch(existing);
        } else {
          this._add<IPlanItem>({
            kind: 'plan',
            id: this._newId('plan', seq),
            turnId: this.runningTurn,
            version: 0,
            entries
          });
        }
        break;
      }
      case 'available_commands_update':
        this.commands = Array.isArray(u.availableCommands) ? u.availableCommands : [];
        break;
      case 'current_mode_update':
        // the agent switched by itself (or confirms a switch); ACP sends the id only
        if (typeof u.currentModeId === 'string') {
          this.modes = { ...(this.modes ?? {}), currentModeId: u.currentModeId };
        }
        break;
      case 'usage_update':
        this.usage = usageOf(u) ?? this.usage;
        break;
      case 'config_option_update':
        // ACP: the full set of options, not a diff
        if (Array.isArray(u.configOptions)) {
          this.configOptions = u.configOptions;
        }
        break;
      default:
        break;
    }
  }

  /** Create or update the card of a tool call; agents are inconsistent about ids and order. */
  private _upsertTool(u: any, seq: number): IToolItem {
    const key = String(u.toolCallId ?? `anon-${seq}`);
    let tool = this._tools.get(key);
    if (tool && tool.turnId !== this.runningTurn && this.runningTurn !== null) {
      // an id reused by a later turn is a new call, not an update of a finished one
      tool = undefined;
    }
    if (!tool) {
      tool = this._add<IToolItem>({
        kind: 'tool',
        id: this._newId('tool', seq),
        turnId: this.runningTurn,
        version: 0,
        toolCallId: key,
        title: '',
        toolKind: 'other',
        status: 'pending',
        content: [],
        locations: [],
        permissions: []
      });
      this._tools.set(key, tool);
    }
    if (typeof u.title === 'string' && u.title) {
      tool.title = u.title;
    }
    if (typeof u.kind === 'string' && u.kind) {
      tool.toolKind = u.kind;
    }
    if (typeof u.status === 'string' && u.status) {
      tool.status = u.status;
    }
    if (u.rawInput !== undefined && u.rawInput !== null) {
      tool.rawInput = u.rawInput;
    }
    if (u.rawOutput !== undefined && u.rawOutput !== null) {
      tool.rawOutput = u.rawOutput;
    }
    if (Array.isArray(u.content)) {
      tool.content = u.content; // ACP: an update's content replaces the collection
    }
    if (Array.isArray(u.locations)) {
      tool.locations = u.locations;
    }
    this._agentTerminal(tool, u);
    const own = ownToolOfUpdate(u);
    if (own) {
      // an update that names the tool replaces what the card knows of it (arguments only when it carries them)
      tool.own = { name: own.name, args: own.args ?? (tool.own?.name === own.name ? tool.own.args : undefined) };
    } else if (tool.own && u.rawInput && typeof u.rawInput === 'object' && !Array.isArray(u.rawInput)) {
      tool.own = { name: tool.own.name, args: u.rawInput }; // the arguments of a call named earlier
    }
    if (!tool.title) {
      tool.title = key;
    }
    this._touch(tool);
    return tool;
  }

  /**
   * The terminal of a command the agent runs itself, from the `_meta` an agent sends once the client advertises
   * `terminal_output` (claude-agent-acp: `terminal_info` on the call, `terminal_output` with the output, appended as
   * codex-acp streams it, `terminal_exit` with the status). The output keeps its last AGENT_TERMINAL_CHARS.
   */
  private _agentTerminal(tool: IToolItem, u: any): void {
    const meta = u?._meta;
    if (!meta || typeof meta !== 'object') {
      return;
    }
    const info = meta.terminal_info;
    const out = meta.terminal_output;
    const exit = meta.terminal_exit;
    const id = [info, out, exit].map(m => (m && typeof m === 'object' ? m.terminal_id : undefined)).find(Boolean);
    if (typeof id !== 'string' || !id) {
      return;
    }
    const state: ITerminalState =
      tool.agentTerminal?.terminalId === id
        ? tool.agentTerminal
        : {
            terminalId: id,
            name: '', // no Jupyter terminal: nothing to open
            command: '',
            args: [],
            cwd: typeof info?.cwd === 'string' ? info.cwd : '',
            output: '',
            truncated: false,
            exitStatus: null,
            released: false
          };
    const command = tool.rawInput?.command ?? u?.rawInput?.command;
    if (typeof command === 'string' && command) {
      state.command = command;
    }
    if (out && typeof out.data === 'string') {
      const all = state.output + out.data;
      state.truncated = state.truncated || all.length > AGENT_TERMINAL_CHARS;
      state.output = all.length > AGENT_TERMINAL_CHARS ? all.slice(all.length - AGENT_TERMINAL_CHARS) : all;
    }
    if (exit && typeof exit === 'object') {
      const code = typeof exit.exit_code === 'number' ? exit.exit_code : null;
      state.exitStatus = { exitCode: code, signal: typeof exit.signal === 'string' ? exit.signal : null };
    }
    tool.agentTerminal = state;
  }

  /** An agent's question (`elicitation_request`), or its end (`elicitation_resolved`, completed or not). */
  private _elicitation(e: IElicitationRequestEvent | IElicitationResolvedEvent, seq: number): void {
    const id = String(e.elicitation_id ?? '');
    const known = this.items.find((i): i is IElicitationItem => i.kind === 'elicitation' && i.elicitationId === id);
    if (e.type === 'elicitation_request') {
      if (!id || known) {
        return;
      }
      if (e.turn_id && !this.runningTurn) {
        this.runningTurn = e.turn_id;
      }
      this._add<IElicitationItem>({
        kind: 'elicitation',
        id: this._newId('elicit', seq),
        turnId: e.turn_id ?? this.runningTurn,
        version: 0,
        elicitationId: id,
        mode: String(e.mode ?? 'form'),
        message: String(e.message ?? ''),
        schema: e.requested_schema ?? undefined,
        url: typeof e.url === 'string' ? e.url : undefined,
        urlHost: typeof e.url_host === 'string' ? e.url_host : undefined
      });
      return;
    }
    if (!known) {
      return;
    }
    if (e.completed) {
      known.completed = true;
    }
    if (!known.resolved || !e.completed) {
      known.resolved = {
        action: String(e.action ?? 'cancel'),
        content: e.content ?? undefined,
        reason: e.reason ?? undefined,
        by: e.by ?? undefined,
        ...whoAndWhen(e)
      };
    }
    this._touch(known);
  }

  private _permissionRequest(e: IPermissionRequestEvent, seq: number): void {
    const requestId = String(e.request_id);
    const call = { ...(e.tool_call ?? {}) };
    if (!call.toolCallId) {
      call.toolCallId = `permission-${requestId}`;
    }
    if (e.turn_id && !this.runningTurn) {
      this.runningTurn = e.turn_id;
    }
    const turnId = e.turn_id ?? this.runningTurn;
    const perm: IPermission = {
      requestId,
      turnId,
      // the agent's options as it sent them (ACP's PermissionOption; the wire keeps them loose)
      options: Array.isArray(e.options) ? (e.options as IPermissionOption[]) : [],
      source: e.source,
      ...(e.wording === 'client' ? { wording: 'client' } : {})
    };
    // the server asks about a call the agent shows (or will show) as a card: ask on that card, in the server's
    // own words (the gate's question, or an agent's request the server words: never one the agent words itself)
    const ours = e.source === 'client' || e.wording === 'client';
    const shown = ours ? call._meta?.jupyter_acp?.agent_call : undefined;
    let host = shown !== undefined ? this._tools.get(String(shown)) : undefined;
    if (shown !== undefined && (!host || host.turnId !== turnId)) {
      // not shown yet (gemini-cli sends its card only after it asked): the agent's later updates land here
      host = this._upsertTool(
        { toolCallId: String(shown), title: call.title, kind: call.kind, status: 'pending' },
        seq
      );
    }
    let tool: IToolItem;
    if (host && host.turnId === turnId) {
      tool = host;
      perm.own = {
        title: String(call.title ?? ''),
        content: Array.isArray(call.content) ? call.content : [],
        rawInput: call.rawInput
      };
    } else {
      tool = this._upsertTool(call, seq);
    }
    tool.permissions.push(perm);
    this._perms.set(requestId, { tool, perm });
    this._touch(tool);
  }
}
