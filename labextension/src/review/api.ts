/**
 * The review and rewind routes, through the panel's one requester (`AcpApi.request`: ServerConnection, auth and
 * XSRF). Answers are read defensively into the shapes of types.ts: a field missing or of another type becomes its
 * empty value, an entry that is not one is left out, so a server a little older or newer than the panel shows what it
 * can instead of breaking the view. No JupyterLab import at run time: node's test runner loads this module.
 */
import { trans } from '../i18n';
import type {
  Decision,
  ICellChange,
  ICellSide,
  ICheckpoint,
  IKernelSnapshot,
  INamedReason,
  IRestoreResult,
  ITurnChanges,
  SessionPolicy
} from './types';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** What the client needs of the panel's API: one JSON request under `jupyter-acp/`, its refusals thrown. */
export interface IRequester {
  request<T>(path: string, init?: RequestInit): Promise<T>;
}

const KINDS = new Set(['added', 'removed', 'modified', 'moved']);

function str(value: unknown): string {
  return typeof value === 'string' ? value : value === null || value === undefined ? '' : String(value);
}

function names(value: unknown): string[] {
  return Array.isArray(value) ? value.filter(v => typeof v === 'string' || typeof v === 'number').map(String) : [];
}

function reasons(value: unknown): INamedReason[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const out: INamedReason[] = [];
  for (const v of value) {
    if (typeof v === 'string') {
      out.push({ name: v, reason: '' });
    } else if (v && typeof v === 'object' && (v as any).name !== undefined) {
      out.push({ name: str((v as any).name), reason: str((v as any).reason) });
    }
  }
  return out;
}

function side(value: any): ICellSide | null {
  if (!value || typeof value !== 'object') {
    return null;
  }
  // nbformat allows a source as a list of lines; the routes send a string, a stored notebook may not
  const source = Array.isArray(value.source) ? value.source.map(str).join('') : str(value.source);
  return { cell_type: str(value.cell_type) || 'code', source };
}

export function normaliseChange(raw: any): ICellChange | null {
  if (!raw || typeof raw !== 'object' || !KINDS.has(raw.change)) {
    return null;
  }
  return {
    cell_id: str(raw.cell_id),
    change: raw.change,
    before: side(raw.before),
    after: side(raw.after),
    outputs_changed: raw.outputs_changed === true
  };
}

function snapshot(raw: any): IKernelSnapshot | null {
  if (!raw || typeof raw !== 'object') {
    return null;
  }
  return {
    saved: names(raw.saved),
    skipped: reasons(raw.skipped),
    bytes: typeof raw.bytes === 'number' && raw.bytes >= 0 ? raw.bytes : 0
  };
}

function checkpoint(raw: any): ICheckpoint | null {
  if (!raw || typeof raw !== 'object' || (typeof raw.id !== 'string' && typeof raw.id !== 'number')) {
    return null;
  }
  return { id: String(raw.id), kernel: snapshot(raw.kernel) };
}

/**
 * A changes answer. `POST .../review` answers "the changes left to review": the same object, or (an older
 * draft of the route) the bare list; both read the same, the turn and checkpoint then taken from `fallback`.
 */
export function normaliseChanges(raw: any, fallback?: Partial<ITurnChanges>): ITurnChanges {
  const list = Array.isArray(raw) ? raw : Array.isArray(raw?.changes) ? raw.changes : [];
  const hasCheckpoint = raw && typeof raw === 'object' && !Array.isArray(raw) && 'checkpoint' in raw;
  const obj = raw && typeof raw === 'object' && !Array.isArray(raw) ? raw : {};
  const decided = Array.isArray(obj.decided)
    ? obj.decided
        .filter((d: any) => d && typeof d === 'object' && (d.decision === 'keep' || d.decision === 'discard'))
        .map((d: any) => ({ cell_id: str(d.cell_id), decision: d.decision }))
    : (fallback?.decided ?? []);
  const refused = Array.isArray(obj.not_discarded)
    ? obj.not_discarded
        .filter((d: any) => d && typeof d === 'object')
        .map((d: any) => ({ cell_id: str(d.cell_id), reason: str(d.reason) }))
    : [];
  return {
    turn_id: str(raw?.turn_id) || fallback?.turn_id || '',
    changes: list.map(normaliseChange).filter((c: ICellChange | null): c is ICellChange => c !== null),
    checkpoint: hasCheckpoint ? checkpoint(raw.checkpoint) : (fallback?.checkpoint ?? null),
    decided,
    running: obj.running === true,
    not_discarded: refused
  };
}

