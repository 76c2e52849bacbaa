"""The tools a session offers its model: client tools (the org.mini-me convention), MCP servers, a plan.

One ``Tool`` per model-visible name, whatever its channel.  Schemas are cleaned for small models
(``clean_schema``) only in what the model is shown: the arguments go to the tool unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from ..protocol import client_tools
from .limits import MAX_TOOL_VALUE_BYTES, McpServerSpec

log = logging.getLogger("jupyter_acp.agent.tools")

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PLAN_TOOL = "update_plan"
#: keywords small models choke on; none of them widens or narrows what the tool accepts for the model
_DROP_KEYWORDS = {
    "$schema",
    "$id",
    "$comment",
    "examples",
    "default",
    "format",
    "title",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
    "$defs",
    "definitions",
}


@dataclass
class ToolResult:
    text: str
    is_error: bool = False
    raw: Any = None


@dataclass
class Tool:
    name: str  # as the model sees it
    description: str
    schema: dict[str, Any]
    source: str  # "client-tools" | "mcp" | "plan"
    read_only: bool = False
    title: str = ""  # a human title from the tool's annotations, when it gives one
    call: Callable[[dict[str, Any], str, str], Awaitable[ToolResult]] | None = field(default=None, repr=False)

    def to_model(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description[:1024], "parameters": self.schema},
        }


def cap_value(value: Any) -> Any:
    """A raw tool input or output as reported in updates: at most 64 KiB of JSON, else a placeholder."""
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError):
        value = repr(value)
        size = len(value.encode("utf-8"))
    if size > MAX_TOOL_VALUE_BYTES:
        return f"[tool value omitted: {size} bytes exceeds {MAX_TOOL_VALUE_BYTES}-byte limit]"
    return value


def _clean(node: Any) -> Any:
    if isinstance(node, list):
        return [_clean(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP_KEYWORDS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: _clean(v) for k, v in value.items() if isinstance(v, dict)}
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            options = [_clean(v) for v in value if isinstance(v, dict) and v.get("type") != "null"]
            if len(options) == 1:
                out.update({k: v for k, v in options[0].items() if k not in out})
            elif options:
                out[key] = options
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if isinstance(t, str) and t != "null"]
            if types:
                out[key] = types[0] if len(types) == 1 else types
        else:
            out[key] = _clean(value)
    # required: only names of declared properties, only strings, no duplicates
    if "required" in out:
        req = out["required"]
        props = out.get("properties")
        if isinstance(req, list):
            seen: list[str] = []
            for r in req:
                if isinstance(r, str) and r not in seen and (not isinstance(props, dict) or r in props):
                    seen.append(r)
            req = seen
        if isinstance(req, list) and req:
            out["required"] = req
        else:
            del out["required"]
    # enum: non-empty, scalar values, no null, no duplicates; if mixed types, all as strings is NOT
    # equivalent, so a mixed enum is dropped (the model sees a looser schema, never a stricter one)
    if "enum" in out:
        vals = out["enum"]
        clean: list[Any] = []
        if isinstance(vals, list):
            for v in vals:
                if v is not None and not isinstance(v, (dict, list)) and v not in clean:
                    clean.append(v)
        kinds = {type(v) for v in clean}
        if clean and len(kinds) == 1:
            out["enum"] = clean
            if "type" not in out:
                out["type"] = {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
                    kinds.pop(), "string"
                )
        else:
            del out["enum"]
    return out


def clean_schema(schema: Any) -> dict[str, Any]:
    """A tool's input schema as small models take it: an object with properties, no exotic keywords."""
    out = _clean(schema) if isinstance(schema, dict) else {}
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    return out


def result_text(result: Any) -> tuple[str, bool]:
    """Text of an MCP ``CallToolResult`` (dict form) for the model, and whether it is an error."""
    if not isinstance(result, dict):
        return (json.dumps(result, ensure_ascii=False) if result is not None else ""), False
    parts: list[str] = []
    for block in result.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "image":
            parts.append(f"[image {block.get('mimeType', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.get('uri', '')}]")
        elif kind == "resource":
            res = block.get("resource") or {}
            parts.append(str(res.get("text") or f"[resource {res.get('uri', '')}]"))
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts), bool(result.get("isError"))


# -- client tools ---------------------------------------------------------------------------------
def client_tools_from(entries: Any, conn: Any, timeout: float) -> list[Tool]:
    """Tools from a convention list (meta or request mode); bad entries are skipped with one stderr line."""
    tools: list[Tool] = []
    if not isinstance(entries, list):
        return tools
    for entry in entries:
        if not isinstance(entry, dict):
            log.warning("skipped a client tool entry that is not an object")
            continue
        name, method = entry.get("name"), entry.get("method")
        if (
            not isinstance(name, str)
            or not TOOL_NAME.match(name)
            or not isinstance(method, str)
            or not method.startswith("_")
        ):
            log.warning("skipped a client tool entry without a valid name and extension method")
            continue
        annotations: Any = entry.get("annotations") if isinstance(entry.get("annotations"), dict) else {}
        tools.append(
            Tool(
                name=name,
                description=str(entry.get("description") or name),
                schema=clean_schema(entry.get("inputSchema")),
                source="client-tools",
                read_only=annotations.get("readOnlyHint") is True,
                title=str(annotations.get("title") or "")[:200],
                call=_client_caller(conn, method, timeout),
            )
        )
    return tools


