import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IAcpEvent, IElicitationItem } from '../model';
import { choicesOf, httpHost } from '../renderers/elicitation';

let seq = 0;
function ev(type: string, fields: Record<string, unknown> = {}): IAcpEvent {
  return { seq: ++seq, type, ...fields };
}

const SCHEMA = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };

function elicitations(m: ChatModel): IElicitationItem[] {
  return m.items.filter((i): i is IElicitationItem => i.kind === 'elicitation');
}

test('an elicitation is one item: asked, then answered with its content (also when replayed twice)', () => {
  const m = new ChatModel();
  const events = [
    ev('turn_started', { turn_id: 't1', prompt: [{ type: 'text', text: 'go' }] }),
    ev('elicitation_request', {
      elicitation_id: 'a'.repeat(32),
      turn_id: 't1',
      mode: 'form',
      message: 'How many?',
      requested_schema: SCHEMA
    })
  ];
  m.applyAll(events);
  const [item] = elicitations(m);
  assert.equal(item.message, 'How many?');
  assert.deepEqual(item.schema, SCHEMA);
  assert.equal(item.resolved, undefined);
  const before = item.version;
  m.apply(
    ev('elicitation_resolved', { elicitation_id: 'a'.repeat(32), action: 'accept', content: { n: 3 }, by: 'me' })
  );
  assert.ok(item.version > before, 'the card re-renders');
  assert.deepEqual(item.resolved, { action: 'accept', content: { n: 3 }, reason: undefined, by: 'me' });
  m.applyAll(events); // an overlapping replay adds nothing
  assert.equal(elicitations(m).length, 1);
});

test('URL mode: complete after accept keeps the accept and marks it completed; turn end cancels the unanswered', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't2', prompt: [{ type: 'text', text: 'go' }] }),
    ev('elicitation_request', {
      elicitation_id: 'u1',
      turn_id: 't2',
      mode: 'url',
      message: 'Sign in',
      url: 'https://auth.example.com/x',
      url_host: 'auth.example.com'
    }),
    ev('elicitation_request', {
      elicitation_id: 'f1',
      turn_id: 't2',
      mode: 'form',
      message: 'm',
      requested_schema: SCHEMA
    }),
    ev('elicitation_resolved', { elicitation_id: 'u1', action: 'accept' }),
    ev('elicitation_resolved', { elicitation_id: 'u1', action: 'accept', completed: true }),
    ev('turn_ended', { turn_id: 't2', stop_reason: 'end_turn' })
  ]);
  const [url, form] = elicitations(m);
  assert.equal(url.urlHost, 'auth.example.com');
  assert.equal(url.resolved?.action, 'accept');
  assert.equal(url.completed, true);
  assert.equal(form.resolved?.action, 'cancel');
  assert.equal(form.resolved?.reason, 'the turn ended');
});

test('choices from enum (with enumNames) and from oneOf titles; only http(s) URLs have a host', () => {
  assert.deepEqual(choicesOf({ type: 'string', enum: ['a', 'b'], enumNames: ['Alpha'] }), [
    { value: 'a', title: 'Alpha' },
    { value: 'b', title: 'b' }
  ]);
  assert.deepEqual(choicesOf({ oneOf: [{ const: 'x', title: 'Ex' }] }), [{ value: 'x', title: 'Ex' }]);
  assert.equal(choicesOf({ type: 'string' }), null);
  assert.equal(httpHost('https://a.example/p'), 'a.example');
  assert.equal(httpHost('javascript:alert(1)'), null);
  assert.equal(httpHost('data:text/html,x'), null);
  assert.equal(httpHost('not a url'), null);
});
