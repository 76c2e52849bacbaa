import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IAcpEvent } from '../model';
import { activityOf, badgeOf, byNotebook, costText, shortCount, total, usageView } from '../summary';

let seq = 0;
function ev(type: string, fields: Record<string, unknown> = {}): IAcpEvent {
  return { seq: ++seq, type, ...fields };
}
function usage(update: Record<string, unknown>): IAcpEvent {
  return ev('session_update', { update: { sessionUpdate: 'usage_update', ...update } });
}

test('usage_update is kept per session: the last report wins, a bad one is ignored', () => {
  const m = new ChatModel();
  assert.equal(m.usage, null);
  m.applyAll([usage({ used: 1000, size: 200000 })]);
  assert.deepEqual(m.usage, { used: 1000, size: 200000 });
  m.applyAll([usage({ used: 53000, size: 200000, cost: { amount: 0.045, currency: 'USD' } })]);
  assert.deepEqual(m.usage, { used: 53000, size: 200000, cost: { amount: 0.045, currency: 'USD' } });
  m.applyAll([usage({ used: 'lots', size: 0 })]);
  assert.equal((m.usage as { used: number } | null)?.used, 53000);
  const other = new ChatModel();
  assert.equal(other.usage, null, 'another session has its own usage');
});

test('a new conversation clears the meter; merging older history keeps the newest usage', () => {
  const m = new ChatModel();
  m.applyAll([ev('notice', { text: 'x' }), usage({ used: 10, size: 100 })]);
  m.merge([{ seq: 0.5, type: 'notice', text: 'older' } as IAcpEvent]);
  assert.equal(m.usage?.used, 10);
  m.applyAll([ev('notice', { phase: 'session_reset', text: 'new conversation' })]);
  assert.equal(m.usage, null);
});

test('the meter reads short counts, a percent and a tooltip with the numbers', () => {
  assert.equal(shortCount(950), '950');
  assert.equal(shortCount(1500), '1.5k');
  assert.equal(shortCount(53000), '53k');
  assert.equal(shortCount(1_200_000), '1.2M');
  const v = usageView({ used: 53000, size: 200000, cost: { amount: 0.045, currency: 'USD' } });
  assert.equal(v.label, '53k / 200k');
  assert.equal(v.percent, 27);
  assert.match(v.tooltip, /53,000 of 200,000 tokens used \(27%\)/);
  assert.match(v.tooltip, /0\.045 USD/);
  assert.equal(usageView({ used: 500, size: 100 }).fraction, 1);
  assert.equal(costText({ amount: 0.045, currency: 'USD' }), '$0.045');
  assert.equal(costText({ amount: 1.2, currency: 'eur' }), '€1.20');
  assert.equal(costText({ amount: 12.5, currency: 'JPY' }), '12.50 JPY');
});

test('badges: pending requests count per notebook, running turns show a dot', () => {
  const sessions = [
    { id: 'a', notebook: 'x.ipynb', agent: 'echo', turn_id: 't', state: 'busy', pending_permissions: ['r1', 'r2'] },
    { id: 'b', notebook: 'x.ipynb', agent: 'other', turn_id: null, state: 'ready', pending_permissions: [] },
    { id: 'c', notebook: 'y.ipynb', agent: 'echo', turn_id: 't2', state: 'busy' },
    { id: 'd', notebook: 'z.ipynb', agent: 'echo', turn_id: null, state: 'ready' }
  ].map(activityOf);
  const map = byNotebook(sessions);
  assert.deepEqual(badgeOf(map.get('x.ipynb')), { text: '2', words: '2 permission requests waiting for you' });
  assert.deepEqual(badgeOf(map.get('y.ipynb')), { text: '', words: 'the agent is working' });
  assert.equal(badgeOf(map.get('z.ipynb')), null);
  assert.equal(badgeOf(undefined), null);
  assert.deepEqual(total(map), { pending: 2, running: true });
  assert.equal(badgeOf({ pending: 12, running: true })?.text, '9+');
});
