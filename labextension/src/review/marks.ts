/**
 * Agent-written cells, marked in the notebook from their own metadata (`metadata.jupyter_acp`, provenance.ts): a
 * quiet dot beside the cell; hovering it (or focusing it and pressing Enter) opens a popover that says who changed the
 * cell, in which turn, for which prompt and for whom ("Codex, turn 4: 'plot the residuals' (by alice)"), with "Open in
 * the conversation" and "Show the change".
 *
 * The mark follows the metadata, not the server: it shows in any notebook that carries entries (opened after a
 * restart, in a second browser, after nbconvert), and goes when the entries go ("Remove agent marks from this
 * notebook" deletes them through the notebook's model: the user's own edit, saved like any other, one undo step).
 */
import type { Cell } from '@jupyterlab/cells';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { button, el } from '../dom';
import { trans } from '../i18n';
import { describeEntry, detailText, IAgentEntry, ICellProvenance, PROVENANCE_KEY, provenanceOf } from './provenance';

const MARKED = 'jp-ACP-hasProvenance';
/** How long the popover stays once the pointer leaves the mark (time to reach its buttons). */
const LINGER = 350;

export interface IProvenanceHost {
  readonly tracker: INotebookTracker;
  /** configured agents' titles by name ("codex" -> "Codex") */
  titles(): Record<string, string>;
  /** scroll the panel to the turn's prompt */
  openTurn(notebook: string, entry: IAgentEntry): void;
  /** open the turn's review at this cell */
  showChange(notebook: string, entry: IAgentEntry, cellId: string): void;
}

export class ProvenanceMarks {
  private _watched = new WeakSet<NotebookPanel>();
  private _cells = new WeakSet<Cell>();
  private _popover: { node: HTMLElement; cell: Cell; timer: number | null } | null = null;

  constructor(private readonly _host: IProvenanceHost) {
    _host.tracker.widgetAdded.connect((_, nb) => this._watch(nb));
    _host.tracker.forEach(nb => this._watch(nb));
  }

  /**
   * Delete `metadata.jupyter_acp` from every cell of the notebook, in one transaction of its shared model (one undo
   * step, marked dirty like any edit); answers the number of cells cleaned.
   */
  static strip(nb: NotebookPanel): number {
    const model = nb.content.model;
    if (!model) {
      return 0;
    }
    let n = 0;
    model.sharedModel.transact(() => {
      for (const cell of model.cells) {
        if (cell.getMetadata(PROVENANCE_KEY) !== undefined) {
          cell.deleteMetadata(PROVENANCE_KEY);
          n++;
        }
      }
    });
    return n;
  }

  /** Cells of the notebook that carry an agent entry. */
  static count(nb: NotebookPanel): number {
    let n = 0;
    for (const cell of nb.content.model?.cells ?? []) {
      if (provenanceOf(cell.getMetadata(PROVENANCE_KEY))) {
        n++;
      }
    }
    return n;
  }

  private _watch(nb: NotebookPanel): void {
    if (this._watched.has(nb)) {
      return;
    }
    this._watched.add(nb);
    const apply = () => this._applyAll(nb);
    const connect = () => nb.content.model?.cells.changed.connect(apply);
    connect();
    nb.content.modelChanged.connect(() => {
      connect();
      apply();
    });
    void nb.context.ready.then(apply);
  }

  private _applyAll(nb: NotebookPanel): void {
    if (nb.isDisposed) {
      return;
    }
    for (const cell of nb.content.widgets) {
      this._follow(nb, cell);
    }
  }

  /** Mark the cell now and whenever its metadata changes (the server writes entries on the live document). */
  private _follow(nb: NotebookPanel, cell: Cell): void {
    if (!this._cells.has(cell)) {
      this._cells.add(cell);
      cell.model.metadataChanged.connect((_, change) => {
        if (change.key === PROVENANCE_KEY) {
          this._apply(nb, cell);
        }
      });
    }
    this._apply(nb, cell);
  }

