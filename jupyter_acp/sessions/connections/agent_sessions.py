"""Agent connections and their ACP sessions: start, open, resume, load or re-create, and yield past the cap.

A service of the hub (``hub.agent_sessions``): it takes what it uses of the hub as :class:`AgentSessionHub`, which
includes what serving an agent's requests needs (``ClientHub``: each connection's endpoint is built here, on the
hub), and never imports the hub.  The hub keeps its public names for the routes (``hub.connection``,
``hub.ensure_acp_session``, ``hub.restart_agent``, ...), each a line that calls this.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ...acp.connection import AgentConnection, AgentError, AgentNeedsLogin
from ...channels import MCP_HTTP, MCP_STDIO, choose_channels, stdio_shim_entry
from ...channels.mcp_acp import CHANNEL as MCP_ACP  # hook: MCP over ACP
from ...channels.mcp_acp import lend as lend_in_band
from ...protocol import client_tools
from ...protocol.actor import Actor
from ...protocol.jsonrpc import RpcError
from ..gate.elicitations import CAPABILITY as ELICITATION_CAPABILITY
from ..state import HubError, NotebookSession
from ..store import SessionRecord
from .acp_client import ClientEndpoint, ClientHub

if TYPE_CHECKING:  # pragma: no cover
    from ...catalog.agents import AgentSpec
    from ..settings import HubSettings

log = logging.getLogger(__name__)


class Restarted(NamedTuple):
    """What a change of an agent's settings restarted: its process, and how many of its conversations (open on that
    process, re-opening with their next prompt) and running turns (ended) it touched."""

    process: bool
    conversations: int
    turns: int
    #: running turns the restart waits for (it happens when they have ended; 0: it happened now, or not at all)
    waiting: int = 0


class AgentSessionHub(ClientHub, Protocol):
    """What the agent sessions use of the hub: beside what an agent's requests are served with (``ClientHub``), its
    settings and server, the agents' connections and the index from an agent's session id to the notebook's (the hub's
    state, which the conversations change too), the tool host, the sessions of an agent, the record's save, and
    cancelling a session's held permission cards when its agent exits."""

    app: HubSettings
    serverapp: Any  # jupyter_server's ServerApp (HubSettings.serverapp)
    connections: dict[str, AgentConnection]
    _by_acp: dict[tuple[str, str], NotebookSession]
    mcp_host: Any  # channels.mcp_http.McpToolHost, started here when first needed

    def specs(self) -> dict[str, AgentSpec]: ...

    def _sessions_of(self, agent: str) -> list[NotebookSession]: ...

    def _save(self, rec: SessionRecord) -> None: ...

    def cancel_pending_permissions(self, session: NotebookSession) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...


