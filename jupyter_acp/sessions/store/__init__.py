"""Transcript store: every event of every notebook session, in SQLite, before it is sent out.

Writes are synchronous (SQLite in WAL mode answers in microseconds) and committed once per flush of the hub's
event log (a burst; every 5 ms while a stream goes on), so 10,000 chunks cost a handful of commits.  A failing
disk never stops a turn: errors are returned to the hub, which tells the user and keeps serving from memory.

The store is private: its folder is 0700 and its files (the database and SQLite's ``-wal`` and
``-shm``) 0600; a store found looser is repaired and the log says so.  It is bounded: one event's
stored JSON is capped (long text fields cut, the cut said), a session past its byte cap has its
oldest turns' agent updates compacted into one notice, and every read is a page (count and bytes)
read with ``LIMIT``, never the whole history.  A session belongs to one server root (the root's real
path): two projects sharing this per-user store never see each other's conversations.

Split by job: this module is the transcript (sessions, events, compaction, pages); ``store_file.py`` the
file (schema, migration, private permissions, transactions); ``store_cap.py`` the bound on one event.
The names the rest of the package imports from here stay importable from here.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from ...protocol import codec
from ..store_cap import MiB, cap_event, human, text_bytes
from .conversations import ConversationRecord, ConversationStore
from .current_agent import CurrentAgentStore
from .file import SCHEMA, SIDE_FILES, VERSION, StoreError, StoreFile, root_of, store_error

__all__ = [
    "ConversationRecord",
    "MiB",
    "SCHEMA",
    "SIDE_FILES",
    "VERSION",
    "SessionRecord",
    "StoreError",
    "TranscriptStore",
    "cap_event",
    "human",
    "root_of",
    "text_bytes",
]

log = logging.getLogger(__name__)


class SessionRecord(BaseModel):
    """What survives a server restart about a notebook session."""

    id: str
    notebook: str
    agent: str
    cwd: str
    acp_session_id: str | None = None
    created: float = 0.0
    updated: float = 0.0
    #: real path of the server root the notebook lives in ("" for a migrated session of no known root)
    root: str = ""
    #: the number of the notebook's current conversation (a reset starts the next one; see ``store_conversations``)
    conversation: int = 1
    #: as loaded: the highest seq a server may have given out (``TranscriptStore.reserve``; never written by
    #: ``save_session``) and the server life that reserved it
    seq_reserved: int = 0
    owner: str = ""


class TranscriptStore(StoreFile, ConversationStore, CurrentAgentStore):
    """Sessions and their events: append (capped), compact past the byte cap, read in pages."""

    def __init__(self, path: str, *, max_event_bytes: int = 256 * 1024, max_session_bytes: int = 64 * MiB) -> None:
        super().__init__(path)
        #: one event's stored JSON is cut to this (0: no cap)
        self.max_event_bytes = max_event_bytes
        #: a session's history past this has its oldest turns compacted when a turn ends (0: no cap)
        self.max_session_bytes = max_session_bytes

    # -- sessions --------------------------------------------------------------------------------
    def save_session(self, rec: SessionRecord) -> None:
        rec.updated = time.time()
        self._write(
            "INSERT INTO sessions (id, notebook, agent, cwd, acp_session_id, created, updated, root, conversation) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET notebook=excluded.notebook, "
            "cwd=excluded.cwd, acp_session_id=excluded.acp_session_id, updated=excluded.updated, "
            "conversation=excluded.conversation",
            (
                rec.id,
                rec.notebook,
                rec.agent,
                rec.cwd,
                rec.acp_session_id,
                rec.created,
                rec.updated,
                rec.root,
                rec.conversation,
            ),
        )

    _SESSION_COLUMNS = (
        "SELECT id, notebook, agent, cwd, acp_session_id, created, updated, root, conversation, seq_reserved, owner "
        "FROM sessions"
    )

    @staticmethod
    def _record(r: tuple[Any, ...]) -> SessionRecord:
        return SessionRecord(
            id=r[0],
            notebook=r[1],
            agent=r[2],
            cwd=r[3],
            acp_session_id=r[4],
            created=r[5],
            updated=r[6],
            root=r[7],
            conversation=r[8],
            seq_reserved=r[9],
            owner=r[10],
        )

    def load_sessions(self, root: str | None = None) -> list[SessionRecord]:
        """The sessions of one server root (its real path); all of them when ``root`` is None."""
        sql = self._SESSION_COLUMNS
        args: tuple[Any, ...] = ()
        if root is not None:
            if not root:
                return []  # "" marks sessions of no known root: never shown
            sql += " WHERE root = ?"
            args = (root,)
        return [self._record(r) for r in self.db.execute(sql, args).fetchall()]

    def find_session(self, root: str, notebook: str, agent: str) -> SessionRecord | None:
        """The stored session of (root, notebook, agent), which another server on this store may have created."""
        try:
            row = self.db.execute(
                self._SESSION_COLUMNS + " WHERE root = ? AND notebook = ? AND agent = ?", (root, notebook, agent)
            ).fetchone()
        except sqlite3.Error as exc:
            raise store_error("could not read the sessions", exc) from exc
        return self._record(row) if row else None

    # -- seqs: never given twice -------------------------------------------------------------------
    def reserve(self, session_id: str, floor: int, block: int, owner: str) -> int:
        """Stage a reservation of seqs past ``floor`` (in the transaction the next ``commit`` writes); the new end.

        The stored high-water mark becomes ``max(stored, floor) + block``: seqs up to it may be sent before their
        events are stored, and a later start (of this server or another on the store) begins past it, so a seq a
        client holds is never given to another event. When another server reserved past ``floor`` meanwhile, this
        server's next block starts at the end minus ``block`` (not at ``floor``): the caller jumps there.
        A session without its row (it could not be saved) reserves nothing: the answer is ``floor + block``.
        """
        self._write(
            "UPDATE sessions SET seq_reserved = MAX(seq_reserved, ?) + ?, owner = ? WHERE id = ?",
            (floor, block, owner, session_id),
        )
        row = self.db.execute("SELECT seq_reserved FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return int(row[0]) if row else floor + block

    def release(self, session_id: str, seq: int, owner: str) -> None:
        """Stage giving back the seqs reserved past ``seq`` (a clean stop saved everything up to it), unless
        another server reserved since: then its reservation stands."""
        self._write(
            "UPDATE sessions SET seq_reserved = ? WHERE id = ? AND owner = ? AND seq_reserved > ?",
            (seq, session_id, owner, seq),
        )

    def open_turns(self, session_id: str) -> list[tuple[int, str, int]]:
        """(seq, turn id, conversation) of each stored ``turn_started`` no stored ``turn_ended`` follows.

        Read from the turns index (starts and ends only), never the session's other events."""
        try:
            rows = self.db.execute(
                # INDEXED BY: without statistics SQLite would walk the session's whole history by its primary key
                "SELECT seq, type, json_extract(data, '$.turn_id'), conversation FROM events INDEXED BY events_turns "
                "WHERE session_id = ? AND type IN ('turn_started', 'turn_ended') ORDER BY seq",
                (session_id,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise store_error("could not read the transcript", exc) from exc
        started: dict[str, tuple[int, str, int]] = {}
        for seq, type_, turn_id, conversation in rows:
            if type_ == "turn_started":
                started[str(turn_id)] = (int(seq), str(turn_id), int(conversation))
            else:
                started.pop(str(turn_id), None)
        return sorted(started.values())

    # -- events ----------------------------------------------------------------------------------
    def append_many(
        self, session_id: str, events: list[dict[str, Any]], encoded: list[str], conversation: int = 1
    ) -> None:
        """Stage events (already JSON-encoded once, for the store and the wire alike), of one conversation.

        An event bigger than ``max_event_bytes`` is stored cut (the cut marked).  When a turn ends in
        this batch and the session is past ``max_session_bytes``, its oldest turns are compacted.
        """
        db = self.db
        threshold = self.max_event_bytes // 4 if self.max_event_bytes > 0 else None
        rows = []
        added = 0
        turn_ended = False
        for e, text in zip(events, encoded, strict=True):
            if threshold is not None and len(text) > threshold:
                e, text = cap_event(e, text, self.max_event_bytes)
            size = text_bytes(text)
            added += size
            turn_ended = turn_ended or e["type"] == "turn_ended"
            rows.append((session_id, e["seq"], e["type"], size, text, conversation))
        try:
            if not self._dirty:
                db.execute("BEGIN")
                self._dirty = True
            db.executemany(
                "INSERT OR REPLACE INTO events (session_id, seq, type, size, data, conversation) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._note_conversation(session_id, conversation, events)
        except (sqlite3.Error, ValueError) as exc:
            raise self._failed(exc) from exc
        if session_id in self._bytes:
            self._bytes[session_id] += added
        if turn_ended and self.max_session_bytes > 0:
            try:
                self.compact(session_id)
            except sqlite3.Error as exc:  # compaction is housekeeping: saving the events is what matters
                log.warning("compacting the history of %s failed: %s", session_id, exc)
                self._bytes.pop(session_id, None)

    def session_bytes(self, session_id: str) -> int:
        """Bytes of a session's stored events (measured once, then counted as events are added)."""
        n = self._bytes.get(session_id)
        if n is None:
            row = self.db.execute(
                "SELECT COALESCE(SUM(COALESCE(size, length(CAST(data AS BLOB)))), 0) FROM events WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            n = self._bytes[session_id] = int(row[0])
        return n

    def compact(self, session_id: str) -> dict[str, Any] | None:
        """Past ``max_session_bytes``: drop the oldest turns' ``session_update`` events down to 3/4 of it.

        Prompts (``turn_started``), turn ends and permission events stay; the latest turn stays whole.
        One ``notice`` (``phase: "compacted"``) takes the place of the first dropped event and says how
        many turns and bytes went.  Returns it, or None when nothing was dropped.
        """
        limit = self.max_session_bytes
        total = self.session_bytes(session_id)
        if limit <= 0 or total <= limit:
            return None
        db = self.db
        target = limit * 3 // 4
        starts = [
            r[0]
            for r in db.execute(
                "SELECT seq FROM events WHERE session_id = ? AND type = 'turn_started' ORDER BY seq", (session_id,)
            )
        ]
        turns = dropped = 0
        first: int | None = None
        for start, end in zip(starts, starts[1:], strict=False):  # never the latest turn
            if total - dropped <= target:
                break
            span = (session_id, start, end)
            n, size, lo = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(COALESCE(size, length(CAST(data AS BLOB)))), 0), MIN(seq) FROM events "
                "WHERE session_id = ? AND type = 'session_update' AND seq > ? AND seq < ?",
                span,
            ).fetchone()
            if not n:
                continue
            if not self._dirty:
                db.execute("BEGIN")
                self._dirty = True
            db.execute(
                "DELETE FROM events WHERE session_id = ? AND type = 'session_update' AND seq > ? AND seq < ?", span
            )
            turns += 1
            dropped += int(size)
            first = lo if first is None else min(first, lo)
        if not turns or first is None:
            return None
        notice = {
            "seq": first,
            "type": "notice",
            "ts": time.time(),
            "level": "info",
            "phase": "compacted",
            "turns": turns,
            "bytes": dropped,
            "text": f"the agent's updates of {turns} earlier turn{'s' if turns > 1 else ''} ({human(dropped)}) were "
            f"dropped to keep this history under {human(limit)} (JupyterACP.max_session_bytes); "
            "the prompts and turn ends stay",
        }
        text = codec.dumps(notice)
        db.execute(  # in the conversation of the turn it sits in (the prompt before it)
            "INSERT OR REPLACE INTO events (session_id, seq, type, size, data, conversation) VALUES (?, ?, ?, ?, ?, "
            "COALESCE((SELECT conversation FROM events WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1), 1))",
            (session_id, first, "notice", text_bytes(text), text, session_id, first),
        )
        self._bytes[session_id] = total - dropped + text_bytes(text)
        log.info("history of session %s compacted: %d turns, %s", session_id, turns, human(dropped))
        return notice

    def _page(self, rows: Iterable[tuple[str]], max_bytes: int | None) -> list[dict[str, Any]]:
        """Decode rows until the byte budget is spent (always at least one row)."""
        out: list[dict[str, Any]] = []
        used = 0
        for (text,) in rows:
            size = text_bytes(text)
            if out and max_bytes is not None and used + size > max_bytes:
                break
            event = codec.loads(text)
            if self.max_event_bytes > 0 and size > self.max_event_bytes:  # stored before the cap existed
                event, text = cap_event(event, text, self.max_event_bytes)
                size = text_bytes(text)
            out.append(event)
            used += size
        return out

    def read(
        self, session_id: str, after: int = 0, limit: int | None = None, max_bytes: int | None = None
    ) -> list[dict[str, Any]]:
        """Events with seq > after, oldest first: at most ``limit`` of them and about ``max_bytes``."""
        sql = "SELECT data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq"
        return self._query_page(sql, (session_id, after), limit, max_bytes)

    def _query_page(
        self, sql: str, args: tuple[Any, ...], limit: int | None, max_bytes: int | None
    ) -> list[dict[str, Any]]:
        """One page of a query's rows (``limit`` rows at most, about ``max_bytes``), in the query's order."""
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        try:
            cursor = self.db.execute(sql, args)
            try:
                return self._page(cursor, max_bytes)
            finally:
                cursor.close()
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the transcript: {exc}") from exc

    def read_before(
        self, session_id: str, before: int, limit: int | None = None, max_bytes: int | None = None
    ) -> list[dict[str, Any]]:
        """The newest events with seq < before (at most ``limit``, about ``max_bytes``), oldest first."""
        sql = "SELECT data FROM events WHERE session_id = ? AND seq < ? ORDER BY seq DESC"
        page = self._query_page(sql, (session_id, before), limit, max_bytes)
        page.reverse()
        return page

    def find(self, session_id: str, type_: str, after: int, before: int, limit: int = 64) -> list[dict[str, Any]]:
        """Events of one type with after < seq < before, newest first (at most ``limit``)."""
        try:
            rows = self.db.execute(
                "SELECT data FROM events WHERE session_id = ? AND type = ? AND seq > ? AND seq < ? "
                "ORDER BY seq DESC LIMIT ?",
                (session_id, type_, after, before, limit),
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the transcript: {exc}") from exc
        return self._page(rows, None)

    def last_seq(self, session_id: str) -> int:
        try:
            row = self.db.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the transcript: {exc}") from exc
        return int(row[0] or 0)
