"""Agent configuration: the defaults, and agents found on PATH; what an entry may say is ``spec.AgentSpec``.

Agent commands come from configuration only (``c.JupyterACP.agents``), never from a request.

``AgentSpec`` (a pydantic model, in ``spec``) is imported when first named here (``catalog.AgentSpec``): the route
modules import this one at the server's start for ``KNOWN_AGENTS`` and ``detected_agents`` only, and pydantic is the
one import the start-up measurably pays for. Importing ``spec`` after what the server has loaded by then costs
90-160 ms of CPU (150-530 ms of wall time; five runs on the 2-core test machine) against the start's goal of 50 ms
(``bench/cold.py --only start``; ``tests/test_startup.py`` holds it off the start). The checker never sees the
lazy ``__getattr__`` (it is defined only when not type checking) but the names themselves, re-exported
explicitly: a misspelt name from this module is an error, the same on a cold run and a warm one. Code that runs
after the start imports them from ``spec``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ..acp.process import resolve_command

if TYPE_CHECKING:
    from .spec import AgentSpec as AgentSpec
    from .spec import Discovery as Discovery
    from .spec import ToolChannel as ToolChannel
else:

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
