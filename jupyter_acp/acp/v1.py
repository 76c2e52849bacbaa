"""Where the protocol meets the app: the ACP version 1 shapes the client reads and writes, in one module.

Zed keeps its ACP client behind one file (``acp.rs``) so that a protocol change is that file's change; this module is
the same idea for the shapes the rest of the app reads through :class:`~jupyter_acp.acp.connection.AgentConnection`:
the version negotiation, ``initialize``'s request and answer, the agent's capabilities and login methods, and the
unstable MCP-over-ACP method names.  The readers are small functions over the ``initialize`` answer, so a v2 reader
(``info`` / ``capabilities`` instead of ``agentInfo`` / ``agentCapabilities``) can sit beside them.

The version is negotiated, never assumed: the client asks for 1; an agent that supports 1 answers 1 (ACP: "the
version the client specified if supported by the agent, or the latest it supports"), and any other answer ends the
connection with both versions named (:func:`version_refusal`).  The v2 draft (2026-07-20) is named as such: its
prompt answer is only an acknowledgment, modes are config options and ``fs/*`` and ``terminal/*`` are gone, so a v2
agent cannot be driven with the v1 turn loop.

What still speaks v1 outside this module (for a v2 change, with this one): ``sessions/connections/agent_sessions.py``
(``session/new|load|resume`` params with ``additionalDirectories`` and ``_meta``, ``session/close``),
``sessions/log/conversations.py`` (``session/list``, ``session/delete``, the unstable ``session/fork``),
``AgentConnection.logout``, ``protocol/jsonrpc.py`` (``$/cancel_request`` either way), ``sessions/connections/turns.py`` (a
prompt's answer ends the turn, ``stopReason``, ``session/cancel``, ``promptCapabilities`` fitting),
``sessions/connections/acp_client.py`` and ``gate.py`` (the ``fs/*`` and ``terminal/*`` methods, ``session/request_permission``
without ``title``), the mode and config routes (``session/set_mode``), ``sessions/gate/elicitations.py``; the panel reads
``session/update`` kinds as v1 sends them (``labextension/src/model.ts``).
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

#: the version this client speaks (and asks for in ``initialize``)
PROTOCOL_VERSION = 1
#: the draft's version number (schema v2, 2.0.0-alpha): recognised to say so, not spoken
DRAFT_VERSION = 2

# -- the unstable MCP-over-ACP methods (agent -> client; ``mcp/message`` goes both ways) ----------------------------
MCP_CONNECT = "mcp/connect"
MCP_MESSAGE = "mcp/message"
MCP_DISCONNECT = "mcp/disconnect"
MCP_METHODS = (MCP_CONNECT, MCP_MESSAGE, MCP_DISCONNECT)


def initialize_params(client_capabilities: dict[str, Any], client_info: dict[str, Any]) -> dict[str, Any]:
    """``initialize``'s params: the version asked for, what the client can do, who it is."""
    return {"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": client_capabilities, "clientInfo": client_info}


def version_refusal(agent: str, result: Any) -> str | None:
    """Why this ``initialize`` answer cannot be served (the user's words), or None when it speaks version 1."""
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    if version == PROTOCOL_VERSION and not isinstance(version, bool):
        return None
    if version is None:
        return (
            f"agent {agent!r} answered initialize without a protocolVersion (ACP requires one); this client speaks "
            f"ACP protocol version {PROTOCOL_VERSION}"
        )
    if version == DRAFT_VERSION and not isinstance(version, bool):
        return (
            f"agent {agent!r} answered with ACP protocol version {DRAFT_VERSION}, the v2 draft (turn-free prompts, "
            f"modes as config options, no fs or terminal methods); this client speaks ACP protocol version "
            f"{PROTOCOL_VERSION} only: run a release of the agent that speaks version {PROTOCOL_VERSION}"
        )
    return (
        f"agent {agent!r} speaks ACP protocol version {version!r}; this client speaks ACP protocol version "
        f"{PROTOCOL_VERSION} (it asked for {PROTOCOL_VERSION}, and an agent that supports it answers it)"
    )


# -- readers of the initialize answer ----------------------------------------------------------------------------
def agent_capabilities(init: dict[str, Any]) -> dict[str, Any]:
    caps = init.get("agentCapabilities")
    return caps if isinstance(caps, dict) else {}


def agent_info(init: dict[str, Any]) -> dict[str, Any] | None:
    info = init.get("agentInfo")
    return info if isinstance(info, dict) else None


