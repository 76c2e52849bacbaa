/**
 * The shapes of the review and rewind routes (`GET .../turns/{turn}/changes`, `POST .../review`, `.../rewind`,
 * `.../checkpoints/{id}/restore`), as the panel reads them after `normalise*` (api.ts): every field present, of its
 * type, so the view never tests for a missing one. Pure TypeScript: node's test runner loads it.
 */

export type ChangeKind = 'added' | 'removed' | 'modified' | 'moved';

/** One side of a cell change: what the cell was (`before`) or is (`after`). */
export interface ICellSide {
  cell_type: string;
  source: string;
}

export interface ICellChange {
  cell_id: string;
  change: ChangeKind;
  before: ICellSide | null;
  after: ICellSide | null;
  outputs_changed: boolean;
}

/** A variable the checkpoint could not keep (or a rewind could not put back), with the reason. */
export interface INamedReason {
  name: string;
  reason: string;
}

/** What the turn's checkpoint holds of the kernel's namespace. */
export interface IKernelSnapshot {
  saved: string[];
  skipped: INamedReason[];
  bytes: number;
}

export interface ICheckpoint {
  id: string;
  /** null: the turn did not touch the kernel before its checkpoint (or the kernel could not be saved) */
  kernel: IKernelSnapshot | null;
}

/** A turn's changes still to review, and the checkpoint a rewind goes back to (null: none). */
export interface ITurnChanges {
  turn_id: string;
  changes: ICellChange[];
  checkpoint: ICheckpoint | null;
  /** the cells of the turn decided already (`keep` or `discard`), as the server keeps them */
  decided: { cell_id: string; decision: Decision }[];
  /** the turn is still running: it can be read, not decided */
  running: boolean;
  /** a "Discard all" left these cells as they are, each with the reason */
  not_discarded: { cell_id: string; reason: string }[];
}

/** What a rewind (or the restore that undoes it) put back, and what it could not. */
export interface IRestoreResult {
  turn_id: string;
  /** the cells restored (their ids when the server names them) */
  restored_cells: number;
  restored_cell_ids: string[];
  /** `removed`: variables the turn created, taken out so the namespace is as it was */
  kernel: { restored: string[]; not_restored: INamedReason[]; removed: string[] } | null;
  /** the checkpoint taken just before, which undoes this one (null: none) */
  undo_checkpoint: string | null;
  /** what no checkpoint undoes, in the server's words (empty: the panel's own list) */
  never_restored: string[];
}

export type Decision = 'keep' | 'discard';

/** A notebook session's own policy: `review` is "Review after"; null: the server's configuration applies. */
export type SessionPolicy = 'review' | null;
