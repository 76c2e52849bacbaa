"""One configured agent: its process, its ACP connection, and what it said it can do.

Many notebook sessions share one connection.  A crashed agent is noticed at once (every pending
request fails), and started again by the next caller of ``ensure_started``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .._version import __version__
from ..protocol import client_tools
from ..protocol.jsonrpc import AUTH_REQUIRED, ConnectionClosed, Handler, JsonRpcConnection, RpcError
from .process import AgentProcess

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1


class AgentError(Exception):
    """An agent could not serve: the message is written for the user."""


class AgentNeedsLogin(AgentError):
    pass


def auth_kind(method: dict[str, Any]) -> str:
    """An ``authMethods`` entry's kind: ``agent`` (the default), ``env_var`` or ``terminal``."""
    kind = method.get("type") or "agent"
    return kind if kind in ("agent", "env_var", "terminal") else str(kind)


def auth_env_vars(method: dict[str, Any]) -> list[str]:
    """The variables an ``env_var`` method names: ``varName``, ``vars[].name`` or ``_meta`` ``varName``/``vars``."""
    names: list[str] = []
    raw = method.get("_meta")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for source in (method, *(v for v in meta.values() if isinstance(v, dict)), meta):
        single = source.get("varName") or source.get("var_name") or source.get("envVar")
        if isinstance(single, str):
            names.append(single)
        for var in source.get("vars") or []:
            name = var.get("name") if isinstance(var, dict) else var
            if isinstance(name, str):
                names.append(name)
    return list(dict.fromkeys(names))


