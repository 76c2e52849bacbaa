import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IAcpEvent, INoticeItem, ITurnEndItem } from '../model';
import { planProgress } from '../renderers/plans';

let seq = 0;
function ev(type: string, fields: Record<string, unknown> = {}): IAcpEvent {
  return { seq: ++seq, type, ...fields };
}

test('plan progress: the step in progress, else the first not done; all done says so', () => {
  const e = (status: string, content: string) => ({ content, status });
  assert.deepEqual(planProgress([e('completed', 'a'), e('in_progress', 'b'), e('pending', 'c')]), {
    index: 2,
    total: 3,
    current: 'b',
    done: false
  });
  assert.equal(planProgress([e('completed', 'a'), e('pending', 'b'), e('pending', 'c')]).current, 'b');
  assert.deepEqual(planProgress([e('completed', 'a'), e('completed', 'b')]), {
    index: 2,
    total: 2,
    current: 'b',
    done: true
  });
  assert.equal(planProgress([]).total, 0);
});

test("a turn's end carries when it started and ended; a revert notice its own fields", () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't1', ts: 100, prompt: [{ type: 'text', text: 'go' }] }),
    ev('turn_ended', { turn_id: 't1', ts: 112.5, stop_reason: 'end_turn' }),
    ev('notice', { phase: 'reverted', level: 'info', text: 'x', turn_id: 't1', edits: 2, cell_id: 'c1' }),
    ev('notice', { phase: 'reverted', level: 'info', text: 'y', turn_id: null, edits: 1 })
  ]);
  const end = m.items.find(i => i.kind === 'turn_end') as ITurnEndItem;
  assert.equal(end.startedAt, 100);
  assert.equal(end.endedAt, 112.5);
  const notices = m.items.filter(i => i.kind === 'notice') as INoticeItem[];
  assert.deepEqual(notices[0].revert, { turnId: 't1', edits: 2, cellId: 'c1' });
  assert.deepEqual(notices[1].revert, { turnId: null, edits: 1, cellId: undefined });
});
