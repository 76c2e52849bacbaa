import { test } from 'node:test';
import assert from 'node:assert/strict';

import { requestTitle } from '../asking';
import { IAcpEvent } from '../model';

let seq = 0;
function ev(type: string, fields: Record<string, unknown> = {}): IAcpEvent {
  return { seq: ++seq, type, ...fields };
}

const options = [
  { optionId: 'allow', name: 'Allow', kind: 'allow_once' },
  { optionId: 'reject', name: 'Reject', kind: 'reject_once' }
];

test('a request naming only an announced tool call is titled as its card is, not "a tool"', () => {
  const events = [
    ev('turn_started', { turn_id: 't1', prompt: [{ type: 'text', text: 'add a cell' }] }),
    ev('session_update', {
      turn_id: 't1',
      update: { sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'Insert a cell', kind: 'edit', status: 'pending' }
    }),
    ev('permission_request', { turn_id: 't1', request_id: 'r1', tool_call: { toolCallId: 'c1' }, options })
  ];
  const request = events[2];
  // what the toast said before: the request's own title, empty here
  assert.equal(String(request.tool_call?.title ?? '') || 'a tool', 'a tool');
  assert.equal(requestTitle(events, 'r1'), 'Insert a cell');
});

test("the request's own title counts when it has one; an unknown request keeps the fallback", () => {
  const events = [
    ev('turn_started', { turn_id: 't2', prompt: [] }),
    ev('permission_request', {
      turn_id: 't2',
      request_id: 'r2',
      tool_call: { toolCallId: 'c2', title: 'Write answer.txt', kind: 'edit' },
      options
    })
  ];
  assert.equal(requestTitle(events, 'r2'), 'Write answer.txt');
  assert.equal(requestTitle(events, 'nope', 'the tool'), 'the tool');
});
