"""The loopback MCP tool host: the tool surface over Streamable HTTP, for agents that know no convention.

Rules (embacle-tool-host, adapted): one listener on 127.0.0.1 at a port the kernel picks, accepting
before any URL is handed out; a 256-bit bearer per ACP session, accepted from the
``Authorization`` header only and compared in constant time; the bearer lists tools while its session
is open, acts only while a turn of that session runs, and is revoked when the session is reopened,
the agent dies or the server stops; unknown and revoked bearers fail alike (401 +
``WWW-Authenticate: Bearer``); the tool list is asked per request and re-checked at call time; errors
are answers (``isError``), never transport errors; requests carrying a browser ``Origin`` are refused.

What a message means (``initialize``, ``tools/list``, ``tools/call``, ...) is ``mcp_messages.py``'s, shared with MCP
over ACP; this module is the transport: the listener, the bearers, the HTTP answers.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tornado import httpserver, netutil, web

from ..protocol import codec
from . import mcp_messages

if TYPE_CHECKING:  # pragma: no cover
    from . import ToolGate

log = logging.getLogger(__name__)

#: the channel's name in the gate's audit events
CHANNEL = "mcp-http"

UNAUTHORIZED = -32001


@dataclass
class Grant:
    """What one bearer may do: act for one notebook session of one agent process."""

    bearer: str
    session_id: str
    agent: str
    generation: int

    def __post_init__(self) -> None:
        self.key = self.bearer.encode()  # encoded once, not on every request

    def __repr__(self) -> str:  # never print the bearer
        return f"Grant(session={self.session_id}, agent={self.agent}, generation={self.generation})"


class McpToolHost:
    def __init__(self, gate: ToolGate) -> None:
        self.gate = gate
        self._grants: list[Grant] = []
        self._server: httpserver.HTTPServer | None = None
        self._sockets: list[socket.socket] = []
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind and accept at once: the URL is valid as soon as this returns."""
        if self._server is not None:
            return
        app = web.Application([(r"/mcp", McpHandler, {"host": self})], xsrf_cookies=False, log_function=_log_request)
        self._sockets = netutil.bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
        self.port = self._sockets[0].getsockname()[1]
        self._server = httpserver.HTTPServer(app, max_body_size=8 * 1024 * 1024)
        self._server.add_sockets(self._sockets)
        log.info("MCP tool host listening on 127.0.0.1:%s", self.port)

    def stop(self) -> None:
        """Idempotent; revokes every bearer and frees the port."""
        self._grants.clear()
        if self._server is not None:
            self._server.stop()
            self._server = None
        for sock in self._sockets:
            sock.close()
        self._sockets = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    # -- bearers ---------------------------------------------------------------------------------
    def grant(self, session: Any, generation: int) -> str:
        """A fresh bearer for a session's (re)opened ACP session; the previous one stops working."""
        self.revoke_session(session.id)
        bearer = secrets.token_hex(32)
        self._grants.append(Grant(bearer, session.id, session.agent, generation))
        return bearer

    def revoke_session(self, session_id: str) -> None:
        self._grants = [g for g in self._grants if g.session_id != session_id]

    def revoke_agent(self, agent: str) -> None:
        self._grants = [g for g in self._grants if g.agent != agent]

    @property
    def open_grants(self) -> int:
        return len(self._grants)

    def lookup(self, bearer: str) -> Grant | None:
        found = None
        key = bearer.encode()
        for grant in self._grants:  # no early exit: constant time over the list
            if hmac.compare_digest(grant.key, key):
                found = grant
        return found

    def server_entry(self, bearer: str) -> dict[str, Any]:
        """The ``mcpServers`` entry handed to the agent in ``session/new``."""
        return {
            "type": "http",
            "name": mcp_messages.SERVER_NAME,
            "url": self.url,
            "headers": [{"name": "Authorization", "value": f"Bearer {bearer}"}],
        }

    # -- dispatch --------------------------------------------------------------------------------
    async def dispatch(self, grant: Grant, message: dict[str, Any]) -> dict[str, Any] | None:
        """One JSON-RPC message in, its answer out (None for a notification): MCP's own handling, shared with MCP over
        ACP (``mcp_messages.py``), for the session this bearer was granted."""
        return await mcp_messages.answer(self.gate, self.gate.find_session(grant.session_id), message, channel=CHANNEL)


def _log_request(handler: web.RequestHandler) -> None:
    """Answered calls at debug level, refusals at info, failures as errors.

    Tornado's default wrote one INFO line per MCP request to the server log: under 50 sessions calling
    tools about a sixth of the host's CPU per request was that line (record, format, write to stderr).
    """
    status = handler.get_status()
    level = logging.DEBUG if status < 400 else logging.INFO if status < 500 else logging.ERROR
    if log.isEnabledFor(level):
        req = handler.request
        log.log(level, "%d %s %s %.2fms", status, req.method, req.path, 1000.0 * req.request_time())


class McpHandler(web.RequestHandler):
    """``POST /mcp`` only; every other method answers 405."""

    SUPPORTED_METHODS = ("POST", "GET", "DELETE", "PUT", "PATCH", "OPTIONS")

    def initialize(self, host: McpToolHost) -> None:
        self.host = host

    def _reply(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        self.set_status(status)
        for key, value in (headers or {}).items():
            self.set_header(key, value)
        if body is None:
            self.finish()
            return
        text = codec.dumps(body)  # orjson: an outline answer is ~20 kB, and the stdlib encoder was 10% of a busy host
        accept = self.request.headers.get("Accept", "")
        if "text/event-stream" in accept and "application/json" not in accept:
            self.set_header("Content-Type", "text/event-stream")
            self.finish(f"event: message\ndata: {text}\n\n")
        else:
            self.set_header("Content-Type", "application/json")
            self.finish(text)

    def _not_allowed(self) -> None:
        self._reply(405, headers={"Allow": "POST"})

    get = delete = put = patch = options = _not_allowed

    async def post(self) -> None:
        if self.request.headers.get("Origin"):
            # a browser on this machine must not reach the agent's tools (DNS rebinding)
            self._reply(403, mcp_messages.error(None, UNAUTHORIZED, "requests from browsers are refused"))
            return
        auth = self.request.headers.get("Authorization", "")
        grant = self.host.lookup(auth[7:].strip()) if auth.startswith("Bearer ") else None
        if grant is None:
            self._reply(401, mcp_messages.error(None, UNAUTHORIZED, "Unauthorized"), {"WWW-Authenticate": "Bearer"})
            return
        try:
            message = codec.loads(self.request.body or b"")
        except ValueError as exc:
            self._reply(200, mcp_messages.error(None, -32700, f"Parse error: {exc}"))
            return
        if not isinstance(message, dict):
            self._reply(200, mcp_messages.error(None, -32600, "Invalid Request: batches are not supported"))
            return
        answer = await self.host.dispatch(grant, message)
        if answer is None:
            self._reply(204)  # a notification: nothing to say
        else:
            self._reply(200, answer)

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:  # keep headers (the bearer) out of logs
        log.error("MCP host error: %s", value)
