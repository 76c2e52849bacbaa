import { test } from 'node:test';
import assert from 'node:assert/strict';

import { IRequester, normaliseChanges, normaliseRestore, reasonOf, ReviewApi } from '../review/api';
import {
  cellDiff,
  changesSummary,
  checkpointText,
  editScript,
  restoreReport,
  reviewLabel,
  sourceHunks,
  wordDiff
} from '../review/diff';
import { ChatModel } from '../model';
import { describeEntry, detailText, provenanceOf } from '../review/provenance';

// -- the diff ------------------------------------------------------------------------------------

test('a modified cell shows its changed line as removed then added, with the changed words marked', () => {
  const d = cellDiff({
    cell_id: 'c1',
    change: 'modified',
    before: { cell_type: 'code', source: 'import pandas as pd\ndf = pd.read_csv("a.csv")\ndf.plot()' },
    after: { cell_type: 'code', source: 'import pandas as pd\ndf = pd.read_csv("b.csv")\ndf.plot()' },
    outputs_changed: true
  });
  assert.equal(d.label, 'Modified');
  assert.equal(d.added, 1);
  assert.equal(d.removed, 1);
  assert.equal(d.outputsChanged, true);
  assert.equal(d.hunks.length, 1);
  const ops = d.hunks[0].lines.map(l => `${l.op}:${l.oldNo ?? '-'}:${l.newNo ?? '-'}`);
  assert.deepEqual(ops, ['ctx:1:1', 'del:2:-', 'add:-:2', 'ctx:3:3']);
  const del = d.hunks[0].lines[1];
  const add = d.hunks[0].lines[2];
  assert.deepEqual(
    del.spans?.filter(s => s.changed).map(s => s.text),
    ['a'],
    'only the changed word is marked on the old line'
  );
  assert.deepEqual(add.spans?.map(s => s.text).join(''), 'df = pd.read_csv("b.csv")', 'the spans spell the whole line');
  assert.deepEqual(
    add.spans?.filter(s => s.changed).map(s => s.text),
    ['b']
  );
});

test('unchanged lines far from a change fold into counts; a whole added cell shows every line', () => {
  const before = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n');
  const after = before.replace('line 10', 'line ten');
  const { hunks, skippedAfter } = sourceHunks(before, after);
  assert.equal(hunks.length, 1);
  assert.equal(hunks[0].skippedBefore, 7, 'lines 0-6 folded (three of context before line 10)');
  assert.equal(hunks[0].lines.length, 3 + 2 + 3);
  assert.equal(skippedAfter, 6);
  const added = cellDiff({
    cell_id: 'n',
    change: 'added',
    before: null,
    after: { cell_type: 'markdown', source: before },
    outputs_changed: false
  });
  assert.equal(added.hunks.length, 1);
  assert.equal(added.hunks[0].skippedBefore, 0);
  assert.equal(added.hunks[0].lines.length, 20);
  assert.ok(added.hunks[0].lines.every(l => l.op === 'add' && l.spans === undefined));
  assert.equal(added.cellType, 'markdown');
});

test('a removed cell is all removed lines; a moved cell with the same source has no lines; a type change is said', () => {
  const removed = cellDiff({
    cell_id: 'r',
    change: 'removed',
    before: { cell_type: 'code', source: 'a = 1\nb = 2\n' },
    after: null,
    outputs_changed: false
  });
  assert.deepEqual(
    removed.hunks[0].lines.map(l => [l.op, l.oldNo, l.text]),
    [
      ['del', 1, 'a = 1'],
      ['del', 2, 'b = 2']
    ],
    'a final newline is not a line'
  );
  const moved = cellDiff({
    cell_id: 'm',
    change: 'moved',
    before: { cell_type: 'code', source: 'x' },
    after: { cell_type: 'code', source: 'x' },
    outputs_changed: false
  });
  assert.equal(moved.label, 'Moved');
  assert.equal(moved.sameSource, true);
  assert.equal(moved.hunks.length, 0);
  const both = cellDiff({
    cell_id: 'm2',
    change: 'moved',
    before: { cell_type: 'code', source: '# plot' },
    after: { cell_type: 'markdown', source: '# Plot' },
    outputs_changed: false
  });
  assert.equal(both.label, 'Moved and modified');
  assert.equal(both.typeChange, 'code → markdown');
});

