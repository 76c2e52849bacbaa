"""The session hub: notebook session <-> ACP session, turns, permissions, fan-out and replay.

A session is a notebook, not a chat: (notebook path, agent) names exactly one session, whose cwd
is the notebook's folder as its kernel sees it.  Every event is written to the transcript store
before any subscriber sees it; subscribers replay from the last sequence number they saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..acp.connection import AgentConnection, AgentError, AgentNeedsLogin
from ..agents.catalog import AgentSpec
from ..channels import MCP_HTTP, MCP_STDIO, choose_channels, notebook_preamble, starts_with_command, stdio_shim_entry
from ..protocol import client_tools, codec
from ..protocol.jsonrpc import RpcError
from ..protocol.paths import PathError, notebook_api_path
from ..protocol.transcript import exchanges
from ..tools import ToolContext, ToolSurface
from ..tools.files import FileRules
from .acp_client import ClientEndpoint
from .follow import ToolListFollower
from .gate import Gate
from .store import SessionRecord, StoreError, TranscriptStore

if TYPE_CHECKING:  # pragma: no cover
    from .settings import HubSettings

log = logging.getLogger(__name__)

#: called with a batch of events and the same events JSON-encoded (encoded once, for store and wire)
Subscriber = Callable[[list[dict[str, Any]], list[str]], None]


def encode(event: dict[str, Any]) -> str:
    return codec.dumps(event)


class HubError(Exception):
    """A request the hub refuses; ``status`` is the HTTP status the handlers answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class PendingPermission:
    request_id: str
    future: asyncio.Future[dict[str, Any]]
    options: list[dict[str, Any]]
    turn_id: str | None
    tool_call_id: str | None = None
    #: the tool call as the user saw it on the card (matched against the agent's later call)
    tool_call: dict[str, Any] = field(default_factory=dict)
    source: str = "agent"


@dataclass
class Turn:
    id: str
    started: float = field(default_factory=time.monotonic)
    last_activity: float = field(default_factory=time.monotonic)
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    tool_calls_served: int = 0
    #: what the agent showed of its own tool calls, by id (see ``sessions.gate``)
    seen_calls: dict[str, Any] = field(default_factory=dict)
    #: agent permission requests the user allowed, each good for one matching call of ours
    agent_approvals: list[Any] = field(default_factory=list)
    #: requests of the agent we are serving now (tool calls, files): the agent waits on us, not hangs
    serving: int = 0

    def touch(self) -> None:
        self.last_activity = time.monotonic()


class NotebookSession:
    """One notebook's conversation with one agent."""

    def __init__(self, record: SessionRecord, last_seq: int) -> None:
        self.record = record
        self.seq = last_seq
        self.turn: Turn | None = None
        self.subscribers: set[Subscriber] = set()
        self.pending_permissions: dict[str, PendingPermission] = {}
        self.outbox: list[dict[str, Any]] = []
        #: events (and their JSON) sent out but not yet in the store: only while the store fails
        self.unsaved: list[tuple[dict[str, Any], str]] = []
        #: generation of the agent connection the ACP session lives in (None: must be (re)opened)
        self.acp_generation: int | None = None
        self.replaying = False
        self.setup_task: asyncio.Task[None] | None = None
        self.state = "new"  # new | starting | ready | error
        self.error: str | None = None
        self.modes: dict[str, Any] | None = None
        self.config_options: list[Any] | None = None
        self.always_allowed: set[str] = set()
        #: the agent lost the conversation: the next prompt carries the recent history
        self.reseed = False
        #: channels carrying the tools to this session's agent, and whether it was told about them
        self.channels: frozenset[str] = frozenset()
        self.primed = False
        self.last_used = 0.0  # monotonic time of the last prompt: the least recently used yields first
        #: the client tools the agent was last told (request discovery), and whether that changed mid-turn
        self.listed_tools: frozenset[str] | None = None
        self.tools_stale = False

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def notebook(self) -> str:
        return self.record.notebook

    @property
    def agent(self) -> str:
        return self.record.agent

    @property
    def cwd(self) -> str:
        return self.record.cwd

    @property
    def acp_session_id(self) -> str | None:
        return self.record.acp_session_id


