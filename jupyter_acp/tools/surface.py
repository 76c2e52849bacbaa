"""Tool definitions and their dispatch, independent of the channel that carries a call.

A channel (the ``org.mini-me`` client-tools convention, loopback MCP) asks ``list_tools`` for a
session every time, and ``call`` re-checks that list at call time: a tool withdrawn mid-session
(kernel gone, notebook read-only) is refused in band, never by a transport error.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocol import client_tools

if TYPE_CHECKING:  # pragma: no cover
    from ..notebook.stamping import Stamp
    from .host import Approver, ToolHost, ToolSession

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
    # the reason too: agents that show their model only structuredContent must still learn why
    out["structuredContent"] = {"error": kind, "message": text, **(structured or {})}
    return out


@dataclass
class ToolContext:
    """What a tool call is bound to: one notebook session, looked up afresh at call time."""

    host: ToolHost
    session: ToolSession
    #: shared services of the tool surface (kernel bridge, notebook access, frontend bridge)
    services: Any = None
    turn_id: str | None = None
    tool_call_id: str | None = None
    channel: str = "client-tools"
    #: the action the gate is deciding (``host.Action``), when the call came through a channel
    action: Any = None
    #: the gate's approval step for this context's session: what ``services.gate`` asks with a tool's own card (None:
    #: a context no gate made, where every tool that would ask is refused)
    approver: Approver | None = None
    #: how the gate allowed the call (for the audit event)
    approval: str | None = None
    #: per-call memo for availability checks (kernel id, language, writability asked once per call)
    cache: dict[str, Any] = field(default_factory=dict)
    #: the call is only rehearsed (``ToolSurface.rehearse``): the executor stops at its gate, which keeps the card it
    #: would ask with in ``card``; so an executor reads, and changes nothing (but what ``services.saw`` notes, which
    #: a rehearsal's services ignore), before it asks its gate
    rehearsal: bool = False
    card: dict[str, Any] | None = None
    #: who makes this call's changes (agent, turn, prompt, user): written into each changed cell's metadata with the
    #: change (``notebook/provenance.py``); None outside a turn
    provenance: Stamp | None = None

    @property
    def notebook(self) -> str:
        return self.session.notebook

    @property
    def cwd(self) -> str:
        return self.session.cwd

    @property
    def serverapp(self) -> Any:
        return self.host.serverapp

    async def kernel_id(self) -> str | None:
        """The notebook's *current* kernel (restarts and switches follow)."""
        if "kernel_id" not in self.cache:
            self.cache["kernel_id"] = await self.host.kernel_id_for(self.session.notebook)
        kernel_id: str | None = self.cache["kernel_id"]
        return kernel_id


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
    #: the executor bounds its own waits (permission prompts, user-given timeouts): no outer timeout
    own_timeouts: bool = False
    title: str = ""

    def __post_init__(self) -> None:
        if not self.name.startswith(client_tools.TOOL_NAME_PREFIX):
            raise ValueError(f"client tool names start with {client_tools.TOOL_NAME_PREFIX!r}: {self.name}")
        if not self.method:
            self.method = client_tools.TOOL_METHOD_PREFIX + self.name[len(client_tools.TOOL_NAME_PREFIX) :]
        self.annotations = {"readOnlyHint": self.read_only, "destructiveHint": self.destructive, **self.annotations}
        if self.title:
            self.annotations.setdefault("title", self.title)
        self._validator: Any = None

    def validate(self, arguments: Any) -> str | None:
        """None when the arguments fit the schema, else a message the model can act on."""
        if not isinstance(arguments, dict):
            return "arguments must be a JSON object"
        if self._validator is None:
            # at the first call, as nbformat in kernels/messages.py (2.7 s of CPU where nothing imported it yet:
            # the kernel that runs the agent itself); the server has it from its start
            import jsonschema

            self._validator = jsonschema.Draft202012Validator(self.input_schema)
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        parts = []
        for err in errors[:5]:
            where = "/".join(str(p) for p in err.absolute_path) or "arguments"
            parts.append(f"{where}: {err.message}")
        return "; ".join(parts)

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
        #: shared services the executors use (set by the registry; see ``registry.ToolServices``)
        self.services: Any = None
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
        ctx.cache.clear()
        out = []
        for tool in self._tools.values():
            try:
                if tool.available is None or await tool.available(ctx):
                    out.append(tool)
            except Exception:
                log.exception("availability check of %s failed; tool withheld", tool.name)
        return out

    async def available(self, tool: ToolDef, ctx: ToolContext) -> bool:
        """Only the called tool's availability is asked at call time (cheap, and never stale)."""
        if tool.available is None:
            return True
        try:
            return bool(await tool.available(ctx))
        except Exception:
            log.exception("availability check of %s failed; tool withheld", tool.name)
            return False

    async def close(self) -> None:
        """Release what the services hold (kernel clients); called at server stop."""
        closer = getattr(self.services, "close", None)
        if closer is not None:
            await closer()

    async def call(self, ctx: ToolContext, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a tool; every outcome, failures included, is a ``CallToolResult``."""
        ctx.cache.clear()
        tool = self._tools.get(name)
        if tool is None or not await self.available(tool, ctx):
            return error_result(f"unknown tool: {name} is not available for this notebook", kind="unknown_tool")
        problem = tool.validate(arguments)
        if problem is not None:
            return error_result(f"invalid arguments for {name}: {problem}", kind="invalid_arguments")
        return await self.run(ctx, tool, arguments)

    @staticmethod
    def read_card(tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
        """The card a tool that only reads is asked on (when a policy asks): its title and its arguments."""
        preview = json.dumps(arguments, ensure_ascii=False, indent=1)[:2000]
        return {"title": tool.title or tool.name, "kind": "read", "preview": preview, "arguments": arguments}

    async def rehearse(self, ctx: ToolContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The card the gate would be asked with for this call (title, kind, preview: the cell's diff, the code to
        run), without making it: a changing tool's executor runs up to its gate, which keeps the card and refuses
        (``services.gate``). None when the call would fail before it asks (no such cell, a stale edit): then there
        is no card to show, and the call itself says why. Availability and arguments are checked by the caller."""
        if tool.read_only:
            return self.read_card(tool, arguments)
        services = ctx.services
        view = getattr(services, "rehearsal_view", None)
        ctx.rehearsal, ctx.card = True, None
        if view is not None:
            ctx.services = view()  # notes nothing of what the agent saw (only the call itself counts as a read)
        try:
            async with asyncio.timeout(self.call_timeout):
                await tool.executor(ctx, arguments)
        except Exception:
            log.exception("rehearsing %s failed; asked at its call instead", tool.name)
            return None
        finally:
            ctx.rehearsal, ctx.services = False, services
        return ctx.card

    async def run(self, ctx: ToolContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a tool whose availability and arguments were checked (by ``call``, or by the one gate)."""
        name = tool.name
        try:
            if tool.own_timeouts:
                return await tool.executor(ctx, arguments)
            # a timeout scope, not ``wait_for``: no Task and no extra loop turn per call
            async with asyncio.timeout(self.call_timeout):
                return await tool.executor(ctx, arguments)
        except TimeoutError:
            return error_result(f"{name} timed out after {self.call_timeout:g} s", kind="timeout")
        except Exception as exc:
            log.exception("tool %s failed", name)  # the traceback goes to the server log, never to the agent
            reason = str(exc).strip() or "no reason given"
            return error_result(f"{name} failed: {type(exc).__name__}: {reason}", kind="failed")
