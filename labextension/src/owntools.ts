/**
 * The notebook's own tools as third-party agents name them in their cards, and what those cards show instead:
 * the title and preview the built-in agent gives the same call ("Edit cell c1", the code, the diff), so a card
 * reads alike whatever the agent. The server recognises the same forms in permission requests
 * (`sessions/gate/approvals.py`, `own_tool_call`); here they only change how a card reads, never what is allowed.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */

import { trans } from './i18n';

/** The MCP server name the server gives the notebook's tools in every agent's `mcpServers`. */
export const MCP_SERVER = 'jupyter';

const TOOL = '(client_[a-z][a-z0-9_]*)';
const PATTERNS: RegExp[] = [
  new RegExp(`^mcp__${MCP_SERVER}__${TOOL}$`), // claude-agent-acp
  new RegExp(`^${MCP_SERVER}__${TOOL}$`), // goose
  new RegExp(`^${MCP_SERVER}_${TOOL}$`), // opencode, mistral-vibe
  new RegExp(`^(?:Tool: )?${MCP_SERVER}/${TOOL}$`), // codex-acp's card, fast-agent
  new RegExp(`^${TOOL} \\(${MCP_SERVER} MCP Server\\)$`) // gemini-cli, qwen-code
];

/** The notebook tool a card's title (or an agent's tool name) names, in one of the agents' forms. */
export function ownToolName(text: unknown): string | undefined {
  if (typeof text !== 'string' || text.length > 1000) {
    return undefined;
  }
  for (const pattern of PATTERNS) {
    const m = pattern.exec(text.trim());
    if (m) {
      return m[1];
    }
  }
  return undefined;
}

/** Which notebook tool one update of a card names (title, `_meta.claudeCode.toolName`, codex's rawInput). */
export function ownToolOfUpdate(u: any): { name: string; args?: any } | undefined {
  const raw = u?.rawInput;
  if (raw && typeof raw === 'object' && raw.server === MCP_SERVER && typeof raw.tool === 'string') {
    const name = ownToolName(`${MCP_SERVER}/${raw.tool}`);
    if (name) {
      return { name, args: raw.arguments };
    }
  }
  const name = ownToolName(u?.title) ?? ownToolName(u?._meta?.claudeCode?.toolName);
  if (!name) {
    return undefined;
  }
  return { name, args: raw && typeof raw === 'object' && !Array.isArray(raw) ? raw : undefined };
}

function ids(value: any): string {
  const list = Array.isArray(value) ? value.map(String) : [];
  return list.slice(0, 6).join(', ') + (list.length > 6 ? trans.__(' and %1 more', list.length - 6) : '');
}

/** What a card says about a call, as the built-in agent titles it: "Edit cell c1", "Run cells c0, c1". */
export function callTitle(name: string, args: any): string {
  const a = args && typeof args === 'object' ? args : {};
  const cid = typeof a.cell_id === 'string' ? a.cell_id : '';
  const list = ids(a.cell_ids);
  const n = Array.isArray(a.cell_ids) ? a.cell_ids.length : 0;
  const known: Record<string, string> = {
    client_notebook_outline: trans.__('Notebook outline'),
    client_read_cells: list ? trans._n('Read cell %2', 'Read cells %2', n, list) : trans.__('Read cells'),
    client_insert_cell: a.cell_type === 'markdown' ? trans.__('Insert a cell (markdown)') : trans.__('Insert a cell'),
    client_edit_cell: cid ? trans.__('Edit cell %1', cid) : trans.__('Edit a cell'),
    client_delete_cells: list ? trans._n('Delete cell %2', 'Delete cells %2', n, list) : trans.__('Delete cells'),
    client_move_cell: cid ? trans.__('Move cell %1', cid) : trans.__('Move a cell'),
    client_execute_cells: list ? trans._n('Run cell %2', 'Run cells %2', n, list) : trans.__('Run cells'),
    client_execute_code: trans.__('Run code in the kernel'),
    client_list_variables: trans.__('List kernel variables'),
    client_inspect_variable:
      typeof a.name === 'string' ? trans.__('Inspect %1', a.name) : trans.__('Inspect a variable'),
    client_get_selection: trans.__("The user's selection")
  };
  return known[name] ?? name.replace(/^client_/, '').replace(/_/g, ' ');
}

