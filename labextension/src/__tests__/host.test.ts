import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { ISessionInfo } from '../api';
import { AcpHost, IHostParts } from '../host';
import { format, setTranslator, trans } from '../i18n';
import type { IAcpEvent } from '../model';
import { IAcpHost } from '../tokens';

class FakeSocket {
  onopen: (() => void) | null = null;
  onmessage: ((m: { data: string }) => void) | null = null;
  onclose: (() => void) | null = null;
  closed = false;
  constructor(readonly url: string) {}
  send(): void {}
  open(): void {
    this.onopen?.();
  }
  deliver(data: unknown): void {
    this.onmessage?.({ data: JSON.stringify(data) });
  }
  close(): void {
    this.closed = true;
    this.onclose?.();
  }
}

const tick = (ms = 5) => new Promise(resolve => setTimeout(resolve, ms));
const SID = 'feedfacefeedfacefeedfacefeedface';

function info(notebook: string, id = SID, last_seq = 0): ISessionInfo {
  return { id, notebook, agent: 'echo', cwd: '', state: 'ready', turn_id: null, last_seq, error: null };
}

/** An AcpHost over fakes: the calls it made, the sockets it opened, the session the "panel" shows. */
function fixture() {
  const calls: unknown[][] = [];
  const sockets: FakeSocket[] = [];
  const state = { shown: null as ISessionInfo | null, promptError: null as Error | null };
  const parts: IHostParts = {
    api: {
      openSession: async (notebook: string, agent?: string) => {
        calls.push(['open', notebook, agent]);
        return info(notebook, SID, 7);
      },
      prompt: async (sessionId: string, blocks: unknown[]) => {
        calls.push(['prompt', sessionId, blocks]);
        if (state.promptError) {
          throw state.promptError;
        }
        return { turn_id: 'turn-1' };
      },
      streamUrl: (sessionId: string, after: number) => `ws://x/jupyter-acp/sessions/${sessionId}/stream?after=${after}`
    },
    shownSession: () => state.shown,
    reveal: async (notebook?: string) => {
      calls.push(['reveal', notebook]);
    },
    socket: url => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s as unknown as WebSocket;
    }
  };
  return { host: new AcpHost(parts), calls, sockets, state };
}

test('the token is one named object other extensions require', () => {
  assert.equal(IAcpHost.name, 'jupyter-acp-host:IAcpHost');
  assert.match(IAcpHost.description ?? '', /send a prompt/);
});

test('a prompt goes to the notebook session the server opens (its current agent unless one is named)', async () => {
  const { host, calls } = fixture();
  const sent = await host.sendPrompt('work/a.ipynb', 'explain the last cell');
  assert.deepEqual(sent, { session: info('work/a.ipynb', SID, 7), turnId: 'turn-1' });
  assert.deepEqual(calls, [
    ['open', 'work/a.ipynb', undefined],
    ['prompt', SID, [{ type: 'text', text: 'explain the last cell' }]]
  ]);
  calls.length = 0;
  const blocks = [{ type: 'resource_link', uri: 'file:///x.csv', name: 'x.csv' }];
  await host.sendPrompt('a.ipynb', blocks, { agent: 'builtin' });
  assert.deepEqual(calls, [
    ['open', 'a.ipynb', 'builtin'],
    ['prompt', SID, blocks]
  ]);
});

test("an empty prompt is refused before any request, and the server's refusal reaches the caller", async () => {
  const { host, calls, state } = fixture();
  await assert.rejects(host.sendPrompt('a.ipynb', '   '), /empty prompt/);
  await assert.rejects(host.sendPrompt('a.ipynb', []), /empty prompt/);
  assert.deepEqual(calls, []);
  state.promptError = new Error('a turn is already running in this session');
  await assert.rejects(host.sendPrompt('a.ipynb', 'hi'), /already running/);
});

test('opening the panel reveals the notebook first, or the sidebar alone', async () => {
  const { host, calls } = fixture();
  await host.openPanel('a.ipynb');
  await host.openPanel();
  assert.deepEqual(calls, [
    ['reveal', 'a.ipynb'],
    ['reveal', undefined]
  ]);
});

