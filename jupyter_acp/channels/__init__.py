"""Transports of the tool surface: the org.mini-me convention, loopback MCP over HTTP, a stdio shim, MCP over ACP.

Which one an agent gets is decided here, after ``initialize`` has said what the agent can do.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from ..acp.connection import AgentConnection


class ToolGate(Protocol):
    """What a channel asks of the sessions layer (the one gate): channels only translate their wire to it."""

    def find_session(self, session_id: str) -> Any | None:
        """The notebook session behind a grant (None once it is gone)."""
        ...

    async def list_tools(self, session: Any, channel: str) -> list[dict[str, Any]]:
        """The session's tools now, in MCP's shape."""
        ...

    async def call_tool(
        self, session: Any, name: str, arguments: dict[str, Any], *, channel: str, ids: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """Run a tool through the gate; always a ``CallToolResult``."""
        ...


CLIENT_TOOLS = "client-tools"
MCP_HTTP = "mcp-http"
MCP_STDIO = "mcp-stdio"
#: the name the notebook's MCP server has in every agent's ``mcpServers`` (HTTP host and stdio shim alike): agents
#: name its tools after it (``mcp__jupyter__client_edit_cell``, ``client_edit_cell (jupyter MCP Server)``, ...)
MCP_SERVER_NAME = "jupyter"
#: MCP over the ACP connection itself (unstable; ``mcp_acp.py``)
MCP_ACP = "mcp-acp"
#: the channels that lend the tools as an MCP server
MCP_CHANNELS = frozenset({MCP_HTTP, MCP_STDIO, MCP_ACP})

#: environment of the stdio shim: where the host listens and the session's bearer
SHIM_URL_ENV = "JUPYTER_ACP_MCP_URL"
SHIM_BEARER_ENV = "JUPYTER_ACP_MCP_BEARER"


def choose_channels(configured: str, discovery: str, conn: AgentConnection) -> frozenset[str]:
    """The channels that carry the tools to this agent.

    ``auto``: the client-tools convention when the agent acknowledges the configured discovery mode
    (``client_tools_discovery``); else MCP over the ACP connection when it advertises ``mcpCapabilities.acp`` (no
    port, no bearer: the connection is the credential); else HTTP MCP when it advertises it; else the stdio shim
    (every ACP agent must take stdio MCP servers).  ``mcpCapabilities`` alone is not trusted to rule HTTP out:
    configure ``mcp-http`` for agents known to use it.
    """
    caps = conn.mcp_capabilities
    mcp = MCP_ACP if caps.get("acp") else MCP_HTTP if caps.get("http") else MCP_STDIO
    if configured == "none":
        return frozenset()
    if configured == CLIENT_TOOLS:
        return frozenset({CLIENT_TOOLS})
    if configured in (MCP_HTTP, MCP_STDIO, MCP_ACP):
        return frozenset({configured})
    if configured == "both":
        return frozenset({CLIENT_TOOLS, mcp})
    if discovery in conn.client_tools_modes:
        # the convention only when the agent acknowledged the very discovery mode we use (else it never learns the list)
        return frozenset({CLIENT_TOOLS})
    return frozenset({mcp})


def stdio_shim_entry(url: str, bearer: str) -> dict[str, Any]:
    """A stdio MCP server entry (no ``type`` key: some agents skip typed stdio entries)."""
    return {
        "name": MCP_SERVER_NAME,
        "command": sys.executable,
        "args": ["-m", "jupyter_acp.channels.mcp_stdio"],
        "env": [{"name": SHIM_URL_ENV, "value": url}, {"name": SHIM_BEARER_ENV, "value": bearer}],
    }


#: how the notebook preamble starts (agents and tests can tell it from the user's words)
PREAMBLE_MARK = "[Jupyter notebook context]"


def notebook_preamble(notebook: str, cwd: str) -> str:
    """Told to an MCP-channel agent once per session, in a block *after* the user's first prompt.

    After, never before: a prompt that starts with a slash command or a directive must keep its start.
    The same context is in the MCP server's ``instructions``; this block is for agents that ignore those.
    """
    return (
        f"{PREAMBLE_MARK} You are working inside the Jupyter notebook `{notebook}` (its folder: {cwd}). "
        "The `jupyter` MCP server's client_* tools read, edit and run its cells, inspect the live kernel's "
        "variables and show the user's selection: use them for anything in the notebook, and never edit "
        ".ipynb files directly."
    )


def starts_with_command(blocks: list[dict[str, Any]]) -> bool:
    """True when the prompt is an agent's slash command (``/compact``, ``/init``, ...)."""
    first = next((b for b in blocks if b.get("type") == "text"), None)
    return bool(first and str(first.get("text", "")).lstrip().startswith("/"))
