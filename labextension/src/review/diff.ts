/**
 * A turn's notebook diff as the review view shows it, computed without the DOM (node's test runner checks it).
 *
 * nbdime's rendering is the reference: one card per cell, added cells all green, removed ones all red, a modified
 * cell's source as a line diff with the changed words marked inside a changed line, a moved cell said as moved, and
 * "outputs changed" noted. Unchanged lines further than `CONTEXT` from a change fold into "N unchanged lines".
 */
import { trans } from '../i18n';
import type { ChangeKind, ICellChange, IRestoreResult, ITurnChanges } from './types';

/** Unchanged lines shown around a change. */
export const CONTEXT = 3;
/** Past this many line pairs the diff is not searched for common lines (the middle shows as replaced). */
const MAX_CELLS = 4_000_000;
/** Past this many token pairs a changed line is not searched for its changed words. */
const MAX_WORD_CELLS = 40_000;

export type LineOp = 'ctx' | 'add' | 'del';

/** A stretch of a line: `changed` marks the words a modified line changed (nbdime's darker background). */
export interface ISpan {
  text: string;
  changed: boolean;
}

export interface IDiffLine {
  op: LineOp;
  /** 1-based line numbers in the old and the new source (null: the line is not on that side) */
  oldNo: number | null;
  newNo: number | null;
  text: string;
  /** set on a changed line paired with its counterpart; absent: the whole line is new or gone */
  spans?: ISpan[];
}

/** Shown lines, and how many unchanged lines were folded before them. */
export interface IHunk {
  skippedBefore: number;
  lines: IDiffLine[];
}

export interface ICellDiff {
  cellId: string;
  change: ChangeKind;
  /** "Added", "Removed", "Modified", "Moved" (and "moved and modified" when a moved cell changed too) */
  label: string;
  cellType: string;
  /** "code → markdown" when the cell's type changed */
  typeChange: string | null;
  hunks: IHunk[];
  /** unchanged lines folded after the last hunk */
  skippedAfter: number;
  added: number;
  removed: number;
  outputsChanged: boolean;
  /** the cell's source did not change (a move, or outputs only) */
  sameSource: boolean;
}

function lines(text: string): string[] {
  if (!text) {
    return [];
  }
  const out = text.split('\n');
  if (out.length > 1 && out[out.length - 1] === '') {
    out.pop(); // a final newline is not a line of its own
  }
  return out;
}

/**
 * The edit script from `a` to `b` (longest common subsequence after trimming the common ends; when the middle is too
 * big to search, it shows as removed then added, which is still a correct diff).
 */
export function editScript<T>(a: T[], b: T[], maxCells = MAX_CELLS): { op: LineOp; a: number; b: number }[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) {
    start++;
  }
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out: { op: LineOp; a: number; b: number }[] = [];
  for (let i = 0; i < start; i++) {
    out.push({ op: 'ctx', a: i, b: i });
  }
  const n = endA - start;
  const m = endB - start;
  if (n && m && n * m <= maxCells) {
    // lcs[i][j]: the longest common subsequence of a[start+i..endA) and b[start+j..endB)
    const width = m + 1;
    const lcs = new Uint32Array((n + 1) * width);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * width + j] =
          a[start + i] === b[start + j]
            ? lcs[(i + 1) * width + j + 1] + 1
            : Math.max(lcs[(i + 1) * width + j], lcs[i * width + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if (a[start + i] === b[start + j]) {
        out.push({ op: 'ctx', a: start + i, b: start + j });
        i++;
        j++;
      } else if (lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
        out.push({ op: 'del', a: start + i, b: -1 });
        i++;
      } else {
        out.push({ op: 'add', a: -1, b: start + j });
        j++;
      }
    }
    for (; i < n; i++) {
      out.push({ op: 'del', a: start + i, b: -1 });
    }
    for (; j < m; j++) {
      out.push({ op: 'add', a: -1, b: start + j });
    }
  } else {
    for (let i = start; i < endA; i++) {
      out.push({ op: 'del', a: i, b: -1 });
    }
    for (let j = start; j < endB; j++) {
      out.push({ op: 'add', a: -1, b: j });
    }
  }
  for (let k = 0; k < a.length - endA; k++) {
    out.push({ op: 'ctx', a: endA + k, b: endB + k });
  }
  return out;
}

/** Words, runs of spaces and single punctuation: the units a changed line is compared by. */
function tokens(line: string): string[] {
  return line.match(/\w+|\s+|[^\w\s]/g) ?? [];
}

function merge(spans: ISpan[]): ISpan[] {
  const out: ISpan[] = [];
  for (const s of spans) {
    const last = out[out.length - 1];
    if (last && last.changed === s.changed) {
      last.text += s.text;
    } else if (s.text) {
      out.push({ ...s });
    }
  }
  return out;
}

