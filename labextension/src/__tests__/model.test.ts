import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IAcpEvent, IToolItem, lineDiff, optionOrder, pickersOf } from '../model';

let seq = 0;
function ev(type: string, fields: Record<string, unknown> = {}): IAcpEvent {
  return { seq: ++seq, type, ...fields };
}
function upd(update: Record<string, unknown>): IAcpEvent {
  return ev('session_update', { update });
}
function chunk(text: string, kind = 'agent_message_chunk'): IAcpEvent {
  return upd({ sessionUpdate: kind, content: { type: 'text', text } });
}

test('chunks of one kind merge into one item; a new kind starts a new item', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't1', prompt: [{ type: 'text', text: 'hello there' }] }),
    chunk('thinking ', 'agent_thought_chunk'),
    chunk('hard', 'agent_thought_chunk'),
    chunk('hello '),
    chunk('there'),
    ev('turn_ended', { turn_id: 't1', stop_reason: 'end_turn', tool_calls_served: 0 })
  ]);
  assert.deepEqual(
    m.items.map(i => i.kind),
    ['user', 'thought', 'message', 'turn_end']
  );
  assert.equal((m.items[0] as any).text, 'hello there');
  assert.equal((m.items[1] as any).text, 'thinking hard');
  assert.equal((m.items[2] as any).text, 'hello there');
  assert.equal(m.runningTurn, null);
  assert.deepEqual(m.promptHistory(), ['hello there']);
});

test('events at or below the last seq are ignored (overlapping replay after reconnect)', () => {
  const m = new ChatModel();
  const events = [ev('turn_started', { turn_id: 't', prompt: [{ type: 'text', text: 'x' }] }), chunk('a'), chunk('b')];
  assert.equal(m.applyAll(events), 3);
  assert.equal(m.applyAll(events), 0);
  assert.equal(m.applyAll([events[2], chunk('c')]), 1);
  assert.equal((m.items[1] as any).text, 'abc');
  assert.equal(m.lastSeq, seq);
});

test('tool calls upsert by id, updates for unannounced ids create the card', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't', prompt: [] }),
    upd({ sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'Read a.py', kind: 'read', status: 'pending' }),
    upd({ sessionUpdate: 'tool_call_update', toolCallId: 'c1', status: 'completed', rawOutput: { ok: 1 } }),
    upd({ sessionUpdate: 'tool_call_update', toolCallId: 'c2', status: 'in_progress' })
  ]);
  const tools = m.items.filter(i => i.kind === 'tool') as IToolItem[];
  assert.equal(tools.length, 2);
  assert.equal(tools[0].title, 'Read a.py');
  assert.equal(tools[0].toolKind, 'read');
  assert.equal(tools[0].status, 'completed');
  assert.deepEqual(tools[0].rawOutput, { ok: 1 });
  assert.ok(tools[0].version >= 2);
  assert.equal(tools[1].title, 'c2');
  // the turn ends: a call still running did not finish
  m.apply(ev('turn_ended', { turn_id: 't', stop_reason: 'cancelled' }));
  assert.equal(tools[1].status, 'cancelled');
});

test('an id reused by a later turn makes a new card; calls left open by a normal end are "ended"', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't1', prompt: [] }),
    upd({ sessionUpdate: 'tool_call', toolCallId: 'call_1', title: 'A', status: 'pending' }),
    ev('turn_ended', { turn_id: 't1', stop_reason: 'end_turn' }),
    ev('turn_started', { turn_id: 't2', prompt: [] }),
    upd({ sessionUpdate: 'tool_call', toolCallId: 'call_1', title: 'B', status: 'in_progress' })
  ]);
  const tools = m.items.filter(i => i.kind === 'tool') as IToolItem[];
  assert.deepEqual(
    tools.map(t => [t.title, t.status, t.turnId]),
    [
      ['A', 'ended', 't1'],
      ['B', 'in_progress', 't2']
    ]
  );
});