def auth_methods(init: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in init.get("authMethods") or [] if isinstance(m, dict)]


def _section(caps: dict[str, Any], name: str) -> dict[str, Any]:
    value = caps.get(name)
    return value if isinstance(value, dict) else {}


def prompt_capabilities(caps: dict[str, Any]) -> dict[str, Any]:
    """``promptCapabilities``: image, audio, embeddedContext."""
    return _section(caps, "promptCapabilities")


def mcp_capabilities(caps: dict[str, Any]) -> dict[str, Any]:
    """``mcpCapabilities``: http, sse (stable), acp (unstable)."""
    return _section(caps, "mcpCapabilities")


def session_capability(caps: dict[str, Any], name: str) -> bool:
    """``sessionCapabilities.NAME`` is offered (list, delete, resume, close, additionalDirectories; fork, unstable):
    an object, possibly empty, means yes."""
    return _section(caps, "sessionCapabilities").get(name) is not None


def supports_load(caps: dict[str, Any]) -> bool:
    return bool(caps.get("loadSession"))


def supports_logout(caps: dict[str, Any]) -> bool:
    """``auth.logout`` (stable since 2026-05-21)."""
    return _section(caps, "auth").get("logout") is not None


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


# -- what an agent asks of the client (agent -> client requests and notifications) ----------------------------------
# The params of each method the client serves, named as the ACP schema names them (the SDK's pydantic models of the
# same names, ``acp.schema``, are a test dependency: tests/test_acp_schema.py checks both ends against them).  Every
# key may be missing (``total=False``) and no value is checked here: an agent is not trusted, its handler in
# ``sessions/connections/acp_client.py`` checks what it reads.


class SessionNotification(TypedDict, total=False):
    """``session/update``."""

    sessionId: str
    update: dict[str, Any]


class RequestPermissionRequest(TypedDict, total=False):
    """``session/request_permission``: the agent's own question, on its card of the call."""

    sessionId: str
    toolCall: dict[str, Any]
    options: list[dict[str, Any]]


class ReadTextFileRequest(TypedDict, total=False):
    """``fs/read_text_file``: ``line`` (1-based) and ``limit`` (lines) read a part."""

    sessionId: str
    path: str
    line: int | None
    limit: int | None


class WriteTextFileRequest(TypedDict, total=False):
    """``fs/write_text_file``."""

    sessionId: str
    path: str
    content: str


class CreateTerminalRequest(TypedDict, total=False):
    """``terminal/create``: ``env`` is a list of ``{name, value}``."""

    sessionId: str
    command: str
    args: list[str]
    env: list[dict[str, str]]
    cwd: str | None
    outputByteLimit: int | None


class TerminalRequest(TypedDict, total=False):
    """``terminal/output``, ``terminal/wait_for_exit``, ``terminal/kill``, ``terminal/release`` (the schema's
    TerminalOutputRequest, WaitForTerminalExitRequest, KillTerminalRequest, ReleaseTerminalRequest: the same keys)."""

    sessionId: str
    terminalId: str


# -- W3C trace context, forwarded as ``params._meta`` (stable since 2026-06-03) -------------------------------------
#: ``traceparent``: version, trace id, parent id, flags (lower-case hex); a later version may add fields after them
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x21-\x7e]*)?$")
#: one ``tracestate`` member: key=value (W3C Trace Context, section 3.3)
_TRACESTATE_MEMBER = re.compile(
    r"^[a-z0-9][a-z0-9_\-*/]{0,240}(@[a-z][a-z0-9_\-*/]{0,13})?=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}$"
)


def trace_meta(traceparent: str | None, tracestate: str | None = None) -> dict[str, str] | None:
    """The ``_meta`` to forward to the agent for one request of the server: only W3C's ``traceparent`` (and its
    ``tracestate``), and only well-formed, so a client's header never carries anything else into the agent's params.
    None when there is nothing valid to forward (a ``tracestate`` goes only with a valid ``traceparent``)."""
    if not isinstance(traceparent, str):
        return None
    parent = traceparent.strip()
    match = _TRACEPARENT.match(parent) if len(parent) <= 256 else None
    if match is None:
        return None
    version, trace_id, parent_id, _flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    meta = {"traceparent": parent}
    state = tracestate.strip() if isinstance(tracestate, str) else ""
    if state and len(state) <= 512:
        members = [m.strip() for m in state.split(",") if m.strip()]
        if len(members) <= 32 and all(_TRACESTATE_MEMBER.match(m) for m in members):
            meta["tracestate"] = ",".join(members)
    return meta
