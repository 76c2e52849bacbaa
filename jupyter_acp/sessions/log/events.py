"""The event log: every event stored before it is sent out, one transaction per burst (at most FLUSH_WAIT), a
failing store retried while the conversation goes on in memory, replay in pages.

A seq is never given twice: each session's seqs are reserved in the store in blocks (``RESERVE_BLOCK``, one small
write per block, in a flush's own transaction) before any event past the reservation is sent, and a start resumes
past the reservation. While the store fails, the reservation left covers what goes on in memory; past it, events
wait (stored, then sent) until the store works again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..hub_parts import QuestionSteps
from ..state import NO_RUN_END, NotebookSession, Subscriber, encode
from ..store import StoreError

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import HubSettings
    from ..store import TranscriptStore
    from ..store.lives import Lives

log = logging.getLogger(__name__)

#: message chunks that join the previous chunk of the same message while both wait for the same flush
JOINABLE = frozenset({"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"})
#: a joined chunk's text stays under this (characters), far below the store's per-event cap
JOIN_LIMIT = 32 * 1024
#: seconds an event of a running turn waits for company before it is stored and sent: a turn's events of one
#: burst (turn_started, the answer, turn_ended of a quick agent; a stream's chunks) leave as one frame and one
#: commit; an event said outside a turn (turn_ended among them) leaves at the next loop tick
FLUSH_WAIT = 0.001
#: the wait while events keep coming (the last timed flush was less than this ago): a stream's flush, its commit and
#: its frame cost about 150 us whatever they carry, so a long answer is flushed 200 times a second, not 1,000
STREAM_WAIT = 0.005
#: seqs reserved in the store at a time (a start after a crash skips what was left of them: a gap, never a reuse)
RESERVE_BLOCK = 10_000
#: a flush reserves the next block once fewer seqs than this are left: while the store fails, at least this many
#: events of a session still go out before they wait for it
RESERVE_AHEAD = RESERVE_BLOCK // 2
#: a notice of events the store refused row by row (itself refused too: told no further)
REFUSED = "store_refused"


def _text_chunk(update: Any) -> str | None:
    """The text of a plain text chunk (nothing but ``sessionUpdate``, ``content`` and maybe ``messageId``).

    Asked once per streamed token: plain lookups, no set built per call."""
    if type(update) is not dict or update.get("sessionUpdate") not in JOINABLE:
        return None
    size = len(update)
    if size > 3 or "content" not in update or (size == 3 and "messageId" not in update):
        return None
    content = update["content"]
    if type(content) is not dict or len(content) != 2 or content.get("type") != "text":
        return None
    text = content.get("text")
    return text if type(text) is str else None


class LogHub(Protocol):
    """What the event log uses of the hub: its settings, its store and life on it, the sessions, whether it stops,
    and which of a session's questions still wait (a replay pins them)."""

    app: HubSettings
    lives: Lives
    sessions: dict[str, NotebookSession]
    closing: bool

    @property
    def store(self) -> TranscriptStore: ...

    @property
    def questions(self) -> QuestionSteps: ...


