"""The session hub: notebook session <-> ACP session, turns, permissions, fan-out and replay.

A session is a notebook, not a chat: (notebook path, agent) names exactly one session, whose cwd
is the notebook's folder as its kernel sees it.  Every event is written to the transcript store
before any subscriber sees it; subscribers replay from the last sequence number they saw.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jupyter_core.utils import ensure_async

from ..acp.connection import AgentConnection
from ..catalog.agents import AgentSpec
from ..protocol.actor import Actor
from ..protocol.paths import PathError, notebook_api_path
from ..tools import ToolContext, ToolSurface
from ..tools.files import FileRules
from .connections.agent_sessions import AgentSessions, Restarted
from .connections.current_agent import CurrentAgents
from .connections.follow import ToolListFollower
from .connections.turns import Turns
from .gate.elicitations import Questions
from .gate.gate import Gate
from .gate.permissions import Permissions
from .log.conversations import Conversations
from .log.events import EventLog
from .review import ReviewService, ReviewStore
from .state import NO_RUN_END, HubError, NotebookSession, PendingPermission, Subscriber, Turn, TurnTimeout, encode
from .store import SessionRecord, StoreError, TranscriptStore
from .store.lives import Lives
from .terminals.terminals import TerminalService

if TYPE_CHECKING:  # pragma: no cover
    from .settings import HubSettings

log = logging.getLogger(__name__)

__all__ = [
    "HubError",
    "NotebookSession",
    "PendingPermission",
    "SessionHub",
    "Subscriber",
    "Turn",
    "TurnTimeout",
    "encode",
]


class SessionHub:
    """The facade the routes and the app hold: the session registry and the lifecycle here; the event log, the
    turns, the agent sessions, the permissions, the gate, the terminals, the tool lists' follower, the agents'
    questions, the current agents and the conversations are services it holds, each taking a Protocol of what it
    uses of the hub."""

    # the services, as the routes and the app use them (the parts see them through narrower protocols)
    log: EventLog
    gate: Gate
    follower: ToolListFollower
    questions: Questions
    conversations: Conversations
    agent_sessions: AgentSessions
    permissions: Permissions
    turns: Turns

    def __init__(self, app: HubSettings, store: TranscriptStore, tools: ToolSurface) -> None:
        self.app = app
        self.serverapp = app.serverapp
        self.store = store
        self.tools = tools
        self.sessions: dict[str, NotebookSession] = {}
        self._by_key: dict[tuple[str, str], NotebookSession] = {}
        self._by_acp: dict[tuple[str, str], NotebookSession] = {}
        self.connections: dict[str, AgentConnection] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closing = False
        #: every session's events: recorded, stored in bursts, sent, replayed (``log/events.py``)
        self.log = EventLog(self)
        self.mcp_host: Any = None  # channels.mcp_http.McpToolHost, started when first needed
        #: the one gate every agent action passes
        self._file_rules: FileRules | None = None
        #: the agents' connections and each notebook session's agent session (``connections/agent_sessions.py``)
        self.agent_sessions = AgentSessions(self)
        #: the cards held for the user, and the bookkeeping of the agents' tool calls (``gate/permissions.py``)
        self.permissions = Permissions(self)
        #: the sessions' turns: the queue per agent, the watchdog, cancel, reset, modes (``connections/turns.py``)
        self.turns = Turns(self)
        self.follower = ToolListFollower(self, kernel_wait=getattr(app, "kernel_start_wait", 10.0))
        #: turns' checkpoints, their review and rewind, and the provenance of agents' changes
        self.review: ReviewService | None = None
        services = tools.services
        if services is not None:
            store_path = getattr(store, "path", ":memory:")
            review_path = (
                os.path.join(os.path.dirname(os.path.abspath(store_path)), "review.sqlite")
                if store_path != ":memory:" and not store_path.startswith("file:")
                else ":memory:"
            )
            self.review = ReviewService(
                self, services.notebooks, services.kernels, services.config, ReviewStore(review_path)
            )
        self.gate = Gate(self, services.config if services is not None else None, self.review)
        #: the agents' questions to the user (``elicitation/create``)
        self.questions = Questions(self)
        #: the notebook's past conversations: list, read, resume, delete, fork (``log/conversations.py``)
        self.conversations = Conversations(self)
        #: each notebook's current agent (the panel's picker, ``%acp use``)
        self.current_agents = CurrentAgents(self)
        #: agents' commands in Jupyter terminals (``terminal/*``)
        self.terminals = TerminalService(self)
        #: the server root's real path: a session belongs to a notebook of this root, and only its
        #: sessions are loaded (two projects sharing the per-user store never see each other's)
        self.root = os.path.realpath(self.serverapp.root_dir)
        store.max_event_bytes = app.max_event_bytes
        store.max_session_bytes = app.max_session_bytes
        #: this server's life on the store (other servers may share it: ``store_lives.py``)
        self.lives = Lives(store.path)
        self.lives.claim()
        last_words = self.lives.read_last_words()
        for rec in store.load_sessions(self.root):
            self._load(rec, last_words.get(rec.id))
        # what was said at load (turns the server died in, what a stop could not save) is stored before any
        # client reads
        self.log.flush()
        if last_words and self.log.failed is None:
            self.lives.forget_last_words()

    def _load(self, rec: SessionRecord, lost: dict[str, Any] | None = None) -> NotebookSession:
        """A stored session, in memory: its seq past every seq given out, its turns a dead server left open ended,
        what an earlier stop could not save told."""
        rec.cwd = self.cwd_for(rec.notebook)  # recomputed at every load: always a folder of this root
        try:
            last = self.store.last_seq(rec.id)
        except StoreError as exc:
            log.error("reading the transcript of %s failed: %s", rec.id, exc)
            last = 0
        session = NotebookSession(rec, last)
        if rec.seq_reserved > last:
            # a server may have sent events up to its reservation and not stored them (it was killed while the store
            # failed; or it still runs): the next event's seq is past the reservation, never one a client may hold
            session.run_end, session.next_start = last, rec.seq_reserved
        self._add(session)
        if lost:
            self._tell_lost(session, lost)
        if rec.owner and self.lives.alive(rec.owner):
            return session  # another server on this store runs it: its turns are its own
        try:
            open_turns = self.store.open_turns(rec.id)
        except StoreError as exc:
            log.error("reading the turns of %s failed: %s", rec.id, exc)
            open_turns = []
        for _, turn_id, conversation in open_turns:
            self._record(
                session,
                conversation,
                "turn_ended",
                turn_id=turn_id,
                error="the server stopped during this turn (it was killed or crashed) before the agent finished; "
                "what the agent said until then is above. Send the prompt again to go on.",
                error_kind="server_lost",
                tool_calls_served=0,
                tool_channels=[],
            )
        return session

    def _record(self, session: NotebookSession, conversation: int, type_: str, **data: Any) -> None:
        """An event of an earlier conversation (``emit`` says it in the current one), stored at the next flush."""
        session.seq += 1
        if session.seq > session.run_end:  # as ``emit``: past the seqs an earlier server reserved
            session.seq, session.run_end = session.next_start + 1, NO_RUN_END
        event = {"seq": session.seq, "type": type_, "ts": time.time(), **data}
        session.unsaved.append((event, encode(event), conversation))
        self.log.mark_dirty(session)

    def _tell_lost(self, session: NotebookSession, lost: dict[str, Any]) -> None:
        n = int(lost.get("events") or 0)
        turns = [str(t) for t in lost.get("turns") or []]
        which = f" of turn{'s' if len(turns) > 1 else ''} {', '.join(turns)}" if turns else ""
        self.emit(
            session,
            "notice",
            level="warning",
            phase="store_lost",
            events=n,
            turns=turns,
            text=f"{n} event{'s' if n != 1 else ''}{which} (seqs {lost.get('first')}-{lost.get('last')}) could not "
            f"be kept: the transcript store failed ({lost.get('reason') or 'unknown'}) and the server stopped before "
            "saving worked again. They were shown while the server ran; they are not in this history.",
        )

    # -- sessions --------------------------------------------------------------------------------
    def _add(self, session: NotebookSession) -> None:
        self.sessions[session.id] = session
        self._by_key[(session.notebook, session.agent)] = session
        if session.acp_session_id:
            self._by_acp[(session.agent, session.acp_session_id)] = session

    def specs(self) -> dict[str, AgentSpec]:
        return self.app.agent_specs

    def get(self, session_id: str) -> NotebookSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise HubError(f"no session {session_id!r}", 404)
        return session

    def list(self, notebook: str | None = None) -> list[NotebookSession]:
        if notebook is None:
            return list(self.sessions.values())
        path = notebook_api_path(notebook)
        return [s for s in self.sessions.values() if s.notebook == path]

    async def open_session(
        self, notebook: str, agent: str | None = None, *, trace: dict[str, str] | None = None
    ) -> NotebookSession:
        """The session for (notebook, agent), created on first use; idempotent.  No agent: the notebook's
        current agent (``current_agent.py``).  ``trace``: the request's W3C trace context, for the warm-up's
        ``session/new`` ``_meta``."""
        try:
            path = notebook_api_path(notebook)
        except PathError as exc:
            raise HubError(str(exc), 400) from None
        agent = agent or self.current_agents.current(path)
        if agent not in self.specs():
            raise HubError(f"no agent named {agent!r} is configured", 404)
        session = self._by_key.get((path, agent))
        if session is None:
            cm = self.serverapp.contents_manager
            exists = await ensure_async(cm.file_exists(path))
            if not exists:
                raise HubError(f"no notebook at {path!r}", 404)
            session = self._by_key.get((path, agent)) or self._adopt(path, agent) or self._create(path, agent)
        elif session.record.cwd != (cwd := self.cwd_for(path)):
            session.record.cwd = cwd  # recomputed at every open: the agent session (re)opens in this root
            self._save(session.record)
        if (
            session.acp_generation is None
            and session.setup_task is None
            and not self.closing
            and session.agent in self.specs()
        ):
            # warm up in the background: the agent starts while the user types
            session.setup_task = self.spawn(self.warm_up(session, trace))
        return session

    def _adopt(self, path: str, agent: str) -> NotebookSession | None:
        """The session another server on this store created for (notebook, agent) since this one loaded: the same
        conversation (one row per notebook and agent), never a second one."""
        try:
            rec = self.store.find_session(self.root, path, agent)
        except StoreError as exc:
            log.warning("looking the session up in the store failed: %s", exc)
            return None
        if rec is None or rec.id in self.sessions:
            return None
        session = self._load(rec)
        self.log.schedule_flush()
        return session

    def _create(self, path: str, agent: str) -> NotebookSession:
        now = time.time()
        rec = SessionRecord(
            id=uuid.uuid4().hex,
            notebook=path,
            agent=agent,
            cwd=self.cwd_for(path),
            created=now,
            updated=now,
            root=self.root,
        )
        session = NotebookSession(rec, 0)
        try:
            self.store.save_session(rec)
        except StoreError as exc:
            if exc.row:  # another server stored it between the look-up and this write: that one is the session
                adopted = self._adopt(path, agent)
                if adopted is not None:
                    return adopted
            session.record_dirty = True  # saved with its events once the store works
            self._add(session)
            self.log.store_failure(str(exc), busy=exc.busy, touched=[session])
            return session
        self._add(session)
        self.log.schedule_flush()
        return session

    def _sessions_of(self, agent: str) -> builtins.list[NotebookSession]:
        return [s for s in self.sessions.values() if s.agent == agent]

    # -- the event log (a service: log/events.py), by the names the routes and parts use -------------------------
    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]:
        """Record an event; stored, then sent to every subscriber, with what else is said in the same burst."""
        return self.log.emit(session, type_, **data)

    def emit_update(self, session: NotebookSession, update: dict[str, Any]) -> None:
        """An agent's ``session/update`` as an event (a text chunk may join the one before it)."""
        self.log.emit_update(session, update)

    def store_now(self) -> None:
        """Store (and send) what waits, now: an answer that says an event happened leaves after it is stored."""
        self.log.store_now()

    def events(
        self,
        session: NotebookSession,
        after: int = 0,
        limit: int | None = None,
        *,
        before: int | None = None,
        current: bool = False,
    ) -> builtins.list[dict[str, Any]]:
        """One page of the session's events (``EventLog.events``)."""
        return self.log.events(session, after, limit, before=before, current=current)

    def history_moved(self, session: NotebookSession, after: int) -> dict[str, Any] | None:
        """What to tell a client that saw events past the server's last seq, else None."""
        return self.log.history_moved(session, after)

    def subscribe(
        self,
        session: NotebookSession,
        after: int,
        sub: Subscriber,
        *,
        current: bool = False,
        page_bytes: int | None = None,
    ) -> tuple[builtins.list[dict[str, Any]], Callable[[], None]]:
        """Replay from ``after``, then live (``EventLog.subscribe``)."""
        return self.log.subscribe(session, after, sub, current=current, page_bytes=page_bytes)

    # -- the agent sessions (a service: connections/agent_sessions.py), by the names the routes and parts use ----
    def connection(self, agent: str) -> AgentConnection:
        """The agent's connection (made, not started, on first use)."""
        return self.agent_sessions.connection(agent)

    async def ensure_acp_session(self, session: NotebookSession, *, trace: dict[str, str] | None = None) -> None:
        await self.agent_sessions.ensure_acp_session(session, trace=trace)

    async def warm_up(self, session: NotebookSession, trace: dict[str, str] | None = None) -> None:
        await self.agent_sessions.warm_up(session, trace)

    async def restart_agent(self, agent: str, why: str, actor: Actor | None = None) -> Restarted:
        return await self.agent_sessions.restart_agent(agent, why, actor)

    def session_for_acp(self, conn: AgentConnection, acp_session_id: Any) -> NotebookSession | None:
        return self.agent_sessions.session_for_acp(conn, acp_session_id)

    def session_params(
        self, session: NotebookSession, conn: AgentConnection, trace: dict[str, str] | None
    ) -> dict[str, Any]:
        return self.agent_sessions.session_params(session, conn, trace)

    # -- the turns (a service: connections/turns.py), by the names the routes and the services use ---------------
    async def prompt(
        self,
        session: NotebookSession,
        blocks: builtins.list[dict[str, Any]],
        user: str | None = None,
        *,
        trace: dict[str, str] | None = None,
        actor: Actor | None = None,
    ) -> str:
        return await self.turns.prompt(session, blocks, user, trace=trace, actor=actor)

    async def cancel(self, session: NotebookSession) -> bool:
        return await self.turns.cancel(session)

    async def reset(self, session: NotebookSession) -> NotebookSession:
        return await self.turns.reset(session)

    async def set_mode(self, session: NotebookSession, mode_id: str, actor: Actor | None = None) -> None:
        await self.turns.set_mode(session, mode_id, actor)

    async def set_config_option(
        self, session: NotebookSession, config_id: str, value: Any, actor: Actor | None = None
    ) -> None:
        await self.turns.set_config_option(session, config_id, value, actor)

    # -- the permissions (a service: gate/permissions.py), by the names the routes, the gate and the parts use ------
    async def ask_permission(
        self,
        session: NotebookSession,
        tool_call: dict[str, Any],
        options: builtins.list[dict[str, Any]],
        *,
        source: str = "agent",
        wording: str | None = None,
        grants: Any = None,
    ) -> dict[str, Any]:
        return await self.permissions.ask_permission(
            session, tool_call, options, source=source, wording=wording, grants=grants
        )

    def answer_permission(
        self, session: NotebookSession, request_id: str, option_id: str, actor: Actor | None = None
    ) -> None:
        self.permissions.answer_permission(session, request_id, option_id, actor)

    def cancel_pending_permissions(self, session: NotebookSession) -> None:
        self.permissions.cancel_pending(session)

    def tool_context(
        self, session: NotebookSession, channel: str, tool_call_id: str | None = None, *, action: Any = None
    ) -> ToolContext:
        return self.permissions.tool_context(session, channel, tool_call_id, action=action)

    def serving(self, session: NotebookSession) -> contextlib.AbstractContextManager[None]:
        return self.permissions.serving(session)

    def count_tool_call(self, session: NotebookSession) -> None:
        self.permissions.count_tool_call(session)

    def file_rules(self) -> FileRules:
        """What ``fs/*`` may touch (computed once: Jupyter's and IPython's folders, allow_hidden)."""
        if self._file_rules is None:
            self._file_rules = FileRules.for_server(self.serverapp)
        return self._file_rules

    def cwd_for(self, path: str) -> str:
        km = self.serverapp.kernel_manager
        cwd: str = km.cwd_for_path(os.path.dirname(path)) if hasattr(km, "cwd_for_path") else self.serverapp.root_dir
        return cwd

    async def kernel_id_for(self, notebook: str) -> str | None:
        """The kernel currently attached to a notebook, asked at call time."""
        sm = self.serverapp.session_manager
        for s in await ensure_async(sm.list_sessions()):
            if s.get("path") == notebook and s.get("kernel"):
                kernel_id: str = s["kernel"]["id"]
                return kernel_id
        return None

    def rename(self, old: str, new: str) -> None:
        """A renamed notebook keeps its conversation and its current agent; its cwd follows the new folder."""
        self.current_agents.rename(old, new)
        for session in list(self.sessions.values()):
            if session.notebook == old or session.notebook.startswith(old.rstrip("/") + "/"):
                new_path = new + session.notebook[len(old) :]
                self._by_key.pop((session.notebook, session.agent), None)
                session.record.notebook = new_path
                session.record.cwd = self.cwd_for(new_path)
                self._by_key[(new_path, session.agent)] = session
                self._save(session.record)
                self.emit(session, "notice", text=f"notebook renamed to {new_path}; the conversation follows it")

    def _save(self, rec: SessionRecord) -> None:
        """Save a session's record with its next flush (a refused record is said there, never blocking)."""
        session = self.sessions.get(rec.id)
        if session is None:
            return
        session.record_dirty = True
        self.log.mark_dirty(session)
        self.log.schedule_flush()

    # -- lifecycle -------------------------------------------------------------------------------
    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run ``coro`` as a task of the hub: kept until it ends, cancelled and awaited when the hub stops."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        self.closing = True
        await self.terminals.stop()
        for session in self.sessions.values():
            self.cancel_pending_permissions(session)
            self.questions.cancel_pending(session, "the server is stopping")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.stop() for c in self.connections.values()), return_exceptions=True)
        if self.mcp_host is not None:
            self.mcp_host.stop()
        if self.review is not None:
            await self.review.stop()
        self.log.stop()  # the last save attempt, whatever the retry timer says (closing)
        if self.log.failed is None:
            self._release_reservations()
        else:
            self._last_words()
        self.lives.release()

    def _release_reservations(self) -> None:
        """Everything is stored: give the unused reserved seqs back, so the next start goes on without a gap."""
        try:
            for session in self.sessions.values():
                if session.reserved > session.seq and not session.held:
                    self.store.release(session.id, session.seq, self.lives.id)
            self.store.commit()
        except StoreError as exc:  # the next start skips them: a gap, never a reuse
            log.warning("could not give back the reserved seqs: %s", exc)

    def _last_words(self) -> None:
        """The store still fails at stop: write next to it what could not be kept, for the next start to tell."""
        lost: dict[str, Any] = {}
        for session in self.sessions.values():
            if not session.unsaved:
                continue
            events = [e for e, _, _ in session.unsaved]
            turns = list(dict.fromkeys(str(e["turn_id"]) for e in events if e.get("turn_id")))
            lost[session.id] = {
                "events": len(events),
                "turns": turns,
                "first": events[0]["seq"],
                "last": events[-1]["seq"],
                "reason": self.log.failed,
            }
        if lost:
            n = sum(v["events"] for v in lost.values())
            log.error("transcript store still fails at stop: %d events of %d sessions could not be kept", n, len(lost))
            self.lives.write_last_words(lost)

    def kill_agents_now(self) -> None:
        for conn in self.connections.values():
            if conn.process:
                conn.process.kill_now()

    def describe(self, session: NotebookSession) -> dict[str, Any]:
        return {
            "id": session.id,
            "notebook": session.notebook,
            "agent": session.agent,
            "cwd": session.cwd,
            "state": "busy" if session.turn else session.state,
            "turn_id": session.turn.id if session.turn else None,
            "last_seq": session.seq,
            "error": session.error,
            "modes": session.modes,
            "config_options": session.config_options,
            "pending_permissions": list(session.pending_permissions),
            "pending_elicitations": [
                k for k, p in self.questions.pending.items() if p.session_id == session.id and not p.answered
            ],
            "always_allowed": sorted(session.always_allowed),
            # the session's own policy ("review": Review after), None when the configuration's applies
            "policy": self.review.session_policy(session.id) if self.review is not None else None,
            "tool_channels": sorted(session.channels),
            # what the admin does not let users pick here, with the reason: the panel greys it
            "fixed_by_admin": self.fixed_by_admin(),
        }

    def fixed_by_admin(self) -> dict[str, Any]:
        rules = self.app.admin_rules
        return {
            "options": {k: why for k in ("allow_always", "reject_always") if (why := rules.option(k))},
            "modes": rules.forbidden_modes(),
            "policies": {p: why for p in ("review",) if (why := rules.policy(p))},
        }
