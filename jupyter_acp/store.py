"""Transcript store: every event of every notebook session, in SQLite, before it is sent out.

Writes are synchronous (SQLite in WAL mode answers in microseconds) and committed once per
event-loop tick by the hub, so a burst of 10,000 chunks costs a handful of commits.  A failing
disk never stops a turn: errors are returned to the hub, which tells the user and keeps serving
from memory.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from typing import Any

from pydantic import BaseModel

from . import jsonwire

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    notebook TEXT NOT NULL,
    agent TEXT NOT NULL,
    cwd TEXT NOT NULL,
    acp_session_id TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS sessions_notebook_agent ON sessions (notebook, agent);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


class SessionRecord(BaseModel):
    """What survives a server restart about a notebook session."""

    id: str
    notebook: str
    agent: str
    cwd: str
    acp_session_id: str | None = None
    created: float = 0.0
    updated: float = 0.0


class StoreError(Exception):
    """The store could not save; the message says why (disk full, locked, ...)."""


class TranscriptStore:
    def __init__(self, path: str) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._dirty = False

    def open(self) -> None:
        if self.path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        # a short busy timeout: a store locked by another server must not stall the event loop
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0.05)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        self._db = db

    def close(self) -> None:
        if self._db is not None:
            try:
                self.commit()
            except StoreError:
                pass
            self._db.close()
            self._db = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the transcript store is not open")
        return self._db

    # -- sessions --------------------------------------------------------------------------------
    def save_session(self, rec: SessionRecord) -> None:
        rec.updated = time.time()
        self._write(
            "INSERT INTO sessions (id, notebook, agent, cwd, acp_session_id, created, updated) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET notebook=excluded.notebook, "
            "cwd=excluded.cwd, acp_session_id=excluded.acp_session_id, updated=excluded.updated",
            (rec.id, rec.notebook, rec.agent, rec.cwd, rec.acp_session_id, rec.created, rec.updated),
        )

    def load_sessions(self) -> list[SessionRecord]:
        rows = self.db.execute(
            "SELECT id, notebook, agent, cwd, acp_session_id, created, updated FROM sessions"
        ).fetchall()
        return [
            SessionRecord(id=r[0], notebook=r[1], agent=r[2], cwd=r[3], acp_session_id=r[4], created=r[5], updated=r[6])
            for r in rows
        ]

    # -- events ----------------------------------------------------------------------------------
    def append_many(self, session_id: str, events: list[dict[str, Any]], encoded: list[str]) -> None:
        """Stage events (already JSON-encoded once, for the store and the wire alike)."""
        db = self.db
        try:
            if not self._dirty:
                db.execute("BEGIN")
                self._dirty = True
            db.executemany(
                "INSERT OR REPLACE INTO events (session_id, seq, type, data) VALUES (?, ?, ?, ?)",
                [(session_id, e["seq"], e["type"], text) for e, text in zip(events, encoded)],
            )
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"could not save the transcript: {exc}") from exc

    def read(self, session_id: str, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq"
        args: tuple[Any, ...] = (session_id, after)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        try:
            return [jsonwire.loads(r[0]) for r in self.db.execute(sql, args)]
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the transcript: {exc}") from exc

    def last_seq(self, session_id: str) -> int:
        row = self.db.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
        return int(row[0] or 0)

    # -- transactions ----------------------------------------------------------------------------
    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        db = self.db
        try:
            if not self._dirty:
                db.execute("BEGIN")
                self._dirty = True
            db.execute(sql, args)
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"could not save the transcript: {exc}") from exc

    def commit(self) -> None:
        if not self._dirty or self._db is None:
            return
        try:
            self._db.execute("COMMIT")
            self._dirty = False
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"could not save the transcript: {exc}") from exc

    def _rollback(self) -> None:
        self._dirty = False
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass
