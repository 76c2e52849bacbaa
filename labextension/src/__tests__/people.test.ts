import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IToolItem, IUserItem } from '../model';
import { actorName, actorOf, answeredBy, byline, clockTime, isSomeoneElse, safeColor } from '../people';
import type { IActor } from '../wire';

const BOB: IActor = {
  kind: 'user',
  username: 'bob',
  display_name: 'Bob Dylan',
  color: 'var(--jp-collaborator-color3)'
};
/** 14:02 local time today, as the server's event `ts` (seconds) */
const AT_1402 = new Date(2026, 11, 2, 14, 2, 30).getTime() / 1000;

test('a card answered by someone else names them and the time; the viewer reads "You"', () => {
  assert.equal(answeredBy('allowed', BOB, 'alice', AT_1402), 'Bob Dylan allowed · 14:02');
  assert.equal(answeredBy('allowed', BOB, 'bob', AT_1402), 'You allowed · 14:02');
  assert.equal(answeredBy('rejected', BOB, 'alice', AT_1402), 'Bob Dylan rejected · 14:02');
  assert.equal(answeredBy('declined', BOB, 'bob'), 'You declined');
});

test('what no person did says what did it', () => {
  assert.equal(actorName({ kind: 'magic' }, 'alice'), 'The %acp magic');
  assert.equal(answeredBy('cancelled', { kind: 'server' }, 'alice', AT_1402), 'The server cancelled · 14:02');
  assert.equal(actorName({ kind: 'agent' }, 'alice'), 'The agent');
  // a person without a display name is named by their username; the viewer unknown yet: never "You"
  assert.equal(actorName({ kind: 'user', username: 'carol' }, null), 'carol');
});

test('a byline and the clock: 24-hour local time, padded', () => {
  assert.equal(byline(BOB, 'alice', AT_1402), 'Bob Dylan · 14:02');
  assert.equal(clockTime(new Date(2026, 0, 1, 9, 5).getTime() / 1000), '09:05');
  assert.equal(byline(BOB, 'alice'), 'Bob Dylan');
});

test("only a person other than the viewer marks a prompt as someone else's", () => {
  assert.equal(isSomeoneElse(BOB, 'alice'), true);
  assert.equal(isSomeoneElse(BOB, 'bob'), false);
  assert.equal(isSomeoneElse({ kind: 'magic' }, 'alice'), false);
  assert.equal(isSomeoneElse(undefined, 'alice'), false);
});

test('an actor as it arrives: malformed ones are none, a missing colour is null', () => {
  assert.equal(actorOf(undefined), undefined);
  assert.equal(actorOf({ username: 'x' }), undefined);
  assert.deepEqual(actorOf({ kind: 'user', username: 'carol', display_name: '', color: null }), {
    kind: 'user',
    username: 'carol',
    display_name: undefined,
    color: null
  });
});

test('a colour goes into a style only when it is a colour', () => {
  assert.equal(safeColor('var(--jp-collaborator-color3)'), 'var(--jp-collaborator-color3)');
  assert.equal(safeColor('#a0b1c2'), '#a0b1c2');
  assert.equal(safeColor('rgb(1, 2, 3)'), 'rgb(1, 2, 3)');
  assert.equal(safeColor('red; background: url(http://x)'), null);
  assert.equal(safeColor(null), null);
});

test("the model keeps who prompted and who answered each card, with the events' times", () => {
  const m = new ChatModel();
  m.applyAll([
    { seq: 1, ts: AT_1402, type: 'turn_started', turn_id: 't1', prompt: [{ type: 'text', text: 'hi' }], actor: BOB },
    {
      seq: 2,
      ts: AT_1402,
      type: 'permission_request',
      request_id: 'r1',
      turn_id: 't1',
      source: 'agent',
      tool_call: { toolCallId: 'c1', title: 'write' },
      options: [{ optionId: 'allow', name: 'Allow', kind: 'allow_once' }]
    },
    { seq: 3, ts: AT_1402 + 60, type: 'permission_resolved', request_id: 'r1', option_id: 'allow', actor: BOB }
  ]);
  const user = m.items.find(i => i.kind === 'user') as IUserItem;
  assert.deepEqual(user.actor, BOB);
  assert.equal(user.at, AT_1402);
  const tool = m.items.find(i => i.kind === 'tool') as IToolItem;
  assert.deepEqual(tool.permissions[0].resolved, { optionId: 'allow', actor: BOB, at: AT_1402 + 60 });
});
