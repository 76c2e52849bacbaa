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
from . import v1
from .process import AgentProcess
from .v1 import PROTOCOL_VERSION, auth_env_vars, auth_kind

__all__ = ["PROTOCOL_VERSION", "AgentConnection", "AgentError", "AgentNeedsLogin", "auth_env_vars", "auth_kind"]

log = logging.getLogger(__name__)


class AgentError(Exception):
    """An agent could not serve: the message is written for the user."""


class AgentNeedsLogin(AgentError):
    pass


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
        #: what the client lends over this connection itself (MCP over ACP: ``channels/mcp_acp.py``), by id; a new
        #: process starts with nothing lent (ids given to an earlier one are dead with it)
        self.lent: dict[str, Any] = {}

    # -- capabilities (read through ``v1``: the shapes live there) -------------------------------
    @property
    def agent_capabilities(self) -> dict[str, Any]:
        return v1.agent_capabilities(self.init_result)

    @property
    def agent_info(self) -> dict[str, Any] | None:
        return v1.agent_info(self.init_result)

    @property
    def prompt_capabilities(self) -> dict[str, Any]:
        return v1.prompt_capabilities(self.agent_capabilities)

    @property
    def supports_load(self) -> bool:
        return v1.supports_load(self.agent_capabilities)

    @property
    def supports_resume(self) -> bool:
        return v1.session_capability(self.agent_capabilities, "resume")

    @property
    def supports_close(self) -> bool:
        return v1.session_capability(self.agent_capabilities, "close")

    def supports_session(self, name: str) -> bool:
        """``sessionCapabilities.NAME``: list, delete, additionalDirectories, resume, close; fork (unstable)."""
        return v1.session_capability(self.agent_capabilities, name)

    @property
    def supports_logout(self) -> bool:
        return v1.supports_logout(self.agent_capabilities)

    @property
    def mcp_capabilities(self) -> dict[str, Any]:
        return v1.mcp_capabilities(self.agent_capabilities)

    @property
    def client_tools_modes(self) -> list[str]:
        return client_tools.agent_acknowledged_modes(self.agent_capabilities)

    @property
    def auth_methods(self) -> list[dict[str, Any]]:
        return v1.auth_methods(self.init_result)

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
        self.lent = {}
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
                v1.initialize_params(
                    self._client_capabilities(self),
                    {"name": "jupyter-acp", "title": "Jupyter ACP", "version": __version__},
                ),
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
        refusal = v1.version_refusal(self.name, result)
        if refusal is not None:  # negotiated, never assumed: another version ends the connection, both named
            self.last_error = refusal
            await self._fail()
            raise AgentError(refusal)
        assert isinstance(result, dict)
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

    def runs_with(self, env: dict[str, str]) -> bool:
        """Whether this agent's process runs (or starts) with exactly ``env``: no restart would change anything."""
        return env == self._env

    async def reconfigure(self, env: dict[str, str]) -> bool:
        """New settings (a model, a key): the next ``ensure_started`` runs the agent with ``env``.  A running process
        is stopped only when ``env`` differs from the one it runs with (a process keeps the environment it started
        with); one not running (never started, stopped, exited) simply takes ``env`` at its next start.  True when a
        running process was stopped."""
        async with self._lock:
            running = self.process is not None and self.state in ("starting", "ready", "needs_login")
            if env == self._env and running:
                return False  # its environment is already this one (e.g. the server's environment wins)
            self._env = env
            if self.process is not None or self.rpc is not None:
                self.state = "stopped"
                await self._teardown()
                if self._watch:
                    self._watch.cancel()
            return running

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

    async def logout(self, *, timeout: float = 60.0) -> None:
        """``logout`` (``agentCapabilities.auth.logout``): the agent forgets the account it works for; its next
        ``session/new`` asks for a login (-32000), which the panel's login card answers."""
        await self.ensure_started()  # whether it offers logout is known once it answered initialize
        if not self.supports_logout:
            raise AgentError(
                f"agent {self.name!r} offers no logout (agentCapabilities.auth.logout); log out with the agent's "
                "own command in a terminal"
            )
        assert self.rpc is not None
        try:
            await self.rpc.request("logout", {}, timeout=timeout)
        except TimeoutError:
            raise AgentError(f"agent {self.name!r} did not answer logout within {timeout:g} s") from None
        except ConnectionClosed:
            raise AgentError(self.describe_exit()) from None
        except RpcError as exc:
            raise AgentError(f"agent {self.name!r} refused to log out: {exc.message}") from None

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
