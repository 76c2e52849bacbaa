/**
 * Cells the agent edited, marked in the notebook: a left border and a small bar (Accept, Undo) on
 * each cell whose agent edits can still be undone alone.
 *
 * What is marked comes from the server (`GET .../revert?cells=1`: the cells whose agent edits of the
 * live document it can undo one by one), asked again as the conversation's events arrive (at most
 * every 700 ms while a turn runs). A mark goes when the user types in the cell or clicks Accept
 * (`POST .../revert {cell_id, accept: true}`: the server stops offering it), or Undo reverts that
 * cell's agent edits alone (`POST .../revert {cell_id}`: the user's later edits stay).
 */
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { checkIcon, undoIcon } from '@jupyterlab/ui-components';

import type { AcpApi } from './api';
import { button, el } from './dom';
import { trans } from './i18n';
import type { SessionView } from './session';

const MARKED = 'jp-ACP-agentEdited';

export interface ICellMarksHost {
  readonly api: AcpApi;
  readonly tracker: INotebookTracker;
  flash(text: string, level?: string): void;
}

/** Keys that change a cell's text (typing), not the ones that move around it. */
function edits(e: KeyboardEvent): boolean {
  if (e.metaKey || e.ctrlKey) {
    return ['v', 'x', 'z', 'y'].includes(e.key.toLowerCase());
  }
  return e.key.length === 1 || e.key === 'Backspace' || e.key === 'Delete' || e.key === 'Enter' || e.key === 'Tab';
}

export class CellMarks {
  /** session id -> cell ids marked, and the notebook it is bound to */
  private _cells = new Map<string, { path: string; ids: Set<string> }>();
  private _timers = new Map<string, number>();
  private _asked = new Map<string, number>();
  private _watched = new WeakSet<NotebookPanel>();

  constructor(private readonly _host: ICellMarksHost) {
    _host.tracker.widgetAdded.connect((_, nb) => this._watch(nb));
    _host.tracker.forEach(nb => this._watch(nb));
  }

  /** The conversation's events changed: ask the server again (throttled). */
  changed(view: SessionView): void {
    const id = view.info.id;
    if (this._asked.get(id) === view.model.lastSeq || this._timers.has(id)) {
      return;
    }
    this._timers.set(
      id,
      window.setTimeout(() => {
        this._timers.delete(id);
        this._asked.set(id, view.model.lastSeq);
        void this.refresh(view);
      }, 700)
    );
  }

  async refresh(view: SessionView): Promise<void> {
    let cells: Record<string, unknown> = {};
    try {
      const res = await this._host.api.request<{ cells?: Record<string, unknown> }>(
        `sessions/${view.info.id}/revert?cells=1`
      );
      cells = res?.cells ?? {};
    } catch {
      cells = {}; // a server without the notebook tools, or no live document: nothing to mark
    }
    this._cells.set(view.info.id, { path: view.info.notebook, ids: new Set(Object.keys(cells)) });
    this._applyPath(view.info.notebook);
  }

  /** The marked cell ids of a notebook (every session bound to it). */
  marked(path: string): Set<string> {
    const out = new Set<string>();
    for (const { path: p, ids } of this._cells.values()) {
      if (p === path) {
        ids.forEach(id => out.add(id));
      }
    }
    return out;
  }

  private _sessionOf(path: string, cellId: string): string | null {
    for (const [sid, { path: p, ids }] of this._cells) {
      if (p === path && ids.has(cellId)) {
        return sid;
      }
    }
    return null;
  }

  private _watch(nb: NotebookPanel): void {
    if (this._watched.has(nb)) {
      return;
    }
    this._watched.add(nb);
    const apply = () => this._apply(nb);
    nb.content.model?.cells.changed.connect(apply);
    nb.content.modelChanged.connect(() => {
      nb.content.model?.cells.changed.connect(apply);
      apply();
    });
    void nb.context.ready.then(apply);
  }

  private _applyPath(path: string): void {
    this._host.tracker.forEach(nb => {
      if (!nb.isDisposed && nb.context.localPath === path) {
        this._apply(nb);
      }
    });
  }

  private _apply(nb: NotebookPanel): void {
    if (nb.isDisposed) {
      return;
    }
    const path = nb.context.localPath;
    const marked = this.marked(path);
    for (const cell of nb.content.widgets) {
      const id = cell.model?.id;
      const node = cell.node;
      const has = node.classList.contains(MARKED);
      const want = !!id && marked.has(id);
      if (want && !has) {
        node.classList.add(MARKED);
        node.dataset.acpCell = id;
        node.appendChild(this._bar(path, id));
        if (!node.dataset.acpWatched) {
          node.dataset.acpWatched = '1';
          node.addEventListener(
            'keydown',
            e => {
              const cid = node.dataset.acpCell;
              if (
                cid &&
                node.classList.contains(MARKED) &&
                edits(e) &&
                (e.target as HTMLElement)?.closest('.jp-Cell-inputArea')
              ) {
                void this._accept(path, cid, true); // the user edits the cell: it is theirs now
              }
            },
            true
          );
        }
      } else if (!want && has) {
        this._unmark(node);
      }
    }
  }

  private _unmark(node: HTMLElement): void {
    node.classList.remove(MARKED);
    delete node.dataset.acpCell;
    node.querySelectorAll(':scope > .jp-ACP-cellMark').forEach(b => b.remove());
  }

  private _bar(path: string, cellId: string): HTMLElement {
    const bar = el('div', 'jp-ACP-cellMark');
    bar.setAttribute('role', 'group');
    bar.setAttribute('aria-label', trans.__('Edited by the agent'));
    bar.append(
      el('span', 'jp-ACP-cellMarkLabel', trans.__('Agent edit')),
      button(
        trans.__('Accept'),
        'jp-ACP-linkButton jp-ACP-cellAccept',
        () => void this._accept(path, cellId, false),
        checkIcon,
        trans.__("Accept: keep the agent's edit of this cell (the mark goes)")
      ),
      button(
        trans.__('Undo'),
        'jp-ACP-linkButton jp-ACP-cellUndo',
        () => void this._undo(path, cellId),
        undoIcon,
        trans.__("Undo the agent's edits of this cell only (your own edits stay)")
      )
    );
    return bar;
  }

  private _drop(path: string, cellId: string): void {
    for (const { path: p, ids } of this._cells.values()) {
      if (p === path) {
        ids.delete(cellId);
      }
    }
    this._applyPath(path);
  }

  private async _accept(path: string, cellId: string, quiet: boolean): Promise<void> {
    const sid = this._sessionOf(path, cellId);
    this._drop(path, cellId);
    if (!sid) {
      return;
    }
    try {
      await this._host.api.request(`sessions/${sid}/revert`, {
        method: 'POST',
        body: JSON.stringify({ cell_id: cellId, accept: true })
      });
    } catch (err) {
      if (!quiet) {
        this._host.flash(trans.__('Could not accept the edit: %1', (err as Error).message));
      }
    }
  }

  private async _undo(path: string, cellId: string): Promise<void> {
    const sid = this._sessionOf(path, cellId);
    if (!sid) {
      return;
    }
    try {
      await this._host.api.request(`sessions/${sid}/revert`, {
        method: 'POST',
        body: JSON.stringify({ cell_id: cellId })
      });
      this._drop(path, cellId);
    } catch (err) {
      this._host.flash(trans.__("Could not undo the agent's edit of this cell: %1", (err as Error).message), 'warning');
    }
  }
}
