import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IAcpEvent, IToolItem, cssMayFetch, isRemoteUrl, toolLabel } from '../model';

/** A transcript of `turns` turns: each a prompt, a tool call (announced, then completed), an answer, an end. */
function transcript(turns: number): IAcpEvent[] {
  const out: IAcpEvent[] = [];
  let seq = 0;
  const ev = (type: string, fields: Record<string, unknown> = {}) => out.push({ seq: ++seq, type, ...fields });
  for (let t = 1; t <= turns; t++) {
    const turn_id = `t${t}`;
    ev('turn_started', { turn_id, prompt: [{ type: 'text', text: `question ${t}` }] });
    ev('session_update', {
      update: { sessionUpdate: 'tool_call', toolCallId: 'call', title: `read ${t}`, status: 'pending' }
    });
    ev('session_update', {
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: `answer ` } }
    });
    ev('session_update', { update: { sessionUpdate: 'tool_call_update', toolCallId: 'call', status: 'completed' } });
    ev('session_update', { update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: `${t}` } } });
    ev('turn_ended', { turn_id, stop_reason: 'end_turn' });
  }
  return out;
}

function shape(m: ChatModel): string[] {
  return m.items.map(i => {
    switch (i.kind) {
      case 'user':
      case 'message':
        return `${i.kind}:${i.text}`;
      case 'tool':
        return `tool:${(i as IToolItem).title}:${(i as IToolItem).status}`;
      default:
        return i.kind;
    }
  });
}

test('the latest page of a long history: older history is noted, pages merge back into the same items', () => {
  const all = transcript(5); // 30 events
  const whole = new ChatModel();
  whole.applyAll(all);
  assert.equal(whole.olderBefore, null);

  const m = new ChatModel();
  // the stream replays the last 8 events (seq 23..30): it starts mid-turn (turn 4's second chunk)
  m.applyAll(all.slice(22));
  assert.equal(m.olderBefore, 23);
  assert.equal(m.firstSeq, 23);
  // the tool_call_update of turn 4 arrived without its tool_call: a card of its own for now
  const epoch = m.epoch;
  const idsBefore = m.items.map(i => i.id);
  // scrolling up: the page before seq 23, then the one before that
  m.addOlder(all.slice(10, 22), 23);
  assert.equal(m.olderBefore, 11);
  assert.ok(m.epoch > epoch, 'a merge rebuilds the items (the view re-syncs)');
  m.addOlder(all.slice(0, 10), 11);
  assert.equal(m.olderBefore, null, 'seq 1 reached: nothing older');
  assert.deepEqual(shape(m), shape(whole));
  assert.equal(m.lastSeq, 30);
  assert.equal(m.firstSeq, 1);
  // the items of the latest page kept their ids (the view keeps their DOM, and the scroll position)
  const turn5 = idsBefore.filter(id => /^(user|message|end)-(2[5-9]|30)/.test(id));
  assert.ok(turn5.length >= 3);
  for (const id of turn5) {
    assert.ok(m.get(id), `item ${id} kept its id`);
  }
  // live events after the merge append as usual
  m.apply({ seq: 31, type: 'turn_started', turn_id: 't6', prompt: [{ type: 'text', text: 'question 6' }] });
  assert.equal(m.runningTurn, 't6');
  assert.equal(m.items[m.items.length - 1].kind, 'user');
});

test('an empty older page, or a repeated one, ends the paging; duplicates are ignored', () => {
  const all = transcript(2); // 12 events
  const m = new ChatModel();
  m.applyAll(all.slice(6));
  assert.equal(m.olderBefore, 7);
  assert.equal(m.addOlder(all.slice(0, 6), 7), 6);
  assert.equal(m.addOlder(all.slice(0, 6), 1), 0);
  assert.equal(m.olderBefore, null);
  const m2 = new ChatModel();
  m2.applyAll(all.slice(6));
  m2.addOlder([], 7);
  assert.equal(m2.olderBefore, null);
  assert.equal(m2.items.length, shape(m2).length);
});

test('pinned events (the running turn, a pending permission) come before the page; state stays current', () => {
  const m = new ChatModel();
  const pinnedStart: IAcpEvent = {
    seq: 3,
    type: 'turn_started',
    turn_id: 'long',
    prompt: [{ type: 'text', text: 'do it all' }],
    pinned: true
  };
  const pinnedPerm: IAcpEvent = {
    seq: 5,
    type: 'permission_request',
    turn_id: 'long',
    request_id: 'r1',
    tool_call: { toolCallId: 'c9', title: 'Edit cell' },
    options: [{ optionId: 'a', name: 'Allow', kind: 'allow_once' }],
    pinned: true
  };
  const page: IAcpEvent[] = [];
  for (let s = 40; s <= 45; s++) {
    page.push({
      seq: s,
      type: 'session_update',
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: `${s} ` } }
    });
  }
  m.applyAll([pinnedStart, pinnedPerm, ...page]);
  assert.equal(m.olderBefore, 40, 'the first event that is not pinned tells where the page starts');
  assert.equal(m.runningTurn, 'long');
  assert.equal(m.pendingPermissions().length, 1);
  // the older page holds the pinned ones again: merged once, still pending, still running
  const older: IAcpEvent[] = [
    { seq: 1, type: 'session_ready' },
    { seq: 2, type: 'notice', text: 'hello', level: 'info' },
    { ...pinnedStart, pinned: undefined },
    {
      seq: 4,
      type: 'session_update',
      update: { sessionUpdate: 'tool_call', toolCallId: 'c9', title: 'Edit cell', status: 'pending' }
    },
    { ...pinnedPerm, pinned: undefined }
  ];
  for (let s = 6; s < 40; s++) {
    older.push({
      seq: s,
      type: 'session_update',
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: '.' } }
    });
  }
  m.addOlder(older, 40);
  assert.equal(m.olderBefore, null);
  assert.equal(m.items.filter(i => i.kind === 'user').length, 1);
  assert.equal(m.items.filter(i => i.kind === 'tool').length, 1);
  assert.equal(m.pendingPermissions().length, 1);
  assert.equal(m.runningTurn, 'long');
});