/**
 * The changed words of a line and its new version: spans of each side, or null when the lines share too little for
 * word marks to help (less than a third of their characters), as nbdime marks such a line whole.
 */
export function wordDiff(oldLine: string, newLine: string): { old: ISpan[]; new: ISpan[] } | null {
  const a = tokens(oldLine);
  const b = tokens(newLine);
  if (!a.length || !b.length) {
    return null;
  }
  const script = editScript(a, b, MAX_WORD_CELLS);
  const oldSpans: ISpan[] = [];
  const newSpans: ISpan[] = [];
  let common = 0;
  for (const step of script) {
    if (step.op === 'ctx') {
      common += a[step.a].length;
      oldSpans.push({ text: a[step.a], changed: false });
      newSpans.push({ text: b[step.b], changed: false });
    } else if (step.op === 'del') {
      oldSpans.push({ text: a[step.a], changed: true });
    } else {
      newSpans.push({ text: b[step.b], changed: true });
    }
  }
  if (common * 3 < Math.max(oldLine.length, newLine.length)) {
    return null;
  }
  return { old: merge(oldSpans), new: merge(newSpans) };
}

/** A line diff of two sources, folded into hunks with `context` unchanged lines around each change. */
export function sourceHunks(
  before: string,
  after: string,
  context = CONTEXT
): { hunks: IHunk[]; skippedAfter: number; added: number; removed: number } {
  const a = lines(before);
  const b = lines(after);
  const script = editScript(a, b);
  const all: IDiffLine[] = [];
  let added = 0;
  let removed = 0;
  for (let k = 0; k < script.length;) {
    const step = script[k];
    if (step.op === 'ctx') {
      all.push({ op: 'ctx', oldNo: step.a + 1, newNo: step.b + 1, text: a[step.a] });
      k++;
      continue;
    }
    // a block of changes: its removed lines, then its added ones, paired in order for word marks
    const dels: number[] = [];
    const adds: number[] = [];
    while (k < script.length && script[k].op !== 'ctx') {
      if (script[k].op === 'del') {
        dels.push(script[k].a);
      } else {
        adds.push(script[k].b);
      }
      k++;
    }
    removed += dels.length;
    added += adds.length;
    const pairs = dels.map((d, i) => (i < adds.length ? wordDiff(a[d], b[adds[i]]) : null));
    dels.forEach((d, i) => {
      const line: IDiffLine = { op: 'del', oldNo: d + 1, newNo: null, text: a[d] };
      if (pairs[i]) {
        line.spans = pairs[i]!.old;
      }
      all.push(line);
    });
    adds.forEach((ad, i) => {
      const line: IDiffLine = { op: 'add', oldNo: null, newNo: ad + 1, text: b[ad] };
      if (pairs[i]) {
        line.spans = pairs[i]!.new;
      }
      all.push(line);
    });
  }
  // fold: keep the lines within `context` of a change
  const keep = all.map(() => false);
  all.forEach((line, i) => {
    if (line.op !== 'ctx') {
      for (let j = Math.max(0, i - context); j <= Math.min(all.length - 1, i + context); j++) {
        keep[j] = true;
      }
    }
  });
  const hunks: IHunk[] = [];
  let skipped = 0;
  let current: IHunk | null = null;
  all.forEach((line, i) => {
    if (!keep[i]) {
      skipped++;
      current = null;
      return;
    }
    if (!current) {
      current = { skippedBefore: skipped, lines: [] };
      hunks.push(current);
      skipped = 0;
    }
    current.lines.push(line);
  });
  return { hunks, skippedAfter: skipped, added, removed };
}

/** A change's badge (a function: translated when called, after the plugin has set the language). */
function kindLabel(kind: ChangeKind): string {
  switch (kind) {
    case 'added':
      return trans.__('Added');
    case 'removed':
      return trans.__('Removed');
    case 'modified':
      return trans.__('Modified');
    default:
      return trans.__('Moved');
  }
}

/** One cell's card: what changed, and its source diff. */
export function cellDiff(change: ICellChange): ICellDiff {
  const before = change.change === 'added' ? '' : (change.before?.source ?? '');
  const after = change.change === 'removed' ? '' : (change.after?.source ?? '');
  // a whole added or removed cell shows every line (nothing to fold against)
  const whole = change.change === 'added' || change.change === 'removed';
  const { hunks, skippedAfter, added, removed } = sourceHunks(before, after, whole ? Infinity : CONTEXT);
  const oldType = change.before?.cell_type ?? null;
  const newType = change.after?.cell_type ?? null;
  const sameSource = before === after;
  let label = kindLabel(change.change);
  if (change.change === 'moved' && !sameSource) {
    label = trans.__('Moved and modified');
  }
  return {
    cellId: change.cell_id,
    change: change.change,
    label,
    cellType: newType ?? oldType ?? 'code',
    typeChange: oldType && newType && oldType !== newType ? `${oldType} → ${newType}` : null,
    hunks,
    skippedAfter,
    added,
    removed,
    outputsChanged: change.outputs_changed,
    sameSource
  };
}

