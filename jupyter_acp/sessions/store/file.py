"""The store's file: the SQLite schema, migrating older stores, keeping the files private, transactions.

Apart from the transcript (``store.py``: sessions, events, compaction, pages) because this part is about the
file on disk and its history of schemas, not about conversations: opening makes the folder 0700 and the files
(the database and SQLite's ``-wal`` and ``-shm``) 0600, repairing a looser store and saying so; an older store
is migrated in one transaction (another server may be first).  Writes are staged in one transaction per
flush of the event log (``commit``); a failure rolls back and raises :class:`StoreError` with the reason.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import sqlite3
import stat
import uuid
from typing import Any

log = logging.getLogger(__name__)

#: the schema version this code writes (``PRAGMA user_version``); 0 is the store before roots, 1 before
#: conversations, 2 before seq reservations (``sessions.seq_reserved``, ``sessions.owner``)
VERSION = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    notebook TEXT NOT NULL,
    agent TEXT NOT NULL,
    cwd TEXT NOT NULL,
    acp_session_id TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    root TEXT NOT NULL DEFAULT '',
    conversation INTEGER NOT NULL DEFAULT 1,
    seq_reserved INTEGER NOT NULL DEFAULT 0,
    owner TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    size INTEGER,
    data TEXT NOT NULL,
    conversation INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    agent TEXT NOT NULL,
    acp_session_id TEXT,
    title TEXT NOT NULL DEFAULT '',
    started REAL NOT NULL,
    ended REAL,
    turns INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, number)
);
CREATE TABLE IF NOT EXISTS current_agents (
    root TEXT NOT NULL,
    notebook TEXT NOT NULL,
    agent TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (root, notebook)
);
"""
# current_agents (each notebook's current agent, store_current_agent.py) needs no version step: opening any store
# creates it (empty: every notebook on the configured default agent)

#: files SQLite keeps next to the database
SIDE_FILES = ("-wal", "-shm", "-journal")


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


def insert_conversation(
    db: sqlite3.Connection,
    session_id: str,
    number: int,
    started: float,
    *,
    ended: float | None = None,
    title: str = "",
    turns: int = 0,
    acp_session_id: str | None = None,
) -> str:
    """A conversation's row (its agent is the session's); its id, the one the routes name it by."""
    cid = uuid.uuid4().hex
    db.execute(
        "INSERT OR IGNORE INTO conversations (id, session_id, number, agent, acp_session_id, title, started, ended, "
        "turns) SELECT ?, ?, ?, agent, ?, ?, ?, ?, ? FROM sessions WHERE id = ?",
        (cid, session_id, number, acp_session_id, title[:TITLE_CHARS], started, ended, turns, session_id),
    )
    return cid


#: a conversation's title is its first prompt, cut to this
TITLE_CHARS = 200


def split_conversations(db: sqlite3.Connection) -> int:
    """Stores before conversations: each ``session_reset`` marker starts a new one (the marker its first event).

    Every session gets its conversation rows (first prompt, turns, start and end, the agent session id last
    seen); the last is the current one.  Returns how many earlier (ended) conversations the markers split off.
    """
    from ...protocol.transcript import prompt_text

    split = 0
    sessions = db.execute(
        "SELECT id, created FROM sessions WHERE id NOT IN (SELECT session_id FROM conversations)"
    ).fetchall()
    for sid, created in sessions:
        markers = [
            r[0]
            for r in db.execute(
                "SELECT seq FROM events WHERE session_id = ? AND type = 'notice' "
                "AND json_extract(data, '$.phase') = 'session_reset' ORDER BY seq",
                (sid,),
            )
        ]
        for number, lo in enumerate(markers, start=2):
            db.execute("UPDATE events SET conversation = ? WHERE session_id = ? AND seq >= ?", (number, sid, lo))
        last = len(markers) + 1
        for number in range(1, last + 1):
            span = (sid, number)
            first_ts, last_ts, turns = db.execute(
                "SELECT json_extract(MIN(CASE WHEN seq = lo THEN data END), '$.ts'), "
                "json_extract(MIN(CASE WHEN seq = hi THEN data END), '$.ts'), SUM(type = 'turn_started') "
                "FROM events, (SELECT MIN(seq) AS lo, MAX(seq) AS hi FROM events WHERE session_id = ? "
                "AND conversation = ?) WHERE session_id = ? AND conversation = ?",
                span + span,
            ).fetchone()
            first = db.execute(
                "SELECT data FROM events WHERE session_id = ? AND conversation = ? AND type = 'turn_started' "
                "ORDER BY seq LIMIT 1",
                span,
            ).fetchone()
            acp = db.execute(
                "SELECT json_extract(data, '$.acp_session_id') FROM events WHERE session_id = ? AND conversation = ? "
                "AND type = 'session_ready' ORDER BY seq DESC LIMIT 1",
                span,
            ).fetchone()
            title = ""
            if first:
                try:
                    title = prompt_text(json.loads(first[0]))
                except ValueError:
                    pass
            insert_conversation(
                db,
                sid,
                number,
                float(first_ts or created or 0.0),
                ended=None if number == last else float(last_ts or first_ts or created or 0.0),
                title=title,
                turns=int(turns or 0),
                acp_session_id=acp[0] if acp else None,
            )
        db.execute("UPDATE sessions SET conversation = ? WHERE id = ?", (last, sid))
        split += len(markers)
    return split