test('the current session follows the panel; a change is emitted once per other session', () => {
  const { host, state } = fixture();
  const seen: (string | null)[] = [];
  host.currentSessionChanged.connect((_, s) => seen.push(s?.notebook ?? null));
  assert.equal(host.currentSession, null);
  host.panelChanged(); // the panel rendered, nothing else shown
  state.shown = info('a.ipynb', 'a'.repeat(32));
  host.panelChanged();
  host.panelChanged(); // a turn started in the same session: no change
  state.shown = info('b.ipynb', 'b'.repeat(32));
  host.panelChanged();
  state.shown = null;
  host.panelChanged();
  assert.deepEqual(seen, ['a.ipynb', 'b.ipynb', null]);
  assert.equal(host.currentSession, null);
});

test('an observer gets the events after its start once each, resumes after a reconnection, stops when disposed', async () => {
  const { host, sockets } = fixture();
  const watch = host.observe(SID, { after: 7 });
  const got: IAcpEvent[] = [];
  watch.events.connect((_, batch) => got.push(...batch));
  assert.equal(sockets[0].url, `ws://x/jupyter-acp/sessions/${SID}/stream?after=7`);
  sockets[0].open();
  await watch.ready;
  sockets[0].deliver([
    { seq: 8, type: 'turn_started', turn_id: 't' },
    { seq: 9, type: 'session_update', update: {} }
  ]);
  await tick();
  assert.deepEqual(
    got.map(e => e.seq),
    [8, 9]
  );
  assert.equal(watch.lastSeq, 9);
  sockets[0].close(); // the connection dropped: the next socket asks from the last seq seen
  await new Promise(resolve => setTimeout(resolve, 600));
  assert.equal(sockets.length, 2);
  assert.equal(sockets[1].url, `ws://x/jupyter-acp/sessions/${SID}/stream?after=9`);
  sockets[1].open();
  sockets[1].deliver([
    { seq: 9, type: 'session_update', update: {} },
    { seq: 10, type: 'turn_ended', turn_id: 't' }
  ]);
  await tick();
  assert.deepEqual(
    got.map(e => e.seq),
    [8, 9, 10],
    'a repeated event is not emitted again'
  );
  watch.dispose();
  assert.ok(watch.isDisposed);
  assert.ok(sockets[1].closed);
  sockets[1].deliver([{ seq: 11, type: 'notice', text: 'late' }]);
  await tick();
  assert.equal(got.length, 3, 'nothing after dispose');
});

test('an observer replays the current conversation by default, and starts over when the history moved', async () => {
  const { host, sockets } = fixture();
  const watch = host.observe(SID);
  let moved = 0;
  const got: number[] = [];
  watch.events.connect((_, batch) => got.push(...batch.map(e => e.seq)));
  watch.historyMoved.connect(() => moved++);
  assert.match(sockets[0].url, /after=0$/);
  sockets[0].open();
  sockets[0].deliver([{ seq: 1, type: 'notice' }]);
  await tick();
  sockets[0].deliver({ history_moved: true, after: 1, seq: 0, text: 'the history was replaced' });
  sockets[0].deliver([{ seq: 1, type: 'notice' }]);
  await tick();
  assert.equal(moved, 1);
  assert.deepEqual(got, [1, 1], 'the replayed history arrives again after the move');
  watch.dispose();
});

test('strings are the English source with their placeholders until a translator is set, then its own', () => {
  assert.equal(format('%1 of %2 (100%%)', [3, 4]), '3 of 4 (100%)');
  assert.equal(trans.__('Could not open %1', 'a.ipynb'), 'Could not open a.ipynb');
  assert.equal(trans._n('%1 change', '%1 changes', 1), '1 change');
  assert.equal(trans._n('%1 change in %2', '%1 changes in %2', 3, 'a.ipynb'), '3 changes in a.ipynb');
  const loaded: string[] = [];
  const bundle = {
    __: (msg: string, ...args: string[]) => `fr:${format(msg, args)}`,
    _n: (s: string, p: string, n: number, ...args: string[]) => `fr:${format(n === 1 ? s : p, [n, ...args])}`,
    _p: (_c: string, msg: string) => `fr:${msg}`
  };
  setTranslator({ load: (domain: string) => (loaded.push(domain), bundle) } as never);
  try {
    assert.deepEqual(loaded, ['jupyter-acp-host']);
    assert.equal(trans.__('Stop the Agent'), 'fr:Stop the Agent');
    assert.equal(trans._n('%1 change', '%1 changes', 2), 'fr:2 changes');
  } finally {
    setTranslator(null);
  }
  assert.equal(trans.__('Stop the Agent'), 'Stop the Agent');
});
