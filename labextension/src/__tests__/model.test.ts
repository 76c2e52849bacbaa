import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IAcpEvent, IToolItem, lineDiff, optionOrder } from '../model';

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
  const events = [
    ev('turn_started', { turn_id: 't', prompt: [{ type: 'text', text: 'x' }] }),
    chunk('a'),
    chunk('b')
  ];
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
    upd({ sessionUpdate: 'plan', entries: [{ content: 'a', status: 'completed' }, { content: 'b', status: 'pending' }] })
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
