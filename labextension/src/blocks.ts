/**
 * Where a streaming answer's markdown is settled: the prefix made of complete blocks (paragraphs a blank line ended,
 * code fences closed), which text arriving later cannot change, so the sidebar renders it once and re-renders only
 * the open block after it. Re-rendering the whole answer on each batch of chunks costs the answer's length each
 * time (issue 26: a long answer made long tasks); this keeps a streaming answer's cost to what arrived.
 *
 * Conservative: a split is made only where the line after it has fully arrived and cannot continue the block before
 * (it is not indented, and a list item does not follow a list). What a split still renders differently from the whole
 * (a list loosened by a blank line, a link reference defined later) lasts only while the answer streams: the
 * finished answer is rendered whole, as before.
 */

/** A code fence's opening or closing line: up to 3 spaces, 3 or more backticks or tildes, the rest. */
const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
/** A list item's first line (bullet or ordered). */
const LIST_ITEM = /^(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)/;

interface IFence {
  char: string;
  length: number;
  indent: number;
}

/**
 * The end (an offset of `text`, at least `from`) of the complete blocks that start at `from`, which must itself be
 * such an end (0, or a value this returned for a prefix of `text`). Only complete lines count: the line still
 * arriving decides nothing.
 */
export function settledEnd(text: string, from = 0): number {
  let end = from;
  let pos = from;
  let fence: IFence | null = null;
  let afterBreak = false; // the previous line was blank (outside a fence): the block before may have ended
  let blockFirst = ''; // the first line of the latest block (a list item after a list continues it)
  for (;;) {
    const nl = text.indexOf('\n', pos);
    if (nl < 0) {
      return end;
    }
    const line = text.slice(pos, nl);
    const next = nl + 1;
    if (fence) {
      const m = FENCE.exec(line);
      if (m && m[2][0] === fence.char && m[2].length >= fence.length && !m[3].trim()) {
        // a fence opened at the margin is a block of its own: it is complete when it closes
        if (fence.indent === 0) {
          end = next;
          blockFirst = '';
        }
        fence = null;
        afterBreak = false;
      }
      pos = next;
      continue;
    }
    if (!line.trim()) {
      afterBreak = true;
      pos = next;
      continue;
    }
    if (pos === end) {
      blockFirst = line;
    } else if (afterBreak) {
      const continues = /^\s/.test(line) || (LIST_ITEM.test(line) && LIST_ITEM.test(blockFirst));
      if (!continues) {
        end = pos;
      }
      blockFirst = line;
    }
    afterBreak = false;
    const open = FENCE.exec(line);
    if (open && !(open[2][0] === '`' && open[3].includes('`'))) {
      fence = { char: open[2][0], length: open[2].length, indent: open[1].length };
    }
    pos = next;
  }
}
