"""Transcript store: every event of every notebook session, in SQLite, before it is sent out.

Writes are synchronous (SQLite in WAL mode answers in microseconds) and committed once per
event-loop tick by the hub, so a burst of 10,000 chunks costs a handful of commits.  A failing
disk never stops a turn: errors are returned to the hub, which tells the user and keeps serving
from memory.

The store is private: its folder is 0700 and its files (the database and SQLite's ``-wal`` and
``-shm``) 0600; a store found looser is repaired and the log says so.  It is bounded: one event's
stored JSON is capped (long text fields cut, the cut said), a session past its byte cap has its
oldest turns' agent updates compacted into one notice, and every read is a page (count and bytes)
read with ``LIMIT``, never the whole history.  A session belongs to one server root (the root's real
path): two projects sharing this per-user store never see each other's conversations.
"""

from __future__ import annotations

import logging
import os
import posixpath
import sqlite3
import stat
import time
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from ..protocol import codec

log = logging.getLogger(__name__)

#: the schema version this code writes (``PRAGMA user_version``); 0 is the store before roots
VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    notebook TEXT NOT NULL,
    agent TEXT NOT NULL,
    cwd TEXT NOT NULL,
    acp_session_id TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    root TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    size INTEGER,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""

#: files SQLite keeps next to the database
SIDE_FILES = ("-wal", "-shm", "-journal")

MiB = 1024 * 1024


def human(n: int) -> str:
    """A byte count as people read it: 900 B, 250 KiB, 3.8 MiB."""
    if n < 1024:
        return f"{n} B"
    if n < MiB:
        return f"{n / 1024:.0f} KiB"
    return f"{n / MiB:.1f} MiB"


def text_bytes(text: str) -> int:
    """UTF-8 size of a string; free for ASCII (``isascii`` is a flag lookup)."""
    return len(text) if text.isascii() else len(text.encode())


def root_of(cwd: str, notebook: str) -> str:
    """The server root a pre-root session came from: its cwd minus the notebook's folder ("" if unknown)."""
    if not cwd or not os.path.isabs(cwd):
        return ""
    folder = posixpath.dirname(notebook).strip("/")
    cwd = os.path.normpath(cwd)
    if not folder:
        return os.path.realpath(cwd)
    suffix = os.sep + folder.replace("/", os.sep)
    if not cwd.endswith(suffix):
        return ""
    return os.path.realpath(cwd[: -len(suffix)] or os.sep)