test('lines that share little are marked whole, not word by word; the edit script is a real LCS', () => {
  assert.equal(wordDiff('print(total)', 'for row in rows: yield row'), null);
  const script = editScript(['a', 'b', 'c', 'd'], ['a', 'c', 'x', 'd']);
  assert.deepEqual(
    script.map(s => s.op),
    ['ctx', 'del', 'ctx', 'add', 'ctx']
  );
  // past the search bound the middle is replaced whole, still a correct diff
  const big = editScript(['a', 'b', 'c'], ['a', 'c', 'b'], 1);
  assert.deepEqual(
    big.map(s => s.op),
    ['ctx', 'del', 'del', 'add', 'add']
  );
});

test('the footer, the header and the checkpoint line say counts in words', () => {
  assert.equal(reviewLabel(1), 'Review 1 change');
  assert.equal(reviewLabel(4), 'Review 4 changes');
  const changes = normaliseChanges({
    turn_id: 't',
    changes: [
      {
        cell_id: 'a',
        change: 'modified',
        before: { cell_type: 'code', source: 'x' },
        after: { cell_type: 'code', source: 'y' },
        outputs_changed: true
      },
      {
        cell_id: 'b',
        change: 'modified',
        before: { cell_type: 'code', source: 'x' },
        after: { cell_type: 'code', source: 'z' },
        outputs_changed: false
      },
      { cell_id: 'c', change: 'added', before: null, after: { cell_type: 'code', source: 'w' }, outputs_changed: false }
    ],
    checkpoint: {
      id: 'cp1',
      kernel: {
        saved: ['df', 'model'],
        skipped: [{ name: 'conn', reason: 'a socket does not pickle' }],
        bytes: 1_234_567
      }
    }
  });
  assert.equal(changesSummary(changes.changes), '3 changes: 2 modified, 1 added, outputs of 1 cell changed');
  assert.equal(changesSummary([]), 'Nothing left to review');
  assert.equal(checkpointText(changes), 'Checkpoint: the cells and 2 kernel variables (1.2 MB), 1 variable not saved.');
  assert.match(checkpointText({ ...changes, checkpoint: null }), /kernel cannot be rewound/);
});

// -- the API client ------------------------------------------------------------------------------

class FakeServer implements IRequester {
  calls: { path: string; method: string; body: unknown }[] = [];
  constructor(private readonly _answer: (path: string, body: unknown) => unknown) {}
  async request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const body = init.body ? JSON.parse(String(init.body)) : undefined;
    this.calls.push({ path, method: init.method ?? 'GET', body });
    const answer = this._answer(path, body);
    if (answer instanceof Error) {
      throw answer;
    }
    return answer as T;
  }
}

class HttpError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

test('the client asks the routes as the issue writes them and reads their shapes', async () => {
  const server = new FakeServer((path, body) => {
    if (path.endsWith('/changes')) {
      return {
        turn_id: 't/1',
        changes: [
          {
            cell_id: 'a',
            change: 'modified',
            before: { cell_type: 'code', source: ['x = 1\n', 'y'] },
            after: { cell_type: 'code', source: 'x = 2\ny' },
            outputs_changed: false
          },
          { cell_id: 'b', change: 'renamed', before: null, after: null, outputs_changed: false },
          'junk'
        ],
        checkpoint: { id: 'cp-1', kernel: null }
      };
    }
    if (path.endsWith('/review')) {
      return { turn_id: 't/1', changes: [], checkpoint: { id: 'cp-1', kernel: null } };
    }
    if (path.endsWith('/rewind')) {
      return {
        turn_id: 't/1',
        restored_cells: ['a', 'b'],
        kernel: {
          restored: ['df'],
          not_restored: [{ name: 'conn', reason: 'does not pickle' }, 'gpu'],
          removed: ['tmp']
        },
        undo_checkpoint: 'cp-undo',
        never_restored: ['files the code wrote, changed or deleted']
      };
    }
    if (path.endsWith('/policy')) {
      return { id: 's 1', policy: (body as { policy: string | null }).policy };
    }
    if (path.endsWith('/restore')) {
      return { turn_id: 't/1', restored_cells: 2, kernel: null, undo_checkpoint: { id: 'cp-2' } };
    }
    return new HttpError('no route', 404);
  });
  const api = new ReviewApi(server);
  const changes = await api.changes('s 1', 't/1');
  assert.equal(server.calls[0].path, 'sessions/s%201/turns/t%2F1/changes');
  assert.equal(server.calls[0].method, 'GET');
  assert.equal(changes.changes.length, 1, 'an unknown change kind and a non-object are left out');
  assert.equal(changes.changes[0].before?.source, 'x = 1\ny', 'a source given as lines is joined');
  assert.deepEqual(changes.checkpoint, { id: 'cp-1', kernel: null });

  const left = await api.review('s 1', 't/1', 'discard', 'a', changes);
  assert.deepEqual(server.calls[1], {
    path: 'sessions/s%201/turns/t%2F1/review',
    method: 'POST',
    body: { decision: 'discard', cell_id: 'a' }
  });
  assert.equal(left.changes.length, 0);
  await api.review('s 1', 't/1', 'keep');
  assert.deepEqual(server.calls[2].body, { decision: 'keep' }, 'the whole turn: no cell_id');

  const rewound = await api.rewind('s 1', 't/1');
  assert.equal(server.calls[3].path, 'sessions/s%201/turns/t%2F1/rewind');
  assert.equal(server.calls[3].method, 'POST');
  assert.equal(rewound.restored_cells, 2);
  assert.deepEqual(rewound.restored_cell_ids, ['a', 'b']);
  assert.deepEqual(rewound.kernel, {
    restored: ['df'],
    not_restored: [
      { name: 'conn', reason: 'does not pickle' },
      { name: 'gpu', reason: '' }
    ],
    removed: ['tmp']
  });
  assert.deepEqual(rewound.never_restored, ['files the code wrote, changed or deleted']);
  assert.equal(rewound.undo_checkpoint, 'cp-undo');
  const report = restoreReport(rewound);
  assert.deepEqual(report.restored, [
    '2 cells put back as before the turn',
    'kernel variables: df',
    'variables created since, removed: tmp'
  ]);
  assert.deepEqual(report.notRestored, ['conn: does not pickle', 'gpu: no reason given']);

  const undone = await api.restore('s 1', 'cp-undo');
  assert.equal(server.calls[4].path, 'sessions/s%201/checkpoints/cp-undo/restore');
  assert.equal(undone.undo_checkpoint, 'cp-2', 'an undo checkpoint given as an object is read by its id');
  assert.equal(undone.turn_id, 't/1');
  assert.match(restoreReport(undone).notRestored[0], /holds no kernel state/);
  assert.deepEqual(undone.never_restored, [], "no list from the server: the view says the panel's own");

  assert.equal(await api.setPolicy('s 1', 'review'), 'review');
  assert.deepEqual(server.calls[5], { path: 'sessions/s%201/policy', method: 'POST', body: { policy: 'review' } });
  assert.equal(await api.setPolicy('s 1', null), null, "back to the configuration's policy");
  assert.deepEqual(server.calls[6].body, { policy: null });
  assert.equal(restoreReport(undone, true).restored[0], '2 cells put back as they were before the rewind');
});

test("the review route's bare list keeps the turn's checkpoint; refusals keep the server's reason", async () => {
  const left = normaliseChanges(
    [{ cell_id: 'a', change: 'added', before: null, after: { source: 'x' }, outputs_changed: 1 }],
    {
      turn_id: 't',
      checkpoint: { id: 'cp', kernel: null }
    }
  );
  assert.equal(left.turn_id, 't');
  assert.deepEqual(left.checkpoint, { id: 'cp', kernel: null });
  assert.equal(left.changes[0].after?.cell_type, 'code');
  assert.equal(left.changes[0].outputs_changed, false, 'only true is true');
  assert.equal(normaliseRestore({}).undo_checkpoint, null);
  // the server's extras: decisions made already, a running turn, cells "Discard all" left with the reason
  const extra = normaliseChanges({
    turn_id: 't',
    changes: [],
    checkpoint: null,
    decided: [
      { cell_id: 'a', decision: 'keep' },
      { cell_id: 'b', decision: 'maybe' }
    ],
    running: true,
    not_discarded: [{ cell_id: 'c', reason: 'edited since, and the server restarted' }]
  });
  assert.deepEqual(extra.decided, [{ cell_id: 'a', decision: 'keep' }]);
  assert.equal(extra.running, true);
  assert.deepEqual(extra.not_discarded, [{ cell_id: 'c', reason: 'edited since, and the server restarted' }]);

  const refusing = new ReviewApi(
    new FakeServer(() => new HttpError('nothing to rewind: the turn changed neither cells nor the kernel', 409))
  );
  await assert.rejects(refusing.rewind('s', 't'), (err: unknown) => {
    assert.equal(
      reasonOf(err, 'Could not rewind'),
      'Could not rewind: nothing to rewind: the turn changed neither cells nor the kernel'
    );
    return true;
  });
  assert.match(reasonOf(new HttpError('', 403), 'Could not discard'), /not change it/);
  assert.match(reasonOf(new HttpError('Not Found', 404), 'Could not load'), /no such route/);
  assert.equal(reasonOf(new HttpError('', 500), 'Could not keep'), 'Could not keep: the server answered 500');
});

