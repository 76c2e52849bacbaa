import { test } from 'node:test';
import assert from 'node:assert/strict';

import { TurnClock } from '../clock';

test('the turn clock stops while the agent waits for the user and goes on from there after the answer', () => {
  const clock = new TurnClock();
  assert.equal(clock.read('t1', 100, 110, false), 10);
  // a permission card waits 60 s: the clock shows the 12 s worked, all along
  assert.equal(clock.read('t1', 100, 112, true), 12);
  assert.equal(clock.read('t1', 100, 172, true), 12);
  // answered at 175: it counts again from 12
  assert.equal(clock.read('t1', 100, 175, false), 12);
  assert.equal(clock.read('t1', 100, 180, false), 17);
});

test('a new turn starts its clock afresh', () => {
  const clock = new TurnClock();
  clock.read('t1', 0, 5, true);
  clock.read('t1', 0, 50, false);
  assert.equal(clock.read('t2', 60, 63, false), 3);
});