test('a permission request attaches to its tool card (created if never announced) and resolves', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't', prompt: [{ type: 'text', text: 'go' }] }),
    ev('permission_request', {
      request_id: 'r1',
      turn_id: 't',
      tool_call: { toolCallId: 'call_1', title: 'Write answer.txt', kind: 'edit', status: 'pending' },
      options: [
        { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
        { optionId: 'allow', name: 'Allow', kind: 'allow_once' }
      ]
    })
  ]);
  const tool = m.items.find(i => i.kind === 'tool') as IToolItem;
  assert.equal(tool.title, 'Write answer.txt');
  assert.equal(tool.permissions.length, 1);
  assert.equal(m.pendingPermissions().length, 1);
  m.apply(ev('permission_resolved', { request_id: 'r1', option_id: 'allow' }));
  assert.deepEqual(tool.permissions[0].resolved, { optionId: 'allow' });
  assert.equal(m.pendingPermissions().length, 0);
  // the later announcement of the same id updates the same card
  m.apply(upd({ sessionUpdate: 'tool_call', toolCallId: 'call_1', status: 'completed' }));
  assert.equal(m.items.filter(i => i.kind === 'tool').length, 1);
  assert.equal(tool.status, 'completed');
});

test('a permission without a tool call id still gets a card; turn end cancels it', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't', prompt: [] }),
    ev('permission_request', { request_id: 'r9', turn_id: 't', tool_call: { title: 'Run' }, options: [] }),
    ev('turn_ended', { turn_id: 't', stop_reason: 'cancelled' })
  ]);
  const tool = m.items.find(i => i.kind === 'tool') as IToolItem;
  assert.equal(tool.toolCallId, 'permission-r9');
  assert.deepEqual(tool.permissions[0].resolved, { cancelled: true });
});

test('plan updates in place within a turn', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't', prompt: [] }),
    upd({ sessionUpdate: 'plan', entries: [{ content: 'a', status: 'pending' }] }),
    chunk('working'),
    upd({
      sessionUpdate: 'plan',
      entries: [
        { content: 'a', status: 'completed' },
        { content: 'b', status: 'pending' }
      ]
    })
  ]);
  const plans = m.items.filter(i => i.kind === 'plan') as any[];
  assert.equal(plans.length, 1);
  assert.equal(plans[0].entries.length, 2);
  assert.equal(plans[0].entries[0].status, 'completed');
});

test('phases and problems: starting, ready, needs login, crashed', () => {
  const m = new ChatModel();
  m.apply(ev('notice', { text: 'starting agent', level: 'info', phase: 'agent_starting' }));
  assert.equal(m.phase, 'starting');
  m.apply(ev('session_ready', { modes: { currentModeId: 'ask', availableModes: [] }, config_options: null }));
  assert.equal(m.phase, 'ready');
  assert.equal(m.modes?.currentModeId, 'ask');
  m.apply(upd({ sessionUpdate: 'current_mode_update', currentModeId: 'code' }));
  assert.equal(m.modes?.currentModeId, 'code');
  m.apply(upd({ sessionUpdate: 'available_commands_update', availableCommands: [{ name: 'plan' }] }));
  assert.equal(m.commands[0].name, 'plan');
  m.apply(ev('turn_started', { turn_id: 't', prompt: [] }));
  m.apply(ev('turn_ended', { turn_id: 't', error: 'agent exited with code 3\nboom', error_kind: 'agent_failed' }));
  assert.equal(m.phase, 'error');
  assert.equal(m.problem?.kind, 'agent_failed');
  m.apply(ev('turn_started', { turn_id: 't2', prompt: [] }));
  assert.ok(m.problem === null);
  m.apply(ev('turn_ended', { turn_id: 't2', error: 'run `x login`', error_kind: 'needs_login' }));
  const after: any = m.problem;
  assert.equal(after?.kind, 'needs_login');
});

test('user_message_chunk (session/load replay) builds user items', () => {
  const m = new ChatModel();
  m.applyAll([chunk('hi ', 'user_message_chunk'), chunk('you', 'user_message_chunk'), chunk('answer')]);
  assert.deepEqual(
    m.items.map(i => [i.kind, (i as any).text]),
    [
      ['user', 'hi you'],
      ['message', 'answer']
    ]
  );
});

test('resource blocks in a prompt become attachments', () => {
  const m = new ChatModel();
  m.apply(
    ev('turn_started', {
      turn_id: 't',
      prompt: [
        { type: 'text', text: 'explain' },
        { type: 'resource', resource: { uri: 'nb.ipynb#cell=1', title: 'cell 2', text: 'x = 1' } }
      ]
    })
  );
  assert.deepEqual((m.items[0] as any).attachments, ['cell 2']);
});

