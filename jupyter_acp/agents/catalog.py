"""Agent configuration: the defaults, and agents found on PATH; what an entry may say is ``spec.AgentSpec``.

Agent commands come from configuration only (``c.JupyterACP.agents``), never from a request. ``AgentSpec`` (a pydantic
model) is imported when first named (``catalog.AgentSpec`` still works): the route modules that import this one at
the server's start need only ``KNOWN_AGENTS`` and ``detected_agents``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ..acp.process import resolve_command

if TYPE_CHECKING:
    from .spec import AgentSpec, Discovery, ToolChannel  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in ("AgentSpec", "ToolChannel", "Discovery"):
        from . import spec

        return getattr(spec, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_agents() -> dict[str, AgentSpec]:
    """The agents a fresh install has: the built-in agent and its echo mode."""
    from .spec import AgentSpec

    py = sys.executable
    # The client queues turns past JupyterACP.max_concurrent_turns; the agent's own cap sits above it
    # so that a notebook opening while others run is never refused.
    cap = ["--max-concurrent", "32"]
    return {
        # our own agent speaks the client-tools convention: no MCP detour, no preamble
        "builtin": AgentSpec(
            command=py,
            args=["-m", "jupyter_acp.agent", *cap],
            title="Built-in agent (litellm)",
            tool_channel="client-tools",
        ),
        "echo": AgentSpec(
            command=py,
            args=["-m", "jupyter_acp.agent", "--echo", *cap],
            title="Echo (no model: repeats your prompt)",
            tool_channel="client-tools",
        ),
    }


#: Well-known ACP agents: detected on PATH and offered as ready-made entries the user can enable.
KNOWN_AGENTS: dict[str, dict[str, Any]] = {
    "codex": {"command": "codex-acp", "args": [], "title": "Codex (codex-acp)", "tool_channel": "mcp-http"},
    # Claude Code reads the MCP server's instructions: no preamble needed
    "claude": {
        "command": "claude-agent-acp",
        "args": [],
        "title": "Claude (claude-agent-acp)",
        "tool_channel": "mcp-http",
        "preamble": False,
    },
    "gemini": {"command": "gemini", "args": ["--acp"], "title": "Gemini CLI", "tool_channel": "mcp-http"},
    "opencode": {"command": "opencode", "args": ["acp"], "title": "OpenCode", "tool_channel": "mcp-http"},
    "goose": {"command": "goose", "args": ["acp"], "title": "Goose", "tool_channel": "mcp-http"},
}


def detected_agents(configured: dict[str, AgentSpec]) -> dict[str, dict[str, Any]]:
    """Known agents installed on PATH but not configured, with the entry that would enable them."""
    taken = {spec.command for spec in configured.values()}
    found: dict[str, dict[str, Any]] = {}
    for name, entry in KNOWN_AGENTS.items():
        if name in configured or entry["command"] in taken:
            continue
        path = resolve_command(entry["command"])
        if path:
            found[name] = {**entry, "path": path}
    return found
