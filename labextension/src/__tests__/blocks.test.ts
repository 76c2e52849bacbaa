import { test } from 'node:test';
import assert from 'node:assert/strict';

import { settledEnd } from '../blocks';

/** The settled prefix and the open tail of `text`, as a streaming answer is split. */
function split(text: string, from = 0): [string, string] {
  const end = settledEnd(text, from);
  return [text.slice(0, end), text.slice(end)];
}

test('a paragraph is settled once a blank line and the first line of the next block have arrived', () => {
  assert.deepEqual(split('First para.\n\nSecond'), ['', 'First para.\n\nSecond']); // its line still arriving
  assert.deepEqual(split('First para.\n\nSecond para\n'), ['First para.\n\n', 'Second para\n']);
  assert.deepEqual(split('One line\nsame paragraph\n'), ['', 'One line\nsame paragraph\n']);
});

test('a code fence left open keeps everything after its opening in the tail, blank lines included', () => {
  const text = 'Intro.\n\n```python\nx = 1\n\ny = 2\n\nNot a paragraph\n';
  assert.deepEqual(split(text), ['Intro.\n\n', '```python\nx = 1\n\ny = 2\n\nNot a paragraph\n']);
});

test('a fence whose closing line has arrived is settled at once; its closing line still arriving is not', () => {
  assert.deepEqual(split('```py\nx = 1\n```'), ['', '```py\nx = 1\n```']);
  assert.deepEqual(split('```py\nx = 1\n```\nAfter'), ['```py\nx = 1\n```\n', 'After']);
  // a shorter or other fence does not close it
  assert.deepEqual(split('````\n```\n~~~\n'), ['', '````\n```\n~~~\n']);
});

test('a tail that later closes its fence settles, and the split continues from where it settled', () => {
  const early = 'Text.\n\n```js\nlet a = 1;\n\n';
  const [settled] = split(early);
  assert.equal(settled, 'Text.\n\n');
  const later = early + 'let b = 2;\n```\nMore text.\n';
  const end = settledEnd(later, settled.length);
  assert.equal(later.slice(0, end), 'Text.\n\n```js\nlet a = 1;\n\nlet b = 2;\n```\n');
  const last = later + '\nLast\n';
  assert.deepEqual(split(last, end), [later + '\n', 'Last\n']);
  assert.equal(settledEnd(later), settledEnd(later, settled.length)); // from the start: the same end
});

test('list items separated by blank lines stay one open list; a paragraph after the list settles it', () => {
  const list = '- one\n\n- two\n\n1. three\n';
  assert.deepEqual(split(list), ['', list]);
  assert.deepEqual(split(list + '\nAfter the list\n'), [list + '\n', 'After the list\n']);
});

test('an indented line after a blank line continues the block (a list item, an indented code block)', () => {
  assert.deepEqual(split('- item\n\n  more of the item\n'), ['', '- item\n\n  more of the item\n']);
  assert.deepEqual(split('    code\n\n    more code\n'), ['', '    code\n\n    more code\n']);
});

test('a fence inside a list item does not end the list when it closes', () => {
  const text = '- item\n  ```\n  x\n  ```\n  still the item\n';
  assert.deepEqual(split(text), ['', text]);
});

test('backticks in a backtick fence info string make no fence (inline code)', () => {
  assert.deepEqual(split('```a`b```\n\nNext\n'), ['```a`b```\n\n', 'Next\n']);
});

test('the end never goes back: each prefix of an answer settles no further than the whole', () => {
  const answer = 'Para one.\n\n```python\nprint(1)\n\n```\n\n- a\n- b\n\nDone.\n';
  let last = 0;
  for (let i = 0; i <= answer.length; i++) {
    const end = settledEnd(answer.slice(0, i), last);
    assert.ok(end >= last, `at ${i}: ${end} < ${last}`);
    assert.equal(end, settledEnd(answer.slice(0, i)), `at ${i}: from ${last} differs from 0`);
    last = end;
  }
  assert.equal(answer.slice(0, last), 'Para one.\n\n```python\nprint(1)\n\n```\n\n- a\n- b\n\n');
});