test('a reconnect that replays only the latest page leaves a gap, filled by a merge', () => {
  const all = transcript(3); // 18 events
  const m = new ChatModel();
  m.applyAll(all.slice(0, 5));
  m.applyAll(all.slice(12));
  assert.deepEqual(m.gap, { after: 5, before: 13 });
  assert.equal(m.olderBefore, null);
  m.merge(all.slice(5, 12));
  assert.equal(m.gap, null);
  const whole = new ChatModel();
  whole.applyAll(all);
  assert.deepEqual(shape(m), shape(whole));
});

test('policy_changed sets the always-allowed tools; audit refusals show with their rule; unknown events are ignored', () => {
  const m = new ChatModel();
  let changes = 0;
  m.onChange = () => changes++;
  m.applyAll([
    { seq: 1, type: 'future_thing', payload: { x: 1 } },
    { seq: 2, type: 'policy_changed', always_allowed: ['client_edit_cell', 'client_execute_cells'] },
    { seq: 3, type: 'audit', action: 'tool', tool: 'client_edit_cell', decision: 'allowed', rule: 'always allowed' },
    {
      seq: 4,
      type: 'audit',
      power: 'fs',
      action: 'fs/write_text_file',
      decision: 'refused',
      rule: 'hidden',
      message: 'hidden files are refused (ContentsManager.allow_hidden); set it to True to allow'
    },
    { seq: 5, type: 'audit', power: 'tool', action: 'client_execute_code', decision: 'refused', rule: 'no_turn' },
    { seq: 6, type: 'session_update', update: null },
    { seq: 7, type: 'turn_started', prompt: 'not blocks' },
    { seq: 8, type: 'permission_resolved', request_id: 'never-asked' },
    { seq: 9, type: 'audit', decision: 'refused' }
  ]);
  assert.equal(changes, 1);
  assert.equal(m.lastSeq, 9);
  assert.deepEqual(m.alwaysAllowed, ['client_edit_cell', 'client_execute_cells']);
  const audits = m.items.filter(i => i.kind === 'audit');
  assert.equal(audits.length, 3, 'only refusals make a line');
  assert.match(
    (audits[0] as any).text,
    /^Refused: Write files — hidden files are refused .*allow_hidden.* \(rule: hidden\)$/
  );
  assert.equal((audits[1] as any).text, 'Refused: Run code (rule: no_turn)');
  assert.equal((audits[2] as any).text, 'Refused: an action');
  m.apply({ seq: 10, type: 'policy_changed', always_allowed: [] });
  assert.deepEqual(m.alwaysAllowed, []);
  assert.equal(toolLabel('client_edit_cell'), 'Edit cell');
  assert.equal(toolLabel('client_execute_cells'), 'Run cells');
  assert.equal(toolLabel('client_rename_notebook'), 'Rename notebook');
});

test('image and resource_link chunks render as markdown the sidebar can neutralise', () => {
  const m = new ChatModel();
  m.applyAll([
    { seq: 1, type: 'turn_started', turn_id: 't', prompt: [] },
    {
      seq: 2,
      type: 'session_update',
      update: {
        sessionUpdate: 'agent_message_chunk',
        content: { type: 'image', mimeType: 'image/png', uri: 'http://evil.example/x.png?d=1' }
      }
    },
    {
      seq: 3,
      type: 'session_update',
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'image', mimeType: 'image/png', data: 'AAAA' } }
    },
    {
      seq: 4,
      type: 'session_update',
      update: {
        sessionUpdate: 'agent_message_chunk',
        content: { type: 'resource_link', name: 'a [b]', uri: 'http://evil.example/r (1)' }
      }
    }
  ]);
  const text = (m.items[1] as any).text as string;
  assert.match(text, /!\[image\]\(<http:\/\/evil\.example\/x\.png\?d=1>\)/);
  assert.match(text, /!\[image\]\(<data:image\/png;base64,AAAA>\)/);
  assert.match(text, /\[a \\\[b\\\]\]\(<http:\/\/evil\.example\/r \(1\)>\)/);
});

test('isRemoteUrl: other origins, protocol-relative, javascript: are remote; data:, relative and same origin are not', () => {
  const base = 'http://127.0.0.1:8888/lab/tree/a.ipynb';
  for (const url of [
    'http://127.0.0.1:9999/x?d=SECRET',
    '//evil.example/x',
    '\\\\evil.example/x',
    'https://evil.example',
    ' http://evil.example/x ',
    'javascript:alert(1)',
    'http://127.0.0.1:8888@evil.example/',
    'ftp://127.0.0.1:8888/x',
    'http://[::1]:8888/x'
  ]) {
    assert.equal(isRemoteUrl(url, base), true, url);
  }
  for (const url of [
    'data:image/png;base64,AAAA',
    '/files/pixel.png',
    'pixel.png',
    '../x.png',
    'http://127.0.0.1:8888/files/a.png',
    '#top',
    ''
  ]) {
    assert.equal(isRemoteUrl(url, base), false, url);
  }
  assert.equal(cssMayFetch('color: red; background-color: blue'), false);
  for (const css of [
    'background: url(http://x)',
    'background-image:URL ( x )',
    'list-style-image: image-set("x" 1x)',
    'background: \\75 rl(x)',
    '@import "x"'
  ]) {
    assert.equal(cssMayFetch(css), true, css);
  }
});