class AgentSessions:
    """The agents' connections and each notebook session's agent session (the hub holds one)."""

    def __init__(self, hub: AgentSessionHub) -> None:
        self.hub = hub
        #: each connection's handler of the agent's requests, on the hub (a factory the connection calls per start)
        self._endpoint: Callable[[AgentConnection], ClientEndpoint] = lambda c: ClientEndpoint(hub, c)
        #: an agent's restart waiting for the turns that ran when its settings changed, and those turns' tasks
        self._pending: dict[str, tuple[asyncio.Task[None], set[asyncio.Task[None]]]] = {}

    def connection(self, agent: str) -> AgentConnection:
        conn = self.hub.connections.get(agent)
        if conn is None:
            spec = self.hub.specs()[agent]
            conn = AgentConnection(
                agent,
                spec.argv,
                env=self.hub.app.agent_env(spec),
                cwd=self.hub.serverapp.root_dir,
                handler_factory=self._endpoint,
                client_capabilities=self._client_capabilities,
                max_frame_bytes=self.hub.app.max_frame_bytes,
                start_timeout=self.hub.app.agent_start_timeout,
                stderr_bytes=self.hub.app.agent_log_bytes,
                on_bad_frame=self._on_bad_frame,
                on_exit=self._on_agent_exit,
            )
            self.hub.connections[agent] = conn
        return conn

    async def restart_agent(self, agent: str, why: str, actor: Actor | None = None) -> Restarted:
        """This agent's settings changed: restart only what must take them.  Its process restarts (only this agent's)
        when it runs with another environment than the new one; an agent not running takes its new environment at
        its next start, and one whose environment did not change (the server's environment wins) keeps running.
        A turn running meanwhile is not cut: the restart waits for the turns running now to end, and a prompt sent
        in the meantime waits for the restart (it goes with the new settings).  The conversations open on the
        stopped process re-open (resumed, loaded or re-seeded) on their next prompt, lazily, and each is told so (and
        by whom: ``actor``, the person who changed them); the others are not touched."""
        conn = self.hub.connections.get(agent)
        if conn is None:
            return Restarted(False, 0, 0)  # never started: the next start takes the new environment
        open_ = [s for s in self.hub._sessions_of(agent) if s.acp_generation == conn.generation]
        pending = self._pending.get(agent)
        if pending is not None and not pending[0].done():
            return Restarted(True, len(open_), 0, len(pending[1]))  # it reads the newest settings when it runs
        env = self.hub.app.agent_env(self.hub.specs()[agent])
        running = {s.turn.task for s in self.hub._sessions_of(agent) if s.turn is not None and s.turn.task}
        if running and conn.alive and not conn.runs_with(env):
            task = self.hub.spawn(self._restart_after(agent, running, why, actor))
            self._pending[agent] = (task, running)
            return Restarted(True, len(open_), 0, len(running))
        return await self._restart_now(agent, why, actor)

    async def _restart_after(self, agent: str, turns: set[asyncio.Task[None]], why: str, actor: Actor | None) -> None:
        """The restart of an agent whose settings changed while turns ran: once those turns have ended."""
        try:
            await asyncio.wait(turns)
            await self._restart_now(agent, why, actor, waited=True)
        finally:
            if self._pending.get(agent, (None,))[0] is asyncio.current_task():
                del self._pending[agent]

    async def _restart_now(self, agent: str, why: str, actor: Actor | None, *, waited: bool = False) -> Restarted:
        conn = self.hub.connections[agent]
        generation = conn.generation
        open_ = [s for s in self.hub._sessions_of(agent) if s.acp_generation == generation]
        # turns running now are cut by the restart; after a wait, those still "running" wait for it (not cut)
        running = [] if waited else [s for s in self.hub._sessions_of(agent) if s.turn is not None]
        if not await conn.reconfigure(self.hub.app.agent_env(self.hub.specs()[agent])):
            return Restarted(False, 0, 0)
        self._on_agent_exit(conn)
        told = [s for s in self.hub._sessions_of(agent) if s in open_ or s in running]
        for session in told:
            cut = " (the turn that was running ended)" if session in running else ""
            self.hub.emit(
                session,
                "notice",
                level="info",
                text=f"agent {agent!r} restarted: {why}{cut}; this conversation re-opens with your next prompt",
                phase="agent_reconfigured",
                **({"actor": actor} if actor else {}),
            )
        return Restarted(True, len(told), len(running))

    async def _after_pending_restart(self, session: NotebookSession) -> None:
        """A prompt (or a warm-up) sent while the agent's restart waits for earlier turns: it waits for the restart,
        so that it goes with the new settings, and its conversation says what it waits for (a turn may wait long, on
        a permission card).  The turns the restart waits for go on (they would wait forever)."""
        pending = self._pending.get(session.agent)
        if pending is None or pending[0].done() or asyncio.current_task() in pending[1]:
            return
        if session.turn is not None:
            self.hub.emit(
                session,
                "notice",
                level="info",
                text=f"agent {session.agent!r} restarts with its new settings once the turns it is running end; "
                "this prompt goes then",
                phase="agent_restart_waits",
            )
        await asyncio.shield(pending[0])

    def _client_capabilities(self, conn: AgentConnection) -> dict[str, Any]:
        caps: dict[str, Any] = {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": self.hub.terminals.available,
            "elicitation": dict(ELICITATION_CAPABILITY),  # form and url (elicitations.py)
            # the panel renders boolean options as switches and sends ``type: "boolean"`` (the client opt-in: an
            # agent offers them only to a client that says so)
            "session": {"configOptions": {"boolean": {}}},
        }
        if getattr(self.hub.serverapp, "terminals_enabled", False):
            caps["auth"] = {"terminal": True}  # a terminal login method: the panel opens a JupyterLab terminal
        # the panel shows the output of commands an agent runs itself (claude-agent-acp's Bash, codex-acp's shell)
        # from its updates' ``_meta.terminal_info`` / ``terminal_output`` / ``terminal_exit``, as a terminal
        caps["_meta"] = {"terminal_output": True}
        spec = self.hub.specs()[conn.name]
        channel = spec.tool_channel
        if channel in ("auto", "client-tools", "both"):
            discovery = spec.client_tools_discovery
            tools = [t.to_wire() for t in self.hub.tools.all()] if discovery == client_tools.DISCOVERY_META else None
            caps["_meta"].update(client_tools.client_capability_meta(discovery, tools))
        return caps

    def _on_bad_frame(self, conn: AgentConnection, text: str) -> None:
        log.warning("agent %s: %s", conn.name, text)
        for session in self.hub._sessions_of(conn.name):
            if session.turn is not None:
                self.hub.emit(session, "notice", level="warning", text=f"agent {conn.name!r} {text}")

    def _on_agent_exit(self, conn: AgentConnection) -> None:
        if self.hub.mcp_host is not None:
            self.hub.mcp_host.revoke_agent(conn.name)
        for session in self.hub._sessions_of(conn.name):
            if session.acp_generation == conn.generation:
                session.acp_generation = None
            self.hub.cancel_pending_permissions(session)
            self.hub.questions.cancel_pending(session, f"agent {conn.name!r} exited")
            self.hub.terminals.end_session_soon(session, f"agent {conn.name!r} exited")

    async def warm_up(self, session: NotebookSession, trace: dict[str, str] | None = None) -> None:
        """Open the agent session in the background (the agent starts while the user types); a failure is kept on
        the session and reported at the next prompt."""
        try:
            await self.ensure_acp_session(session, trace=trace)
        except (AgentError, RpcError, HubError):
            pass  # recorded on the session and reported on the next prompt
        except Exception:
            log.exception("warming up session %s failed", session.id)
        finally:
            session.setup_task = None

    async def ensure_acp_session(self, session: NotebookSession, *, trace: dict[str, str] | None = None) -> None:
        """Start the agent if needed and open, load, resume or re-create the ACP session (``trace``: the W3C trace
        context of the request this happens for, forwarded as the params' ``_meta``)."""
        await self._after_pending_restart(session)
        conn = self.connection(session.agent)
        if session.acp_generation == conn.generation and conn.alive:
            return
        session.state = "starting"
        try:
            if not conn.alive:
                self.hub.emit(
                    session, "notice", level="info", text=f"starting agent {session.agent!r}…", phase="agent_starting"
                )
                was_dead = conn.state == "dead"
                await conn.ensure_started()
                if was_dead:
                    self.hub.emit(session, "notice", level="info", text=f"agent {session.agent!r} restarted")
            async with conn.setup_lock:
                if session.acp_generation == conn.generation and conn.alive:
                    return
                await self._open_acp_session(session, conn, trace)
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
        live = [s for s in self.hub._sessions_of(conn.name) if s.acp_generation == conn.generation and s is not session]
        if len(live) < self.hub.app.max_sessions_per_agent:
            return
        idle = sorted((s for s in live if s.turn is None), key=lambda s: s.last_used)
        if not idle:
            raise HubError(
                f"agent {conn.name!r} already runs {len(live)} sessions, all busy (JupyterACP.max_sessions_per_agent)",
                429,
            )
        victim = idle[0]
        victim.acp_generation = None
        await self.hub.terminals.end_session(victim, "this notebook's agent session yielded to another notebook")
        if conn.supports_close and victim.acp_session_id:
            try:
                await conn.request("session/close", {"sessionId": victim.acp_session_id}, timeout=10)
            except Exception as exc:  # closing is a courtesy to the agent
                log.info("session/close of %s failed: %s", victim.acp_session_id, exc)
        log.info("session %s of %s yielded its agent session to %s", victim.id, victim.notebook, session.notebook)

    def session_params(
        self, session: NotebookSession, conn: AgentConnection, trace: dict[str, str] | None
    ) -> dict[str, Any]:
        """What session/new, load and resume share beside ``mcpServers``: the cwd (the notebook's folder), the
        server root as an additional directory when the notebook sits below it and the agent takes
        ``additionalDirectories`` (ACP: sent again on load and resume), and the request's trace context."""
        params: dict[str, Any] = {"cwd": session.cwd}
        root = os.path.realpath(self.hub.serverapp.root_dir)
        if conn.supports_session("additionalDirectories") and os.path.realpath(session.cwd) != root:
            # the project: an agent may read its other files (``fs/*`` stays within the root: tools/files.py)
            params["additionalDirectories"] = [root]
        if trace:
            params["_meta"] = dict(trace)
        return params

    async def _open_acp_session(
        self, session: NotebookSession, conn: AgentConnection, trace: dict[str, str] | None = None
    ) -> None:
        await self._make_room(session, conn)
        conn.setting_up = session
        try:
            mcp_servers = await self._mcp_servers(session, conn)
            mcp_servers += self.hub.app.user_mcp_servers(
                conn
            )  # hook: the user's own MCP servers (catalog/mcp_servers.py)
            common = self.session_params(session, conn, trace)
            previous = session.acp_session_id
            how = "new"
            result: Any = None
            if previous and conn.supports_resume:
                try:
                    result = await conn.request(
                        "session/resume", {"sessionId": previous, **common, "mcpServers": mcp_servers}
                    )
                    how = "resumed"
                except RpcError as exc:
                    log.info("resume of %s failed: %s", previous, exc)
            if how == "new" and previous and conn.supports_load:
                # the agent replays history we already have (not one taken over from its own list: that we keep)
                session.replaying = not session.adopted
                try:
                    result = await conn.request(
                        "session/load", {"sessionId": previous, **common, "mcpServers": mcp_servers}
                    )
                    how = "loaded"
                except RpcError as exc:
                    log.info("load of %s failed: %s", previous, exc)
                finally:
                    session.replaying = False
            if how == "new":
                result = await conn.request("session/new", {**common, "mcpServers": mcp_servers})
                if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
                    raise AgentError(f"agent {conn.name!r} answered session/new without a session id")
                if session.acp_session_id:
                    self.hub._by_acp.pop((session.agent, session.acp_session_id), None)
                session.record.acp_session_id = result["sessionId"]
                self.hub._by_acp[(session.agent, result["sessionId"])] = session
                self.hub._save(session.record)
            session.acp_generation = conn.generation
            session.adopted = False
            if how == "new":
                session.primed = False
            if isinstance(result, dict):
                if result.get("modes") is not None:
                    session.modes = result["modes"]
                if result.get("configOptions") is not None:
                    session.config_options = result["configOptions"]
            if previous and how == "new":
                session.reseed = True
                self.hub.emit(
                    session,
                    "notice",
                    level="warning",
                    text=f"agent {conn.name!r} could not reload the earlier conversation; "
                    "a new agent session starts, seeded with the recent history",
                    phase="session_recreated",
                )
            elif previous:
                self.hub.emit(session, "notice", level="info", text=f"agent session {how}", phase=f"session_{how}")
            self.hub.emit(
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
        if self.hub.mcp_host is None:
            from ...channels.mcp_http import McpToolHost  # light: no MCP SDK types on the server's path

            self.hub.mcp_host = McpToolHost(self.hub.gate)
            self.hub.mcp_host.start()
        return self.hub.mcp_host

    async def _mcp_servers(self, session: NotebookSession, conn: AgentConnection) -> list[dict[str, Any]]:
        """The ``mcpServers`` of session/new|load|resume: the tool host, when this agent needs it."""
        spec = self.hub.specs()[conn.name]
        session.channels = choose_channels(spec.tool_channel, spec.client_tools_discovery, conn)
        if MCP_ACP in session.channels:  # hook: lent over this very connection, no port (channels/mcp_acp.py)
            return [lend_in_band(conn, session)]
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
        return self.hub._by_acp.get((conn.name, acp_session_id))