test('optionOrder puts allow before reject; lineDiff keeps context', () => {
  const o = optionOrder([
    { optionId: 'r', name: 'Reject', kind: 'reject_once' },
    { optionId: 'a', name: 'Allow', kind: 'allow_once' }
  ]);
  assert.equal(o[0].optionId, 'a');
  const d = lineDiff('a\nb\nc', 'a\nB\nc');
  assert.deepEqual(
    d.map(x => x.op + x.line),
    [' a', '-b', '+B', ' c']
  );
  assert.deepEqual(
    lineDiff('', 'x').map(x => x.op + x.line),
    ['+x']
  );
});

const MODES = {
  currentModeId: 'ask',
  availableModes: [
    { id: 'ask', name: 'Ask', description: 'asks before editing' },
    { id: 'auto', name: 'Auto' }
  ]
};
const MODEL_OPTION = {
  id: 'model',
  name: 'Model',
  category: 'model',
  type: 'select',
  currentValue: 'openai/a',
  options: [
    { value: 'openai/a', name: 'openai/a' },
    { value: 'openai/b', name: 'openai/b' }
  ]
};

test('modes and config options: session_ready, then the agent and the API change them', () => {
  const m = new ChatModel();
  m.apply(ev('session_ready', { acp_session_id: 's', modes: MODES, config_options: [MODEL_OPTION] }));
  assert.deepEqual(
    m.pickers().map(p => [p.kind, p.id, p.value]),
    [
      ['mode', 'mode', 'ask'],
      ['select', 'model', 'openai/a']
    ]
  );
  // the agent switches by itself: only the id comes
  m.apply(upd({ sessionUpdate: 'current_mode_update', currentModeId: 'auto' }));
  assert.equal(m.modes?.currentModeId, 'auto');
  assert.equal(m.modes?.availableModes?.length, 2);
  // the agent's full set of options replaces the old one
  m.apply(
    upd({ sessionUpdate: 'config_option_update', configOptions: [{ ...MODEL_OPTION, currentValue: 'openai/b' }] })
  );
  assert.equal(m.pickers()[1].value, 'openai/b');
  // a switch through the API (maybe another browser's): the whole state
  m.apply(ev('session_config', { modes: { ...MODES, currentModeId: 'ask' }, config_options: [MODEL_OPTION] }));
  assert.deepEqual(
    m.pickers().map(p => p.value),
    ['ask', 'openai/a']
  );
  // malformed updates change nothing
  m.apply(upd({ sessionUpdate: 'current_mode_update' }));
  m.apply(upd({ sessionUpdate: 'config_option_update', configOptions: 'nope' }));
  assert.deepEqual(
    m.pickers().map(p => p.value),
    ['ask', 'openai/a']
  );
  // a session_config without options clears them
  m.apply(ev('session_config', { modes: MODES, config_options: null }));
  assert.deepEqual(
    m.pickers().map(p => p.id),
    ['mode']
  );
});

test('replayed config events end in the last state, whatever their kind', () => {
  const m = new ChatModel();
  const events = [
    ev('session_ready', { modes: MODES, config_options: [MODEL_OPTION] }),
    upd({ sessionUpdate: 'current_mode_update', currentModeId: 'auto' }),
    ev('session_config', { modes: { ...MODES, currentModeId: 'auto' }, config_options: [MODEL_OPTION] }),
    ev('session_config', {
      modes: { ...MODES, currentModeId: 'auto' },
      config_options: [{ ...MODEL_OPTION, currentValue: 'openai/b' }]
    })
  ];
  m.applyAll(events);
  const again = new ChatModel();
  again.applyAll(events);
  again.applyAll(events); // overlapping replay
  for (const model of [m, again]) {
    assert.deepEqual(
      model.pickers().map(p => p.value),
      ['auto', 'openai/b']
    );
  }
});

