import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IAcpEvent, IToolItem } from '../model';
import { callTitle, optionLabels, ownToolName } from '../owntools';

let seq = 0;
function ev(type: string, fields: Record<string, unknown> = {}): IAcpEvent {
  return { seq: ++seq, type, ...fields };
}
function upd(update: Record<string, unknown>): IAcpEvent {
  return ev('session_update', { update });
}
function tools(m: ChatModel): IToolItem[] {
  return m.items.filter(i => i.kind === 'tool') as IToolItem[];
}

// the options real agents send (codex-acp 0.16, gemini-cli, claude-agent-acp 0.23)
const CODEX = [
  { optionId: 'approved', name: 'Allow', kind: 'allow_once' },
  { optionId: 'approved-for-session', name: 'Allow for this session', kind: 'allow_always' },
  { optionId: 'approved-always', name: "Allow and don't ask again", kind: 'allow_always' },
  { optionId: 'cancel', name: 'Cancel', kind: 'reject_once' }
];
const GEMINI = [
  { optionId: 'proceed_always_server', name: 'Always Allow jupyter', kind: 'allow_always' },
  { optionId: 'proceed_always_tool', name: 'Always Allow client_edit_cell', kind: 'allow_always' },
  { optionId: 'proceed_once', name: 'Allow', kind: 'allow_once' },
  { optionId: 'cancel', name: 'Reject', kind: 'reject_once' }
];
const CLAUDE = [
  { kind: 'allow_always', name: 'Always Allow', optionId: 'allow_always' },
  { kind: 'allow_once', name: 'Allow', optionId: 'allow' },
  { kind: 'reject_once', name: 'Reject', optionId: 'reject' }
];

test("two options of one kind get distinct labels that keep the agent's meaning; a cancel says Cancel", () => {
  assert.deepEqual(
    [...optionLabels(CODEX).values()],
    ['Allow once', 'Always allow in this conversation', "Always allow, don't ask again", 'Cancel']
  );
  assert.deepEqual(
    [...optionLabels(GEMINI).values()],
    ["Always allow this server's tools", 'Always allow this tool', 'Allow once', 'Cancel']
  );
  assert.deepEqual([...optionLabels(CLAUDE).values()], ['Always allow', 'Allow once', 'Reject']);
});

test("labels come from the kind, never the agent's words: a reject named Allow still reads Reject", () => {
  const labels = optionLabels([
    { optionId: 'a', name: 'Allow', kind: 'reject_once' },
    { optionId: 'b', name: 'x', kind: 'allow_always' },
    { optionId: 'c', name: 'y', kind: 'allow_always' }
  ]);
  assert.deepEqual([...labels.values()], ['Reject', 'Always allow (1)', 'Always allow (2)']);
});

test('the forms agents name the notebook tools in are recognised, and nothing else', () => {
  for (const title of [
    'mcp__jupyter__client_edit_cell',
    'jupyter_client_edit_cell',
    'jupyter__client_edit_cell',
    'jupyter/client_edit_cell',
    'Tool: jupyter/client_edit_cell',
    'client_edit_cell (jupyter MCP Server)'
  ]) {
    assert.equal(ownToolName(title), 'client_edit_cell', title);
  }
  for (const title of ['mcp__other__client_edit_cell', 'Run mcp__jupyter__client_edit_cell', 'Edit cell c1']) {
    assert.equal(ownToolName(title), undefined, title);
  }
  assert.equal(callTitle('client_execute_cells', { cell_ids: ['c0', 'c1'] }), 'Run cells c0, c1');
});

test("an MCP card of a notebook tool knows its call: claude's (meta and arguments later), codex's rawInput", () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't', prompt: [] }),
    upd({
      sessionUpdate: 'tool_call',
      toolCallId: 'toolu_1',
      title: 'mcp__jupyter__client_edit_cell',
      rawInput: {},
      _meta: { claudeCode: { toolName: 'mcp__jupyter__client_edit_cell' } }
    }),
    upd({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_1', rawInput: { cell_id: 'c1', source: 'x = 1' } }),
    upd({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_1', status: 'completed' }),
    upd({
      sessionUpdate: 'tool_call',
      toolCallId: 'call_3',
      title: 'Tool: jupyter/client_read_cells',
      rawInput: { server: 'jupyter', tool: 'client_read_cells', arguments: { cell_ids: ['c1'] } }
    })
  ]);
  const [edit, read] = tools(m);
  assert.deepEqual(edit.own, { name: 'client_edit_cell', args: { cell_id: 'c1', source: 'x = 1' } });
  assert.equal(callTitle(edit.own!.name, edit.own!.args), 'Edit cell c1');
  assert.deepEqual(read.own, { name: 'client_read_cells', args: { cell_ids: ['c1'] } });
});

