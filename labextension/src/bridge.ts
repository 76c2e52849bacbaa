/**
 * The tab's side of the server's frontend bridge (`jupyter-acp/frontend/ws`, JSON-RPC).
 *
 * The tab reports which notebooks it shows and which one has focus; the server asks it for the
 * selection (`getSelection`) and, when RTC is off, for the cells (`getCells`) and to apply the
 * agent's edits in the open notebook (`applyEdit`), so they never fight the tab's own copy.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';

/* eslint-disable @typescript-eslint/no-explicit-any */

export class FrontendBridge {
  private _ws: WebSocket | null = null;
  private _delay = 1000;
  private _timer: number | null = null;
  private _disposed = false;
  private readonly _clientId = randomId();
  private readonly _settings = ServerConnection.makeSettings();

  constructor(private readonly _tracker: INotebookTracker) {
    _tracker.currentChanged.connect(() => this._focus(), this);
    _tracker.activeCellChanged.connect(() => this._focus(), this);
    _tracker.widgetAdded.connect((_, panel) => {
      void panel.context.ready.then(() => this._send('opened', { path: panel.context.localPath }));
      panel.context.pathChanged.connect(() => this._focus());
      panel.disposed.connect(() => this._send('closed', { path: panel.context.localPath }));
    }, this);
    this._connect();
  }

  dispose(): void {
    this._disposed = true;
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
    }
    this._ws?.close();
  }

  private _url(): string {
    let url =
      URLExt.join(this._settings.wsUrl, 'jupyter-acp', 'frontend', 'ws') +
      `?clientId=${encodeURIComponent(this._clientId)}`;
    const s = this._settings as any;
    if (s.token && s.appendToken) {
      url += `&token=${encodeURIComponent(s.token)}`;
    }
    return url;
  }

  private _connect(): void {
    if (this._disposed) {
      return;
    }
    const ws = new WebSocket(this._url());
    this._ws = ws;
    ws.onopen = () => {
      this._delay = 1000;
      this._tracker.forEach(panel => this._send('opened', { path: panel.context.localPath }));
      this._focus();
    };
    ws.onmessage = msg => void this._onMessage(String(msg.data));
    ws.onclose = () => {
      if (this._ws !== ws || this._disposed) {
        return;
      }
      this._ws = null;
      this._timer = window.setTimeout(() => this._connect(), this._delay);
      this._delay = Math.min(this._delay * 2, 15000);
    };
  }

  private _send(method: string, params: any): void {
    if (this._ws?.readyState === WebSocket.OPEN) {
      this._ws.send(JSON.stringify({ jsonrpc: '2.0', method, params }));
    }
  }

  private _focus(): void {
    const panel = this._tracker.currentWidget;
    if (panel && !panel.isDisposed) {
      this._send('focus', { path: panel.context.localPath });
    }
  }

  private _panel(path: string | undefined): NotebookPanel | null {
    const current = this._tracker.currentWidget;
    if (!path) {
      return current;
    }
    if (current && current.context.localPath === path) {
      return current;
    }
    return this._tracker.find(p => p.context.localPath === path) ?? null;
  }

  private async _onMessage(raw: string): Promise<void> {
    let msg: any;
    try {
      msg = JSON.parse(raw);
    } catch {
      return;
    }
    if (!msg || typeof msg.method !== 'string' || msg.id === undefined) {
      return;
    }
    let reply: any;
    try {
      const result = await this._handle(msg.method, msg.params ?? {});
      reply = { jsonrpc: '2.0', id: msg.id, result };
    } catch (err) {
      reply = { jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: (err as Error).message } };
    }
    if (this._ws?.readyState === WebSocket.OPEN) {
      this._ws.send(JSON.stringify(reply));
    }
  }

  private async _handle(method: string, params: any): Promise<any> {
    const panel = this._panel(params.path);
    if (!panel) {
      throw new Error(`${params.path ?? 'no notebook'} is not open in this tab`);
    }
    switch (method) {
      case 'getSelection':
        return selectionOf(panel);
      case 'getCells':
        return {
          path: panel.context.localPath,
          cells: cellsOf(panel),
          dirty: panel.context.model.dirty
        };
      case 'applyEdit':
        applyEdit(panel, params);
        return { ok: true };
      default:
        throw new Error(`unknown method ${method}`);
    }
  }
}