/** "Review 4 changes" (the turn's footer). */
export function reviewLabel(n: number): string {
  return trans._n('Review %1 change', 'Review %1 changes', n);
}

/** "4 changes: 3 modified, 1 added" (the review's header), or "Nothing left to review". */
export function changesSummary(changes: ICellChange[]): string {
  if (!changes.length) {
    return trans.__('Nothing left to review');
  }
  const order: ChangeKind[] = ['modified', 'added', 'removed', 'moved'];
  const parts = order
    .map(kind => [kind, changes.filter(c => c.change === kind).length] as const)
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => kindCount(kind, n));
  const outputs = changes.filter(c => c.outputs_changed).length;
  if (outputs) {
    parts.push(trans._n('outputs of %1 cell changed', 'outputs of %1 cells changed', outputs));
  }
  return trans._n('%1 change: %2', '%1 changes: %2', changes.length, parts.join(', '));
}

/** "3 modified" in a summary (the kind in its own words, for languages that inflect them). */
function kindCount(kind: ChangeKind, n: number): string {
  switch (kind) {
    case 'added':
      return trans.__('%1 added', n);
    case 'removed':
      return trans.__('%1 removed', n);
    case 'modified':
      return trans.__('%1 modified', n);
    default:
      return trans.__('%1 moved', n);
  }
}

/** What no checkpoint can undo: said before a rewind and after it (a function: translated when called). */
export function neverRestored(): string[] {
  return [
    trans.__('files the code wrote or deleted'),
    trans.__('network calls it made (requests sent, data uploaded)'),
    trans.__('GPU memory and other device state'),
    trans.__('open connections (databases, sockets, remote sessions)'),
    trans.__("the agent's own terminals")
  ];
}

/** 1.2 MB, 340 kB: a checkpoint's size. */
export function bytesText(n: number): string {
  if (n < 1000) {
    return `${n} B`;
  }
  const units = ['kB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = -1;
  do {
    v /= 1000;
    u++;
  } while (v >= 1000 && u < units.length - 1);
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[u]}`;
}

/** What a rewind would put back, from the turn's checkpoint (said next to the Rewind button). */
export function checkpointText(changes: ITurnChanges): string {
  const cp = changes.checkpoint;
  if (!cp) {
    return trans.__('No checkpoint: the cells can be discarded, but the kernel cannot be rewound for this turn.');
  }
  if (!cp.kernel) {
    return trans.__('Checkpoint of the cells (the turn did not change the kernel before it was taken).');
  }
  const k = cp.kernel;
  const skipped = k.skipped.length
    ? trans._n(', %1 variable not saved', ', %1 variables not saved', k.skipped.length)
    : '';
  return trans._n(
    'Checkpoint: the cells and %1 kernel variable (%2)%3.',
    'Checkpoint: the cells and %1 kernel variables (%2)%3.',
    k.saved.length,
    bytesText(k.bytes),
    skipped
  );
}

/**
 * A restore's report in lines: what was put back, what was not and why. `undo`: the restore undid a rewind (the
 * cells are back as the turn left them, not as before it).
 */
export function restoreReport(result: IRestoreResult, undo = false): { restored: string[]; notRestored: string[] } {
  const restored = [
    undo
      ? trans._n(
          '%1 cell put back as they were before the rewind',
          '%1 cells put back as they were before the rewind',
          result.restored_cells
        )
      : trans._n('%1 cell put back as before the turn', '%1 cells put back as before the turn', result.restored_cells)
  ];
  const notRestored: string[] = [];
  if (result.kernel) {
    if (result.kernel.restored.length) {
      restored.push(trans.__('kernel variables: %1', result.kernel.restored.join(', ')));
    } else {
      restored.push(trans.__('no kernel variable'));
    }
    if (result.kernel.removed.length) {
      restored.push(trans.__('variables created since, removed: %1', result.kernel.removed.join(', ')));
    }
    for (const { name, reason } of result.kernel.not_restored) {
      notRestored.push(`${name}: ${reason || trans.__('no reason given')}`);
    }
  } else {
    notRestored.push(
      trans.__('the kernel: this checkpoint holds no kernel state (its variables stay as they are now)')
    );
  }
  return { restored, notRestored };
}
