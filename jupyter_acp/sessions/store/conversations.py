"""A notebook's conversations: a reset starts a new one, nothing is thrown away, an earlier one can come back.

Apart from the transcript (``store.py``) because it is a view over it, not a second copy: every event row carries
the number of the conversation it was said in (``events.conversation``), the session row the number of the current
one, and ``conversations`` one row each (its id for the routes, first prompt, agent, agent session id, turns,
start and end).  The session's event log stays one sequence, so live replay and paging do not change; reading one
conversation is the same paged query with one more condition.  Stores from before conversations are split at their
``session_reset`` markers when opened (``store_file.split_conversations``).
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ...protocol.transcript import prompt_text
from .file import TITLE_CHARS, StoreError, insert_conversation


class ConversationRecord(BaseModel):
    """One conversation of a notebook session, as listed."""

    id: str
    session_id: str
    number: int
    agent: str
    acp_session_id: str | None = None
    #: the first prompt (cut), "" before the first one
    title: str = ""
    started: float = 0.0
    #: when it was last left (a reset, another one resumed); None for one never left
    ended: float | None = None
    turns: int = 0


_COLUMNS = "id, session_id, number, agent, acp_session_id, title, started, ended, turns"


def agent_title(event: dict[str, Any]) -> str:
    """The title an agent gave its session in this event (a stored ``session_info_update``), else ''."""
    update = event.get("update") if event.get("type") == "session_update" else None
    if not isinstance(update, dict) or update.get("sessionUpdate") != "session_info_update":
        return ""
    title = update.get("title")
    return " ".join(title.split()) if isinstance(title, str) else ""


def _record(row: tuple[Any, ...]) -> ConversationRecord:
    return ConversationRecord(**dict(zip(_COLUMNS.split(", "), row, strict=True)))


class ConversationStore:
    """A part of :class:`~jupyter_acp.sessions.store.TranscriptStore` (a mixin: one object, one SQLite file)."""

    if TYPE_CHECKING:  # pragma: no cover
        # the rest of the store
        @property
        def db(self) -> sqlite3.Connection: ...

        _bytes: dict[str, int]
        _dirty: bool

        def _rollback(self) -> None: ...

        def _write(self, sql: str, args: tuple[Any, ...]) -> None: ...

        def _query_page(
            self, sql: str, args: tuple[Any, ...], limit: int | None, max_bytes: int | None
        ) -> list[dict[str, Any]]: ...

    #: (session id, number) of the conversations known to have their row (set up by ``StoreFile``)
    _rows: set[tuple[str, int]]

    def _note_conversation(self, session_id: str, number: int, events: list[dict[str, Any]]) -> None:
        """Inside the events' transaction: the conversation's row exists, counts its turns, knows its first prompt
        and the agent session it last ran in."""
        db = self.db
        if (session_id, number) not in self._rows:
            started = float(events[0].get("ts") or time.time()) if events else time.time()
            insert_conversation(db, session_id, number, started)
            self._rows.add((session_id, number))
        prompts = [e for e in events if e.get("type") == "turn_started"]
        if prompts:
            db.execute(
                "UPDATE conversations SET turns = turns + ?, title = CASE WHEN title = '' THEN ? ELSE title END "
                "WHERE session_id = ? AND number = ?",
                (len(prompts), prompt_text(prompts[0])[:TITLE_CHARS], session_id, number),
            )
        titles = [t for e in events if (t := agent_title(e))]
        if titles:  # the agent's own name for the conversation (``session_info_update``) wins over the first prompt
            db.execute(
                "UPDATE conversations SET title = ? WHERE session_id = ? AND number = ?",
                (titles[-1][:TITLE_CHARS], session_id, number),
            )
        ready = [e for e in events if e.get("type") == "session_ready" and e.get("acp_session_id")]
        if ready:
            db.execute(
                "UPDATE conversations SET acp_session_id = ? WHERE session_id = ? AND number = ?",
                (ready[-1]["acp_session_id"], session_id, number),
            )

    def conversations(self, session_id: str) -> list[ConversationRecord]:
        """A session's conversations, newest first."""
        try:
            rows = self.db.execute(
                f"SELECT {_COLUMNS} FROM conversations WHERE session_id = ? ORDER BY number DESC", (session_id,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the conversations: {exc}") from exc
        return [_record(r) for r in rows]

    def conversation(self, session_id: str, cid: str) -> ConversationRecord | None:
        """One conversation by its id, only if it belongs to this session (None otherwise)."""
        try:
            row = self.db.execute(
                f"SELECT {_COLUMNS} FROM conversations WHERE id = ? AND session_id = ?", (cid, session_id)
            ).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the conversations: {exc}") from exc
        return _record(row) if row else None

    def next_conversation(self, session_id: str) -> int:
        """The number a new conversation of this session gets."""
        row = self.db.execute(
            "SELECT MAX(n) FROM (SELECT MAX(number) AS n FROM conversations WHERE session_id = ? "
            "UNION ALL SELECT MAX(conversation) FROM events WHERE session_id = ?)",
            (session_id, session_id),
        ).fetchone()
        return int(row[0] or 0) + 1

    def start_conversation(
        self, session_id: str, number: int, *, acp_session_id: str | None = None, title: str = ""
    ) -> str:
        """A conversation's row before any of its events (one taken over from the agent's own list); its id."""
        db = self.db
        try:
            if not self._dirty:
                db.execute("BEGIN")
                self._dirty = True
            cid = insert_conversation(db, session_id, number, time.time(), acp_session_id=acp_session_id, title=title)
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"could not save the conversation: {exc}") from exc
        self._rows.add((session_id, number))
        return cid

    def leave_conversation(self, session_id: str, number: int) -> None:
        """The conversation is no longer the current one: its end is now."""
        self._write(
            "UPDATE conversations SET ended = ? WHERE session_id = ? AND number = ?", (time.time(), session_id, number)
        )

    def delete_conversation(self, session_id: str, number: int) -> int:
        """Remove a conversation and every event said in it; how many events went."""
        span = (session_id, number)
        (count,) = self.db.execute(
            "SELECT COUNT(*) FROM events WHERE session_id = ? AND conversation = ?", span
        ).fetchone()
        self._write("DELETE FROM conversations WHERE session_id = ? AND number = ?", span)
        self._write("DELETE FROM events WHERE session_id = ? AND conversation = ?", span)
        self._bytes.pop(session_id, None)
        self._rows.discard(span)
        return int(count)

    def read_conversation(
        self,
        session_id: str,
        number: int,
        after: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
        *,
        before: int | None = None,
    ) -> list[dict[str, Any]]:
        """One page of one conversation's events, oldest first: seq > after, or the newest with seq < before."""
        if before is not None:
            sql = "SELECT data FROM events WHERE session_id = ? AND conversation = ? AND seq < ? ORDER BY seq DESC"
            page = self._query_page(sql, (session_id, number, before), limit, max_bytes)
            page.reverse()
            return page
        sql = "SELECT data FROM events WHERE session_id = ? AND conversation = ? AND seq > ? ORDER BY seq"
        return self._query_page(sql, (session_id, number, after), limit, max_bytes)
