/**
 * Who changed a cell, read from the cell's own metadata (`metadata.jupyter_acp.history`, written by the server:
 * jupyter_acp/notebook/provenance.py has the shape). Metadata can be edited by hand, so every entry is checked and a
 * malformed one left out, as the server's `parse_entry` does. Pure TypeScript: node's test runner loads it.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */

import { trans } from '../i18n';

/** The metadata key (the same as the server's PROVENANCE_KEY). */
export const PROVENANCE_KEY = 'jupyter_acp';
/** Characters of the prompt the mark's popover shows (the entry keeps 200). */
const PROMPT_SHOWN = 60;

export interface IAgentEntry {
  by: 'agent';
  action: 'inserted' | 'edited' | 'moved' | 'ran';
  agent: { name: string; version: string | null };
  conversationId: string;
  turnId: string;
  toolCallId: string | null;
  sessionId: string | null;
  turnNumber: number | null;
  prompt: string;
  user: string | null;
  at: string;
}

export interface IUserEntry {
  by: 'user';
  user: string | null;
  at: string;
}

export type ProvenanceEntry = IAgentEntry | IUserEntry;

/** A cell's provenance: its entries oldest first, the newest agent one, and whether a user edited it since. */
export interface ICellProvenance {
  history: ProvenanceEntry[];
  last: IAgentEntry;
  /** the user's edit after the newest agent entry (null: none) */
  editedSince: IUserEntry | null;
}

const ACTIONS = new Set(['inserted', 'edited', 'moved', 'ran']);

function optStr(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

export function parseEntry(raw: any): ProvenanceEntry | null {
  if (!raw || typeof raw !== 'object' || typeof raw.at !== 'string') {
    return null;
  }
  if (raw.by === 'user') {
    return { by: 'user', user: optStr(raw.user), at: raw.at };
  }
  const agent = raw.agent;
  if (
    raw.by !== 'agent' ||
    !agent ||
    typeof agent !== 'object' ||
    typeof agent.name !== 'string' ||
    !ACTIONS.has(raw.action) ||
    typeof raw.conversation_id !== 'string' ||
    typeof raw.turn_id !== 'string'
  ) {
    return null;
  }
  const n = raw.turn_number;
  return {
    by: 'agent',
    action: raw.action,
    agent: { name: agent.name, version: optStr(agent.version) },
    conversationId: raw.conversation_id,
    turnId: raw.turn_id,
    toolCallId: optStr(raw.tool_call_id),
    sessionId: optStr(raw.session_id),
    turnNumber: typeof n === 'number' && Number.isInteger(n) ? n : null,
    prompt: optStr(raw.prompt) ?? '',
    user: optStr(raw.user),
    at: raw.at
  };
}

/** The provenance of a cell from its metadata's `jupyter_acp` value; null when no agent entry is there. */
export function provenanceOf(value: unknown): ICellProvenance | null {
  const raw = value && typeof value === 'object' ? (value as any).history : null;
  if (!Array.isArray(raw)) {
    return null;
  }
  const history = raw.map(parseEntry).filter((e): e is ProvenanceEntry => e !== null);
  let lastIndex = -1;
  history.forEach((e, i) => {
    if (e.by === 'agent') {
      lastIndex = i;
    }
  });
  if (lastIndex < 0) {
    return null;
  }
  const later = history.slice(lastIndex + 1).filter((e): e is IUserEntry => e.by === 'user');
  return {
    history,
    last: history[lastIndex] as IAgentEntry,
    editedSince: later.length ? later[later.length - 1] : null
  };
}

/** "Codex" for `codex`: an agent's name as a title, when the panel does not know its configured title. */
export function agentTitle(name: string, titles?: Record<string, string>): string {
  const known = titles?.[name];
  if (known) {
    return known;
  }
  return name ? name.charAt(0).toUpperCase() + name.slice(1) : trans.__('An agent');
}

/**
 * `Codex, turn 4: 'plot the residuals' (by alice)`: what the mark's popover says first (the server's
 * `AgentChange.describe`, with the agent's title). A turn without its number is named by its time.
 */
export function describeEntry(entry: IAgentEntry, titles?: Record<string, string>): string {
  const turn =
    entry.turnNumber !== null ? trans.__('turn %1', entry.turnNumber) : trans.__('a turn at %1', shortTime(entry.at));
  const words = entry.prompt.trim().replace(/\s+/g, ' ');
  const prompt = words.length <= PROMPT_SHOWN ? words : words.slice(0, PROMPT_SHOWN - 1) + '…';
  const who = entry.user ? trans.__(' (by %1)', entry.user) : '';
  return `${agentTitle(entry.agent.name, titles)}, ${turn}: '${prompt}'${who}`;
}

/** `2025-05-01T12:00:00Z` as `2025-05-01 12:00 UTC` (the stored time is UTC). */
export function shortTime(at: string): string {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(at);
  return m ? `${m[1]} ${m[2]} UTC` : at;
}

/** What the agent did, with when (a function: translated when called, after the plugin has set the language). */
function didAt(action: IAgentEntry['action'], at: string): string {
  switch (action) {
    case 'inserted':
      return trans.__('inserted this cell at %1', at);
    case 'edited':
      return trans.__('edited this cell at %1', at);
    case 'moved':
      return trans.__('moved this cell at %1', at);
    default:
      return trans.__('ran this cell at %1', at);
  }
}

/** The popover's second line: what the agent did and when, and the user's edit since. */
export function detailText(p: ICellProvenance): string {
  const did = didAt(p.last.action, shortTime(p.last.at));
  const since = p.editedSince
    ? trans.__('; edited since by %1 (%2)', p.editedSince.user ?? trans.__('a user'), shortTime(p.editedSince.at))
    : '';
  const more = p.history.filter(e => e.by === 'agent').length - 1;
  return (
    `${did}${since}` +
    (more > 0 ? trans._n('; %1 earlier agent change recorded', '; %1 earlier agent changes recorded', more) : '')
  );
}