// -- provenance ----------------------------------------------------------------------------------

const agentEntry = {
  by: 'agent',
  action: 'edited',
  agent: { name: 'codex', version: '0.4.1' },
  conversation_id: 'conv',
  turn_id: 'turn-4',
  tool_call_id: 'call-1',
  session_id: 'sess',
  turn_number: 4,
  prompt: 'plot the residuals',
  user: 'alice',
  at: '2025-05-01T12:00:00Z'
};

test("a cell's mark says the agent, the turn, the prompt and the user, as the issue writes it", () => {
  const p = provenanceOf({ history: [agentEntry] });
  assert.ok(p);
  assert.equal(describeEntry(p.last), "Codex, turn 4: 'plot the residuals' (by alice)");
  assert.equal(describeEntry(p.last, { codex: 'Codex CLI' }), "Codex CLI, turn 4: 'plot the residuals' (by alice)");
  assert.equal(detailText(p), 'edited this cell at 2025-05-01 12:00 UTC');
  const long = { ...agentEntry, turn_number: undefined, user: null, prompt: 'x'.repeat(200) };
  const d = describeEntry(provenanceOf({ history: [long] })!.last);
  assert.match(d, /^Codex, a turn at 2025-05-01 12:00 UTC: 'x{59}…'$/);
});

test('a user edit after the agent is said; malformed entries and cells without agent entries carry no mark', () => {
  const p = provenanceOf({
    history: [
      { ...agentEntry, action: 'inserted', turn_number: 2 },
      { by: 'agent', action: 'forged' },
      agentEntry,
      { by: 'user', action: 'edited', user: 'bob', at: '2025-05-01T12:03:10Z' }
    ]
  });
  assert.ok(p);
  assert.equal(p.history.length, 3);
  assert.equal(p.last.turnNumber, 4);
  assert.equal(p.editedSince?.user, 'bob');
  assert.equal(
    detailText(p),
    'edited this cell at 2025-05-01 12:00 UTC; edited since by bob (2025-05-01 12:03 UTC); 1 earlier agent change recorded'
  );
  assert.equal(provenanceOf({ history: [{ by: 'user', user: 'bob', at: 'x' }] }), null);
  assert.equal(provenanceOf(undefined), null);
  assert.equal(provenanceOf({ history: 'nope' }), null);
});

test("a session's policy follows its policy_changed events; a turn's end carries its review", () => {
  const m = new ChatModel();
  assert.equal(m.sessionPolicy, undefined, 'none seen: the description says');
  m.applyAll([
    { seq: 1, type: 'policy_changed', always_allowed: [], policy: 'review' },
    { seq: 2, type: 'turn_started', turn_id: 't1', prompt: [{ type: 'text', text: 'go' }] },
    { seq: 3, type: 'turn_ended', turn_id: 't1', stop_reason: 'end_turn', review: { changes: 4, checkpoint: 'cp' } },
    { seq: 4, type: 'turn_started', turn_id: 't2', prompt: [{ type: 'text', text: 'again' }] },
    {
      seq: 5,
      type: 'turn_ended',
      turn_id: 't2',
      stop_reason: 'end_turn',
      review: { changes: 2, checkpoint: 'cp2', after: true }
    }
  ]);
  assert.equal(m.sessionPolicy, 'review');
  const ends = m.items.filter(i => i.kind === 'turn_end');
  // `after`: a change went ahead unasked under Review after (the review opens by itself only then)
  assert.deepEqual(
    ends.map(e => (e.kind === 'turn_end' ? e.review : null)),
    [
      { changes: 4, after: false },
      { changes: 2, after: true }
    ]
  );
  m.apply({ seq: 6, type: 'policy_changed', always_allowed: [], policy: null });
  assert.equal(m.sessionPolicy, null);
  m.apply({ seq: 7, type: 'policy_changed', always_allowed: ['client_edit_cell'] });
  assert.equal(m.sessionPolicy, null, 'an always-allow change without a policy leaves it');
});