test("an agent's request the server words is asked on the agent's card, made for it when not shown yet", () => {
  const m = new ChatModel();
  const own = {
    toolCallId: 'client-1',
    title: 'Edit cell c1',
    kind: 'edit',
    rawInput: { cell_id: 'c1', source: 'x' },
    content: [{ type: 'content', content: { type: 'text', text: '-old\n+x' } }],
    _meta: { jupyter_acp: { tool: 'client_edit_cell', agent_call: 'gem-1' } }
  };
  m.applyAll([
    ev('turn_started', { turn_id: 't', prompt: [] }),
    ev('permission_request', {
      request_id: 'r1',
      turn_id: 't',
      tool_call: own,
      options: CODEX,
      source: 'agent',
      wording: 'client'
    }),
    upd({ sessionUpdate: 'tool_call_update', toolCallId: 'gem-1', status: 'completed', title: 'something else' })
  ]);
  const [card] = tools(m);
  assert.equal(tools(m).length, 1, 'one card: the question and the agent call it was about');
  assert.equal(card.toolCallId, 'gem-1');
  assert.equal(card.permissions[0].own?.title, 'Edit cell c1', "the question keeps the server's words");
  assert.equal(card.permissions[0].wording, 'client');
});

test("an agent's own request naming a card in _meta.jupyter_acp is not asked there (only the server's are)", () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't', prompt: [] }),
    upd({ sessionUpdate: 'tool_call', toolCallId: 'victim', title: 'Read notes', kind: 'read' }),
    ev('permission_request', {
      request_id: 'r1',
      turn_id: 't',
      tool_call: { toolCallId: 'evil', title: 'Delete everything', _meta: { jupyter_acp: { agent_call: 'victim' } } },
      options: CLAUDE,
      source: 'agent'
    })
  ]);
  const [victim, evil] = tools(m);
  assert.equal(victim.permissions.length, 0);
  assert.equal(evil.toolCallId, 'evil');
  assert.equal(evil.permissions[0].own, undefined);
});

test("claude's own Bash: its terminal from the call's _meta, kept with its card, never a client terminal", () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't', prompt: [] }),
    ev('terminal_output', { terminalId: 'term_client', name: '3', command: 'make', args: [], output: 'real\n' }),
    upd({
      sessionUpdate: 'tool_call',
      toolCallId: 'toolu_9',
      title: 'ls -la',
      kind: 'execute',
      status: 'pending',
      rawInput: { command: 'ls -la', description: 'List files' },
      content: [{ type: 'terminal', terminalId: 'toolu_9' }],
      _meta: { claudeCode: { toolName: 'Bash' }, terminal_info: { terminal_id: 'toolu_9' } }
    }),
    upd({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'toolu_9',
      _meta: { terminal_output: { terminal_id: 'toolu_9', data: 'a.txt\n' } }
    }),
    upd({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'toolu_9',
      _meta: { terminal_output: { terminal_id: 'toolu_9', data: 'b.txt\n' } }
    }),
    upd({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'toolu_9',
      status: 'completed',
      content: [{ type: 'terminal', terminalId: 'toolu_9' }],
      _meta: { terminal_exit: { terminal_id: 'toolu_9', exit_code: 0, signal: null } }
    }),
    // an agent writing into a client terminal's id changes only its own card
    upd({
      sessionUpdate: 'tool_call',
      toolCallId: 'toolu_10',
      _meta: { terminal_output: { terminal_id: 'term_client', data: 'spoofed' } }
    })
  ]);
  const [bash, spoof] = tools(m);
  assert.deepEqual(
    { command: bash.agentTerminal?.command, output: bash.agentTerminal?.output, exit: bash.agentTerminal?.exitStatus },
    { command: 'ls -la', output: 'a.txt\nb.txt\n', exit: { exitCode: 0, signal: null } }
  );
  assert.equal(bash.agentTerminal?.name, '', 'nothing to open in JupyterLab');
  assert.equal(m.terminals.get('term_client')?.output, 'real\n');
  assert.equal(spoof.agentTerminal?.output, 'spoofed');
});
