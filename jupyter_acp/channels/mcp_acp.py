"""The tool surface lent in-band: an MCP server of type ``"acp"`` carried by the agent's own ACP connection.

MCP over ACP is unstable (its RFD is a draft; the v1 schema's ``schema.unstable.json`` has it): an agent that
advertises ``mcpCapabilities.acp`` gets ``{"type": "acp", "name": "jupyter", "serverId": ID}`` in ``session/new``
(``load``, ``resume``) instead of a loopback URL and a bearer, then asks ``mcp/connect {serverId}`` for a
``connectionId`` and sends MCP's own messages as ``mcp/message {connectionId, method, params}`` (the answer is the
inner result; an inner error is the outer JSON-RPC error), ``mcp/disconnect {connectionId}`` at the end.  No port and
no shim: the connection itself is the credential, so nothing another local process could replay exists.

Rules, as the HTTP host's bearers have them: a server id is drawn (128 bits) for one notebook session of one agent
process; reopening that session lends a new id and withdraws the old one; a new process of the agent starts with
nothing lent (``AgentConnection.lent`` is emptied at each start); what a message means is ``mcp_messages.py``'s,
shared with the HTTP host, and every call goes through the one gate with channel ``mcp-acp``.  The client sends no
``mcp/message`` of its own (its tool list does not change under a session's feet: ``listChanged`` is false).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..acp.v1 import MCP_CONNECT, MCP_DISCONNECT, MCP_METHODS
from ..protocol.jsonrpc import INVALID_PARAMS, RpcError
from . import MCP_ACP, mcp_messages

if TYPE_CHECKING:  # pragma: no cover
    from ..acp.connection import AgentConnection
    from . import ToolGate

__all__ = ["CHANNEL", "METHODS", "handle", "lend"]

#: the channel's name (``tool_channel``, the gate's audit events)
CHANNEL = MCP_ACP
#: the client-side methods this module answers
METHODS = MCP_METHODS
#: most MCP connections one agent process may hold open at once (each is a small entry; an agent opens one per
#: session it uses the tools of)
MAX_CONNECTIONS = 1024


@dataclass
class Lent:
    """One server id: the notebook session it serves, for the agent process it was handed to."""

    server_id: str
    session_id: str
    generation: int


@dataclass
class LentServers:
    """What this client lent on one agent connection: servers by id, open MCP connections by id."""

    servers: dict[str, Lent] = field(default_factory=dict)
    connections: dict[str, str] = field(default_factory=dict)


def _lent(conn: AgentConnection) -> LentServers:
    found = conn.lent.get(CHANNEL)
    if not isinstance(found, LentServers):
        found = conn.lent[CHANNEL] = LentServers()
    return found


def lend(conn: AgentConnection, session: Any) -> dict[str, Any]:
    """The ``mcpServers`` entry for a session's (re)opened ACP session; the session's earlier id stops working."""
    lent = _lent(conn)
    for old in [s for s in lent.servers.values() if s.session_id == session.id]:
        del lent.servers[old.server_id]
        for cid in [c for c, sid in lent.connections.items() if sid == old.server_id]:
            del lent.connections[cid]
    server_id = secrets.token_hex(16)
    lent.servers[server_id] = Lent(server_id, session.id, conn.generation)
    return {"type": "acp", "name": mcp_messages.SERVER_NAME, "serverId": server_id}


def _server(conn: AgentConnection, lent: LentServers, server_id: Any) -> Lent | None:
    found = lent.servers.get(server_id) if isinstance(server_id, str) else None
    return found if found is not None and found.generation == conn.generation else None


async def handle(gate: ToolGate, conn: AgentConnection, method: str, params: dict[str, Any]) -> Any:
    """Answer the agent's ``mcp/connect``, ``mcp/message`` or ``mcp/disconnect`` (raises ``RpcError`` for the
    outer JSON-RPC error)."""
    lent = _lent(conn)
    if method == MCP_CONNECT:
        # ``serverId`` in the schema; the RFD's first text called it ``acpId``
        server_id = params.get("serverId", params.get("acpId"))
        server = _server(conn, lent, server_id)
        if server is None:
            raise RpcError(
                INVALID_PARAMS,
                f"no MCP server {str(server_id)[:80]!r} is lent on this connection (rule: only the serverId of a "
                "session/new, load or resume of this agent process, and only the latest for its session)",
            )
        if len(lent.connections) >= MAX_CONNECTIONS:
            raise RpcError(INVALID_PARAMS, f"more than {MAX_CONNECTIONS} MCP connections open: disconnect some first")
        new_id = secrets.token_hex(12)
        lent.connections[new_id] = server.server_id
        return {"connectionId": new_id}
    connection_id = params.get("connectionId")
    server = _server(conn, lent, lent.connections.get(connection_id) if isinstance(connection_id, str) else None)
    if method == MCP_DISCONNECT:
        if isinstance(connection_id, str):
            lent.connections.pop(connection_id, None)
        return {}
    if server is None:
        raise RpcError(
            INVALID_PARAMS,
            f"unknown or closed MCP connection {str(connection_id)[:80]!r} (rule: mcp/connect first, with a serverId "
            "of this agent process; a reopened session's connections close with its old id)",
        )
    inner = {"jsonrpc": "2.0", "id": 0, "method": params.get("method"), "params": params.get("params")}
    answer = await mcp_messages.answer(gate, gate.find_session(server.session_id), inner, channel=CHANNEL)
    if answer is None:  # pragma: no cover - an id is always set above
        return None
    if "error" in answer:
        err = answer["error"]
        raise RpcError(int(err.get("code", INVALID_PARAMS)), str(err.get("message") or "MCP error"), err.get("data"))
    return answer["result"]
