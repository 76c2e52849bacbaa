"""Tool definitions and their dispatch, independent of the channel that carries a call.

A channel (the ``org.mini-me`` client-tools convention, loopback MCP) asks ``list_tools`` for a
session every time, and ``call`` re-checks that list at call time: a tool withdrawn mid-session
(kernel gone, notebook read-only) is refused in band, never by a transport error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import convention

if TYPE_CHECKING:  # pragma: no cover
    from ..hub import NotebookSession, SessionHub

log = logging.getLogger(__name__)

Executor = Callable[["ToolContext", dict[str, Any]], Awaitable[dict[str, Any]]]
Availability = Callable[["ToolContext"], Awaitable[bool]]


def text_result(text: str, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    """An MCP ``CallToolResult`` that succeeded."""
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if structured is not None:
        out["structuredContent"] = structured
    return out


def error_result(text: str, kind: str = "declined", structured: dict[str, Any] | None = None) -> dict[str, Any]:
    """An MCP ``CallToolResult`` the model must react to: errors are answers."""
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
    out["structuredContent"] = {"error": kind, **(structured or {})}
    return out


@dataclass
class ToolContext:
    """What a tool call is bound to: one notebook session, looked up afresh at call time."""

    hub: SessionHub
    session: NotebookSession
    turn_id: str | None = None
    tool_call_id: str | None = None
    channel: str = "client-tools"

    @property
    def notebook(self) -> str:
        return self.session.notebook

    @property
    def cwd(self) -> str:
        return self.session.cwd

    @property
    def serverapp(self) -> Any:
        return self.hub.serverapp

    async def kernel_id(self) -> str | None:
        """The notebook's *current* kernel (restarts and switches follow)."""
        return await self.hub.kernel_id_for(self.session.notebook)


@dataclass
class ToolDef:
    name: str
    description: str
    input_schema: dict[str, Any]
    executor: Executor
    read_only: bool = True
    destructive: bool = False
    available: Availability | None = None
    method: str = ""
    annotations: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name.startswith(convention.TOOL_NAME_PREFIX):
            raise ValueError(f"client tool names start with {convention.TOOL_NAME_PREFIX!r}: {self.name}")
        if not self.method:
            self.method = convention.TOOL_METHOD_PREFIX + self.name[len(convention.TOOL_NAME_PREFIX) :]
        self.annotations = {"readOnlyHint": self.read_only, "destructiveHint": self.destructive, **self.annotations}

    def to_wire(self) -> dict[str, Any]:
        """The convention's tool description (MCP's tool shape plus ``method``)."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "method": self.method,
            "annotations": self.annotations,
        }


class ToolSurface:
    """The registry of client tools, served to every channel from here."""

    def __init__(self, tools: list[ToolDef] | None = None, *, call_timeout: float = 120.0) -> None:
        self._tools: dict[str, ToolDef] = {}
        self._by_method: dict[str, ToolDef] = {}
        self.call_timeout = call_timeout
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: ToolDef) -> None:
        self._tools[tool.name] = tool
        self._by_method[tool.method] = tool

    def by_method(self, method: str) -> ToolDef | None:
        return self._by_method.get(method)

    def by_name(self, name: str) -> ToolDef | None:
        return self._tools.get(name)

    def all(self) -> list[ToolDef]:
        return list(self._tools.values())

    async def list_tools(self, ctx: ToolContext) -> list[ToolDef]:
        out = []
        for tool in self._tools.values():
            try:
                if tool.available is None or await tool.available(ctx):
                    out.append(tool)
            except Exception:
                log.exception("availability check of %s failed; tool withheld", tool.name)
        return out

    async def call(self, ctx: ToolContext, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a tool; every outcome, failures included, is a ``CallToolResult``."""
        tool = self._tools.get(name)
        if tool is None or tool not in await self.list_tools(ctx):
            return error_result(f"unknown tool: {name} is not available for this notebook", kind="unknown_tool")
        try:
            return await asyncio.wait_for(tool.executor(ctx, arguments), self.call_timeout)
        except asyncio.TimeoutError:
            return error_result(f"{name} timed out after {self.call_timeout:g} s", kind="timeout")
        except Exception as exc:
            log.exception("tool %s failed", name)
            return error_result(f"{name} failed: {exc}", kind="failed")