def _client_caller(
    conn: Any, method: str, timeout: float
) -> Callable[[dict[str, Any], str, str], Awaitable[ToolResult]]:
    from ..protocol.jsonrpc import ConnectionClosed, RpcError

    async def call(arguments: dict[str, Any], sid: str, call_id: str) -> ToolResult:
        params = {k: v for k, v in arguments.items() if k != "_meta"}
        params["_meta"] = client_tools.call_meta(sid, call_id or None)
        try:
            result = await conn.request(method, params, timeout=timeout)
        except RpcError as exc:
            return ToolResult(f"[client tool error: {exc.message}]", True, {"error": exc.to_json()})
        except TimeoutError:
            return ToolResult(f"[client tool error: no answer within {timeout:g} s]", True, {"error": "timeout"})
        except ConnectionClosed as exc:
            return ToolResult(f"[client tool error: {exc}]", True, {"error": str(exc)})
        text, is_error = result_text(result)
        return ToolResult(text, is_error, result)

    return call


# -- MCP servers ----------------------------------------------------------------------------------
def _mcp_name(server: str, tool: str) -> str:
    base = re.sub(r"[^a-zA-Z0-9_-]", "_", server)[:24]
    return f"{base}__{tool}"


def _no_default_environment() -> dict[str, str]:
    """Replaces the MCP SDK's default child environment in this (the agent's own) process."""
    return {}


class McpConnection:
    """One MCP server, held open by a task of its own (anyio contexts must close where they opened)."""

    def __init__(self, spec: McpServerSpec, cwd: str) -> None:
        self.spec = spec
        self.cwd = cwd
        self.session: Any = None
        self.tools: list[Any] = []
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> None:
        self._task = asyncio.ensure_future(self._run())
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            await self.close()
            raise TimeoutError(f"MCP server {self.spec.name!r} did not start within {timeout:g} s") from None
        if self._error is not None:
            raise self._error

    async def _run(self) -> None:
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                if self.spec.kind == "stdio":
                    from mcp.client import stdio as mcp_stdio

                    # The seed: the child gets only the env the client configured (the SDK would add its
                    # HOME, LOGNAME, PATH, SHELL, TERM and USER), and its stderr (which may carry prompts,
                    # tool results or credentials) never reaches our log.
                    mcp_stdio.get_default_environment = _no_default_environment
                    params = mcp_stdio.StdioServerParameters(
                        command=self.spec.command, args=self.spec.args, env=dict(self.spec.env), cwd=self.cwd
                    )
                    errlog = stack.enter_context(open(os.devnull, "w", encoding="utf-8"))  # noqa: ASYNC230 - no I/O
                    read, write = await stack.enter_async_context(mcp_stdio.stdio_client(params, errlog=errlog))
                else:
                    import httpx2
                    from mcp.client.streamable_http import streamable_http_client

                    client = await stack.enter_async_context(
                        httpx2.AsyncClient(headers=self.spec.headers, timeout=httpx2.Timeout(30.0, read=300.0))
                    )
                    read, write = await stack.enter_async_context(
                        streamable_http_client(self.spec.url, http_client=client)
                    )
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                listed = await session.list_tools()
                self.session = session
                self.tools = list(listed.tools)
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.is_set():
                self._error = exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
                self._ready.set()
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %r stopped: %s", self.spec.name, type(exc).__name__)
        finally:
            self.session = None

    async def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except (TimeoutError, Exception):
                self._task.cancel()

    def as_tools(self, *, trust_annotations: bool, call_timeout: float) -> list[Tool]:
        out: list[Tool] = []
        for t in self.tools:
            name = _mcp_name(self.spec.name, t.name)
            if not TOOL_NAME.match(name):
                log.warning("skipped an MCP tool of %r whose name is not usable (over 64 bytes or odd)", self.spec.name)
                continue
            ann = getattr(t, "annotations", None)
            read_only = bool(trust_annotations and ann is not None and getattr(ann, "read_only_hint", None))
            out.append(
                Tool(
                    name=name,
                    description=t.description or t.name,
                    schema=clean_schema(t.input_schema if hasattr(t, "input_schema") else t.inputSchema),
                    source="mcp",
                    read_only=read_only,
                    call=self._caller(t.name, call_timeout),
                )
            )
        return out

    def _caller(self, tool: str, timeout: float) -> Callable[[dict[str, Any], str, str], Awaitable[ToolResult]]:
        async def call(arguments: dict[str, Any], _sid: str, _call_id: str) -> ToolResult:
            if self.session is None:
                return ToolResult(f"[MCP server {self.spec.name} is not running]", True, {"error": "not running"})
            try:
                result = await asyncio.wait_for(self.session.call_tool(tool, arguments), timeout)
            except TimeoutError:
                return ToolResult(f"[MCP tool error: no answer within {timeout:g} s]", True, {"error": "timeout"})
            except Exception as exc:
                return ToolResult(f"[MCP tool error: {exc}]", True, {"error": str(exc)})
            raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            text, is_error = result_text(raw)
            return ToolResult(text, is_error, raw)

        return call


def plan_tool() -> Tool:
    return Tool(
        name=PLAN_TOOL,
        description=(
            "Keep a short plan for a task of several steps: send the whole list each time, "
            "with each step's status (pending, in_progress, completed)."
        ),
        schema={
            "type": "object",
            "properties": {
                "entries": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "priority": {"type": "string", "enum": ["high", "medium", "low"]},
                        },
                        "required": ["content", "status"],
                    },
                }
            },
            "required": ["entries"],
        },
        source="plan",
        read_only=True,
    )


def plan_entries(arguments: dict[str, Any]) -> list[dict[str, Any]]:
    entries = []
    for e in arguments.get("entries") or []:
        if isinstance(e, dict) and isinstance(e.get("content"), str):
            status = e.get("status") if e.get("status") in ("pending", "in_progress", "completed") else "pending"
            priority = e.get("priority") if e.get("priority") in ("high", "medium", "low") else "medium"
            entries.append({"content": e["content"][:500], "status": status, "priority": priority})
    return entries[:50]
