"""Every wire name of the ``org.mini-me`` client-tools convention, in one place.

The convention's reference page could not be obtained, so several names are reconstructed
(see ``shared/reference/client-tools-convention.md``).  Both ends in this repository (the
Jupyter client and the built-in agent) import them from here, so a correction is one edit.
"""

from __future__ import annotations

from typing import Any, cast

#: The ``_meta`` namespace key used in capabilities and in per-call metadata.
NAMESPACE = "org.mini-me"
#: Key under the namespace that carries the client-tools capability.
CLIENT_TOOLS_KEY = "clientTools"
#: Discovery modes: the list travels in ``initialize`` or is asked at each session open.
DISCOVERY_META = "meta"
DISCOVERY_REQUEST = "request"
#: Agent -> client request asking the tool list (request mode), as it appears on the wire.
TOOLS_LIST_METHOD = "_org.mini-me/tools/list"
#: Reasons carried by the list request.
LIST_REASONS = ("new", "load", "resume")
#: Every client tool's name starts with this, so agents can route ``^client_``.
TOOL_NAME_PREFIX = "client_"
#: Extension-method prefix of this client's own tools.
TOOL_METHOD_PREFIX = "_jupyter-acp/"


def client_capability_meta(discovery: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``clientCapabilities._meta`` entry advertising client tools."""
    body: dict[str, Any] = {"discovery": discovery}
    if discovery == DISCOVERY_META:
        body["tools"] = tools or []
    return {NAMESPACE: {CLIENT_TOOLS_KEY: body}}


def agent_acknowledged_modes(agent_capabilities: dict[str, Any] | None) -> list[str]:
    """Discovery modes an agent acknowledged in ``agentCapabilities._meta`` (empty: none)."""
    meta = (agent_capabilities or {}).get("_meta") or {}
    entry = (meta.get(NAMESPACE) or {}).get(CLIENT_TOOLS_KEY)
    if not isinstance(entry, dict):
        return []
    modes = entry.get("discovery")
    if isinstance(modes, str):
        modes = [modes]
    return [m for m in (modes or []) if m in (DISCOVERY_META, DISCOVERY_REQUEST)]


def agent_capability_meta(modes: tuple[str, ...] = (DISCOVERY_META, DISCOVERY_REQUEST)) -> dict[str, Any]:
    """The ``agentCapabilities._meta`` entry an agent uses to acknowledge the convention."""
    return {NAMESPACE: {CLIENT_TOOLS_KEY: {"discovery": list(modes)}}}


def call_meta(session_id: str, tool_call_id: str | None = None) -> dict[str, Any]:
    """``_meta`` an agent attaches to a tool call so the client knows the session."""
    inner: dict[str, Any] = {"sessionId": session_id}
    if tool_call_id:
        inner["toolCallId"] = tool_call_id
    return {NAMESPACE: inner}


def session_of_call(params: dict[str, Any] | None) -> str | None:
    """The session id a tool call or list request names in its ``_meta`` (namespaced or bare)."""
    meta = (params or {}).get("_meta")
    if not isinstance(meta, dict):
        return None
    inner = meta.get(NAMESPACE)
    if isinstance(inner, dict) and isinstance(inner.get("sessionId"), str):
        return cast(str, inner["sessionId"])
    bare = meta.get("sessionId")
    return bare if isinstance(bare, str) else None


def strip_meta(params: dict[str, Any] | None) -> dict[str, Any]:
    """The model's arguments: the call's params without ``_meta``."""
    return {k: v for k, v in (params or {}).items() if k != "_meta"}


#: ``_meta`` keys agents use for the id of the tool call a request belongs to
CALL_ID_KEYS = ("toolCallId", "claudecode/toolUseId", "progressToken")


def call_ids(meta: Any, namespace: str | None = None) -> tuple[str, ...]:
    """The ids an agent attached to a request's ``_meta`` (flat, or under the convention's namespace)."""
    if not isinstance(meta, dict):
        return ()
    found: list[str] = []
    for scope in (meta, meta.get(namespace) if namespace else None):
        if isinstance(scope, dict):
            for key in CALL_ID_KEYS:
                value = scope.get(key)
                if isinstance(value, (str, int)) and not isinstance(value, bool):
                    found.append(str(value))
    return tuple(dict.fromkeys(found))