class SessionHub:
    def __init__(self, app: HubSettings, store: TranscriptStore, tools: ToolSurface) -> None:
        self.app = app
        self.serverapp = app.serverapp
        self.store = store
        self.tools = tools
        self.sessions: dict[str, NotebookSession] = {}
        self._by_key: dict[tuple[str, str], NotebookSession] = {}
        self._by_acp: dict[tuple[str, str], NotebookSession] = {}
        self.connections: dict[str, AgentConnection] = {}
        self._flush_scheduled = False
        self._dirty: set[NotebookSession] = set()
        self._store_failed: str | None = None
        self._store_retry_at = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.mcp_host: Any = None  # channels.mcp_http.McpToolHost, started when first needed
        self._turn_slots: dict[str, asyncio.Semaphore] = {}
        #: the one gate every agent action passes
        self._file_rules: FileRules | None = None
        self.follower = ToolListFollower(self, kernel_wait=getattr(app, "kernel_start_wait", 10.0))
        self.gate = Gate(self, tools.services.config if tools.services is not None else None)
        #: the server root's real path: a session belongs to a notebook of this root, and only its
        #: sessions are loaded (two projects sharing the per-user store never see each other's)
        self.root = os.path.realpath(self.serverapp.root_dir)
        store.max_event_bytes = app.max_event_bytes
        store.max_session_bytes = app.max_session_bytes
        for rec in store.load_sessions(self.root):
            rec.cwd = self.cwd_for(rec.notebook)  # recomputed at every load: always a folder of this root
            self._add(NotebookSession(rec, store.last_seq(rec.id)))

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

    async def open_session(self, notebook: str, agent: str | None = None) -> NotebookSession:
        """The session for (notebook, agent), created on first use; idempotent."""
        try:
            path = notebook_api_path(notebook)
        except PathError as exc:
            raise HubError(str(exc), 400) from None
        agent = agent or self.app.default_agent_name
        if agent not in self.specs():
            raise HubError(f"no agent named {agent!r} is configured", 404)
        session = self._by_key.get((path, agent))
        if session is None:
            cm = self.serverapp.contents_manager
            exists = await _maybe_await(cm.file_exists(path))
            if not exists:
                raise HubError(f"no notebook at {path!r}", 404)
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
            self._save(rec)
            session = NotebookSession(rec, 0)
            self._add(session)
        elif session.record.cwd != (cwd := self.cwd_for(path)):
            session.record.cwd = cwd  # recomputed at every open: the agent session (re)opens in this root
            self._save(session.record)
        if (
            session.acp_generation is None
            and session.setup_task is None
            and not self._closing
            and session.agent in self.specs()
        ):
            # warm up in the background: the agent starts while the user types
            session.setup_task = self._spawn(self._warm_up(session))
        return session

    def _sessions_of(self, agent: str) -> list[NotebookSession]:
        return [s for s in self.sessions.values() if s.agent == agent]

    async def approve(self, session: Any, action: Any, *, title: str, kind: str, preview: str = "") -> str:
        """``ToolHost.approve``: a tool asks the one gate, with its own title and preview."""
        return await self.gate.approve(session, action, title=title, kind=kind, preview=preview)

    def file_rules(self) -> FileRules:
        """What ``fs/*`` may touch (computed once: Jupyter's and IPython's folders, allow_hidden)."""
        if self._file_rules is None:
            self._file_rules = FileRules.for_server(self.serverapp)
        return self._file_rules

    def cwd_for(self, path: str) -> str:
        km = self.serverapp.kernel_manager
        return km.cwd_for_path(os.path.dirname(path)) if hasattr(km, "cwd_for_path") else self.serverapp.root_dir

    async def kernel_id_for(self, notebook: str) -> str | None:
        """The kernel currently attached to a notebook, asked at call time."""
        sm = self.serverapp.session_manager
        for s in await _maybe_await(sm.list_sessions()):
            if s.get("path") == notebook and s.get("kernel"):
                return s["kernel"]["id"]
        return None

    def rename(self, old: str, new: str) -> None:
        """A renamed notebook keeps its conversation; its cwd follows the new folder."""
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
        try:
            self.store.save_session(rec)
            self._schedule_flush()
        except StoreError as exc:
            self._store_failure(str(exc))

    # -- events ----------------------------------------------------------------------------------
    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]:
        """Record an event, then (at the end of this loop tick) send it to every subscriber."""
        session.seq += 1
        event = {"seq": session.seq, "type": type_, "ts": time.time(), **data}
        session.outbox.append(event)
        self._dirty.add(session)
        self._schedule_flush()
        return event

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_event_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Store this tick's events in one transaction, then hand them to subscribers.

        A failing store (disk full, locked by another server) never stops the stream: events wait
        in memory, the user is told once, and saving is retried every few seconds; when it works
        again the waiting events are written and the user is told that too.
        """
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        batches = []
        for session in dirty:
            events, session.outbox = session.outbox, []
            encoded = [encode(e) for e in events]
            batches.append((session, events, encoded))
            session.unsaved.extend(zip(events, encoded, strict=True))
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
                events = [e for e, _ in session.unsaved]
                self.store.append_many(session.id, events, [t for _, t in session.unsaved])
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
        self, session: NotebookSession, after: int = 0, limit: int | None = None, *, before: int | None = None
    ) -> list[dict[str, Any]]:
        """One page of events, oldest first: those with seq > after, or the newest with seq < before.

        A page holds at most ``limit`` events (and ``JupyterACP.replay_page_events``) and about
        ``JupyterACP.replay_page_bytes``, always at least one event when there is one: the stored ones
        (read with LIMIT, never the whole history), then those still waiting in memory.
        """
        count = self.app.replay_page_events
        if limit is not None:
            count = max(1, min(limit, count))
        max_bytes = self.app.replay_page_bytes
        waiting = [e for e, _ in session.unsaved] + session.outbox
        if before is not None:
            newer = [e for e in waiting if e["seq"] < before][-count:]  # newer than anything stored
            below = newer[0]["seq"] if newer else before
            room = count - len(newer)
            try:
                older = self.store.read_before(session.id, below, room, max_bytes) if room > 0 else []
            except StoreError as exc:
                log.warning("reading the transcript failed: %s", exc)
                older = []
            return older + newer
        try:
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
        self, session: NotebookSession, after: int, sub: Subscriber
    ) -> tuple[list[dict[str, Any]], Callable[[], None]]:
        """Replay from ``after``, then live; no gap and no duplicate (seq-filtered by the caller).

        The replay is one page: when more than a page lies after ``after``, the latest page (the client
        sees its first replayed seq past after + 1 and fetches older pages with ``events?before=``).
        Events that still matter though older than that page (a pending permission request, the running
        turn's ``turn_started``) come first, marked ``"pinned": true``.
        """
        replay = self.events(session, after)
        if replay and replay[-1]["seq"] < session.seq:  # more than a page: the latest one instead
            replay = [e for e in self.events(session, before=session.seq + 1) if e["seq"] > after]
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

    # -- agents ----------------------------------------------------------------------------------
    def connection(self, agent: str) -> AgentConnection:
        conn = self.connections.get(agent)
        if conn is None:
            spec = self.specs()[agent]
            conn = AgentConnection(
                agent,
                spec.argv,
                env=self.app.agent_env(spec),
                cwd=self.serverapp.root_dir,
                handler_factory=lambda c: ClientEndpoint(self, c),
                client_capabilities=self._client_capabilities,
                max_frame_bytes=self.app.max_frame_bytes,
                start_timeout=self.app.agent_start_timeout,
                stderr_bytes=self.app.agent_log_bytes,
                on_bad_frame=self._on_bad_frame,
                on_exit=self._on_agent_exit,
            )
            self.connections[agent] = conn
        return conn

    def _client_capabilities(self, conn: AgentConnection) -> dict[str, Any]:
        caps: dict[str, Any] = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}
        spec = self.specs()[conn.name]
        channel = spec.tool_channel
        if channel in ("auto", "client-tools", "both"):
            discovery = spec.client_tools_discovery
            tools = [t.to_wire() for t in self.tools.all()] if discovery == client_tools.DISCOVERY_META else None
            caps["_meta"] = client_tools.client_capability_meta(discovery, tools)
        return caps

    def _on_bad_frame(self, conn: AgentConnection, text: str) -> None:
        log.warning("agent %s: %s", conn.name, text)
        for session in self._sessions_of(conn.name):
            if session.turn is not None:
                self.emit(session, "notice", level="warning", text=f"agent {conn.name!r} {text}")

    def _on_agent_exit(self, conn: AgentConnection) -> None:
        if self.mcp_host is not None:
            self.mcp_host.revoke_agent(conn.name)
        for session in self._sessions_of(conn.name):
            if session.acp_generation == conn.generation:
                session.acp_generation = None
            self._cancel_pending_permissions(session)

    async def _warm_up(self, session: NotebookSession) -> None:
        try:
            await self.ensure_acp_session(session)
        except (AgentError, RpcError, HubError):
            pass  # recorded on the session and reported on the next prompt
        except Exception:
            log.exception("warming up session %s failed", session.id)
        finally:
            session.setup_task = None

    async def ensure_acp_session(self, session: NotebookSession) -> None:
        """Start the agent if needed and open, load, resume or re-create the ACP session."""
        conn = self.connection(session.agent)
        if session.acp_generation == conn.generation and conn.alive:
            return
        session.state = "starting"
        try:
            if not conn.alive:
                self.emit(
                    session, "notice", level="info", text=f"starting agent {session.agent!r}…", phase="agent_starting"
                )
                was_dead = conn.state == "dead"
                await conn.ensure_started()
                if was_dead:
                    self.emit(session, "notice", level="info", text=f"agent {session.agent!r} restarted")
            async with conn.setup_lock:
                if session.acp_generation == conn.generation and conn.alive:
                    return
                await self._open_acp_session(session, conn)
            session.state = "ready"
            session.error = None
        except AgentNeedsLogin as exc:
            session.state = "error"
            session.error = str(exc)
            raise
        except (AgentError, RpcError) as exc:
            session.state = "error"
            session.error = str(exc)
            raise

    async def _make_room(self, session: NotebookSession, conn: AgentConnection) -> None:
        """Keep an agent under max_sessions_per_agent: the least recently used idle session yields
        its agent session (closed when the agent can), and picks it up again when next used."""
        live = [s for s in self._sessions_of(conn.name) if s.acp_generation == conn.generation and s is not session]
        if len(live) < self.app.max_sessions_per_agent:
            return
        idle = sorted((s for s in live if s.turn is None), key=lambda s: s.last_used)
        if not idle:
            raise HubError(
                f"agent {conn.name!r} already runs {len(live)} sessions, all busy (JupyterACP.max_sessions_per_agent)",
                429,
            )
        victim = idle[0]
        victim.acp_generation = None
        if conn.supports_close and victim.acp_session_id:
            try:
                await conn.request("session/close", {"sessionId": victim.acp_session_id}, timeout=10)
            except Exception as exc:  # closing is a courtesy to the agent
                log.info("session/close of %s failed: %s", victim.acp_session_id, exc)
        log.info("session %s of %s yielded its agent session to %s", victim.id, victim.notebook, session.notebook)

    async def _open_acp_session(self, session: NotebookSession, conn: AgentConnection) -> None:
        await self._make_room(session, conn)
        conn.setting_up = session
        try:
            mcp_servers = await self._mcp_servers(session, conn)
            previous = session.acp_session_id
            how = "new"
            result: Any = None
            if previous and conn.supports_resume:
                try:
                    result = await conn.request(
                        "session/resume", {"sessionId": previous, "cwd": session.cwd, "mcpServers": mcp_servers}
                    )
                    how = "resumed"
                except RpcError as exc:
                    log.info("resume of %s failed: %s", previous, exc)
            if how == "new" and previous and conn.supports_load:
                session.replaying = True  # the agent replays history we already have
                try:
                    result = await conn.request(
                        "session/load", {"sessionId": previous, "cwd": session.cwd, "mcpServers": mcp_servers}
                    )
                    how = "loaded"
                except RpcError as exc:
                    log.info("load of %s failed: %s", previous, exc)
                finally:
                    session.replaying = False
            if how == "new":
                result = await conn.request("session/new", {"cwd": session.cwd, "mcpServers": mcp_servers})
                if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
                    raise AgentError(f"agent {conn.name!r} answered session/new without a session id")
                if session.acp_session_id:
                    self._by_acp.pop((session.agent, session.acp_session_id), None)
                session.record.acp_session_id = result["sessionId"]
                self._by_acp[(session.agent, result["sessionId"])] = session
                self._save(session.record)
            session.acp_generation = conn.generation
            if how == "new":
                session.primed = False
            if isinstance(result, dict):
                if result.get("modes") is not None:
                    session.modes = result["modes"]
                if result.get("configOptions") is not None:
                    session.config_options = result["configOptions"]
            if previous and how == "new":
                session.reseed = True
                self.emit(
                    session,
                    "notice",
                    level="warning",
                    text=f"agent {conn.name!r} could not reload the earlier conversation; "
                    "a new agent session starts, seeded with the recent history",
                    phase="session_recreated",
                )
            elif previous:
                self.emit(session, "notice", level="info", text=f"agent session {how}", phase=f"session_{how}")
            self.emit(
                session,
                "session_ready",
                acp_session_id=session.acp_session_id,
                how=how,
                modes=session.modes,
                config_options=session.config_options,
            )
        finally:
            conn.setting_up = None

    async def _tool_host(self) -> Any:
        if self.mcp_host is None:
            from ..channels.mcp_http import McpToolHost  # light: no MCP SDK types on the server's path

            self.mcp_host = McpToolHost(self.gate)
            self.mcp_host.start()
        return self.mcp_host

    async def _mcp_servers(self, session: NotebookSession, conn: AgentConnection) -> list[dict[str, Any]]:
        """The ``mcpServers`` of session/new|load|resume: the tool host, when this agent needs it."""
        spec = self.specs()[conn.name]
        session.channels = choose_channels(spec.tool_channel, spec.client_tools_discovery, conn)
        if not session.channels & {MCP_HTTP, MCP_STDIO}:
            return []
        host = await self._tool_host()
        bearer = host.grant(session, conn.generation)
        if MCP_HTTP in session.channels:
            return [host.server_entry(bearer)]
        return [stdio_shim_entry(host.url, bearer)]

    def session_for_acp(self, conn: AgentConnection, acp_session_id: Any) -> NotebookSession | None:
        """The notebook session behind an agent's session id; only sessions of *this* agent."""
        if not isinstance(acp_session_id, str):
            return None
        return self._by_acp.get((conn.name, acp_session_id))

    # -- turns -----------------------------------------------------------------------------------
    async def prompt(self, session: NotebookSession, blocks: list[dict[str, Any]]) -> str:
        if session.turn is not None:
            raise HubError("a turn is already running in this session; cancel it or wait for it to end", 409)
        if session.agent not in self.specs():
            raise HubError(
                f"agent {session.agent!r} is no longer configured (JupyterACP.agents); its history stays readable", 409
            )
        turn = Turn(id=uuid.uuid4().hex[:12])
        session.turn = turn
        session.last_used = time.monotonic()
        self.emit(session, "turn_started", turn_id=turn.id, prompt=blocks)
        turn.task = self._spawn(self._run_turn(session, turn, blocks))
        return turn.id

    def _slots(self, agent: str) -> asyncio.Semaphore:
        slots = self._turn_slots.get(agent)
        if slots is None:
            slots = self._turn_slots[agent] = asyncio.Semaphore(self.app.max_concurrent_turns)
        return slots

    async def _run_turn(self, session: NotebookSession, turn: Turn, blocks: list[dict[str, Any]]) -> None:
        outcome: dict[str, Any]
        slots = self._slots(session.agent)
        try:
            if slots.locked():
                self.emit(
                    session,
                    "notice",
                    level="info",
                    phase="queued",
                    text=f"agent {session.agent!r} already runs {self.app.max_concurrent_turns} turns; "
                    "this one starts as soon as one ends (JupyterACP.max_concurrent_turns)",
                )
            async with slots:
                outcome = await self._turn_body(session, turn, blocks)
        except asyncio.CancelledError:
            if turn.cancelled and not self._closing:
                # the user cancelled and the agent did not stop in time (or the turn was still queued)
                self._end_turn(session, turn, {"stop_reason": "cancelled"})
                return
            self._end_turn(session, turn, {"error": "the server is shutting down", "error_kind": "shutdown"})
            raise
        self._end_turn(session, turn, outcome)

    async def _turn_body(self, session: NotebookSession, turn: Turn, blocks: list[dict[str, Any]]) -> dict[str, Any]:
        outcome: dict[str, Any]
        try:
            if session.setup_task is not None:
                await asyncio.shield(session.setup_task)
            await self.follower.wait_for_kernel(session)
            await self.ensure_acp_session(session)
            if await self.follower.refresh_if_changed(session, in_turn=True):
                await self.ensure_acp_session(session)  # reopened (resumed, loaded, or new and re-seeded)
            conn = self.connection(session.agent)
            if session.reseed:
                blocks = self._seeded(session, blocks, turn.id)
                session.reseed = False
            if not session.primed and session.channels & {MCP_HTTP, MCP_STDIO} and self.specs()[session.agent].preamble:
                if not starts_with_command(blocks):  # a slash command keeps the prompt to itself
                    blocks = [*blocks, {"type": "text", "text": notebook_preamble(session.notebook, session.cwd)}]
                    session.primed = True
            else:
                session.primed = True
            turn.touch()
            request = asyncio.ensure_future(
                conn.request("session/prompt", {"sessionId": session.acp_session_id, "prompt": blocks})
            )
            result = await self._watch_turn(session, turn, conn, request)
            stop = result.get("stopReason", "end_turn") if isinstance(result, dict) else "end_turn"
            outcome = {"stop_reason": "cancelled" if turn.cancelled and stop == "end_turn" else stop}
        except AgentNeedsLogin as exc:
            outcome = {"error": str(exc), "error_kind": "needs_login"}
        except TurnTimeout as exc:
            outcome = {"error": str(exc), "error_kind": "timeout"}
        except (AgentError, RpcError) as exc:
            kind = "agent_error" if isinstance(exc, RpcError) else "agent_failed"
            outcome = {"error": str(exc), "error_kind": kind}
        except Exception as exc:  # pragma: no cover - a bug, but never lose the turn's end
            log.exception("turn %s failed", turn.id)
            outcome = {"error": f"internal error: {exc!r}", "error_kind": "internal"}
        return outcome

    def _end_turn(self, session: NotebookSession, turn: Turn, outcome: dict[str, Any]) -> None:
        if session.turn is not turn:
            return
        self._cancel_pending_permissions(session)
        session.turn = None
        self.emit(session, "turn_ended", turn_id=turn.id, tool_calls_served=turn.tool_calls_served, **outcome)
        self.follower.turn_ended(session)

    async def _watch_turn(
        self, session: NotebookSession, turn: Turn, conn: AgentConnection, request: asyncio.Future[Any]
    ) -> Any:
        """Await the prompt's answer; end a turn whose agent goes silent for too long."""
        idle = self.app.turn_idle_timeout
        while True:
            done, _ = await asyncio.wait({request}, timeout=min(1.0, idle))
            if done:
                return request.result()
            if session.pending_permissions or turn.serving:
                turn.touch()  # waiting on the user, or on our own tool: not the agent hanging
                continue
            silent_since = turn.last_activity
            if time.monotonic() - silent_since < idle:
                continue
            await conn.notify("session/cancel", {"sessionId": session.acp_session_id})
            done, _ = await asyncio.wait({request}, timeout=self.app.cancel_grace)
            if done:
                return request.result()
            request.cancel()
            hung = conn.last_traffic <= silent_since
            if hung:  # not a byte from the agent, for any session, since this turn went quiet
                await conn.kill_hung(f"agent {conn.name!r} stopped answering and was stopped")
            raise TurnTimeout(
                f"agent {conn.name!r} sent nothing for {idle:g} s; the turn was ended "
                "(JupyterACP.turn_idle_timeout). "
                + (
                    "The agent did not answer at all and was stopped; your next prompt starts it again. "
                    if hung
                    else ""
                )
                + "The conversation is kept: send the prompt again."
            )

    def _seeded(self, session: NotebookSession, blocks: list[dict[str, Any]], turn_id: str) -> list[dict[str, Any]]:
        """Prefix a prompt with the recent history, for an agent that lost the conversation."""
        lines: list[str] = []
        # the latest page: a bounded tail
        for ex in exchanges(self.events(session, before=session.seq + 1)):
            if ex.turn_id == turn_id:
                continue
            lines.append(f"User: {ex.prompt}")
            if ex.answer:
                lines.append(f"Agent: {ex.answer}")
        history = "\n".join(lines)
        budget = self.app.reseed_history_chars
        if len(history) > budget:
            history = "…" + history[-budget:]
        if not history:
            return blocks
        preface = {
            "type": "text",
            "text": "Earlier in this conversation (the agent was restarted and could not reload it):\n"
            + history
            + "\n\nThe user's new message follows.",
        }
        return [preface, *blocks]

    async def cancel(self, session: NotebookSession) -> bool:
        turn = session.turn
        if turn is None:
            return False
        turn.cancelled = True
        self._cancel_pending_permissions(session)
        conn = self.connections.get(session.agent)
        if conn is not None and session.acp_session_id:
            await conn.notify("session/cancel", {"sessionId": session.acp_session_id})
        self._spawn(self._force_end(session, turn))
        return True

    async def _force_end(self, session: NotebookSession, turn: Turn) -> None:
        """An agent that ignores session/cancel (or a turn still queued) still gets its turn ended."""
        await asyncio.sleep(self.app.cancel_grace)
        if session.turn is turn and turn.task is not None and not turn.task.done():
            turn.task.cancel()

    async def reset(self, session: NotebookSession) -> NotebookSession:
        """A new conversation for the notebook: the agent forgets; the transcript keeps a marker.

        The notebook session (and its id) stays: only its ACP session is replaced.
        """
        if session.turn is not None:
            await self.cancel(session)
            deadline = time.monotonic() + self.app.cancel_grace + 1
            while session.turn is not None and time.monotonic() < deadline:  # noqa: ASYNC110 - bounded poll
                await asyncio.sleep(0.05)
            if session.turn is not None:
                raise HubError("the running turn did not end; try again", 409)
        conn = self.connections.get(session.agent)
        old = session.acp_session_id
        if conn is not None and conn.alive and old and conn.supports_close:
            try:
                await conn.request("session/close", {"sessionId": old}, timeout=5)
            except Exception as exc:  # the agent forgetting is all we need; closing is a courtesy
                log.info("session/close of %s failed: %s", old, exc)
        if old:
            self._by_acp.pop((session.agent, old), None)
        if self.mcp_host is not None:
            self.mcp_host.revoke_session(session.id)
        session.record.acp_session_id = None
        self._save(session.record)
        session.acp_generation = None
        session.reseed = False
        self.emit(
            session,
            "notice",
            level="info",
            phase="session_reset",
            text="new conversation: the agent does not remember what came before this point",
        )
        return await self.open_session(session.notebook, session.agent)

    async def set_mode(self, session: NotebookSession, mode_id: str) -> None:
        """Switch the agent's session mode (``session/set_mode``) and tell every watcher."""
        await self.ensure_acp_session(session)
        modes = session.modes or {}
        if mode_id not in {m.get("id") for m in modes.get("availableModes") or []}:
            raise HubError(f"{mode_id!r} is not one of the agent's modes", 400)
        conn = self.connection(session.agent)
        try:
            await conn.request("session/set_mode", {"sessionId": session.acp_session_id, "modeId": mode_id}, timeout=30)
        except RpcError as exc:
            raise HubError(f"the agent refused the mode: {exc}", 502) from None
        session.modes = {**modes, "currentModeId": mode_id}
        self.emit(session, "session_config", modes=session.modes, config_options=session.config_options)

    async def set_config_option(self, session: NotebookSession, config_id: str, value: Any) -> None:
        """Change one of the agent's session options (``session/set_config_option``)."""
        await self.ensure_acp_session(session)
        option = next((o for o in session.config_options or [] if o.get("id") == config_id), None)
        if option is None:
            raise HubError(f"{config_id!r} is not one of the agent's options", 400)
        if option.get("type", "select") == "select" and option.get("options"):
            # flat choices or groups of choices (ACP allows both)
            flat = [c for o in option["options"] for c in (o.get("options") or [o])]
            if value not in {c.get("value") for c in flat}:
                raise HubError(f"{value!r} is not one of the choices of {option.get('name') or config_id!r}", 400)
        params: dict[str, Any] = {"sessionId": session.acp_session_id, "configId": config_id, "value": value}
        if isinstance(value, bool):
            params["type"] = "boolean"
        conn = self.connection(session.agent)
        try:
            result = await conn.request("session/set_config_option", params, timeout=30)
        except RpcError as exc:
            raise HubError(f"the agent refused the option: {exc}", 502) from None
        if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
            session.config_options = result["configOptions"]
        self.emit(session, "session_config", modes=session.modes, config_options=session.config_options)

    # -- permissions -----------------------------------------------------------------------------
    async def ask_permission(
        self,
        session: NotebookSession,
        tool_call: dict[str, Any],
        options: list[dict[str, Any]],
        *,
        source: str = "agent",
    ) -> dict[str, Any]:
        """Hold a permission request for the user; answered by option id, or cancelled."""
        request_id = secrets.token_hex(16)  # unguessable: only who was shown the card can answer it
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        turn_id = session.turn.id if session.turn else None
        call_id = tool_call.get("toolCallId") if isinstance(tool_call.get("toolCallId"), str) else None
        session.pending_permissions[request_id] = PendingPermission(
            request_id, fut, options, turn_id, call_id, tool_call=tool_call, source=source
        )
        self.emit(
            session,
            "permission_request",
            request_id=request_id,
            turn_id=turn_id,
            tool_call=tool_call,
            options=options,
            source=source,
        )
        try:
            outcome = await asyncio.wait_for(asyncio.shield(fut), self.app.permission_timeout)
        except TimeoutError:
            outcome = {"outcome": "cancelled"}
            self.emit(session, "permission_resolved", request_id=request_id, cancelled=True, reason="timeout")
        finally:
            session.pending_permissions.pop(request_id, None)
            if session.turn:
                session.turn.touch()
        return outcome

    def answer_permission(self, session: NotebookSession, request_id: str, option_id: str) -> None:
        pending = session.pending_permissions.get(request_id)
        if pending is None:
            raise HubError(f"no pending permission request {request_id!r} (answered, cancelled or expired)", 404)
        kinds = {o.get("optionId"): o.get("kind", "") for o in pending.options}
        if option_id not in kinds:
            raise HubError(f"{option_id!r} is not one of the offered options", 400)
        if str(kinds[option_id]).startswith("allow") and pending.source == "agent":
            self.gate.agent_request_allowed(session, request_id, pending.tool_call)
        if not pending.future.done():
            pending.future.set_result({"outcome": "selected", "optionId": option_id})
        session.pending_permissions.pop(request_id, None)
        self.emit(session, "permission_resolved", request_id=request_id, option_id=option_id)

    def _cancel_pending_permissions(self, session: NotebookSession) -> None:
        for request_id, pending in list(session.pending_permissions.items()):
            if not pending.future.done():
                pending.future.set_result({"outcome": "cancelled"})
                self.emit(session, "permission_resolved", request_id=request_id, cancelled=True)
        session.pending_permissions.clear()

    # -- tool calls ------------------------------------------------------------------------------
    def tool_context(
        self, session: NotebookSession, channel: str, tool_call_id: str | None = None, *, action: Any = None
    ) -> ToolContext:
        if tool_call_id is None and action is not None and action.ids:
            tool_call_id = action.ids[0]
        return ToolContext(
            host=self,
            session=session,
            services=self.tools.services,
            turn_id=session.turn.id if session.turn else None,
            tool_call_id=tool_call_id,
            channel=channel,
            action=action,
        )

    @contextlib.contextmanager
    def serving(self, session: NotebookSession) -> Iterator[None]:
        """Mark a request of the agent as being served: the watchdog waits for us, not the agent."""
        turn = session.turn
        if turn is not None:
            turn.serving += 1
        try:
            yield
        finally:
            if turn is not None:
                turn.serving -= 1
                turn.touch()

    def count_tool_call(self, session: NotebookSession) -> None:
        if session.turn is not None:
            session.turn.tool_calls_served += 1
            session.turn.touch()

    # -- lifecycle -------------------------------------------------------------------------------
    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        self._closing = True
        for session in self.sessions.values():
            self._cancel_pending_permissions(session)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.stop() for c in self.connections.values()), return_exceptions=True)
        if self.mcp_host is not None:
            self.mcp_host.stop()
        self._flush()

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
            "always_allowed": sorted(session.always_allowed),
            "tool_channels": sorted(session.channels),
        }


class TurnTimeout(Exception):
    pass


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value
