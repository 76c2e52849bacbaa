"""A notebook's past conversations: list them, read one, resume one, delete one; the agent's own past sessions.

A service of the hub apart from turns (``connections/turns.py``) because it is about what the notebook said before,
not about the running conversation: a reset (``Turns.reset``) and a resume both leave the current conversation here
and enter another, and the rest of the hub only sees ``session.conversation`` change.  The store keeps one event log
per notebook session, each event stamped with its conversation (``store/conversations.py``).  It takes what it uses
of the hub as :class:`ConversationHub`, as the gate and the terminals do, and never imports the hub.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from ...acp.connection import AgentError
from ...protocol.jsonrpc import RpcError
from ..state import HubError, NotebookSession
from ..store import ConversationRecord, SessionRecord, StoreError, TranscriptStore

if TYPE_CHECKING:  # pragma: no cover
    from ...acp.connection import AgentConnection
    from ...catalog.agents import AgentSpec
    from ..hub_parts import LogSteps
    from ..settings import HubSettings

log = logging.getLogger(__name__)

#: the id the routes give a past session of the agent's own (from ``session/list``)
AGENT_PREFIX = "agent:"
#: events of a conversation a fork does not copy: about the agent session they ran in, not what was said
NOT_FORKED = frozenset({"session_ready", "notice"})


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


class ConversationTerminals(Protocol):
    """What leaving a conversation asks of the terminals (``terminals/terminals.py``): the session's end."""

    async def end_session(self, session: NotebookSession, reason: str = "") -> int: ...


class ConversationHub(Protocol):
    """What the conversations use of the hub: its settings, store and agents, the event log's writes, opening a
    session again, and the index from an agent's session id to the notebook's.  The underscored names are the event
    log's and the agent sessions' internals that a change of conversation must drive (save now, seal what waits,
    say a store failure, the parameters of a new agent session)."""

    app: HubSettings
    store: TranscriptStore
    connections: dict[str, AgentConnection]
    _by_acp: dict[tuple[str, str], NotebookSession]
    mcp_host: Any  # channels.mcp_http.McpToolHost, started when first needed

    @property
    def terminals(self) -> ConversationTerminals: ...

    @property
    def log(self) -> LogSteps: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    async def open_session(
        self, notebook: str, agent: str | None = None, *, trace: dict[str, str] | None = None
    ) -> NotebookSession: ...

    def specs(self) -> dict[str, AgentSpec]: ...

    def connection(self, agent: str) -> AgentConnection: ...

    async def cancel(self, session: NotebookSession) -> bool: ...

    def session_params(
        self, session: NotebookSession, conn: AgentConnection, trace: dict[str, str] | None
    ) -> dict[str, Any]: ...

    def _save(self, rec: SessionRecord) -> None: ...