test('pickersOf: booleans, grouped options, v2 ids, unknown types, a mode option supersedes modes', () => {
  const pickers = pickersOf(MODES, [
    { configId: 'thinking', name: 'Thinking', category: 'thought_level', type: 'boolean', currentValue: true },
    {
      id: 'model',
      name: 'Model',
      type: 'select',
      currentValue: 'm2',
      options: [
        { group: 'fast', name: 'Fast', options: [{ value: 'm1', name: 'Model 1' }] },
        { group: 'smart', name: 'Smart', options: [{ value: 'm2', name: 'Model 2', description: 'slow' }] }
      ]
    },
    { id: 'slider', name: 'Temperature', type: 'number', currentValue: 0.2 },
    { id: 'empty', name: 'Nothing', type: 'select', options: [] }
  ]);
  assert.deepEqual(
    pickers.map(p => [p.kind, p.id]),
    [
      ['mode', 'mode'],
      ['boolean', 'thinking'],
      ['select', 'model']
    ]
  );
  assert.equal(pickers[1].value, true);
  assert.deepEqual(pickers[2].choices, [
    { value: 'm1', name: 'Model 1', description: undefined, group: 'Fast' },
    { value: 'm2', name: 'Model 2', description: 'slow', group: 'Smart' }
  ]);
  // a current value the agent did not list stays visible
  const stale = pickersOf(null, [{ ...MODEL_OPTION, currentValue: 'openai/old' }]);
  assert.deepEqual(
    stale[0].choices.map(c => c.value),
    ['openai/old', 'openai/a', 'openai/b']
  );
  // ACP: config options supersede modes; a "mode" option replaces the mode picker
  const modeOption = {
    id: 'mode',
    name: 'Session Mode',
    category: 'mode',
    type: 'select',
    currentValue: 'ask',
    options: [{ value: 'ask', name: 'Ask' }]
  };
  assert.deepEqual(
    pickersOf(MODES, [modeOption]).map(p => [p.kind, p.id]),
    [['select', 'mode']]
  );
  assert.deepEqual(pickersOf(null, null), []);
  assert.deepEqual(pickersOf({ currentModeId: 'x', availableModes: [] }, []), []);
});

test('a turn over MCP that used no notebook tool says so; one over the convention stays quiet', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 'm1', prompt: [{ type: 'text', text: 'hi' }] }),
    ev('turn_ended', { turn_id: 'm1', stop_reason: 'end_turn', tool_calls_served: 0, tool_channels: ['mcp-http'] }),
    ev('turn_started', { turn_id: 'c1', prompt: [{ type: 'text', text: 'hi' }] }),
    ev('turn_ended', { turn_id: 'c1', stop_reason: 'end_turn', tool_calls_served: 0, tool_channels: ['client-tools'] })
  ]);
  const ends = m.items.filter(i => i.kind === 'turn_end') as any[];
  assert.equal(ends[0].overMcp, true);
  assert.equal(ends[1].overMcp, false);
});

test("the gate asks on the agent's own card, in its own words the agent cannot change", () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't1', prompt: [{ type: 'text', text: 'go' }] }),
    upd({ sessionUpdate: 'tool_call', toolCallId: 'call-1', title: 'Read cell 1', status: 'pending' }),
    ev('permission_request', {
      request_id: 'r1',
      turn_id: 't1',
      source: 'client',
      options: [{ optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' }],
      tool_call: {
        toolCallId: 'client-0123',
        title: 'Delete cell 3',
        kind: 'delete',
        rawInput: { cell_id: 'c3' },
        content: [{ type: 'content', content: { type: 'text', text: 'x = 1' } }],
        _meta: { jupyter_acp: { tool: 'client_delete_cell', agent_call: 'call-1' } }
      }
    }),
    // the agent renames its card while the question is pending
    upd({ sessionUpdate: 'tool_call_update', toolCallId: 'call-1', title: 'Harmless', content: [] })
  ]);
  const tools = m.items.filter(i => i.kind === 'tool') as IToolItem[];
  assert.equal(tools.length, 1, 'one card for one call');
  assert.equal(tools[0].toolCallId, 'call-1');
  assert.equal(tools[0].title, 'Harmless');
  const perm = tools[0].permissions[0];
  assert.equal(perm.own?.title, 'Delete cell 3');
  assert.deepEqual(perm.own?.rawInput, { cell_id: 'c3' });
});

