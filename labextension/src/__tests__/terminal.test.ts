import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ChatModel, IAcpEvent, IToolItem } from '../model';

let seq = 0;
function ev(type: string, fields: Record<string, unknown> = {}): IAcpEvent {
  return { seq: ++seq, type, ...fields };
}

test('terminal_output keeps the last state of each terminal and refreshes the card that embeds it', () => {
  const m = new ChatModel();
  m.applyAll([
    ev('turn_started', { turn_id: 't1', prompt: [{ type: 'text', text: 'run it' }] }),
    ev('terminal_output', { terminalId: 'term_1', name: '3', command: 'make', args: ['test'], output: '' }),
    ev('session_update', {
      update: {
        sessionUpdate: 'tool_call',
        toolCallId: 'c1',
        title: 'Run make',
        kind: 'execute',
        status: 'in_progress',
        content: [{ type: 'terminal', terminalId: 'term_1' }]
      }
    })
  ]);
  const tool = m.items.find(i => i.kind === 'tool') as IToolItem;
  const before = tool.version;
  m.apply(ev('terminal_output', { terminalId: 'term_1', name: '3', command: 'make', args: ['test'], output: 'ok\n' }));
  assert.ok(tool.version > before, 'the card that embeds the terminal is re-rendered');
  m.apply(
    ev('terminal_output', {
      terminalId: 'term_1',
      name: '3',
      command: 'make',
      args: ['test'],
      output: 'ok\ndone\n',
      exitStatus: { exitCode: 0, signal: null },
      released: true
    })
  );
  const state = m.terminals.get('term_1');
  assert.equal(state?.output, 'ok\ndone\n');
  assert.equal(state?.name, '3');
  assert.deepEqual(state?.args, ['test']);
  assert.deepEqual(state?.exitStatus, { exitCode: 0, signal: null });
  assert.equal(state?.released, true);
  // an event without an id changes nothing
  m.apply(ev('terminal_output', { output: 'stray' }));
  assert.equal(m.terminals.size, 1);
});
