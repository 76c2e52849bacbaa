"""The event log: every event stored before it is sent out, one transaction per burst (at most FLUSH_WAIT), a
failing store retried while the conversation goes on in memory, replay in pages."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .model import NotebookSession, Subscriber, encode
from .store import StoreError

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


class EventLog:
    """A part of :class:`~jupyter_acp.sessions.hub.SessionHub` (a mixin: the hub is one object with one state; each
    part lives in its own module so each job reads alone)."""

    if TYPE_CHECKING:  # pragma: no cover
        # the rest of the hub (its state, its other parts), set up by SessionHub
        _flush_handle: asyncio.Handle | None
        _last_flush: float
        _dirty: set[NotebookSession]
        _store_failed: str | None
        _store_retry_at: float

        def __getattr__(self, name: str) -> Any: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]:
        """Record an event, then (with what else is said within FLUSH_WAIT) store it and send it to every subscriber."""
        self._seal(session)
        session.seq += 1
        event = {"seq": session.seq, "type": type_, "ts": time.time(), **data}
        session.outbox.append(event)
        if type_ == "session_update" and len(data) == 1:
            text = _text_chunk(data.get("update"))
            if text is not None:
                session.merging, session.merged_chars = [text], len(text)
        self._dirty.add(session)
        self._schedule_flush(soon=session.turn is None)
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
    def _seal(session: NotebookSession) -> None:
        """Write the joined pieces into the last outbox event's text (before anything reads the outbox)."""
        pieces, session.merging = session.merging, None
        if pieces is not None and len(pieces) > 1:
            event = session.outbox[-1]
            event["update"] = {**event["update"], "content": {"type": "text", "text": "".join(pieces)}}

    def _schedule_flush(self, soon: bool = False) -> None:
        """Flush within FLUSH_WAIT, or at the next loop tick when ``soon`` (nothing more is coming)."""
        handle = self._flush_handle
        if handle is not None and (not soon or not isinstance(handle, asyncio.TimerHandle)):
            return
        loop = asyncio.get_event_loop()
        if handle is not None:
            handle.cancel()
        if soon:
            self._flush_handle = loop.call_soon(self._flush)
        else:
            now = loop.time()
            wait = STREAM_WAIT if now - self._last_flush < STREAM_WAIT else FLUSH_WAIT
            self._flush_handle = loop.call_at(now + wait, self._flush)

    def _flush(self) -> None:
        """Store the waiting events in one transaction, then hand them to subscribers.

        A failing store (disk full, locked by another server) never stops the stream: events wait
        in memory, the user is told once, and saving is retried every few seconds; when it works
        again the waiting events are written and the user is told that too.
        """
        handle, self._flush_handle = self._flush_handle, None
        if handle is not None:
            handle.cancel()  # flushed directly, or this is it
        # a timed flush: events keep coming (a stream); else a burst ended (turn_ended, a direct flush)
        self._last_flush = asyncio.get_event_loop().time() if isinstance(handle, asyncio.TimerHandle) else 0.0
        dirty, self._dirty = self._dirty, set()
        batches = []
        for session in dirty:
            self._seal(session)
            events, session.outbox = session.outbox, []
            encoded = [encode(e) for e in events]
            batches.append((session, events, encoded))
            # each event with the conversation it was said in (a reset flushes before it switches)
            session.unsaved.extend((e, t, session.conversation) for e, t in zip(events, encoded, strict=True))
        self._save_pending()
        for session, events, encoded in batches:
            for sub in list(session.subscribers):
                try:
                    sub(events, encoded)
                except Exception:
                    log.exception("event subscriber failed; dropping it")
                    session.subscribers.discard(sub)

    def _save_pending(self) -> None:
        if self._store_failed is not None and time.monotonic() < self._store_retry_at:
            return
        waiting = [s for s in self.sessions.values() if s.unsaved]
        try:
            for session in waiting:
                if self._store_failed is not None:  # what could not be saved about it meanwhile (its conversation)
                    self.store.save_session(session.record)
                for number in dict.fromkeys(n for _, _, n in session.unsaved):
                    part = [(e, t) for e, t, n in session.unsaved if n == number]
                    self.store.append_many(session.id, [e for e, _ in part], [t for _, t in part], number)
            self.store.commit()
        except StoreError as exc:
            self._store_failure(str(exc))
            return
        for session in waiting:
            session.unsaved.clear()
        if self._store_failed is not None:
            self._store_failed = None
            log.warning("transcript store works again")
            for session in waiting:
                self.emit(session, "notice", level="info", text="history is being saved again; nothing was lost")

    def _store_failure(self, message: str) -> None:
        first = self._store_failed is None
        self._store_failed = message
        self._store_retry_at = time.monotonic() + self.app.store_retry_interval
        if not self._closing:
            # retry even if nothing else happens: waiting events must reach the disk eventually
            asyncio.get_event_loop().call_later(self.app.store_retry_interval + 0.01, self._save_pending)
        if first:
            log.error("transcript store failed: %s", message)
            for session in self.sessions.values():
                if session.turn is not None or session.unsaved:
                    self.emit(
                        session,
                        "notice",
                        level="warning",
                        text=f"history could not be saved ({message}); the conversation goes on and is kept "
                        "in memory until saving works again",
                        phase="store_failed",
                    )

    def events(
        self,
        session: NotebookSession,
        after: int = 0,
        limit: int | None = None,
        *,
        before: int | None = None,
        current: bool = False,
    ) -> list[dict[str, Any]]:
        """One page of events, oldest first: those with seq > after, or the newest with seq < before.

        ``current``: only the current conversation's (the panel shows it; earlier ones are in its history menu).

        A page holds at most ``limit`` events (and ``JupyterACP.replay_page_events``) and about
        ``JupyterACP.replay_page_bytes``, always at least one event when there is one: the stored ones
        (read with LIMIT, never the whole history), then those still waiting in memory.
        """
        count = self.app.replay_page_events
        if limit is not None:
            count = max(1, min(limit, count))
        max_bytes = self.app.replay_page_bytes
        self._seal(session)
        waiting = [e for e, _, n in session.unsaved if not current or n == session.conversation] + session.outbox
        if before is not None:
            newer = [e for e in waiting if e["seq"] < before][-count:]  # newer than anything stored
            below = newer[0]["seq"] if newer else before
            room = count - len(newer)
            try:
                if room <= 0:
                    older = []
                elif current:
                    older = self.store.read_conversation(
                        session.id, session.conversation, limit=room, max_bytes=max_bytes, before=below
                    )
                else:
                    older = self.store.read_before(session.id, below, room, max_bytes)
            except StoreError as exc:
                log.warning("reading the transcript failed: %s", exc)
                older = []
            return older + newer
        try:
            if current:
                out = self.store.read_conversation(session.id, session.conversation, after, count, max_bytes)
            else:
                out = self.store.read(session.id, after, count, max_bytes)
            complete = not out or out[-1]["seq"] >= self.store.last_seq(session.id)
        except StoreError as exc:
            log.warning("reading the transcript failed: %s", exc)
            out, complete = [], True
        if complete and len(out) < count:  # the stored page reached the end: what waits in memory follows
            last = out[-1]["seq"] if out else after
            out.extend(e for e in waiting if e["seq"] > last)
        return out[:count]

    def subscribe(
        self, session: NotebookSession, after: int, sub: Subscriber, *, current: bool = False
    ) -> tuple[list[dict[str, Any]], Callable[[], None]]:
        """Replay from ``after``, then live; no gap and no duplicate (seq-filtered by the caller).

        The replay is one page: when more than a page lies after ``after``, the latest page (the client
        sees its first replayed seq past after + 1 and fetches older pages with ``events?before=``).
        Events that still matter though older than that page (a pending permission request, the running
        turn's ``turn_started``) come first, marked ``"pinned": true``.

        ``current``: the replay holds only the current conversation (live events are all of it).
        """
        replay = self.events(session, after, current=current)
        if replay and replay[-1]["seq"] < session.seq:  # more than a page: the latest one instead
            replay = [e for e in self.events(session, before=session.seq + 1, current=current) if e["seq"] > after]
            first = replay[0]["seq"] if replay else session.seq + 1
            pinned: list[dict[str, Any]] = []
            try:
                if session.turn is not None:
                    pinned += [
                        e
                        for e in self.store.find(session.id, "turn_started", after, first, 1)
                        if e.get("turn_id") == session.turn.id
                    ]
                if session.pending_permissions:
                    pinned += [
                        e
                        for e in self.store.find(session.id, "permission_request", after, first)
                        if e.get("request_id") in session.pending_permissions
                    ]
                waiting = self.waiting_elicitations(session)
                if waiting:  # a question the agent still waits on, like a permission card
                    pinned += [
                        e
                        for e in self.store.find(session.id, "elicitation_request", after, first)
                        if e.get("elicitation_id") in waiting
                    ]
            except StoreError as exc:
                log.warning("reading the transcript failed: %s", exc)
            pinned.sort(key=lambda e: e["seq"])
            replay = [{**e, "pinned": True} for e in pinned] + replay
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