class AgentConnection:
    """The client side of one agent process."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: str,
        handler_factory: Callable[[AgentConnection], Handler],
        client_capabilities: Callable[[AgentConnection], dict[str, Any]],
        max_frame_bytes: int,
        start_timeout: float,
        stderr_bytes: int,
        on_bad_frame: Callable[[AgentConnection, str], None],
        on_exit: Callable[[AgentConnection], None],
    ) -> None:
        self.name = name
        #: the command line (from configuration only, never from a request)
        self.argv = list(argv)
        self._env = env
        self._cwd = cwd
        self._handler_factory = handler_factory
        self._client_capabilities = client_capabilities
        self._max_frame = max_frame_bytes
        self._start_timeout = start_timeout
        self._stderr_bytes = stderr_bytes
        self._on_bad_frame = on_bad_frame
        self._on_exit = on_exit
        self.state = "stopped"  # stopped | starting | ready | dead | needs_login
        self.generation = 0
        self.process: AgentProcess | None = None
        self.rpc: JsonRpcConnection | None = None
        self.init_result: dict[str, Any] = {}
        self.last_error: str | None = None
        self.restarts = 0
        self._lock = asyncio.Lock()
        #: serialises session set-up so a tool-list request during it is never ambiguous
        self.setup_lock = asyncio.Lock()
        #: the notebook session whose session/new|load|resume is in flight (request-mode tool lists)
        self.setting_up: Any = None
        self._watch: asyncio.Task[None] | None = None
        #: when the agent last wrote anything on its stdout (monotonic clock)
        self.last_traffic = 0.0

    # -- capabilities ----------------------------------------------------------------------------
    @property
    def agent_capabilities(self) -> dict[str, Any]:
        return self.init_result.get("agentCapabilities") or {}

    @property
    def supports_load(self) -> bool:
        return bool(self.agent_capabilities.get("loadSession"))

    @property
    def supports_resume(self) -> bool:
        return (self.agent_capabilities.get("sessionCapabilities") or {}).get("resume") is not None

    @property
    def supports_close(self) -> bool:
        return (self.agent_capabilities.get("sessionCapabilities") or {}).get("close") is not None

    @property
    def mcp_capabilities(self) -> dict[str, Any]:
        return self.agent_capabilities.get("mcpCapabilities") or {}

    @property
    def client_tools_modes(self) -> list[str]:
        return client_tools.agent_acknowledged_modes(self.agent_capabilities)

    @property
    def auth_methods(self) -> list[dict[str, Any]]:
        return list(self.init_result.get("authMethods") or [])

    @property
    def alive(self) -> bool:
        return self.state == "ready" and self.rpc is not None and not self.rpc.closed

    def stderr_tail(self, lines: int = 20) -> str:
        return self.process.stderr_tail(lines) if self.process else ""

    def describe_exit(self) -> str:
        """One paragraph for the user: how the agent ended and the last lines it wrote."""
        code = self.process.returncode if self.process else None
        text = f"agent {self.name!r} exited" + (f" with code {code}" if code is not None else "")
        if self.rpc and self.rpc.close_reason and code is None:
            text = f"agent {self.name!r} connection closed: {self.rpc.close_reason}"
        tail = self.stderr_tail(10)
        return text + (f"; last lines of its log:\n{tail}" if tail else "")

    # -- lifecycle -------------------------------------------------------------------------------
    async def ensure_started(self) -> bool:
        """Start the agent if it is not running; True when this call started it."""
        if self.alive:
            return False
        async with self._lock:
            if self.alive:
                return False
            await self._start()
            return True

    async def _start(self) -> None:
        if self.process is not None:
            await self._teardown()
            self.restarts += 1
        self.state = "starting"
        self.generation += 1
        self.process = AgentProcess(self.argv, self._env, self._cwd, stderr_bytes=self._stderr_bytes)
        try:
            reader, writer = await self.process.start()
        except OSError as exc:
            self.state = "dead"
            self.last_error = f"agent {self.name!r} could not be started ({self.argv[0]}): {exc}"
            raise AgentError(self.last_error) from exc
        self.rpc = JsonRpcConnection(
            reader,
            writer,
            self._handler_factory(self),
            max_frame_bytes=self._max_frame,
            on_bad_frame=lambda text: self._on_bad_frame(self, text),
            on_traffic=self._traffic,
            name=f"agent {self.name}",
        )
        self.rpc.start()
        self._watch = asyncio.ensure_future(self._watch_exit(self.rpc, self.process))
        try:
            result = await self.rpc.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": self._client_capabilities(self),
                    "clientInfo": {"name": "jupyter-acp", "title": "Jupyter ACP", "version": __version__},
                },
                timeout=self._start_timeout,
            )
        except TimeoutError:
            self.last_error = f"agent {self.name!r} did not answer initialize within {self._start_timeout:g} s"
            await self._fail()
            raise AgentError(self.last_error + self._tail_suffix()) from None
        except (ConnectionClosed, RpcError) as exc:
            await asyncio.sleep(0.05)  # let the exit code land for the message
            self.last_error = f"agent {self.name!r} failed during initialize: {exc}"
            await self._fail()
            raise AgentError(self.last_error + self._tail_suffix()) from None
        if not isinstance(result, dict) or result.get("protocolVersion") != PROTOCOL_VERSION:
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            self.last_error = f"agent {self.name!r} speaks ACP protocol version {version!r}; this client speaks 1"
            await self._fail()
            raise AgentError(self.last_error)
        self.init_result = result
        self.state = "ready"
        self.last_error = None

    def _traffic(self) -> None:
        self.last_traffic = time.monotonic()

    async def kill_hung(self, reason: str) -> None:
        """The agent stopped answering altogether: end it; the next caller starts a fresh one."""
        async with self._lock:
            if self.state != "ready":
                return
            self.state = "dead"
            self.last_error = reason
            self._on_exit(self)
            await self._teardown()

    def _tail_suffix(self) -> str:
        tail = self.stderr_tail(10)
        return f"; last lines of its log:\n{tail}" if tail else ""

    async def _fail(self) -> None:
        self.state = "dead"
        await self._teardown()

    async def _watch_exit(self, rpc: JsonRpcConnection, process: AgentProcess) -> None:
        await rpc.wait_closed()
        # The pipe closed: the agent is gone or broken.  Make sure of it, then report.
        if process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), 0.5)
            except TimeoutError:
                pass
        if self.rpc is rpc and self.state in ("ready", "starting"):
            self.state = "dead"
            self.last_error = self.describe_exit()
            log.warning("%s", self.last_error)
            self._on_exit(self)
            await process.stop(grace=0.5)

    async def _teardown(self) -> None:
        rpc, process = self.rpc, self.process
        if rpc is not None:
            rpc.close("agent stopped by client")
        if process is not None:
            await process.stop()

    async def reconfigure(self, env: dict[str, str]) -> None:
        """New settings (a model, a key): stop the process; the next ``ensure_started`` runs it with ``env``."""
        async with self._lock:
            self._env = env
            if self.process is not None or self.rpc is not None:
                self.state = "stopped"
                await self._teardown()
                if self._watch:
                    self._watch.cancel()

    async def authenticate(self, method_id: str, *, timeout: float = 300.0) -> None:
        """Run one of the agent's own (``agent``-type) login methods; the agent is ready for sessions after it."""
        method = next((m for m in self.auth_methods if m.get("id") == method_id), None)
        if self.rpc is None or self.rpc.closed or self.state not in ("ready", "needs_login"):
            await self.ensure_started()
            method = next((m for m in self.auth_methods if m.get("id") == method_id), None)
        if method is None:
            offered = ", ".join(str(m.get("id")) for m in self.auth_methods) or "none"
            raise AgentError(f"agent {self.name!r} offers no login method {method_id!r} (it offers: {offered})")
        kind = auth_kind(method)
        if kind != "agent":
            raise AgentError(
                f"login method {method_id!r} of agent {self.name!r} is of type {kind!r}: the client does not call "
                "authenticate for it (ACP: only 'agent' methods are authenticated by the agent itself)"
            )
        assert self.rpc is not None
        try:
            await self.rpc.request("authenticate", {"methodId": method_id}, timeout=timeout)
        except ConnectionClosed:
            raise AgentError(self.describe_exit()) from None
        except RpcError as exc:
            raise AgentError(f"agent {self.name!r} refused the login {method_id!r}: {exc.message}") from None
        self.state = "ready"
        self.last_error = None

    async def stop(self) -> None:
        async with self._lock:
            self.state = "stopped"
            await self._teardown()
            if self._watch:
                self._watch.cancel()

    # -- requests --------------------------------------------------------------------------------
    async def request(self, method: str, params: Any, *, timeout: float | None = None) -> Any:
        if self.rpc is None or self.rpc.closed:
            raise AgentError(self.last_error or f"agent {self.name!r} is not running")
        return await self.answer(self.rpc.request(method, params, timeout=timeout))

    def start_request(self, method: str, params: Any) -> asyncio.Future[Any]:
        """Write a request now (a turn's prompt reaches the agent before the server answers its client); await
        its answer with ``answer``."""
        if self.rpc is None or self.rpc.closed:
            raise AgentError(self.last_error or f"agent {self.name!r} is not running")
        try:
            return self.rpc.start_request(method, params)
        except ConnectionClosed as exc:
            failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)  # said as ``answer`` says it: with how the agent exited
            return failed

    async def answer(self, pending: Awaitable[Any]) -> Any:
        """A request's answer, its failures said for the user: how the agent exited, or how to log in."""
        try:
            return await pending
        except ConnectionClosed:
            await asyncio.sleep(0.05)  # the exit status arrives just after the pipe closes
            raise AgentError(self.describe_exit()) from None
        except RpcError as exc:
            if exc.code == AUTH_REQUIRED:
                self.state = "needs_login"
                raise AgentNeedsLogin(self.login_hint(exc)) from None
            raise

    async def notify(self, method: str, params: Any) -> None:
        if self.rpc is not None and not self.rpc.closed:
            try:
                await self.rpc.notify(method, params)
            except ConnectionClosed:
                pass

    def login_hint(self, exc: RpcError | None = None) -> str:
        methods = self.auth_methods
        text = f"agent {self.name!r} needs you to log in"
        if exc is not None and exc.message:
            text += f" ({exc.message})"
        if methods:
            parts = []
            for m in methods:
                desc = m.get("description") or ""
                parts.append(f"{m.get('name') or m.get('id')}" + (f": {desc}" if desc else ""))
            text += ". It offers: " + "; ".join(parts)
        cmd = self.argv[0]
        text += (
            f". Log in from a terminal (for example by running `{cmd}`'s login command), then send the prompt again."
        )
        return text