class EventLog:
    """Every session's events: recorded, stored in bursts, sent, replayed; the store's failures (the hub holds one:
    ``hub.log``; its own state here, the hub's read through ``LogHub``)."""

    def __init__(self, hub: LogHub) -> None:
        self.hub = hub
        self._flush_handle: asyncio.Handle | None = None
        self._last_flush = 0.0
        self._dirty: set[NotebookSession] = set()
        #: why the store fails (None: it works); events wait in memory meanwhile
        self.failed: str | None = None
        self._store_busy = False
        self._store_retry_at = 0.0
        self._store_retry: asyncio.TimerHandle | None = None
        #: sessions told about the store's current failure (each once)
        self._store_told: set[str] = set()
        #: sessions whose record the store refused (told once)
        self._refused_records: set[str] = set()

    def mark_dirty(self, session: NotebookSession) -> None:
        """Something of the session waits for the next flush (an event recorded out of ``emit``, its record)."""
        self._dirty.add(session)

    def stop(self) -> None:
        """The last save attempt, whatever the retry timer says (the hub is closing); ``failed`` says how it went."""
        self.flush()
        if self._store_retry is not None:
            self._store_retry.cancel()
            self._store_retry = None

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]:
        """Record an event, then (with what else is said within FLUSH_WAIT) store it and send it to every subscriber."""
        self.seal(session)
        session.seq += 1
        if session.seq > session.run_end:  # another server on the store took the seqs after this run
            session.seq, session.run_end = session.next_start + 1, NO_RUN_END
        event = {"seq": session.seq, "type": type_, "ts": time.time(), **data}
        session.outbox.append(event)
        if type_ == "session_update" and len(data) == 1:
            text = _text_chunk(data.get("update"))
            if text is not None:
                session.merging, session.merged_chars = [text], len(text)
        self._dirty.add(session)
        self.schedule_flush(soon=session.turn is None)
        return event

    def emit_update(self, session: NotebookSession, update: dict[str, Any]) -> None:
        """An agent's ``session/update`` as a ``session_update`` event.

        A text chunk that continues the previous one (same kind, same message, both still waiting for the same
        flush) joins it instead of becoming an event of its own: an agent that streams a token per line costs one
        stored row and one frame per flush, not per token, and the transcript reads the same.
        """
        if session.merging is None or not self._join(session, update):
            self.emit(session, "session_update", update=update)

    @staticmethod
    def _join(session: NotebookSession, update: dict[str, Any]) -> bool:
        """Join a text chunk to the last event, a text chunk of the same kind and message."""
        text = _text_chunk(update)
        if text is None or session.merged_chars + len(text) > JOIN_LIMIT:
            return False
        last = session.outbox[-1]["update"]
        if update["sessionUpdate"] != last["sessionUpdate"] or update.get("messageId") != last.get("messageId"):
            return False
        session.merging.append(text)  # type: ignore[union-attr]
        session.merged_chars += len(text)
        return True

    @staticmethod
    def seal(session: NotebookSession) -> None:
        """Write the joined pieces into the last outbox event's text (before anything reads the outbox)."""
        pieces, session.merging = session.merging, None
        if pieces is not None and len(pieces) > 1:
            event = session.outbox[-1]
            event["update"] = {**event["update"], "content": {"type": "text", "text": "".join(pieces)}}

    def schedule_flush(self, soon: bool = False) -> None:
        """Flush within FLUSH_WAIT, or at the next loop tick when ``soon`` (nothing more is coming)."""
        handle = self._flush_handle
        if handle is not None and (not soon or not isinstance(handle, asyncio.TimerHandle)):
            return
        loop = asyncio.get_event_loop()
        if handle is not None:
            handle.cancel()
        if soon:
            self._flush_handle = loop.call_soon(self.flush)
        else:
            now = loop.time()
            wait = STREAM_WAIT if now - self._last_flush < STREAM_WAIT else FLUSH_WAIT
            self._flush_handle = loop.call_at(now + wait, self.flush)

    def flush(self) -> None:
        """Store the waiting events in one transaction, then hand them to subscribers.

        A failing store (disk full, locked by another server) never stops the stream: events wait
        in memory, the user is told once, and saving is retried at every flush (on a timer while
        another server holds the lock); when it works again the waiting events are written and the
        user is told that too. Only events within the seqs reserved in the store are sent.
        """
        handle, self._flush_handle = self._flush_handle, None
        if handle is not None:
            handle.cancel()  # flushed directly, or this is it
        # a timed flush: events keep coming (a stream); else a burst ended (turn_ended, a direct flush)
        self._last_flush = asyncio.get_event_loop().time() if isinstance(handle, asyncio.TimerHandle) else 0.0
        dirty, self._dirty = self._dirty, set()
        batches = []
        for session in dirty:
            self.seal(session)
            events, session.outbox = session.outbox, []
            encoded = [encode(e) for e in events]
            batches.append((session, events, encoded))
            # each event with the conversation it was said in (a reset flushes before it switches)
            session.unsaved.extend((e, t, session.conversation) for e, t in zip(events, encoded, strict=True))
        self._save_pending()
        for session, events, encoded in batches:
            if events and (session.held or events[-1]["seq"] > session.reserved):
                events, encoded = self._hold(session, events, encoded)
            self._send(session, events, encoded)

    def store_now(self) -> None:
        """Store (and send) what waits, now: an answer that says an event happened leaves after it is stored."""
        if self._dirty:
            self.flush()

    @staticmethod
    def _send(session: NotebookSession, events: list[dict[str, Any]], encoded: list[str]) -> None:
        if not events:
            return
        for sub in list(session.subscribers):
            try:
                sub(events, encoded)
            except Exception:
                log.exception("event subscriber failed; dropping it")
                session.subscribers.discard(sub)

    @staticmethod
    def _hold(
        session: NotebookSession, events: list[dict[str, Any]], encoded: list[str]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """Keep back the events past the reserved seqs (the store fails): sent once stored. Returns the rest."""
        cut = 0 if session.held else next(i for i, e in enumerate(events) if e["seq"] > session.reserved)
        session.held.extend(zip(events[cut:], encoded[cut:], strict=True))
        return events[:cut], encoded[:cut]

    def _send_held(self, session: NotebookSession) -> None:
        ready = [p for p in session.held if p[0]["seq"] <= session.reserved]
        session.held = session.held[len(ready) :]
        self._send(session, [e for e, _ in ready], [t for _, t in ready])

    def _save_pending(self, *, last: bool = False) -> bool:
        """Write what waits (records, reservations, events) in one transaction; True when it is stored.

        A row the store refuses (a constraint, a value SQLite will not take) is skipped and said in a notice to its
        session: the other rows save. The store itself failing fails the whole transaction (retried at the next
        flush; while another server holds the lock, on a timer: each try would wait the busy timeout).
        """
        if (
            self.failed is not None
            and self._store_busy
            and not last
            and not self.hub.closing
            and time.monotonic() < self._store_retry_at
        ):
            self._arm_retry()
            return False
        waiting = [s for s in self.hub.sessions.values() if s.unsaved or s.record_dirty]
        reservations: list[tuple[NotebookSession, int, int]] = []
        refused: list[tuple[NotebookSession, list[dict[str, Any]], str]] = []
        store = self.hub.store
        life = self.hub.lives.id
        try:
            for session in waiting:
                if session.record_dirty or self.failed is not None:
                    self._save_record(session, refused)
                if session.unsaved and session.seq + RESERVE_AHEAD > session.reserved:
                    floor = max(session.seq, session.reserved)
                    reservations.append((session, floor, store.reserve(session.id, floor, RESERVE_BLOCK, life)))
                for number in dict.fromkeys(n for _, _, n in session.unsaved):
                    part = [(e, t) for e, t, n in session.unsaved if n == number]
                    try:
                        store.append_many(session.id, [e for e, _ in part], [t for _, t in part], number)
                    except StoreError as exc:
                        if not exc.row:
                            raise
                        refused.append((session, self._row_by_row(session.id, part, number), str(exc)))
            store.commit()
        except StoreError as exc:
            self.store_failure(str(exc), busy=exc.busy, touched=waiting)
            return False
        for session, floor, end in reservations:
            start = end - RESERVE_BLOCK
            if start > floor and session.run_end == NO_RUN_END:  # another server reserved the seqs between
                session.run_end, session.next_start = floor, start
            session.reserved = end
        for session in waiting:
            session.unsaved.clear()
            session.record_dirty = False
        for session, events, reason in refused:
            self._refused(session, events, reason)
        if self.failed is not None:
            self.failed = None
            told, self._store_told = self._store_told, set()
            log.warning("transcript store works again")
            for session in waiting:
                if session.id in told:
                    self.emit(session, "notice", level="info", text="history is being saved again; nothing was lost")
        for session in waiting:
            if session.held:
                self._send_held(session)
        return True

    def _save_record(self, session: NotebookSession, refused: list[Any]) -> None:
        """Stage the session's record; one the store refuses (another row holds its notebook and agent) is said
        once and never blocks the events."""
        try:
            self.hub.store.save_session(session.record)
        except StoreError as exc:
            if not exc.row:
                raise
            if session.id not in self._refused_records:
                self._refused_records.add(session.id)
                log.error("the record of session %s could not be saved: %s", session.id, exc)
                refused.append((session, [], f"its record: {exc}"))

    def _row_by_row(self, session_id: str, part: list[tuple[dict[str, Any], str]], number: int) -> list[dict[str, Any]]:
        """Stage a refused batch one event at a time; the events refused again (quarantined, in memory)."""
        out = []
        for event, text in part:
            try:
                self.hub.store.append_many(session_id, [event], [text], number)
            except StoreError as exc:
                if not exc.row:
                    raise
                out.append(event)
        return out

    def _refused(self, session: NotebookSession, events: list[dict[str, Any]], reason: str) -> None:
        """Events the store refused row by row: kept for this server's replays, said in a notice (once: a refused
        notice about refused events is not told again)."""
        session.quarantined.extend(events)
        if events and all(e.get("phase") == REFUSED for e in events):
            return
        what = f"{len(events)} event{'s' if len(events) != 1 else ''} of this conversation" if events else "this"
        log.error("transcript store refused %s of session %s: %s", what, session.id, reason)
        self.emit(
            session,
            "notice",
            level="warning",
            phase=REFUSED,
            text=f"{what} could not be saved ({reason}); "
            + (
                "they stay shown while this server runs"
                if events
                else "the conversation's events are still saved under its id"
            )
            + "; other conversations are saved as usual",
        )

    def store_failure(self, message: str, *, busy: bool = False, touched: Sequence[NotebookSession] = ()) -> None:
        first = self.failed is None
        self.failed = message
        self._store_busy = busy
        self._store_retry_at = time.monotonic() + self.hub.app.store_retry_interval
        self._arm_retry()
        if first:
            log.error("transcript store failed: %s", message)
        # every session the failure touches is told, once per failure
        for session in [*touched, *(s for s in self.hub.sessions.values() if s.turn is not None)]:
            if session.id in self._store_told or session.id not in self.hub.sessions:
                continue
            self._store_told.add(session.id)
            self.emit(
                session,
                "notice",
                level="warning",
                text=f"history could not be saved ({message}); the conversation goes on and is kept "
                "in memory until saving works again",
                phase="store_failed",
            )

    def _arm_retry(self) -> None:
        """Retry at the retry time even if nothing else happens: waiting events must reach the disk eventually."""
        if not self.hub.closing and self._store_retry is None:
            wait = max(0.0, self._store_retry_at - time.monotonic()) + 0.01
            self._store_retry = asyncio.get_event_loop().call_later(wait, self._retry_store)

    def _retry_store(self) -> None:
        self._store_retry = None
        if self.failed is not None and not self.hub.closing:
            if self._dirty:
                self.flush()
            else:
                self._save_pending()

    def events(
        self,
        session: NotebookSession,
        after: int = 0,
        limit: int | None = None,
        *,
        before: int | None = None,
        current: bool = False,
        max_bytes: int | None = None,
    ) -> list[dict[str, Any]]:
        """One page of events, oldest first: those with seq > after, or the newest with seq < before.

        ``current``: only the current conversation's (the panel shows it; earlier ones are in its history menu).

        A page holds at most ``limit`` events (and ``JupyterACP.replay_page_events``) and about ``max_bytes``
        (``JupyterACP.replay_page_bytes`` when not given), always at least one event when there is one: the stored
        ones (read with LIMIT, never the whole history), then those still waiting in memory.
        """
        count = self.hub.app.replay_page_events
        if limit is not None:
            count = max(1, min(limit, count))
        if max_bytes is None:
            max_bytes = self.hub.app.replay_page_bytes
        self.seal(session)
        waiting = self._in_memory(session, current)
        if before is not None:
            try:
                if current:
                    older = self.hub.store.read_conversation(
                        session.id, session.conversation, limit=count, max_bytes=max_bytes, before=before
                    )
                else:
                    older = self.hub.store.read_before(session.id, before, count, max_bytes)
            except StoreError as exc:
                log.warning("reading the transcript failed: %s", exc)
                older = []
            newer = [e for e in waiting if e["seq"] < before]
            if not newer:
                return older
            # what waits in memory is newer than what is stored, but for events the store refused
            return _merged(older, newer)[-count:]
        try:
            if current:
                out = self.hub.store.read_conversation(session.id, session.conversation, after, count, max_bytes)
            else:
                out = self.hub.store.read(session.id, after, count, max_bytes)
            complete = not out or out[-1]["seq"] >= self.hub.store.last_seq(session.id)
        except StoreError as exc:
            log.warning("reading the transcript failed: %s", exc)
            out, complete = [], True
        if waiting:
            upto = None if complete else out[-1]["seq"]  # past the stored page: the next page's
            extra = [e for e in waiting if e["seq"] > after and (upto is None or e["seq"] < upto)]
            if extra:
                out = _merged(out, extra)
        return out[:count]

    @staticmethod
    def _in_memory(session: NotebookSession, current: bool) -> list[dict[str, Any]]:
        """The session's events not (yet) in the store, oldest first: those sent while it failed, those about to be
        stored, those it refused; never one past the reserved seqs (not sent yet)."""
        limit = session.reserved
        conversation = session.conversation
        waiting = [e for e, _, n in session.unsaved if (not current or n == conversation) and e["seq"] <= limit]
        waiting += [e for e in session.outbox if e["seq"] <= limit]
        if session.quarantined:
            waiting = sorted(waiting + session.quarantined, key=lambda e: e["seq"])
        return waiting

    def history_moved(self, session: NotebookSession, after: int) -> dict[str, Any] | None:
        """What to tell a client that says it saw events past the server's last seq (the store it saw them from is
        not this one: restored from a backup, replaced, another server's), else None."""
        if after <= session.seq:
            return None
        return {
            "after": after,
            "seq": session.seq,
            "text": f"the server's history of this conversation ends at event {session.seq}, before the {after} "
            "this client saw: its store is not the one those events came from (replaced or restored). Showing the "
            "server's history from the start.",
        }

    def subscribe(
        self,
        session: NotebookSession,
        after: int,
        sub: Subscriber,
        *,
        current: bool = False,
        page_bytes: int | None = None,
    ) -> tuple[list[dict[str, Any]], Callable[[], None]]:
        """Replay from ``after``, then live; no gap and no duplicate (seq-filtered by the caller).

        The replay is one page (of about ``page_bytes``, else ``JupyterACP.replay_page_bytes``): when more than a
        page lies after ``after``, the latest page (the client sees its first replayed seq past after + 1 and
        fetches older pages with ``events?before=``).
        Events that still matter though older than that page (a pending permission request, the running
        turn's ``turn_started``) come first, marked ``"pinned": true``.

        ``current``: the replay holds only the current conversation (live events are all of it).

        An ``after`` past the server's last seq is taken as the server's last seq: the client misses none of what
        comes next (the caller tells it the history moved, ``history_moved``).
        """
        after = min(after, session.seq)
        replay = self.events(session, after, current=current, max_bytes=page_bytes)
        if replay and replay[-1]["seq"] < session.seq:  # more than a page: the latest one instead
            latest = self.events(session, before=session.seq + 1, current=current, max_bytes=page_bytes)
            replay = [e for e in latest if e["seq"] > after]
            first = replay[0]["seq"] if replay else session.seq + 1
            pinned: list[dict[str, Any]] = []
            try:
                if session.turn is not None:
                    pinned += [
                        e
                        for e in self.hub.store.find(session.id, "turn_started", after, first, 1)
                        if e.get("turn_id") == session.turn.id
                    ]
                if session.pending_permissions:
                    pinned += [
                        e
                        for e in self.hub.store.find(session.id, "permission_request", after, first)
                        if e.get("request_id") in session.pending_permissions
                    ]
                waiting = self.hub.questions.waiting(session)
                if waiting:  # a question the agent still waits on, like a permission card
                    pinned += [
                        e
                        for e in self.hub.store.find(session.id, "elicitation_request", after, first)
                        if e.get("elicitation_id") in waiting
                    ]
            except StoreError as exc:
                log.warning("reading the transcript failed: %s", exc)
            pinned.sort(key=lambda e: e["seq"])
            replay = [{**e, "pinned": True} for e in pinned] + replay
        if replay and replay[-1]["seq"] > session.seq:  # stored by another server on the store, past this one's
            replay = [e for e in replay if e["seq"] <= session.seq]
        # events stored before this call come from the replay; the live path only sends newer ones
        last = replay[-1]["seq"] if replay else after
        seen = {"last": last}

        def deliver(events: list[dict[str, Any]], encoded: list[str]) -> None:
            if events and events[0]["seq"] <= seen["last"]:
                pairs = [(e, t) for e, t in zip(events, encoded, strict=True) if e["seq"] > seen["last"]]
                events, encoded = [p[0] for p in pairs], [p[1] for p in pairs]
            if events:
                seen["last"] = events[-1]["seq"]
                sub(events, encoded)

        session.subscribers.add(deliver)
        return replay, lambda: session.subscribers.discard(deliver)


def _merged(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two seq-ordered lists as one, each seq once."""
    seen: set[int] = set()
    out = []
    for e in sorted(a + b, key=lambda e: e["seq"]):
        if e["seq"] not in seen:
            seen.add(e["seq"])
            out.append(e)
    return out
