"""Agent configuration: what an agent entry may say, the defaults, and agents found on PATH.

Agent commands come from configuration only (``c.JupyterACP.agents``), never from a request.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..acp.process import resolve_command

ToolChannel = Literal["auto", "client-tools", "mcp-http", "mcp-stdio", "both", "none"]
Discovery = Literal["meta", "request"]


class AgentSpec(BaseModel):
    """One entry of ``c.JupyterACP.agents``."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="Executable: absolute path or a name looked up on PATH.")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Extra variables set for this agent.")
    passthrough_env: list[str] = Field(
        default_factory=list, description="Names (or fnmatch patterns) of server variables this agent may see."
    )
    title: str = ""
    tool_channel: ToolChannel = "auto"
    client_tools_discovery: Discovery = "request"
    preamble: bool = Field(
        default=True,
        description="Also tell an MCP-channel agent about the notebook in a block after its first prompt "
        "(for agents that ignore the MCP server's instructions); never in front of the user's words.",
    )

    @field_validator("command")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("command must not be empty")
        return value

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]

    def resolved(self) -> str | None:
        return resolve_command(self.command)


def default_agents() -> dict[str, AgentSpec]:
    """The agents a fresh install has: the built-in agent and its echo mode."""
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