/** The ACP kind of a notebook tool, for a card whose agent said only "other" (its icon). */
export function ownKind(name: string): string {
  if (/read|outline|list|inspect|selection/.test(name)) {
    return 'read';
  }
  if (/execute/.test(name)) {
    return 'execute';
  }
  if (/delete/.test(name)) {
    return 'delete';
  }
  if (/move/.test(name)) {
    return 'move';
  }
  return /insert|edit/.test(name) ? 'edit' : 'other';
}

/** The code a call carries, as the built-in agent shows it: a diff (old and new string) or the text. */
export function callContent(args: any): any[] {
  const a = args && typeof args === 'object' ? args : {};
  if (typeof a.old_string === 'string' && typeof a.new_string === 'string') {
    const path = typeof a.cell_id === 'string' ? trans.__('cell %1', a.cell_id) : trans.__('cell');
    return [{ type: 'diff', path, oldText: a.old_string, newText: a.new_string }];
  }
  for (const key of ['source', 'code']) {
    if (typeof a[key] === 'string') {
      const text = a[key].length <= 20000 ? a[key] : a[key].slice(0, 20000) + '\n[... truncated]';
      return [{ type: 'content', content: { type: 'text', text } }];
    }
  }
  return [];
}

/**
 * What each permission button says: the kind's label (never the agent's wording, which a hostile agent could
 * make "Allow" on a reject), made distinct where an agent offers two options of one kind (codex-acp's "for this
 * session" and "don't ask again", gemini-cli's "this server" and "this tool"), and "Cancel" for a reject that is
 * a cancel (codex-acp's and gemini-cli's `cancel`).
 */
export const KIND_LABEL: Readonly<Record<string, string>> = {
  // getters: translated when read, after the plugin has set the language (a constant would be English forever)
  get allow_once() {
    return trans.__('Allow once');
  },
  get allow_always() {
    return trans.__('Always allow');
  },
  get reject_once() {
    return trans.__('Reject');
  },
  get reject_always() {
    return trans.__('Always reject');
  }
};

/** The words that tell two options of one kind apart (a function: translated when called). */
function qualifiers(): [RegExp, Record<string, string>][] {
  return [
    [
      /session|conversation|this chat/,
      {
        allow_always: trans.__('Always allow in this conversation'),
        reject_always: trans.__('Always reject in this conversation')
      }
    ],
    [
      /server/,
      {
        allow_always: trans.__("Always allow this server's tools"),
        reject_always: trans.__("Always reject this server's tools")
      }
    ],
    [/tool/, { allow_always: trans.__('Always allow this tool'), reject_always: trans.__('Always reject this tool') }],
    [
      /always|don.?t ask|never ask|persist|save|forever/,
      {
        allow_always: trans.__("Always allow, don't ask again"),
        reject_always: trans.__("Always reject, don't ask again")
      }
    ]
  ];
}

export function optionLabels(options: { optionId: string; name?: string; kind: string }[]): Map<string, string> {
  const out = new Map<string, string>();
  const count = new Map<string, number>();
  for (const o of options) {
    count.set(o.kind, (count.get(o.kind) ?? 0) + 1);
  }
  for (const o of options) {
    const base = KIND_LABEL[o.kind];
    if (!base) {
      continue;
    }
    const words = `${o.optionId} ${o.name ?? ''}`.toLowerCase();
    let label = base;
    if (o.kind.startsWith('reject') && /\bcancel/.test(words)) {
      label = trans.__('Cancel');
    } else if ((count.get(o.kind) ?? 0) > 1) {
      const found = qualifiers().find(([re, labels]) => re.test(words) && labels[o.kind]);
      label = found ? found[1][o.kind] : base;
    }
    out.set(o.optionId, label);
  }
  // two options still alike (the agent's words told them apart in no known way): numbered, in the agent's order
  const alike = new Map<string, number>();
  for (const label of out.values()) {
    alike.set(label, (alike.get(label) ?? 0) + 1);
  }
  const seen = new Map<string, number>();
  for (const [id, label] of out) {
    if ((alike.get(label) ?? 0) > 1) {
      const n = (seen.get(label) ?? 0) + 1;
      seen.set(label, n);
      out.set(id, `${label} (${n})`);
    }
  }
  return out;
}