function randomId(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, b => b.toString(16).padStart(2, '0')).join('');
}

function cellsOf(panel: NotebookPanel): any[] {
  const shared = panel.content.model?.sharedModel;
  if (!shared) {
    return [];
  }
  return shared.cells.map(c => {
    const cell: any = c.toJSON();
    if (Array.isArray(cell.source)) {
      cell.source = cell.source.join('');
    }
    return cell;
  });
}

/** What the server's getSelection tool reports to the agent. */
export function selectionOf(panel: NotebookPanel): any {
  const nb = panel.content;
  const cell = nb.activeCell;
  const editor = cell?.editor ?? null;
  let selectedText = '';
  let selection: any = null;
  let cursor: any = null;
  if (editor) {
    selection = editor.getSelection();
    cursor = editor.getCursorPosition();
    const a = editor.getOffsetAt(selection.start);
    const b = editor.getOffsetAt(selection.end);
    selectedText = editor.model.sharedModel.getSource().slice(Math.min(a, b), Math.max(a, b));
  }
  const selectedCells: number[] = [];
  const selectedCellIds: string[] = [];
  nb.widgets.forEach((c, i) => {
    if (nb.isSelectedOrActive(c)) {
      selectedCells.push(i);
      selectedCellIds.push(c.model.id);
    }
  });
  return {
    path: panel.context.localPath,
    kernelId: panel.sessionContext.session?.kernel?.id ?? null,
    sessionId: panel.sessionContext.session?.id ?? null,
    activeCellIndex: nb.activeCellIndex,
    activeCellId: cell?.model.id ?? null,
    mode: nb.mode,
    selectedCells,
    selectedCellIds,
    selectedText,
    cursor,
    selection
  };
}

/** Apply one of the agent's edits (RTC off) to the open notebook, as one undoable change. */
export function applyEdit(panel: NotebookPanel, p: any): void {
  const shared = panel.content.model?.sharedModel;
  if (!shared) {
    throw new Error('the notebook has no model yet');
  }
  const indexOf = (id: string): number => {
    const i = shared.cells.findIndex(c => c.id === id);
    if (i < 0) {
      throw new Error(`no cell with id ${id}`);
    }
    return i;
  };
  shared.transact(() => {
    switch (p.op) {
      case 'insert': {
        const cell = { ...p.cell };
        if (Array.isArray(cell.source)) {
          cell.source = cell.source.join('');
        }
        const index = Math.max(0, Math.min(Number(p.index ?? shared.cells.length), shared.cells.length));
        shared.insertCell(index, cell);
        break;
      }
      case 'setSource':
        shared.cells[indexOf(p.cellId)].setSource(String(p.source ?? ''));
        break;
      case 'delete': {
        const ids: string[] = p.cellIds ?? [];
        const indices = ids.map(indexOf).sort((a, b) => b - a);
        for (const i of indices) {
          shared.deleteCell(i);
        }
        break;
      }
      case 'move':
        shared.moveCell(indexOf(p.cellId), Math.max(0, Math.min(Number(p.toIndex), shared.cells.length - 1)));
        break;
      case 'setOutputs': {
        const cell: any = shared.cells[indexOf(p.cellId)];
        if (cell.cell_type !== 'code') {
          throw new Error(`cell ${p.cellId} is not a code cell`);
        }
        cell.setOutputs(p.outputs ?? []);
        cell.execution_count = p.executionCount ?? null;
        break;
      }
      default:
        throw new Error(`unknown edit ${p.op}`);
    }
  });
}
