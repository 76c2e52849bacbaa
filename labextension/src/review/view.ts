/**
 * The review of one turn, in the main area next to the notebook: a notebook diff of what the turn did (one card per
 * cell, diff.ts), Keep / Discard per cell and for the whole turn, "Rewind to before this turn" with exactly what was
 * and was not restored and what no checkpoint can undo, and "Undo rewind".
 *
 * The source shows as JupyterLab shows code: the editor's font and its syntax colours (the notebook's language
 * registry highlights each side's whole source once, then the lines are cut out of it, so a line inside a string or a
 * docstring keeps its colour), the changed words of a changed line marked on top.
 */
import type { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { checkIcon, closeIcon, redoIcon, undoIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { button, el } from '../dom';
import { trans } from '../i18n';
import { reasonOf, ReviewApi } from './api';
import {
  cellDiff,
  changesSummary,
  checkpointText,
  ICellDiff,
  IDiffLine,
  ISpan,
  neverRestored,
  restoreReport
} from './diff';
import type { Decision, ICellChange, IRestoreResult, ITurnChanges } from './types';

export interface IReviewViewOptions {
  api: ReviewApi;
  sessionId: string;
  notebook: string;
  turnId: string;
  /** the prompt that started the turn ('' when the panel does not have it) */
  prompt: string;
  /** the agent's title */
  agent: string;
  languages: IEditorLanguageRegistry | null;
  /** the language of the notebook's code cells (its kernel's) */
  language: string;
  /** a user who may only read the conversation: the view shows, nothing can be decided */
  readOnly?: boolean;
  /** the changes left to review changed: the turn's footer follows */
  onChanged?(turnId: string, left: number): void;
  /** show the cell in the notebook */
  revealCell?(cellId: string): void;
}

/** A piece of a highlighted line: its text, the highlighter's classes, whether the turn changed these words. */
interface IPiece {
  text: string;
  cls: string;
  changed: boolean;
}

/**
 * Each line of `source` as the highlighter's pieces. `highlight` writes flat text nodes and spans for the whole source
 * (jupyterlab/codemirror's `EditorLanguageRegistry.highlight`); a piece with a newline is cut at it.
 */
async function highlightLines(
  languages: IEditorLanguageRegistry | null,
  language: string,
  source: string
): Promise<{ text: string; cls: string }[][] | null> {
  if (!languages || !source) {
    return null;
  }
  const spec = languages.findBest(language);
  if (!spec) {
    return null;
  }
  const box = document.createElement('div');
  try {
    await languages.highlight(source, spec, box);
  } catch {
    return null; // a grammar that fails to load: plain text still reads
  }
  const out: { text: string; cls: string }[][] = [[]];
  box.childNodes.forEach(node => {
    const cls = node instanceof HTMLElement ? node.className : '';
    const parts = (node.textContent ?? '').split('\n');
    parts.forEach((part, i) => {
      if (i > 0) {
        out.push([]);
      }
      if (part) {
        out[out.length - 1].push({ text: part, cls });
      }
    });
  });
  return out;
}

/** The pieces of a line: the highlighter's, cut again where the changed words start and end. */
function pieces(line: IDiffLine, tokens: { text: string; cls: string }[] | null): IPiece[] {
  const toks = tokens && tokens.map(t => t.text).join('') === line.text ? tokens : [{ text: line.text, cls: '' }];
  const spans: ISpan[] = line.spans ?? [{ text: line.text, changed: false }];
  const out: IPiece[] = [];
  let si = 0;
  let sLeft = spans[0]?.text.length ?? 0;
  for (const tok of toks) {
    let rest = tok.text;
    while (rest) {
      while (sLeft === 0 && si < spans.length - 1) {
        si++;
        sLeft = spans[si].text.length;
      }
      const take = sLeft > 0 ? Math.min(sLeft, rest.length) : rest.length;
      out.push({ text: rest.slice(0, take), cls: tok.cls, changed: !!spans[si]?.changed });
      rest = rest.slice(take);
      sLeft -= take;
    }
  }
  return out;
}

function languageOf(cellType: string, codeLanguage: string): string {
  return cellType === 'markdown' ? 'markdown' : cellType === 'raw' ? '' : codeLanguage;
}

export class ReviewView extends Widget {
  private _changes: ITurnChanges | null = null;
  /** cells decided in this view, shown greyed with the decision (the server no longer lists them) */
  private _decided = new Map<string, { decision: Decision; change: ICellChange }>();
  private _busy = false;
  private _error = '';
  private _loading = true;
  private _restore: { kind: 'rewind' | 'undo'; result: IRestoreResult } | null = null;
  private _undo: string | null = null;
  private _focus: string | null = null;
  private _head = el('div', 'jp-ACP-reviewHead');
  private _status = el('div', 'jp-ACP-reviewStatus');
  private _report = el('div', 'jp-ACP-reviewReport');
  private _cells = el('div', 'jp-ACP-reviewCells');

  constructor(private readonly _o: IReviewViewOptions) {
    super();
    this.addClass('jp-ACP-review');
    this.id = `jp-ACP-review-${_o.sessionId}-${_o.turnId}`.replace(/[^\w-]/g, '_');
    this.node.tabIndex = -1;
    this.node.dataset.session = _o.sessionId;
    this.node.dataset.turn = _o.turnId;
    this._status.setAttribute('role', 'status');
    this._report.setAttribute('aria-live', 'polite');
    this.node.append(this._head, this._status, this._report, this._cells);
    this._render();
  }

  get turnId(): string {
    return this._o.turnId;
  }

  get sessionId(): string {
    return this._o.sessionId;
  }

  get notebook(): string {
    return this._o.notebook;
  }

  /** Show a cell's card first (the mark's "Show the change"). */
  focusCell(cellId: string | null): void {
    this._focus = cellId;
    this._scrollToFocus();
  }

  /** Ask the server for the turn's changes again. */
  async load(): Promise<void> {
    this._loading = true;
    this._render();
    try {
      this._changes = await this._o.api.changes(this._o.sessionId, this._o.turnId);
      this._error = '';
      this._o.onChanged?.(this._o.turnId, this._changes.changes.length);
    } catch (err) {
      this._error = reasonOf(err, trans.__("Could not load the turn's changes"));
    } finally {
      this._loading = false;
      this._render();
      this._scrollToFocus();
    }
  }

  // -- actions ---------------------------------------------------------------------------------
  private async _decide(decision: Decision, cellId?: string): Promise<void> {
    const before = this._changes;
    if (!before || this._busy) {
      return;
    }
    await this._run(
      async () => {
        const left = await this._o.api.review(this._o.sessionId, this._o.turnId, decision, cellId, before);
        const still = new Set(left.changes.map(c => c.cell_id));
        for (const c of before.changes) {
          if (!still.has(c.cell_id) && (!cellId || c.cell_id === cellId)) {
            this._decided.set(c.cell_id, { decision, change: c });
          }
        }
        this._changes = left;
        this._o.onChanged?.(this._o.turnId, left.changes.length);
        if (left.not_discarded.length) {
          // "Discard all" leaves a cell the user edited since when its agent edits cannot be undone alone: say why
          throw new Error(left.not_discarded.map(r => trans.__('cell %1: %2', r.cell_id, r.reason)).join('; '));
        }
      },
      decision === 'keep'
        ? cellId
          ? trans.__('Could not keep this change')
          : trans.__("Could not keep the turn's changes")
        : cellId
          ? trans.__('Could not discard this change')
          : trans.__("Could not discard the turn's changes")
    );
  }

  private async _rewind(): Promise<void> {
    await this._run(async () => {
      const result = await this._o.api.rewind(this._o.sessionId, this._o.turnId);
      this._restore = { kind: 'rewind', result };
      this._undo = result.undo_checkpoint;
      await this._reload();
    }, trans.__('Could not rewind to before this turn'));
  }

  private async _undoRewind(): Promise<void> {
    const id = this._undo;
    if (!id) {
      return;
    }
    await this._run(async () => {
      const result = await this._o.api.restore(this._o.sessionId, id);
      this._restore = { kind: 'undo', result };
      this._undo = null;
      await this._reload();
    }, trans.__('Could not undo the rewind'));
  }

  /** After a rewind or its undo: what is left to review now (a failure here leaves the report standing). */
  private async _reload(): Promise<void> {
    try {
      this._changes = await this._o.api.changes(this._o.sessionId, this._o.turnId);
      this._decided.clear();
      this._o.onChanged?.(this._o.turnId, this._changes.changes.length);
    } catch {
      // the report says what happened; the list stays as it was
    }
  }

  private async _run(action: () => Promise<void>, what: string): Promise<void> {
    this._busy = true;
    this._error = '';
    this._render();
    try {
      await action();
    } catch (err) {
      this._error = reasonOf(err, what);
    } finally {
      this._busy = false;
      this._render();
    }
  }

  // -- rendering -------------------------------------------------------------------------------
  private _render(): void {
    this._renderHead();
    this._renderReport();
    this._renderCells();
  }

  private _renderHead(): void {
    const o = this._o;
    const h = this._head;
    h.textContent = '';
    const words = o.prompt.trim().replace(/\s+/g, ' ');
    const title = el(
      'h2',
      'jp-ACP-reviewTitle',
      words
        ? trans.__('Review: “%1”', words.length > 90 ? words.slice(0, 89) + '…' : words)
        : trans.__('Review of a turn')
    );
    const where = el('div', 'jp-ACP-reviewWhere', `${o.notebook} · ${o.agent}`);
    const left = this._changes?.changes ?? [];
    const summary = el(
      'div',
      'jp-ACP-reviewSummary',
      this._loading && !this._changes ? trans.__('Loading the turn’s changes…') : changesSummary(left)
    );
    // the server's list of decided cells when it gives one (it knows the decisions of other tabs and of earlier)
    const decided = this._changes?.decided.length
      ? this._changes.decided.map(d => d.decision)
      : [...this._decided.values()].map(d => d.decision);
    const decidedNote = decided.length
      ? trans.__(
          ' (%1 kept, %2 discarded)',
          decided.filter(d => d === 'keep').length,
          decided.filter(d => d === 'discard').length
        )
      : '';
    const running = !!this._changes?.running;
    summary.textContent += decidedNote;
    const bar = el('div', 'jp-ACP-reviewBar');
    bar.setAttribute('role', 'toolbar');
    bar.setAttribute('aria-label', trans.__('Review the whole turn'));
    const ro = !!o.readOnly;
    const why = ro ? trans.__(' (read only: you may watch this conversation, not change the notebook)') : '';
    const keepAll = button(
      trans.__('Keep all'),
      'jp-ACP-reviewKeepAll',
      () => void this._decide('keep'),
      checkIcon,
      trans.__('Keep all: keep every change of this turn that is left to review%1', why)
    );
    const discardAll = button(
      trans.__('Discard all'),
      'jp-ACP-reviewDiscardAll',
      () => void this._decide('discard'),
      closeIcon,
      trans.__('Discard all: undo every change of this turn that is left to review (your own later edits stay)%1', why)
    );
    keepAll.disabled = discardAll.disabled = ro || this._busy || running || !left.length;
    const rewind = button(
      trans.__('Rewind to before this turn'),
      'jp-ACP-reviewRewind',
      () => void this._rewind(),
      undoIcon,
      trans.__(
        "Rewind to before this turn: put the cells and the kernel's variables back as they were (it can be undone)%1",
        why
      )
    );
    rewind.disabled = ro || this._busy || running || !this._changes?.checkpoint;
    bar.append(keepAll, discardAll, el('span', 'jp-ACP-reviewBarGap'), rewind);
    if (this._undo) {
      const undo = button(
        trans.__('Undo rewind'),
        'jp-ACP-reviewUndo',
        () => void this._undoRewind(),
        redoIcon,
        trans.__('Undo rewind: put the notebook and the kernel back as they were just before the rewind%1', why)
      );
      undo.disabled = ro || this._busy;
      bar.appendChild(undo);
    }
    h.append(title, where, summary, bar);
    if (running) {
      h.appendChild(
        el(
          'div',
          'jp-ACP-reviewNote',
          trans.__('The turn is still running: its changes can be decided once it has ended.')
        )
      );
    }
    if (this._changes) {
      const cp = el('div', 'jp-ACP-reviewCheckpoint', checkpointText(this._changes));
      const skipped = this._changes.checkpoint?.kernel?.skipped ?? [];
      if (skipped.length) {
        const details = el('details', 'jp-ACP-reviewSkipped');
        details.append(
          el('summary', '', trans.__('Variables a rewind cannot restore')),
          this._list(
            skipped.map(s => `${s.name}: ${s.reason || trans.__('no reason given')}`),
            'jp-ACP-reviewNotRestored'
          )
        );
        cp.appendChild(details);
      }
      const never = el('details', 'jp-ACP-reviewSkipped');
      never.append(
        el('summary', '', trans.__('What no rewind undoes')),
        this._list(neverRestored(), 'jp-ACP-reviewNever')
      );
      cp.appendChild(never);
      h.appendChild(cp);
    }
    this._status.textContent = this._busy ? trans.__('Working…') : '';
    this._status.hidden = !this._busy && !this._error;
    this._status.classList.toggle('jp-mod-error', !!this._error);
    this._status.setAttribute('role', this._error ? 'alert' : 'status');
    if (this._error) {
      this._status.textContent = this._error;
    }
  }

  private _list(items: string[], cls: string): HTMLElement {
    const ul = el('ul', cls);
    for (const item of items) {
      ul.appendChild(el('li', '', item));
    }
    return ul;
  }

  private _renderReport(): void {
    const r = this._report;
    r.textContent = '';
    const done = this._restore;
    r.hidden = !done;
    if (!done) {
      return;
    }
    const { restored, notRestored } = restoreReport(done.result, done.kind === 'undo');
    r.dataset.kind = done.kind;
    r.append(
      el(
        'div',
        'jp-ACP-reviewReportTitle',
        done.kind === 'rewind'
          ? trans.__('Rewound to before this turn.')
          : trans.__('Rewind undone: the notebook and the kernel are as they were just before it.')
      ),
      el('div', 'jp-ACP-reviewReportLabel', trans.__('Restored')),
      this._list(restored, 'jp-ACP-reviewRestored'),
      el('div', 'jp-ACP-reviewReportLabel', trans.__('Not restored')),
      this._list(
        notRestored.length ? notRestored : [trans.__('nothing: every variable the checkpoint saved was put back')],
        'jp-ACP-reviewNotRestored'
      ),
      el(
        'div',
        'jp-ACP-reviewReportLabel',
        trans.__('No checkpoint undoes what the code did outside the notebook and the kernel')
      ),
      this._list(done.result.never_restored.length ? done.result.never_restored : neverRestored(), 'jp-ACP-reviewNever')
    );
  }

  private _renderCells(): void {
    const box = this._cells;
    box.textContent = '';
    const left = this._changes?.changes ?? [];
    for (const change of left) {
      box.appendChild(this._card(change, null));
    }
    for (const [, d] of this._decided) {
      if (!left.some(c => c.cell_id === d.change.cell_id)) {
        box.appendChild(this._card(d.change, d.decision));
      }
    }
    if (!this._loading && this._changes && !left.length && !this._decided.size) {
      box.appendChild(
        el(
          'p',
          'jp-ACP-reviewEmpty',
          trans.__(
            'Nothing of this turn is waiting for review: its changes were kept or discarded, or it changed no cell.'
          )
        )
      );
    }
    if (this._focus && this._changes && !left.some(c => c.cell_id === this._focus) && !this._decided.has(this._focus)) {
      box.prepend(
        el(
          'p',
          'jp-ACP-reviewEmpty',
          trans.__(
            'The change of the cell you came from is not waiting for review in this turn (kept or discarded already).'
          )
        )
      );
    }
  }

  private _card(change: ICellChange, decided: Decision | null): HTMLElement {
    const d = cellDiff(change);
    const card = el('section', `jp-ACP-reviewCell jp-mod-${d.change}`);
    card.dataset.cellId = d.cellId;
    card.dataset.change = d.change;
    if (decided) {
      card.classList.add('jp-mod-decided');
      card.dataset.decision = decided;
    }
    if (this._focus === d.cellId) {
      card.classList.add('jp-mod-focused');
    }
    card.setAttribute('aria-label', trans.__('%1 %2 cell', d.label, d.cellType));
    const head = el('div', 'jp-ACP-reviewCellHead');
    head.append(el('span', `jp-ACP-reviewBadge jp-mod-${d.change}`, d.label));
    head.append(el('span', 'jp-ACP-reviewCellType', d.typeChange ?? trans.__('%1 cell', d.cellType)));
    if (this._o.revealCell && change.change !== 'removed') {
      head.appendChild(
        button(
          trans.__('Go to cell'),
          'jp-ACP-linkButton jp-ACP-reviewGoTo',
          () => this._o.revealCell?.(d.cellId),
          undefined,
          trans.__('Go to cell: show this cell (%1) in the notebook', d.cellId)
        )
      );
    }
    if (d.added || d.removed) {
      const stats = el('span', 'jp-ACP-reviewStats');
      stats.append(el('span', 'jp-mod-add', `+${d.added}`), el('span', 'jp-mod-del', `−${d.removed}`));
      stats.setAttribute(
        'aria-label',
        trans._n('%1 line added, %2 removed', '%1 lines added, %2 removed', d.added, d.removed)
      );
      head.appendChild(stats);
    }
    if (d.outputsChanged) {
      head.appendChild(el('span', 'jp-ACP-reviewOutputs', trans.__('Outputs changed')));
    }
    if (decided) {
      head.appendChild(
        el('span', 'jp-ACP-reviewDecision', decided === 'keep' ? trans.__('Kept') : trans.__('Discarded'))
      );
    } else {
      const ro = !!this._o.readOnly;
      const keep = button(
        trans.__('Keep'),
        'jp-ACP-reviewKeep',
        () => void this._decide('keep', d.cellId),
        checkIcon,
        trans.__('Keep: keep this %1 cell as the agent left it', d.label.toLowerCase())
      );
      const discard = button(
        trans.__('Discard'),
        'jp-ACP-reviewDiscard',
        () => void this._decide('discard', d.cellId),
        closeIcon,
        trans.__("Discard: undo the agent's change of this cell (your own later edits stay)")
      );
      keep.disabled = discard.disabled = ro || this._busy || !!this._changes?.running;
      const actions = el('span', 'jp-ACP-reviewActions');
      actions.append(keep, discard);
      head.appendChild(actions);
    }
    card.appendChild(head);
    if (d.sameSource) {
      card.appendChild(
        el(
          'div',
          'jp-ACP-reviewNote',
          d.change === 'moved'
            ? trans.__('Moved to another place in the notebook; its source did not change.')
            : trans.__('Its source did not change.')
        )
      );
    }
    if (d.hunks.length && !decided) {
      card.appendChild(this._source(d, change));
    }
    return card;
  }

  private _source(d: ICellDiff, change: ICellChange): HTMLElement {
    const body = el('div', 'jp-ACP-reviewSource');
    body.setAttribute('role', 'table');
    body.setAttribute('aria-label', trans.__('Source of the %1 cell, line by line', d.cellType));
    const rows: { line: IDiffLine; code: HTMLElement }[] = [];
    d.hunks.forEach(hunk => {
      if (hunk.skippedBefore) {
        body.appendChild(this._fold(hunk.skippedBefore));
      }
      for (const line of hunk.lines) {
        const row = el('div', `jp-ACP-reviewLine jp-mod-${line.op}`);
        row.setAttribute('role', 'row');
        const sign = line.op === 'add' ? '+' : line.op === 'del' ? '−' : ' ';
        const code = el('code', 'jp-ACP-reviewCode');
        const cells = [
          el('span', 'jp-ACP-reviewNo', line.oldNo === null ? '' : String(line.oldNo)),
          el('span', 'jp-ACP-reviewNo', line.newNo === null ? '' : String(line.newNo)),
          el('span', 'jp-ACP-reviewSign', sign),
          code
        ];
        cells.forEach(c => c.setAttribute('role', 'cell'));
        row.append(...cells);
        row.setAttribute(
          'aria-label',
          line.op === 'add'
            ? trans.__('added line %1', line.newNo ?? line.oldNo)
            : line.op === 'del'
              ? trans.__('removed line %1', line.newNo ?? line.oldNo)
              : trans.__('unchanged line %1', line.newNo ?? line.oldNo)
        );
        this._paint(code, line, null);
        body.appendChild(row);
        rows.push({ line, code });
      }
    });
    if (d.skippedAfter) {
      body.appendChild(this._fold(d.skippedAfter));
    }
    // the syntax colours come when the language is loaded (the first time, a grammar is fetched)
    const lang = languageOf(d.cellType, this._o.language);
    if (lang && this._o.languages) {
      const before = change.change === 'added' ? '' : (change.before?.source ?? '');
      const after = change.change === 'removed' ? '' : (change.after?.source ?? '');
      void Promise.all([
        highlightLines(this._o.languages, languageOf(change.before?.cell_type ?? d.cellType, this._o.language), before),
        highlightLines(this._o.languages, lang, after)
      ]).then(([oldLines, newLines]) => {
        for (const { line, code } of rows) {
          const toks = line.op === 'del' ? oldLines?.[line.oldNo! - 1] : newLines?.[line.newNo! - 1];
          if (toks) {
            this._paint(code, line, toks);
          }
        }
      });
    }
    return body;
  }

  private _fold(n: number): HTMLElement {
    return el('div', 'jp-ACP-reviewFold', trans._n('⋯ %1 unchanged line', '⋯ %1 unchanged lines', n));
  }

  private _paint(code: HTMLElement, line: IDiffLine, toks: { text: string; cls: string }[] | null): void {
    code.textContent = '';
    for (const p of pieces(line, toks)) {
      if (!p.cls && !p.changed) {
        code.appendChild(document.createTextNode(p.text));
        continue;
      }
      const span = el('span', [p.cls, p.changed ? 'jp-ACP-reviewWord' : ''].filter(Boolean).join(' '), p.text);
      code.appendChild(span);
    }
    if (!line.text) {
      code.appendChild(document.createTextNode('\u200b')); // an empty line keeps its height
    }
  }

  private _scrollToFocus(): void {
    const id = this._focus;
    if (!id) {
      return;
    }
    const card = this._cells.querySelector<HTMLElement>(`[data-cell-id="${CSS.escape(id)}"]`);
    this._cells.querySelectorAll('.jp-mod-focused').forEach(n => n.classList.remove('jp-mod-focused'));
    if (card) {
      card.classList.add('jp-mod-focused');
      card.scrollIntoView({ block: 'start' });
    }
  }
}
