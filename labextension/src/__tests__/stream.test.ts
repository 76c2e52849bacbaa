import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel } from '../model';
import { EventStream, StreamState } from '../stream';

class FakeSocket {
  onopen: (() => void) | null = null;
  onmessage: ((m: { data: string }) => void) | null = null;
  onclose: (() => void) | null = null;
  closed = false;
  constructor(readonly url: string) {}
  open(): void {
    this.onopen?.();
  }
  deliver(data: unknown): void {
    this.onmessage?.({ data: JSON.stringify(data) });
  }
  drop(): void {
    this.onclose?.();
  }
  close(): void {
    this.closed = true;
    this.onclose?.();
  }
}

const tick = (ms = 5) => new Promise(resolve => setTimeout(resolve, ms));

function chunk(seq: number, text: string) {
  return {
    seq,
    type: 'session_update',
    update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } }
  };
}

test('a dropped stream reconnects from the last seq seen; overlapping replays are not doubled', async () => {
  const model = new ChatModel();
  const sockets: FakeSocket[] = [];
  const states: StreamState[] = [];
  const stream = new EventStream(
    after => `ws://x/stream?after=${after}`,
    () => model.lastSeq,
    events => model.applyAll(events),
    url => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s as any;
    }
  );
  stream.onState = s => states.push(s);
  assert.equal(sockets[0].url, 'ws://x/stream?after=0');
  sockets[0].open();
  // frames hold one event or a batch
  sockets[0].deliver([{ seq: 1, type: 'turn_started', turn_id: 't', prompt: [] }, chunk(2, 'a')]);
  sockets[0].deliver(chunk(3, 'b'));
  await tick();
  assert.equal(model.lastSeq, 3);
  sockets[0].drop();
  assert.equal(stream.state, 'reconnecting');
  await tick(600); // first backoff is 0.5 s
  assert.equal(sockets.length, 2);
  assert.equal(sockets[1].url, 'ws://x/stream?after=3');
  sockets[1].open();
  sockets[1].deliver([chunk(3, 'b'), chunk(4, 'c')]); // the server may overlap
  await tick();
  assert.equal((model.items[1] as any).text, 'abc');
  assert.deepEqual(states, ['open', 'reconnecting', 'open']);
  stream.dispose();
  assert.equal(stream.state, 'closed');
  assert.ok(sockets[1].closed);
  await tick(600);
  assert.equal(sockets.length, 2, 'no reconnect after dispose');
});

test("a stream told the history moved drops what it showed and takes the server's replay, then live events", async () => {
  const model = new ChatModel();
  const sockets: FakeSocket[] = [];
  const stream = new EventStream(
    after => `ws://x/stream?after=${after}`,
    () => model.lastSeq,
    events => model.applyAll(events),
    url => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s as any;
    }
  );
  stream.onMoved = () => model.restart();
  sockets[0].open();
  sockets[0].deliver([{ seq: 1, type: 'turn_started', turn_id: 'old', prompt: [] }, chunk(2, 'gone'), chunk(9, 'x')]);
  await tick();
  assert.equal(model.lastSeq, 9);
  sockets[0].drop();
  await tick(600);
  assert.equal(sockets[1].url, 'ws://x/stream?after=9');
  sockets[1].open();
  sockets[1].deliver({ history_moved: true, after: 9, seq: 2, text: 'the server history ends at event 2' });
  sockets[1].deliver([{ seq: 1, type: 'turn_started', turn_id: 't', prompt: [] }, chunk(2, 'kept')]);
  sockets[1].deliver(chunk(3, ' and live'));
  await tick();
  assert.equal(model.lastSeq, 3);
  assert.equal((model.items[1] as any).text, 'kept and live', "the client's own next events are not skipped");
  assert.ok(!JSON.stringify(model.items).includes('gone'));
  stream.dispose();
});
