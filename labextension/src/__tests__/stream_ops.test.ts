import { test } from 'node:test';
import assert from 'node:assert/strict';

import { EventStream, OpError, openStream } from '../stream';

class FakeSocket {
  onopen: (() => void) | null = null;
  onmessage: ((m: { data: string }) => void) | null = null;
  onclose: (() => void) | null = null;
  sent: any[] = [];
  constructor(readonly url: string) {}
  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }
  open(): void {
    this.onopen?.();
  }
  deliver(data: unknown): void {
    this.onmessage?.({ data: JSON.stringify(data) });
  }
  close(): void {
    this.onclose?.();
  }
}

const tick = (ms = 5) => new Promise(resolve => setTimeout(resolve, ms));
const SID = '0123456789abcdef0123456789abcdef';

test('ops ride the open socket, answers come back by ref and never reach the events', async () => {
  const sockets: FakeSocket[] = [];
  const got: any[] = [];
  const stream = new EventStream(
    after => `ws://x/jupyter-acp/sessions/${SID}/stream?after=${after}`,
    () => 0,
    events => got.push(...events),
    url => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s as any;
    }
  );
  assert.equal(stream.op({ op: 'cancel' }), null, 'not open yet: the caller uses HTTP');
  assert.equal(openStream(SID), null);
  sockets[0].open();
  assert.equal(openStream(SID), stream);
  const prompt = stream.op({ op: 'prompt', prompt: [{ type: 'text', text: 'hi' }] })!;
  const cancel = stream.op({ op: 'cancel' })!;
  assert.deepEqual(
    sockets[0].sent.map(f => [f.op, f.ref]),
    [
      ['prompt', 1],
      ['cancel', 2]
    ]
  );
  // answers in any order; events interleave
  sockets[0].deliver({ ref: 2, ok: false, status: 403, error: 'cancel needs write access' });
  sockets[0].deliver([{ seq: 1, type: 'turn_started', turn_id: 't', prompt: [] }]);
  sockets[0].deliver({ ref: 1, ok: true, turn_id: 't' });
  assert.equal((await prompt).turn_id, 't');
  await assert.rejects(cancel, (e: any) => e instanceof OpError && e.status === 403 && /write access/.test(e.message));
  await tick();
  assert.deepEqual(
    got.map(e => e.seq),
    [1],
    'only events reach the model'
  );
  // a socket that drops fails the ops still waiting (they may or may not have run)
  const lost = stream.op({ op: 'cancel' })!;
  sockets[0].close();
  await assert.rejects(lost, /closed before it answered/);
  assert.equal(openStream(SID), null, 'reconnecting: HTTP again');
  stream.dispose();
});

test("another extension's observer never becomes the socket the panel's ops ride", () => {
  const sockets: FakeSocket[] = [];
  const make = (carriesOps: boolean) =>
    new EventStream(
      after => `ws://x/jupyter-acp/sessions/${SID}/stream?after=${after}`,
      () => 0,
      () => undefined,
      url => {
        const s = new FakeSocket(url);
        sockets.push(s);
        return s as any;
      },
      carriesOps
    );
  const panel = make(true);
  sockets[0].open();
  const observer = make(false);
  sockets[1].open();
  assert.equal(openStream(SID), panel, "the panel's own stream");
  observer.dispose();
  assert.equal(openStream(SID), panel, "still the panel's when the observer is done");
  panel.dispose();
  assert.equal(openStream(SID), null);
});