test("an agent_call naming no card of this turn gets that card made, the question in the server's words; an agent's own request is asked on a card of its own", () => {
  const m = new ChatModel();
  const request = (id: string, source: string, shown: string) =>
    ev('permission_request', {
      request_id: id,
      turn_id: 't1',
      source,
      options: [],
      tool_call: { toolCallId: `own-${id}`, title: `T ${id}`, _meta: { jupyter_acp: { agent_call: shown } } }
    });
  m.applyAll([
    ev('turn_started', { turn_id: 't1', prompt: [{ type: 'text', text: 'go' }] }),
    upd({ sessionUpdate: 'tool_call', toolCallId: 'call-1', title: 'Read cell 1' }),
    request('r1', 'client', 'nope'),
    request('r2', 'agent', 'call-1')
  ]);
  const tools = m.items.filter(i => i.kind === 'tool') as IToolItem[];
  assert.deepEqual(
    tools.map(t => t.toolCallId),
    ['call-1', 'nope', 'own-r2']
  );
  assert.equal(tools[0].permissions.length, 0);
  // the agent's later updates of that id land on the card, and cannot change the question
  m.apply(upd({ sessionUpdate: 'tool_call_update', toolCallId: 'nope', title: 'Harmless', status: 'completed' }));
  assert.equal(tools[1].title, 'Harmless');
  assert.equal(tools[1].permissions[0].own?.title, 'T r1');
});

test('an answer is open while it streams and ends (a new version) when its turn ends or another item follows it', () => {
  const m = new ChatModel();
  m.applyAll([ev('turn_started', { turn_id: 'ts', prompt: [{ type: 'text', text: 'go' }] }), chunk('a '), chunk('b')]);
  const first = m.items[1] as any;
  assert.equal(first.open, true);
  const v = first.version;
  m.apply(upd({ sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'Read', status: 'pending' }));
  assert.equal(first.open, false);
  assert.ok(first.version > v, 'the ended answer has a new version (the sidebar renders it whole)');
  m.apply(chunk('after the tool'));
  const second = m.items[m.items.length - 1] as any;
  assert.equal(second.kind, 'message');
  assert.equal(second.open, true);
  m.apply(ev('turn_ended', { turn_id: 'ts', stop_reason: 'end_turn', tool_calls_served: 0 }));
  assert.equal(second.open, false);
  // history replayed whole: no answer is left open
  const replay = new ChatModel();
  replay.applyAll([
    ev('turn_started', { turn_id: 'tr', prompt: [{ type: 'text', text: 'go' }] }),
    chunk('done'),
    ev('turn_ended', { turn_id: 'tr', stop_reason: 'end_turn', tool_calls_served: 0 })
  ]);
  assert.equal((replay.items[1] as any).open, false);
});

test('a mode switch or an option change is a line in the conversation, named from the state it made', () => {
  const modes = {
    currentModeId: 'plan',
    availableModes: [
      { id: 'code', name: 'Code' },
      { id: 'plan', name: 'Plan' }
    ]
  };
  const options = [
    {
      id: 'model',
      name: 'Model',
      type: 'select',
      currentValue: 'openai/b',
      options: [
        { value: 'openai/a', name: 'GPT A' },
        { value: 'openai/b', name: 'GPT B' }
      ]
    },
    { id: 'think', name: 'Thinking', type: 'boolean', currentValue: true }
  ];
  const bob = { kind: 'user', username: 'bob', display_name: 'Bob Dylan', color: null };
  const events = [
    ev('session_config', {
      modes,
      config_options: options,
      switched: { kind: 'mode', id: 'mode', value: 'plan' },
      actor: bob,
      ts: 100
    }),
    ev('session_config', {
      modes,
      config_options: options,
      switched: { kind: 'option', id: 'model', value: 'openai/b' }
    }),
    ev('session_config', { modes, config_options: options, switched: { kind: 'option', id: 'think', value: true } }),
    ev('session_config', { modes, config_options: options }) // an older server's: no line
  ];
  // a reader whose page starts here (no session_ready before it) sees the same lines
  const m = new ChatModel();
  m.applyAll(events);
  const notices = m.items.filter(i => i.kind === 'notice') as any[];
  assert.deepEqual(
    notices.map(n => n.text),
    ['Mode set to Plan', 'Model set to GPT B', 'Thinking turned on']
  );
  assert.equal(notices[0].phase, 'session_config');
  assert.equal(notices[0].actor.username, 'bob');
  assert.equal(notices[0].at, 100);
  assert.equal(notices[1].actor, undefined);
  assert.equal(m.pickers().find(p => p.kind === 'mode')?.value, 'plan', 'the pickers follow the switch too');
});
