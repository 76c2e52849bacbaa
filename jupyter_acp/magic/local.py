"""The magic without a server: the kernel process drives an agent itself.

Used where no jupyter_acp server is reachable (plain IPython, a terminal, a kernel on another host).
The agent runs as a subprocess of the kernel (``python -m jupyter_acp.agent`` by default) over the same
ACP client code the server uses (``acp/connection.py``), on an asyncio loop in a background thread; the
magic's main thread reads the same events the server would send, so rendering, permissions and cancel are the
same code.  What is missing here: notebook cells and the sidebar. The agent's tools are this kernel's
variables, lent through the ``org.mini-me`` client-tools convention: the server's own tool definitions
(``tools/kernel_tools.py``: names, descriptions, input schemas, executors) served by a ``ToolSurface``, their
kernel service answered in this process by ``kernels/summarise.py`` (``local_tools.py``).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import os
import sys
import threading
import time
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from ..acp.connection import AgentConnection, AgentError, AgentNeedsLogin
from ..acp.process import curated_env
from ..catalog.agents import default_agents
from ..catalog.spec import AgentSpec
from ..protocol import client_tools
from ..protocol.jsonrpc import METHOD_NOT_FOUND, RpcError
from .errors import AcpError
from .local_files import file_request
from .local_tools import LocalToolContext, variable_surface

if TYPE_CHECKING:  # pragma: no cover
    from . import AcpMagics


class _LocalSession:
    def __init__(self, agent: str) -> None:
        self.id = uuid.uuid4().hex
        self.agent = agent
        self.acp_session_id: str | None = None
        self.events: list[dict[str, Any]] = []
        self.seq = 0
        self.turn: str | None = None
        self.pending: dict[str, tuple[asyncio.Future[Any], list[dict[str, Any]]]] = {}
        self.error: str | None = None
        self.cond = threading.Condition()

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "notebook": None,
            "agent": self.agent,
            "cwd": os.getcwd(),
            "state": "busy" if self.turn else ("ready" if self.acp_session_id else "new"),
            "turn_id": self.turn,
            "last_seq": self.seq,
            "error": self.error,
            "pending_permissions": list(self.pending),
        }


class _Client:
    """What the agent may ask of this kernel: updates, permissions, files, variable tools."""

    def __init__(self, backend: LocalBackend, conn: AgentConnection) -> None:
        self.backend = backend
        self.conn = conn

    def _session(self, params: Any) -> _LocalSession | None:
        acp_id = (params or {}).get("sessionId") or client_tools.session_of_call(params)
        for s in self.backend.sessions.values():
            if s.acp_session_id == acp_id:
                return s
        return None

    def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/update":
            session = self._session(params)
            if session is not None:
                self.backend.emit(session, "session_update", update=(params or {}).get("update") or {})

    async def _ask(
        self, session: _LocalSession, tool_call: dict[str, Any], options: list[dict[str, Any]], source: str = "client"
    ) -> dict[str, Any]:
        """Hold a permission request for the user (in the cell or the sidebar) until answered or cancelled."""
        rid = uuid.uuid4().hex[:12]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        session.pending[rid] = (fut, options)
        self.backend.emit(
            session,
            "permission_request",
            request_id=rid,
            turn_id=session.turn,
            tool_call=tool_call,
            options=options,
            source=source,
        )
        try:
            return dict(await fut)
        finally:
            session.pending.pop(rid, None)

    async def handle_request(self, method: str, params: Any) -> Any:
        params = params if isinstance(params, dict) else {}
        if method == "session/request_permission":
            session = self._session(params)
            if session is None:
                return {"outcome": {"outcome": "cancelled"}}
            options = list(params.get("options") or [])
            return {"outcome": await self._ask(session, params.get("toolCall") or {}, options, source="agent")}
        if method in ("fs/read_text_file", "fs/write_text_file"):
            return await file_request(self, self._session(params), method, params)
        if method == client_tools.TOOLS_LIST_METHOD:
            return {"tools": [t.to_wire() for t in self.backend.tools.all()]}
        tool = self.backend.tools.by_method(method)
        if tool is not None:
            return await self.backend.tools.call(
                cast(Any, self.backend.tool_context()), tool.name, client_tools.strip_meta(params)
            )
        raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})


class LocalBackend:
    """The agent as a subprocess of this kernel."""

    mode = "local"

    def __init__(self, magics: AcpMagics) -> None:
        self.magics = magics
        self.sessions: dict[str, _LocalSession] = {}
        self._by_agent: dict[str, _LocalSession] = {}
        self.connections: dict[str, AgentConnection] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="jupyter-acp-local", daemon=True)
        self._thread.start()
        self._turn_ids = itertools.count(1)
        self.tools = variable_surface(self.namespace)
        atexit.register(self.kill_now)

    def kill_now(self) -> None:
        for conn in self.connections.values():
            conn.state = "stopped"  # an exit we caused is not reported as a crash
            if conn.process:
                conn.process.kill_now()

    # -- plumbing --------------------------------------------------------------------------------
    def namespace(self) -> dict[str, Any]:
        shell = self.magics.shell
        return shell.user_ns if shell is not None else {}

    def tool_context(self) -> LocalToolContext:
        return LocalToolContext(self.tools.services)

    def _run(self, coro: Any, timeout: float | None = 120.0) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except AgentNeedsLogin as exc:
            raise AcpError(f"the agent needs a login: {exc}") from None
        except (AgentError, RpcError) as exc:
            raise AcpError(str(exc)) from None

    def emit(self, session: _LocalSession, type_: str, **data: Any) -> None:
        with session.cond:
            session.seq += 1
            session.events.append({"seq": session.seq, "type": type_, "ts": time.time(), **data})
            session.cond.notify_all()

    def specs(self) -> dict[str, AgentSpec]:
        specs = default_agents()
        for name, entry in (self.magics.agents or {}).items():
            if entry is None:
                specs.pop(name, None)
            else:
                specs[name] = AgentSpec.model_validate(entry)
        return specs

    def default_agent(self) -> str:
        specs = self.specs()
        env_default = os.environ.get("JUPYTER_ACP_DEFAULT_AGENT", "")
        if env_default in specs:
            return env_default
        return "builtin" if "builtin" in specs else next(iter(specs))

    def connection(self, agent: str) -> AgentConnection:
        conn = self.connections.get(agent)
        if conn is None:
            specs = self.specs()
            if agent not in specs:
                raise AcpError(f"no agent named {agent!r}; the agents are: {', '.join(specs)}")
            spec = specs[agent]
            conn = AgentConnection(
                agent,
                spec.argv,
                env=curated_env(os.environ, passthrough=spec.passthrough_env, extra=spec.env),
                cwd=os.getcwd(),
                handler_factory=lambda c: _Client(self, c),
                client_capabilities=lambda c: {
                    "fs": {"readTextFile": True, "writeTextFile": True},
                    "terminal": False,
                    "_meta": client_tools.client_capability_meta(
                        client_tools.DISCOVERY_META, [t.to_wire() for t in self.tools.all()]
                    ),
                },
                max_frame_bytes=16 * 1024 * 1024,
                start_timeout=60.0,
                stderr_bytes=64 * 1024,
                on_bad_frame=lambda c, text: print(f"jupyter_acp: agent {c.name!r} {text}", file=sys.stderr),
                on_exit=self._on_exit,
            )
            self.connections[agent] = conn
        return conn

    def _on_exit(self, conn: AgentConnection) -> None:
        for s in self.sessions.values():
            if s.agent == conn.name:
                s.acp_session_id = None
                for fut, _ in list(s.pending.values()):
                    if not fut.done():
                        fut.set_result({"outcome": "cancelled"})

    async def _ensure(self, session: _LocalSession) -> AgentConnection:
        conn = self.connection(session.agent)
        started = await conn.ensure_started()
        if started or session.acp_session_id is None:
            result = await conn.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
            session.acp_session_id = result["sessionId"]
            self.emit(
                session,
                "session_ready",
                acp_session_id=session.acp_session_id,
                how="new",
                modes=None,
                config_options=None,
            )
        return conn

    # -- the backend interface -------------------------------------------------------------------
    def describe(self) -> str:
        return f"agent subprocess of this kernel (pid {os.getpid()})"

    def agents(self) -> list[dict[str, Any]]:
        default = self.default_agent()
        out = []
        for name, spec in self.specs().items():
            conn = self.connections.get(name)
            out.append(
                {
                    "name": name,
                    "title": spec.title or name,
                    "default": name == default,
                    "available": spec.resolved() is not None,
                    "state": conn.state if conn else "stopped",
                    "error": conn.last_error if conn else None,
                }
            )
        return out

    def _get(self, agent: str | None, new: bool) -> _LocalSession:
        name = agent or self.default_agent()
        if name not in self.specs():
            raise AcpError(f"no agent named {name!r}; the agents are: {', '.join(self.specs())}")
        session = self._by_agent.get(name)
        if session is None or new:
            if session is not None and session.turn:
                self.cancel(session.id)
            session = _LocalSession(name)
            self.sessions[session.id] = session
            self._by_agent[name] = session
        return session

    def open(self, agent: str | None, new: bool = False) -> dict[str, Any]:
        return self._get(agent, new).describe()

    def current(self, agent: str | None) -> dict[str, Any] | None:
        session = self._by_agent.get(agent or self.default_agent())
        return session.describe() if session else None

    def prompt(
        self, agent: str | None, new: bool, text: str, extra: list[dict[str, Any]], context: Any
    ) -> dict[str, Any]:
        session = self._get(agent, new)
        if session.turn:
            raise AcpError("a turn is already running in this session; cancel it or wait for it to end (HTTP 409)")
        if context:
            print("jupyter_acp: no notebook here, so --context is ignored", file=sys.stderr)
        conn = self._run(self._ensure(session))
        caps = conn.agent_capabilities.get("promptCapabilities") or {}
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        for block in extra:
            if block.get("type") == "resource" and not caps.get("embeddedContext"):
                block = {"type": "text", "text": block["resource"].get("text", "")}
            blocks.append(block)
        after = session.seq
        turn_id = f"local{next(self._turn_ids)}"
        session.turn = turn_id
        self.emit(session, "turn_started", turn_id=turn_id, prompt=blocks)
        asyncio.run_coroutine_threadsafe(self._turn(session, conn, turn_id, blocks), self._loop)
        return {"turn_id": turn_id, "after": after, "session": session.describe()}

    async def _turn(
        self, session: _LocalSession, conn: AgentConnection, turn_id: str, blocks: list[dict[str, Any]]
    ) -> None:
        try:
            result = await conn.request("session/prompt", {"sessionId": session.acp_session_id, "prompt": blocks})
            stop = (result or {}).get("stopReason", "end_turn") if isinstance(result, dict) else "end_turn"
            outcome: dict[str, Any] = {"stop_reason": stop}
        except AgentNeedsLogin as exc:
            outcome = {"error": str(exc), "error_kind": "needs_login"}
        except (AgentError, RpcError) as exc:
            outcome = {"error": str(exc), "error_kind": "agent_error" if isinstance(exc, RpcError) else "agent_failed"}
        except Exception as exc:  # pragma: no cover - never lose the turn's end
            outcome = {"error": f"internal error: {exc!r}", "error_kind": "internal"}
        session.error = outcome.get("error")
        session.turn = None
        self.emit(session, "turn_ended", turn_id=turn_id, tool_calls_served=0, **outcome)

    def events(self, session_id: str, after: int, wait: float) -> dict[str, Any]:
        session = self.sessions[session_id]
        deadline = time.monotonic() + wait
        with session.cond:
            while session.seq <= after:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                session.cond.wait(min(left, 0.2))  # short waits: Ctrl-C (KeyboardInterrupt) gets through
            events = [e for e in session.events if e["seq"] > after]
        return {"events": events, "session": session.describe()}

    def page_before(self, session_id: str, before: int) -> list[dict[str, Any]]:
        """The session's events before ``before`` (all of them: a kernel's own session is held in memory)."""
        return [e for e in self.sessions[session_id].events if e["seq"] < before]

    def cancel(self, session_id: str) -> bool:
        session = self.sessions.get(session_id)
        if session is None or session.turn is None:
            return False

        async def _cancel() -> None:
            for rid, (fut, _) in list(session.pending.items()):
                if not fut.done():
                    fut.set_result({"outcome": "cancelled"})
                    self.emit(session, "permission_resolved", request_id=rid, cancelled=True)
            conn = self.connections.get(session.agent)
            if conn is not None and session.acp_session_id:
                await conn.notify("session/cancel", {"sessionId": session.acp_session_id})

        self._run(_cancel(), 10)
        return True

    def answer(self, session_id: str, request_id: str, option_id: str) -> None:
        session = self.sessions[session_id]
        pending = session.pending.get(request_id)
        if pending is None:
            err = AcpError(f"no pending permission request {request_id!r}")
            err.status = 404
            raise err
        fut, options = pending
        if option_id not in {o.get("optionId") for o in options}:
            raise AcpError(f"{option_id!r} is not one of the offered options")

        def resolve() -> None:
            if not fut.done():
                fut.set_result({"outcome": "selected", "optionId": option_id})

        self._loop.call_soon_threadsafe(resolve)
        self.emit(session, "permission_resolved", request_id=request_id, option_id=option_id)

    def close(self) -> None:
        async def _stop() -> None:
            await asyncio.gather(*(c.stop() for c in self.connections.values()), return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(10)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
