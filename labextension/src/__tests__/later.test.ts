import { test } from 'node:test';
import assert from 'node:assert/strict';

import { later, pending } from '../renderers/later';

const tick = () => new Promise(resolve => setTimeout(resolve, 5));

test('queued renders: the latest runs once the drawing returns, the others later, nearest the end first', async () => {
  const ran: string[] = [];
  const job =
    (name: string, cost = 0) =>
    async () => {
      const until = performance.now() + cost;
      while (performance.now() < until) {
        // a render's cost
      }
      ran.push(name);
    };
  // an open draws the oldest of the latest items first: each is queued in the log's order
  for (const name of ['a', 'b', 'c', 'd']) {
    later(job(name, 3));
  }
  assert.deepEqual(ran, [], 'nothing renders while the drawing runs');
  await Promise.resolve();
  assert.deepEqual(ran, ['d'], 'the latest rendered in the same task (the answer read at an open)');
  assert.equal(pending(), 3);
  for (let i = 0; i < 50 && pending(); i++) {
    await tick();
  }
  assert.deepEqual(ran, ['d', 'c', 'b', 'a'], 'the rest nearest the end first, later');
});

test('a render that throws does not stop the ones after it', async () => {
  const ran: string[] = [];
  later(async () => {
    ran.push('first');
  });
  later(async () => {
    throw new Error('boom');
  });
  later(async () => {
    ran.push('last');
  });
  for (let i = 0; i < 50 && pending(); i++) {
    await tick();
  }
  await tick();
  assert.deepEqual(ran, ['last', 'first']);
});
