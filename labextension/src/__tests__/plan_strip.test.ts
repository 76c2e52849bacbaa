import { test } from 'node:test';
import assert from 'node:assert/strict';

import { planStripText } from '../renderers/plans';

const e = (status: string, content: string) => ({ content, status });
const plan = [e('completed', 'Load the data'), e('in_progress', 'Plot the totals'), e('pending', 'Write it up')];

test('while the turn runs the strip names the step worked on', () => {
  const t = planStripText(plan, true);
  assert.equal(t.count, '2 of 3');
  assert.equal(t.current, ' · Plot the totals');
  assert.equal(t.stopped, false);
});

test('once the turn ended half-way the strip says how far the plan got, not a step still worked on', () => {
  const t = planStripText(plan, false);
  assert.equal(t.count, '1 of 3 done');
  assert.equal(t.current, ' · stopped');
  assert.ok(t.stopped);
  assert.match(t.words, /done · stopped when the turn ended/);
  assert.doesNotMatch(t.count + t.current, /Plot the totals/);
});

test('a plan all done says so, running or not', () => {
  const done = plan.map(p => ({ ...p, status: 'completed' }));
  assert.equal(planStripText(done, false).count, '3 of 3 done');
  assert.equal(planStripText(done, true).current, '');
});
