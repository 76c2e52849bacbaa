"""MCP's messages answered for the tool surface, whatever carries them: the loopback HTTP host (``mcp_http.py``) and
MCP over ACP (``mcp_acp.py``) share this one translation, so an answer never depends on the transport.

Translation only: ``initialize``, ``ping``, ``tools/list`` and ``tools/call`` become the one gate's ``list_tools`` and
``call_tool`` for the notebook session the transport authenticated (a bearer, or a server id lent on the ACP
connection); the gate decides (session, turn, arguments, policy, approval, audit).  The answers are plain dicts in
MCP's wire shape: importing ``mcp.types`` costs about 550 ms of CPU, which would land on the server's loop; the shapes
are pinned by tests that validate them against ``mcp.types`` (``tests/test_mcp_host.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..protocol.client_tools import call_ids
from . import MCP_SERVER_NAME

if TYPE_CHECKING:  # pragma: no cover
    from . import ToolGate

SUPPORTED_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
PREFERRED_VERSION = "2025-11-25"
#: the server's name in ``mcpServers`` (whatever the transport)
SERVER_NAME = MCP_SERVER_NAME
INSTRUCTIONS = (
    "Tools of the Jupyter notebook this agent session is bound to: read its cells and outputs, edit them, "
    "run them in the notebook's kernel, inspect the kernel's variables, see the user's selection. "
    "Use these tools for anything in the notebook; never edit .ipynb files directly."
)
# JSON-RPC's own codes
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602


def instructions_for(session: Any | None) -> str:
    """The MCP server's ``instructions``: the notebook context, without touching the user's prompt."""
    if session is None:
        return INSTRUCTIONS
    return (
        f"You are working inside the Jupyter notebook `{session.notebook}` (its folder: {session.cwd}). " + INSTRUCTIONS
    )


def error(req_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": req_id, "error": err}


async def answer(
    gate: ToolGate, session: Any | None, message: dict[str, Any], *, channel: str
) -> dict[str, Any] | None:
    """One JSON-RPC message in, its answer out (None for a notification).  ``session`` is the notebook session the
    transport authenticated, None once it is gone (tools are then listed empty and calls answered ``isError``)."""
    req_id = message.get("id")
    is_request = "id" in message and req_id is not None
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return error(req_id, INVALID_REQUEST, "Invalid Request")
    if not is_request:
        return None
    method = message["method"]
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return error(req_id, INVALID_PARAMS, "Invalid params: params must be an object")
    params = params or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        result: dict[str, Any] = {
            "protocolVersion": asked if asked in SUPPORTED_VERSIONS else PREFERRED_VERSION,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "jupyter-acp", "version": __version__},
            "instructions": instructions_for(session),
        }
    elif method == "ping":
        return {"jsonrpc": "2.0", "id": req_id, "result": {}}
    elif method == "tools/list":
        result = {"tools": await gate.list_tools(session, channel) if session is not None else []}
    elif method == "tools/call":
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return error(req_id, INVALID_PARAMS, "Invalid params: tools/call needs {name, arguments?}")
        result = await _call(gate, session, name, arguments, params, channel)
    else:
        return error(req_id, METHOD_NOT_FOUND, f"Method not found: {method}")
    return {"jsonrpc": "2.0", "id": req_id, "result": result}


async def _call(
    gate: ToolGate, session: Any | None, name: str, arguments: dict[str, Any], params: dict[str, Any], channel: str
) -> dict[str, Any]:
    if session is None:
        from ..tools import error_result

        return error_result("this notebook session is no longer open", kind="session_closed")
    ids = call_ids(params.get("_meta"))
    return await gate.call_tool(session, name, arguments, channel=channel, ids=ids)