class Conversations:
    """A notebook session's conversations (the hub holds one: ``hub.conversations``)."""

    def __init__(self, hub: ConversationHub) -> None:
        self.hub = hub

    # -- reading ---------------------------------------------------------------------------------
    def describe(self, session: NotebookSession, conv: ConversationRecord) -> dict[str, Any]:
        return {
            "id": conv.id,
            "kind": "ours",
            "title": conv.title,
            "agent": conv.agent,
            "started": conv.started,
            "ended": conv.ended,
            "turns": conv.turns,
            "current": conv.number == session.conversation,
        }

    def listing(self, session: NotebookSession) -> list[dict[str, Any]]:
        """The notebook's conversations with this agent: the current one (flagged), then the most recently left."""
        try:
            convs = self.hub.store.conversations(session.id)
        except StoreError as exc:
            raise HubError(f"the conversations could not be read: {exc}", 503) from None
        # the current one first, then the most recently left
        convs.sort(key=lambda c: (c.number != session.conversation, -(c.ended or c.started)))
        out = [self.describe(session, c) for c in convs]
        if not any(c["current"] for c in out):  # nothing said yet in the current one: it has no row yet
            out.insert(
                0,
                {
                    "id": None,
                    "kind": "ours",
                    "title": "",
                    "agent": session.agent,
                    "started": time.time(),
                    "ended": None,
                    "turns": 0,
                    "current": True,
                },
            )
        return out

    async def agent_listing(self, session: NotebookSession) -> list[dict[str, Any]]:
        """The agent's own past sessions in this notebook's folder (``session/list``, where it offers it), minus
        those that are ours already.  A running agent only: listing never starts one."""
        conn = self.hub.connections.get(session.agent)
        if (
            conn is None
            or not conn.alive
            or (conn.agent_capabilities.get("sessionCapabilities") or {}).get("list") is None
        ):
            return []
        known = {session.acp_session_id}
        try:
            known |= {c.acp_session_id for c in self.hub.store.conversations(session.id)}
            result = await conn.request("session/list", {"cwd": session.cwd}, timeout=10)
        except (TimeoutError, RpcError, AgentError, StoreError) as exc:
            log.info("session/list of %s failed: %s", session.agent, exc)
            return []
        out = []
        items = result.get("sessions") if isinstance(result, dict) else None
        for s in items if isinstance(items, list) else []:
            if not isinstance(s, dict) or not isinstance(s.get("sessionId"), str) or s["sessionId"] in known:
                continue
            if s.get("cwd") not in (None, session.cwd):
                continue  # another folder's: never this notebook's
            out.append(
                {
                    "id": AGENT_PREFIX + s["sessionId"],
                    "kind": "agent",
                    "title": str(s.get("title") or "")[:200],
                    "agent": session.agent,
                    "updated_at": s.get("updatedAt"),
                    "current": False,
                }
            )
        return out

    def _conversation(self, session: NotebookSession, cid: str) -> ConversationRecord:
        try:
            conv = self.hub.store.conversation(session.id, cid)
        except StoreError as exc:
            raise HubError(f"the conversations could not be read: {exc}", 503) from None
        if conv is None:
            raise HubError(f"no conversation {cid!r} in this notebook's session with {session.agent!r}", 404)
        return conv

    def events(
        self,
        session: NotebookSession,
        cid: str,
        after: int = 0,
        limit: int | None = None,
        *,
        before: int | None = None,
    ) -> list[dict[str, Any]]:
        """One page of one conversation's stored events (read-only), paged like the session's events."""
        conv = self._conversation(session, cid)
        count = self.hub.app.replay_page_events
        if limit is not None:
            count = max(1, min(limit, count))
        try:
            return self.hub.store.read_conversation(
                session.id, conv.number, after, count, self.hub.app.replay_page_bytes, before=before
            )
        except StoreError as exc:
            raise HubError(f"the conversation could not be read: {exc}", 503) from None

    def tail(self, session: NotebookSession) -> list[dict[str, Any]]:
        """The latest page of the current conversation (stored, then waiting in memory): what a re-seed carries."""
        try:
            stored = self.hub.store.read_conversation(
                session.id,
                session.conversation,
                limit=self.hub.app.replay_page_events,
                max_bytes=self.hub.app.replay_page_bytes,
                before=session.seq + 1,
            )
        except StoreError as exc:
            log.warning("reading the transcript failed: %s", exc)
            stored = []
        last = stored[-1]["seq"] if stored else 0
        self.hub.log.seal(session)
        waiting = [e for e, _, n in session.unsaved if n == session.conversation] + session.outbox
        return stored + [e for e in waiting if e["seq"] > last]

    # -- changing ------------------------------------------------------------------------------
    async def _settle(self, session: NotebookSession) -> None:
        """No turn runs (a running one is cancelled and awaited, a bounded wait)."""
        if session.turn is None:
            return
        await self.hub.cancel(session)
        deadline = time.monotonic() + self.hub.app.cancel_grace + 1
        while session.turn is not None and time.monotonic() < deadline:  # noqa: ASYNC110 - bounded poll
            await asyncio.sleep(0.05)
        if session.turn is not None:
            raise HubError("the running turn did not end; try again", 409)

    async def _leave_conversation(self, session: NotebookSession) -> None:
        """The current conversation ends here: its terminals end, the agent session is closed (a courtesy), its
        events are saved."""
        await self.hub.terminals.end_session(session, "the conversation ended")
        conn = self.hub.connections.get(session.agent)
        old = session.acp_session_id
        if conn is not None and conn.alive and old and conn.supports_close:
            try:
                await conn.request("session/close", {"sessionId": old}, timeout=5)
            except Exception as exc:  # the agent forgetting is all we need; closing is a courtesy
                log.info("session/close of %s failed: %s", old, exc)
        if old:
            self.hub._by_acp.pop((session.agent, old), None)
        if self.hub.mcp_host is not None:
            self.hub.mcp_host.revoke_session(session.id)
        self.hub.log.flush()  # what was said so far is stored under the conversation it was said in
        try:
            self.hub.store.leave_conversation(session.id, session.conversation)
        except StoreError as exc:
            self.hub.log.store_failure(str(exc))

    def _enter_conversation(self, session: NotebookSession, number: int, acp_session_id: str | None) -> None:
        session.record.conversation = number
        session.record.acp_session_id = acp_session_id
        if acp_session_id:
            self.hub._by_acp[(session.agent, acp_session_id)] = session
        self.hub._save(session.record)
        session.acp_generation = None
        session.reseed = False

    async def resume(self, session: NotebookSession, cid: str) -> NotebookSession:
        """Make an earlier conversation (or an agent's own past session) the current one again.

        The agent picks it up with ``session/resume`` or ``session/load`` when it offers them and still knows its
        id; otherwise a new agent session is given our transcript of it with the next prompt (as after a restart).
        """
        if cid.startswith(AGENT_PREFIX):
            return await self._adopt_agent_session(session, cid[len(AGENT_PREFIX) :])
        conv = self._conversation(session, cid)
        if conv.number == session.conversation:
            raise HubError("this conversation is already the current one", 409)
        await self._settle(session)
        await self._leave_conversation(session)
        self._enter_conversation(session, conv.number, conv.acp_session_id)
        session.reseed = not conv.acp_session_id and conv.turns > 0
        title = f": “{conv.title[:80]}”" if conv.title else ""
        self.hub.emit(
            session,
            "notice",
            level="info",
            phase="conversation_resumed",
            conversation_id=conv.id,
            text=f"resumed the conversation of {_when(conv.started)}{title}",
        )
        return await self.hub.open_session(session.notebook, session.agent)

    async def _adopt_agent_session(self, session: NotebookSession, acp_id: str) -> NotebookSession:
        """One of the agent's own past sessions for this folder becomes a new conversation of the notebook."""
        listed = {c["id"]: c for c in await self.agent_listing(session)}
        found = listed.get(AGENT_PREFIX + acp_id)
        if found is None:
            raise HubError(
                f"agent {session.agent!r} does not list a session {acp_id!r} for this notebook's folder "
                "(session/list); only those can be resumed here",
                404,
            )
        await self._settle(session)
        await self._leave_conversation(session)
        try:
            number = self.hub.store.next_conversation(session.id)
            cid = self.hub.store.start_conversation(session.id, number, acp_session_id=acp_id, title=found["title"])
        except StoreError as exc:
            raise HubError(f"the conversation could not be saved: {exc}", 503) from None
        self._enter_conversation(session, number, acp_id)
        session.adopted = True  # what session/load replays of it is recorded: we have none of it
        self.hub.emit(
            session,
            "notice",
            level="info",
            phase="conversation_resumed",
            conversation_id=cid,
            text=f"resumed the agent's own session {acp_id}" + (f": “{found['title'][:80]}”" if found["title"] else ""),
        )
        session = await self.hub.open_session(session.notebook, session.agent)
        if session.setup_task is not None:  # what session/load replays comes before the next prompt, not in its turn
            await asyncio.wait({session.setup_task}, timeout=self.hub.app.agent_start_timeout)
        return session

    async def new(self, session: NotebookSession) -> None:
        """A reset: the current conversation ends (kept, listed), the next one starts with the next event."""
        await self._settle(session)
        await self._leave_conversation(session)
        try:
            number = self.hub.store.next_conversation(session.id)
        except StoreError as exc:
            self.hub.log.store_failure(str(exc))
            number = session.conversation + 1
        self._enter_conversation(session, number, None)

    async def delete(self, session: NotebookSession, cid: str) -> dict[str, Any]:
        """Remove an earlier conversation and its events (never the current one), and the agent's own copy of it
        (``session/delete``) where the agent offers that: ``{events, agent_deleted, agent_error}``.

        Ours goes whatever the agent answers: the user asked for it to be gone from here, and an agent that fails
        to forget is said in the notice and the answer, not a reason to keep our copy."""
        conv = self._conversation(session, cid)
        if conv.number == session.conversation:
            raise HubError(
                "this is the current conversation: start a new one (reset) or resume another first, then delete it",
                409,
            )
        agent_deleted, agent_error = await self._delete_agent_copy(session, conv.acp_session_id)
        try:
            removed = self.hub.store.delete_conversation(session.id, conv.number)
            self.hub.store.commit()
        except StoreError as exc:
            raise HubError(f"the conversation could not be deleted: {exc}", 503) from None
        text = f"the conversation of {_when(conv.started)} was deleted ({removed} events)"
        if agent_deleted:
            text += f"; agent {session.agent!r} deleted its copy too"
        elif agent_error:
            text += f"; agent {session.agent!r} kept its copy: {agent_error}"
        self.hub.emit(
            session,
            "notice",
            level="warning" if agent_error else "info",
            phase="conversation_deleted",
            conversation_id=cid,
            text=text,
        )
        return {"events": removed, "agent_deleted": agent_deleted, "agent_error": agent_error}

    async def _delete_agent_copy(self, session: NotebookSession, acp_id: str | None) -> tuple[bool, str | None]:
        """``session/delete`` of the agent's session behind a conversation: (deleted, why not).  Asked of the
        session's agent only when it advertises ``sessionCapabilities.delete`` (ACP: never call what is not
        advertised); an agent not running is started for it, as opening the panel would."""
        if not acp_id or session.agent not in self.hub.specs():
            return False, None
        conn = self.hub.connection(session.agent)
        try:
            await conn.ensure_started()
        except AgentError as exc:
            return False, f"the agent could not be started to delete it ({exc})"
        if not conn.supports_session("delete"):
            return False, None  # the agent offers no deletion: its copy is its own business
        try:
            await conn.request("session/delete", {"sessionId": acp_id}, timeout=self.hub.app.agent_start_timeout)
        except TimeoutError:
            return False, f"it did not answer session/delete within {self.hub.app.agent_start_timeout:g} s"
        except (RpcError, AgentError) as exc:
            return False, f"session/delete failed: {exc}"
        return True, None

    # -- forking ---------------------------------------------------------------------------------------
    async def fork(self, session: NotebookSession, turn_id: str) -> NotebookSession:
        """A new conversation of the same notebook that starts as the current one was when ``turn_id`` ended: its
        events up to there are copied into it (the panel shows them; the history lists both), and it becomes the
        current one.

        The agent forks its own session (``session/fork``, unstable ``sessionCapabilities.fork``) when it offers that
        and the turn is the conversation's last (the method forks a whole session, not a point in it); the fork is
        then resumed or loaded like any earlier session.  Otherwise, or when forking fails, a new agent session is
        given our transcript of it with the next prompt, as after a restart."""
        if session.turn is not None:
            raise HubError("a turn is running: fork when it has ended (or stop it first)", 409)
        events, last = self._events_until(session, turn_id)
        title = next(
            (c.title for c in self.hub.store.conversations(session.id) if c.number == session.conversation), ""
        )
        forked, why = await self._agent_fork(session, last)
        await self._leave_conversation(session)
        try:
            number = self.hub.store.next_conversation(session.id)
            cid = self.hub.store.start_conversation(
                session.id, number, acp_session_id=forked, title=f"Fork of {title}"[:200] if title else ""
            )
        except StoreError as exc:
            raise HubError(f"the conversation could not be saved: {exc}", 503) from None
        self._enter_conversation(session, number, forked)
        for event in events:  # the history up to the fork point, as the new conversation's own
            self.hub.emit(session, event["type"], **{k: v for k, v in event.items() if k not in ("seq", "ts", "type")})
        session.reseed = forked is None and any(e["type"] == "turn_started" for e in events)
        how = (
            f"agent {session.agent!r} forked its session"
            if forked
            else "the agent is given this history with your next prompt" + (f" ({why})" if why else "")
        )
        self.hub.emit(
            session,
            "notice",
            level="info",
            phase="conversation_forked",
            conversation_id=cid,
            turn_id=turn_id,
            text=f"a new conversation, forked after that turn: {how}; the earlier one is kept in the history",
        )
        return await self.hub.open_session(session.notebook, session.agent)

    def _events_until(self, session: NotebookSession, turn_id: str) -> tuple[list[dict[str, Any]], bool]:
        """The current conversation's events up to ``turn_id``'s end (without those about the agent session they
        ran in), and whether that turn is the conversation's last; 404 when no such ended turn is in it."""
        self.hub.log.flush()  # what was said so far is in the store
        copied: list[dict[str, Any]] = []
        after, found, later = 0, False, False
        while True:
            try:
                page = self.hub.store.read_conversation(
                    session.id,
                    session.conversation,
                    after,
                    self.hub.app.replay_page_events,
                    self.hub.app.replay_page_bytes,
                )
            except StoreError as exc:
                raise HubError(f"the conversation could not be read: {exc}", 503) from None
            if not page:
                break
            for event in page:
                if found:
                    later = later or event.get("type") == "turn_started"
                    continue
                if event.get("type") not in NOT_FORKED:
                    copied.append(event)
                found = event.get("type") == "turn_ended" and event.get("turn_id") == turn_id
            after = page[-1]["seq"]
            if found and later:
                break
        if not found:
            raise HubError(f"no ended turn {turn_id!r} in this notebook's current conversation", 404)
        return copied, not later

    async def _agent_fork(self, session: NotebookSession, last: bool) -> tuple[str | None, str | None]:
        """``session/fork`` of the current agent session: (the fork's id, why not)."""
        conn = self.hub.connections.get(session.agent)
        if conn is None or not conn.alive or not session.acp_session_id:
            return None, None
        if not conn.supports_session("fork"):
            return None, None
        if not last:
            return None, "the agent forks whole sessions only, and later turns followed this one"
        params = {
            "sessionId": session.acp_session_id,
            **self.hub.session_params(session, conn, None),
            "mcpServers": [],
        }
        try:
            result = await conn.request("session/fork", params, timeout=self.hub.app.agent_start_timeout)
        except (TimeoutError, RpcError, AgentError) as exc:
            return None, f"session/fork failed: {exc}"
        forked = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(forked, str) or not forked:
            return None, "session/fork answered no session id"
        return forked, None