export function normaliseRestore(raw: any, turnId = ''): IRestoreResult {
  const cells = raw?.restored_cells;
  const ids = Array.isArray(cells) ? names(cells) : [];
  const kernel = raw?.kernel && typeof raw.kernel === 'object' ? raw.kernel : null;
  const undo = raw?.undo_checkpoint;
  return {
    turn_id: str(raw?.turn_id) || turnId,
    restored_cells: Array.isArray(cells) ? ids.length : typeof cells === 'number' && cells >= 0 ? cells : 0,
    restored_cell_ids: ids,
    kernel: kernel
      ? {
          restored: names(kernel.restored),
          not_restored: reasons(kernel.not_restored),
          removed: names(kernel.removed)
        }
      : null,
    // the checkpoint's id, or the checkpoint itself
    undo_checkpoint:
      typeof undo === 'string' && undo
        ? undo
        : undo && typeof undo === 'object' && (typeof undo.id === 'string' || typeof undo.id === 'number')
          ? String(undo.id)
          : null,
    never_restored: names(raw?.never_restored)
  };
}

/** The words of a refusal (the server's `message`/`reason`), never empty. */
export function reasonOf(err: unknown, what: string): string {
  const message = err instanceof Error ? err.message : str(err);
  const status = typeof (err as any)?.status === 'number' ? (err as any).status : 0;
  if (status === 404) {
    return trans.__('%1: this server has no such route or no such turn (%2)', what, message || trans.__('not found'));
  }
  if (status === 403) {
    return trans.__(
      "%1: you may read this notebook's conversation, not change it (%2)",
      what,
      message || trans.__('forbidden')
    );
  }
  return `${what}: ${message || trans.__('the server answered %1', status || trans.__('nothing'))}`;
}

function turnPath(sessionId: string, turnId: string, tail: string): string {
  return `sessions/${encodeURIComponent(sessionId)}/turns/${encodeURIComponent(turnId)}/${tail}`;
}

export class ReviewApi {
  constructor(private readonly _requester: IRequester) {}

  /** The turn's changes still to review, and its checkpoint. */
  async changes(sessionId: string, turnId: string): Promise<ITurnChanges> {
    const raw = await this._requester.request<unknown>(turnPath(sessionId, turnId, 'changes'));
    return normaliseChanges(raw, { turn_id: turnId });
  }

  /** Keep or discard one cell's change (`cellId`) or all that are left; answers the changes left. */
  async review(
    sessionId: string,
    turnId: string,
    decision: Decision,
    cellId?: string,
    previous?: ITurnChanges
  ): Promise<ITurnChanges> {
    const body: { decision: Decision; cell_id?: string } = { decision };
    if (cellId) {
      body.cell_id = cellId;
    }
    const raw = await this._requester.request<unknown>(turnPath(sessionId, turnId, 'review'), {
      method: 'POST',
      body: JSON.stringify(body)
    });
    return normaliseChanges(raw, { turn_id: turnId, checkpoint: previous?.checkpoint ?? null });
  }

  /** Put the cells and the kernel's namespace back as they were before the turn (a 409 says why it cannot). */
  async rewind(sessionId: string, turnId: string): Promise<IRestoreResult> {
    const raw = await this._requester.request<unknown>(turnPath(sessionId, turnId, 'rewind'), {
      method: 'POST',
      body: '{}'
    });
    return normaliseRestore(raw, turnId);
  }

  /** Restore a checkpoint (a rewind's undo checkpoint: the rewind is undone). */
  async restore(sessionId: string, checkpointId: string): Promise<IRestoreResult> {
    const raw = await this._requester.request<unknown>(
      `sessions/${encodeURIComponent(sessionId)}/checkpoints/${encodeURIComponent(checkpointId)}/restore`,
      { method: 'POST', body: '{}' }
    );
    return normaliseRestore(raw);
  }

  /**
   * The notebook session's own policy: `review` ("Review after"), or null for the server's configuration (`POST
   * sessions/{id}/policy {policy}`, answered by the session's description, whose `policy` is the one in force).
   */
  async setPolicy(sessionId: string, policy: SessionPolicy): Promise<SessionPolicy> {
    const raw = await this._requester.request<any>(`sessions/${encodeURIComponent(sessionId)}/policy`, {
      method: 'POST',
      body: JSON.stringify({ policy })
    });
    return raw && typeof raw === 'object' && 'policy' in raw ? (raw.policy === 'review' ? 'review' : null) : policy;
  }
}