# -- capping one event ---------------------------------------------------------------------------
def _string_leaves(value: Any, out: list[tuple[Any, Any, str]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str):
                out.append((value, k, v))
            elif isinstance(v, (dict, list)):
                _string_leaves(v, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, str):
                out.append((value, i, v))
            elif isinstance(v, (dict, list)):
                _string_leaves(v, out)


def _copy(value: Any) -> Any:
    """A copy of the containers; strings are shared (immutable)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def cap_event(event: dict[str, Any], text: str, max_bytes: int) -> tuple[dict[str, Any], str]:
    """The event (and its JSON) within ``max_bytes``: long strings cut, each cut marked.

    Marked ``… [cut: 3.5 MiB not kept]`` at the place of the cut, so a reader (and the agent, when the
    history seeds a new session) knows text is missing.  An event that is big for another reason (a
    huge list of small strings) keeps its scalar fields and says it was cut.
    """
    size = text_bytes(text)
    if max_bytes <= 0 or size <= max_bytes:
        return event, text
    ev = _copy(event)
    for _ in range(4):
        excess = size - max_bytes + 256  # room for the markers
        leaves: list[tuple[Any, Any, str]] = []
        _string_leaves(ev, leaves)
        leaves.sort(key=lambda leaf: -len(leaf[2]))
        for container, key, value in leaves:
            if excess <= 0 or len(value) <= 1024:
                break
            keep = max(512, len(value) - excess)
            if keep >= len(value):
                continue
            removed = value[keep:]
            gone = text_bytes(removed)
            container[key] = value[:keep] + f"… [cut: {human(gone)} not kept]"
            excess -= gone - 40
        text = codec.dumps(ev)
        size = text_bytes(text)
        if size <= max_bytes:
            return ev, text
    stub: dict[str, Any] = {k: v for k, v in event.items() if not isinstance(v, (dict, list))}
    update = event.get("update")
    if isinstance(update, dict):
        stub["update"] = {
            k: v
            for k, v in update.items()
            if isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) <= 256)
        }
    stub = {k: (v[:256] + "…" if isinstance(v, str) and len(v) > 256 else v) for k, v in stub.items()}
    stub["cut"] = f"[cut: an event of {human(text_bytes(codec.dumps(event)))} not kept] (JupyterACP.max_event_bytes)"
    return stub, codec.dumps(stub)


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


class StoreError(Exception):
    """The store could not save; the message says why (disk full, locked, ...)."""


class TranscriptStore:
    def __init__(self, path: str, *, max_event_bytes: int = 256 * 1024, max_session_bytes: int = 64 * MiB) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._dirty = False
        #: one event's stored JSON is cut to this (0: no cap)
        self.max_event_bytes = max_event_bytes
        #: a session's history past this has its oldest turns compacted when a turn ends (0: no cap)
        self.max_session_bytes = max_session_bytes
        #: what opening the store found and did (repaired permissions, migration), for the log and the user
        self.notices: list[str] = []
        self._bytes: dict[str, int] = {}

    # -- opening: private, migrated ----------------------------------------------------------------
    def open(self) -> None:
        private = self.path != ":memory:" and not self.path.startswith("file:")
        if private:
            self._private_folder()
        old_umask = os.umask(0o077) if private else None
        try:
            # a short busy timeout: a store locked by another server must not stall the event loop
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0.05)
            db.execute("PRAGMA busy_timeout = 5000")  # opening and migrating may wait for another server
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(SCHEMA)
            self._migrate(db)
            db.execute("PRAGMA busy_timeout = 50")
        finally:
            if old_umask is not None:
                os.umask(old_umask)
        self._db = db
        if private:
            self._private_files()

    def _private_folder(self) -> None:
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o700, exist_ok=True)
            os.chmod(folder, 0o700)
            return
        st = os.stat(folder)
        if not stat.S_IMODE(st.st_mode) & 0o077:
            return
        name = os.path.basename(self.path)
        ours = {name, *(name + side for side in SIDE_FILES)}
        others = [f for f in os.listdir(folder) if f not in ours]
        mode = oct(stat.S_IMODE(st.st_mode))
        if (
            st.st_uid == os.getuid()
            and not st.st_mode & stat.S_ISVTX
            and (not others or os.path.basename(folder) == "jupyter_acp")
        ):
            os.chmod(folder, 0o700)
            self._notice(
                f"the transcript store's folder {folder} was readable by other users (mode {mode}); "
                "it is private now (0700)"
            )
        else:
            self._notice(
                f"the transcript store's folder {folder} (mode {mode}) is open to other users and holds "
                "other files, so it is left as it is; the store's own files are private (0600). "
                "Set JupyterACP.store_path to a folder of its own to hide even their names"
            )

    def _private_files(self) -> None:
        loose = []
        for f in (self.path, *(self.path + side for side in SIDE_FILES)):
            try:
                st = os.stat(f)
            except FileNotFoundError:
                continue
            if stat.S_IMODE(st.st_mode) & 0o077:
                loose.append(f"{os.path.basename(f)} ({oct(stat.S_IMODE(st.st_mode))})")
                os.chmod(f, 0o600)
        if loose:
            self._notice(
                f"transcript store files were readable by other users: {', '.join(loose)}; they are private now (0600)"
            )

    def _notice(self, text: str) -> None:
        self.notices.append(text)
        log.warning("jupyter_acp: %s", text)

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Bring an older store to this schema: sessions get their root, events their size."""
        if db.execute("PRAGMA user_version").fetchone()[0] >= VERSION:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] >= VERSION:  # another server was first
                db.execute("COMMIT")
                return
            columns = {r[1] for r in db.execute("PRAGMA table_info(sessions)")}
            if "root" not in columns:
                db.execute("ALTER TABLE sessions ADD COLUMN root TEXT NOT NULL DEFAULT ''")
                rows = db.execute("SELECT id, notebook, cwd FROM sessions").fetchall()
                unknown = 0
                for sid, notebook, cwd in rows:
                    root = root_of(cwd, notebook)
                    unknown += not root
                    db.execute("UPDATE sessions SET root = ? WHERE id = ?", (root, sid))
                if rows:
                    self.notices.append(
                        f"transcript store migrated: {len(rows)} sessions now belong to their project root"
                        + (f" ({unknown} of no known root are kept but never shown)" if unknown else "")
                    )
                    log.info("jupyter_acp: %s", self.notices[-1])
            if "size" not in {r[1] for r in db.execute("PRAGMA table_info(events)")}:
                db.execute("ALTER TABLE events ADD COLUMN size INTEGER")  # old rows: NULL, measured when needed
            db.execute("DROP INDEX IF EXISTS sessions_notebook_agent")
            db.execute(
                "CREATE UNIQUE INDEX IF NOT EXISTS sessions_root_notebook_agent ON sessions (root, notebook, agent)"
            )
            db.execute(f"PRAGMA user_version = {VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

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
            "INSERT INTO sessions (id, notebook, agent, cwd, acp_session_id, created, updated, root) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET notebook=excluded.notebook, "
            "cwd=excluded.cwd, acp_session_id=excluded.acp_session_id, updated=excluded.updated",
            (rec.id, rec.notebook, rec.agent, rec.cwd, rec.acp_session_id, rec.created, rec.updated, rec.root),
        )

    def load_sessions(self, root: str | None = None) -> list[SessionRecord]:
        """The sessions of one server root (its real path); all of them when ``root`` is None."""
        sql = "SELECT id, notebook, agent, cwd, acp_session_id, created, updated, root FROM sessions"
        args: tuple[Any, ...] = ()
        if root is not None:
            if not root:
                return []  # "" marks sessions of no known root: never shown
            sql += " WHERE root = ?"
            args = (root,)
        rows = self.db.execute(sql, args).fetchall()
        return [
            SessionRecord(
                id=r[0], notebook=r[1], agent=r[2], cwd=r[3], acp_session_id=r[4], created=r[5], updated=r[6], root=r[7]
            )
            for r in rows
        ]

    # -- events ----------------------------------------------------------------------------------
    def append_many(self, session_id: str, events: list[dict[str, Any]], encoded: list[str]) -> None:
        """Stage events (already JSON-encoded once, for the store and the wire alike).

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
            rows.append((session_id, e["seq"], e["type"], size, text))
        try:
            if not self._dirty:
                db.execute("BEGIN")
                self._dirty = True
            db.executemany(
                "INSERT OR REPLACE INTO events (session_id, seq, type, size, data) VALUES (?, ?, ?, ?, ?)", rows
            )
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"could not save the transcript: {exc}") from exc
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
        db.execute(
            "INSERT OR REPLACE INTO events (session_id, seq, type, size, data) VALUES (?, ?, ?, ?, ?)",
            (session_id, first, "notice", text_bytes(text), text),
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
        self._bytes.clear()  # counted sizes may include what was rolled back: measure again
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass
