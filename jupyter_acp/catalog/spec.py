"""What an agent entry of ``c.JupyterACP.agents`` may say (a pydantic model, off the server's start)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..acp.process import resolve_command

ToolChannel = Literal["auto", "client-tools", "mcp-http", "mcp-stdio", "mcp-acp", "both", "none"]
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