  private _apply(nb: NotebookPanel, cell: Cell): void {
    if (cell.isDisposed) {
      return;
    }
    const p = provenanceOf(cell.model.getMetadata(PROVENANCE_KEY));
    const node = cell.node;
    node.querySelectorAll(':scope > .jp-ACP-provMark').forEach(m => m.remove());
    if (this._popover?.cell === cell) {
      this._hide(true);
    }
    node.classList.toggle(MARKED, !!p);
    if (!p) {
      delete node.dataset.acpAgent;
      return;
    }
    node.dataset.acpAgent = p.last.agent.name;
    const text = describeEntry(p.last, this._host.titles());
    const mark = el('button', 'jp-ACP-provMark');
    mark.type = 'button';
    mark.setAttribute('aria-label', trans.__('Changed by an agent: %1', text));
    mark.setAttribute('aria-haspopup', 'dialog');
    mark.setAttribute('aria-expanded', 'false');
    if (p.editedSince) {
      mark.classList.add('jp-mod-editedSince');
    }
    mark.addEventListener('mouseenter', () => this._show(nb, cell, mark, p));
    mark.addEventListener('mouseleave', () => this._hide(false));
    mark.addEventListener('click', e => {
      e.stopPropagation(); // a click on the mark is not a click that selects the cell for editing
      if (this._popover?.cell === cell) {
        this._hide(true);
      } else {
        this._show(nb, cell, mark, p, true);
      }
    });
    node.appendChild(mark);
  }

  private _show(nb: NotebookPanel, cell: Cell, mark: HTMLElement, p: ICellProvenance, focus = false): void {
    if (this._popover?.cell === cell) {
      this._keep();
      return;
    }
    this._hide(true);
    const path = nb.context.localPath;
    const box = el('div', 'jp-ACP-provPopover');
    box.setAttribute('role', 'dialog');
    box.setAttribute('aria-label', trans.__('Who changed this cell'));
    const cellId = cell.model.id;
    box.append(
      el('div', 'jp-ACP-provText', describeEntry(p.last, this._host.titles())),
      el('div', 'jp-ACP-provDetail', detailText(p))
    );
    const actions = el('div', 'jp-ACP-provActions');
    actions.append(
      button(
        trans.__('Open in the conversation'),
        'jp-ACP-linkButton jp-ACP-provOpen',
        () => {
          this._hide(true);
          this._host.openTurn(path, p.last);
        },
        undefined,
        trans.__('Open in the conversation: scroll the agent panel to the prompt of this turn')
      ),
      button(
        trans.__('Show the change'),
        'jp-ACP-linkButton jp-ACP-provShow',
        () => {
          this._hide(true);
          this._host.showChange(path, p.last, cellId);
        },
        undefined,
        trans.__("Show the change: open this turn's review at this cell")
      )
    );
    box.appendChild(actions);
    box.addEventListener('mouseenter', () => this._keep());
    box.addEventListener('mouseleave', () => this._hide(false));
    box.addEventListener('keydown', e => {
      if (e.key === 'Escape') {
        e.stopPropagation();
        this._hide(true);
        mark.focus();
      }
    });
    box.addEventListener('click', e => e.stopPropagation());
    mark.setAttribute('aria-expanded', 'true');
    cell.node.appendChild(box);
    this._popover = { node: box, cell, timer: null };
    if (focus) {
      box.querySelector<HTMLButtonElement>('button')?.focus();
    }
  }

  private _keep(): void {
    if (this._popover?.timer) {
      window.clearTimeout(this._popover.timer);
      this._popover.timer = null;
    }
  }

  private _hide(now: boolean): void {
    const pop = this._popover;
    if (!pop) {
      return;
    }
    const close = () => {
      pop.node.remove();
      pop.cell.node.querySelector('.jp-ACP-provMark')?.setAttribute('aria-expanded', 'false');
      if (this._popover === pop) {
        this._popover = null;
      }
    };
    if (now) {
      this._keep();
      close();
      return;
    }
    this._keep();
    pop.timer = window.setTimeout(close, LINGER);
  }
}
