import { test } from 'node:test';
import assert from 'node:assert/strict';

import { DRAWN, drawnState, firstDrawn, revealAbove, revealFrom, STEP } from '../drawn';

/** `turns` turns of three items each: a prompt, an answer, a turn end. */
function conversation(turns: number, from = 0): { id: string; kind: string }[] {
  const out: { id: string; kind: string }[] = [];
  for (let t = from; t < from + turns; t++) {
    out.push({ id: `u${t}`, kind: 'user' }, { id: `m${t}`, kind: 'message' }, { id: `e${t}`, kind: 'turn_end' });
  }
  return out;
}

test('an empty or short conversation is drawn whole', () => {
  assert.equal(firstDrawn([], drawnState(), true), 0);
  assert.equal(firstDrawn(conversation(3), drawnState(), true), 0);
});

test('a long conversation draws about its latest DRAWN items, from a prompt', () => {
  const items = conversation(300);
  const start = firstDrawn(items, drawnState(), true);
  assert.equal(items[start].kind, 'user');
  assert.ok(items.length - start >= DRAWN && items.length - start < DRAWN + 3, String(items.length - start));
});

test('scrolling up draws STEP more above; the window stays put as new items come, until the user follows the end', () => {
  const items = conversation(300);
  const state = drawnState();
  const first = firstDrawn(items, state, true);
  assert.ok(revealAbove(items, state));
  const second = firstDrawn(items, state, false);
  assert.ok(first - second >= STEP && items[second].kind === 'user', `${first} -> ${second}`);
  items.push(...conversation(40, 300));
  assert.equal(firstDrawn(items, state, false), second, 'reading above: nothing is dropped');
  const following = firstDrawn(items, state, true);
  assert.ok(items.length - following < DRAWN + 3, 'following the end: the window is cut back');
});

test('older items that arrive while everything was drawn are drawn too (a page from the server)', () => {
  const items = conversation(5);
  const state = drawnState();
  assert.equal(firstDrawn(items, state, true), 0);
  assert.equal(revealAbove(items, state), false, 'nothing more above: the server is asked');
  const older = conversation(50, -50);
  const all = [...older, ...items];
  const start = firstDrawn(all, state, false);
  assert.ok(start < older.length && older.length - start >= STEP, String(start));
});

test('a turn scrolled to from elsewhere is drawn from its prompt', () => {
  const items = conversation(300);
  const state = drawnState();
  firstDrawn(items, state, true);
  assert.ok(revealFrom(items, state, 'u10'));
  assert.equal(items[firstDrawn(items, state, false)].id, 'u10');
  assert.equal(revealFrom(items, state, 'nope'), false);
});