#: SQLite's primary result codes of a store that cannot write now (busy or locked, out of memory, read-only, I/O,
#: corrupt, full, cannot open, lock protocol): nothing about the row written, so every write fails alike
ENVIRONMENT_CODES = frozenset({5, 6, 7, 8, 10, 11, 13, 14, 15})
#: of those, another connection holding the lock: waiting costs the busy timeout, so retried on a timer only
BUSY_CODES = frozenset({5, 6})


class StoreError(Exception):
    """The store could not save; the message says why (disk full, locked, ...).

    ``row``: the failure is about what was written (a constraint, a value SQLite refuses), not the store: other rows
    still save. ``busy``: another connection holds the lock (retrying at once would wait the busy timeout)."""

    def __init__(self, message: str, *, row: bool = False, busy: bool = False) -> None:
        super().__init__(message)
        self.row = row
        self.busy = busy


def store_error(message: str, exc: BaseException) -> StoreError:
    """A :class:`StoreError` for ``exc``, classified: a store failing, or one row refused."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and (code is None or code & 0xFF in ENVIRONMENT_CODES):
        # no code (an older SQLite binding): taken for the store failing, the safe side (retried, never skipped)
        return StoreError(f"{message}: {exc}", busy=code is not None and code & 0xFF in BUSY_CODES)
    return StoreError(f"{message}: {exc}", row=True)


class StoreFile:
    """The SQLite file of :class:`~jupyter_acp.sessions.store.TranscriptStore`: open, migrate, private, commit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._dirty = False
        #: what opening the store found and did (repaired permissions, migration), for the log and the user
        self.notices: list[str] = []
        #: bytes of each session's stored events, counted as they are added (see ``session_bytes``)
        self._bytes: dict[str, int] = {}
        #: (session id, number) of the conversations known to have their row (``store_conversations``)
        self._rows: set[tuple[str, int]] = set()

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
            event_columns = {r[1] for r in db.execute("PRAGMA table_info(events)")}
            if "size" not in event_columns:
                db.execute("ALTER TABLE events ADD COLUMN size INTEGER")  # old rows: NULL, measured when needed
            if "conversation" not in event_columns:
                db.execute("ALTER TABLE events ADD COLUMN conversation INTEGER NOT NULL DEFAULT 1")
            session_columns = {r[1] for r in db.execute("PRAGMA table_info(sessions)")}
            if "conversation" not in session_columns:
                db.execute("ALTER TABLE sessions ADD COLUMN conversation INTEGER NOT NULL DEFAULT 1")
            # the highest seq given out (or about to be) and the server life that reserved it (``reserve``)
            if "seq_reserved" not in session_columns:
                db.execute("ALTER TABLE sessions ADD COLUMN seq_reserved INTEGER NOT NULL DEFAULT 0")
            if "owner" not in session_columns:
                db.execute("ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
            # turn starts and ends alone: the open turns of a session are found at load without reading its events
            db.execute(
                "CREATE INDEX IF NOT EXISTS events_turns ON events (session_id, seq) "
                "WHERE type IN ('turn_started', 'turn_ended')"
            )
            db.execute("CREATE INDEX IF NOT EXISTS events_conversation ON events (session_id, conversation, seq)")
            split = split_conversations(db)
            if split:
                self.notices.append(
                    f"transcript store migrated: {split} earlier conversations (before a reset) are listed apart"
                )
                log.info("jupyter_acp: %s", self.notices[-1])
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

    # -- transactions ----------------------------------------------------------------------------
    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        db = self.db
        try:
            if not self._dirty:
                db.execute("BEGIN")
                self._dirty = True
            db.execute(sql, args)
        except (sqlite3.Error, ValueError) as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: BaseException) -> StoreError:
        """The error to raise for a failed write; the transaction is rolled back unless only the row was refused
        (SQLite undid that statement alone: what else the transaction holds still commits)."""
        error = store_error("could not save the transcript", exc)
        if not error.row:
            self._rollback()
        return error

    def commit(self) -> None:
        if not self._dirty or self._db is None:
            return
        try:
            self._db.execute("COMMIT")
            self._dirty = False
        except sqlite3.Error as exc:
            self._rollback()
            raise store_error("could not save the transcript", exc) from exc

    def _rollback(self) -> None:
        self._dirty = False
        self._bytes.clear()  # counted sizes may include what was rolled back: measure again
        self._rows.clear()  # and conversation rows inserted in it
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass
