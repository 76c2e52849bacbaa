"""Where a turn's record and its checkpoints are kept: a SQLite file of its own, beside the transcript store.

Its own file (``review.sqlite`` in the store's private folder) and not a table of the transcript store: the event
log's store has its own life (its sequence numbers, its flushes, its compaction) and nothing here is an event.
A row is written once a turn first changes something, and read back after a server restart, so a turn that ended
before the restart can still be reviewed and rewound.  The folder is 0700 and the files (the database and SQLite's
``-wal`` / ``-shm``) are 0600, as the transcripts': a notebook's cells as they were are the user's data.

What a row holds:

* ``turns``: per turn, the notebook's cells before its first change and at its end (zlib-compressed JSON), the
  turn's checkpoint id, and the user's decisions on its changes (cell id -> ``keep`` | ``discard``);
* ``checkpoints``: the notebook's cells at the time, and the kernel part (its id in the kernel and the manifest:
  names saved, skipped with reasons, bytes) when the namespace was saved.  The pickles stay in the kernel
  (``kernels/checkpoint.py``); only what they are is kept here;
* ``policies``: a notebook session's own policy (``review``), picked from the panel.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

SIDE_FILES = ("-wal", "-shm")

SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    turn_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    notebook TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    after BLOB,
    decisions TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns (session_id);
CREATE TABLE IF NOT EXISTS checkpoints (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    notebook TEXT NOT NULL,
    cells BLOB NOT NULL,
    kernel_id TEXT,
    kernel TEXT,
    kernel_error TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_by_session ON checkpoints (session_id);
CREATE TABLE IF NOT EXISTS policies (
    session_id TEXT PRIMARY KEY,
    policy TEXT NOT NULL
);
"""


class ReviewStoreError(Exception):
    """The review store could not be read or written; the text says why."""


def pack(cells: list[dict[str, Any]]) -> bytes:
    return zlib.compress(json.dumps(cells, separators=(",", ":")).encode(), 3)


def unpack(blob: bytes | None) -> list[dict[str, Any]] | None:
    if blob is None:
        return None
    data = json.loads(zlib.decompress(blob))
    return data if isinstance(data, list) else None


@dataclass
class CheckpointRow:
    """One checkpoint: the notebook's cells, and the kernel's namespace where it was saved."""

    id: str
    session_id: str
    turn_id: str
    #: ``turn`` (taken before a turn's first change) or ``undo`` (taken by a rewind or a restore, to undo it)
    kind: str
    notebook: str
    cells: list[dict[str, Any]]
    kernel_id: str | None = None
    #: the kernel part's manifest (``KernelCheckpoint.as_dict()``), None when the namespace was not saved
    kernel: dict[str, Any] | None = None
    #: why the namespace was not saved (a kernel that is not Python, none attached, a failure), None when it was
    kernel_error: str | None = None
    created: float = field(default_factory=time.time)


@dataclass
class TurnRow:
    turn_id: str
    session_id: str
    notebook: str
    checkpoint_id: str
    started: float
    ended: float | None = None
    #: the cells at the turn's end (None while it runs, or when they could not be read)
    after: list[dict[str, Any]] | None = None
    decisions: dict[str, str] = field(default_factory=dict)


class ReviewStore:
    """The turns' records and the checkpoints, in ``path`` (``:memory:`` for a hub without a store file)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        private = path != ":memory:"
        if private:
            folder = os.path.dirname(os.path.abspath(path))
            os.makedirs(folder, mode=0o700, exist_ok=True)
        try:
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise ReviewStoreError(f"could not open the review store {path}: {exc}") from exc
        if private:
            for f in (path, *(path + side for side in SIDE_FILES)):
                if os.path.exists(f):
                    os.chmod(f, 0o600)

    def close(self) -> None:
        try:
            self.db.close()
        except sqlite3.Error:
            log.debug("closing the review store failed", exc_info=True)

    def _run(self, sql: str, args: tuple[Any, ...]) -> None:
        try:
            with self._lock:
                self.db.execute(sql, args)
        except sqlite3.Error as exc:
            raise ReviewStoreError(f"could not write the review store {self.path}: {exc}") from exc

    def _one(self, sql: str, args: tuple[Any, ...]) -> Any:
        try:
            with self._lock:
                return self.db.execute(sql, args).fetchone()
        except sqlite3.Error as exc:
            raise ReviewStoreError(f"could not read the review store {self.path}: {exc}") from exc

    # -- checkpoints -------------------------------------------------------------------------------
    def save_checkpoint(self, row: CheckpointRow) -> None:
        self._run(
            "INSERT INTO checkpoints (id, session_id, turn_id, kind, notebook, cells, kernel_id, kernel, kernel_error, "
            "created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET kernel_id=excluded.kernel_id, "
            "kernel=excluded.kernel, kernel_error=excluded.kernel_error",
            (
                row.id,
                row.session_id,
                row.turn_id,
                row.kind,
                row.notebook,
                pack(row.cells),
                row.kernel_id,
                json.dumps(row.kernel) if row.kernel is not None else None,
                row.kernel_error,
                row.created,
            ),
        )

    def checkpoint(self, checkpoint_id: str) -> CheckpointRow | None:
        r = self._one(
            "SELECT id, session_id, turn_id, kind, notebook, cells, kernel_id, kernel, kernel_error, created "
            "FROM checkpoints WHERE id = ?",
            (checkpoint_id,),
        )
        if r is None:
            return None
        return CheckpointRow(
            id=r[0],
            session_id=r[1],
            turn_id=r[2],
            kind=r[3],
            notebook=r[4],
            cells=unpack(r[5]) or [],
            kernel_id=r[6],
            kernel=json.loads(r[7]) if r[7] else None,
            kernel_error=r[8],
            created=r[9],
        )

    # -- turns ----------------------------------------------------------------------------------------
    def save_turn(self, row: TurnRow) -> None:
        self._run(
            "INSERT INTO turns (turn_id, session_id, notebook, checkpoint_id, started, ended, after, decisions) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(turn_id) DO UPDATE SET ended=excluded.ended, "
            "after=excluded.after, decisions=excluded.decisions",
            (
                row.turn_id,
                row.session_id,
                row.notebook,
                row.checkpoint_id,
                row.started,
                row.ended,
                pack(row.after) if row.after is not None else None,
                json.dumps(row.decisions),
            ),
        )

    def turn(self, turn_id: str) -> TurnRow | None:
        r = self._one(
            "SELECT turn_id, session_id, notebook, checkpoint_id, started, ended, after, decisions FROM turns "
            "WHERE turn_id = ?",
            (turn_id,),
        )
        if r is None:
            return None
        decisions = json.loads(r[7] or "{}")
        return TurnRow(
            turn_id=r[0],
            session_id=r[1],
            notebook=r[2],
            checkpoint_id=r[3],
            started=r[4],
            ended=r[5],
            after=unpack(r[6]),
            decisions={str(k): str(v) for k, v in decisions.items()} if isinstance(decisions, dict) else {},
        )

    # -- a session's own policy ----------------------------------------------------------------------
    def policy(self, session_id: str) -> str | None:
        r = self._one("SELECT policy FROM policies WHERE session_id = ?", (session_id,))
        return str(r[0]) if r else None

    def set_policy(self, session_id: str, policy: str | None) -> None:
        if policy is None:
            self._run("DELETE FROM policies WHERE session_id = ?", (session_id,))
        else:
            self._run(
                "INSERT INTO policies (session_id, policy) VALUES (?, ?) ON CONFLICT(session_id) DO UPDATE SET "
                "policy=excluded.policy",
                (session_id, policy),
            )
