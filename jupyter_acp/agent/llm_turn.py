"""One prompt turn against a litellm model: stream text and reasoning, run tool calls, loop.

Every update goes through ``BuiltinAgent.send_update`` (the per-turn 8 MiB budget).  Tool calls are
reported as ``tool_call`` then ``tool_call_update`` with capped raw input and output; tools that are not
read-only ask ``session/request_permission`` first, as the session's mode and the tool's source say.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from .images import image_parts, result_images, text_only, user_message, without_image_data
from .state import LitellmLoader, Session, Turn
from .tools import Tool, ToolResult, cap_value, plan_entries
from .usage import session_vision, usage_update

if TYPE_CHECKING:  # pragma: no cover
    import argparse

    from ..protocol.jsonrpc import JsonRpcConnection
    from .history import HistoryStore


class BuiltinAgent(Protocol):
    """What a model turn asks of ``server.BuiltinAgent``, which runs it (named here, not imported: the server
    imports this module when the first model turn starts)."""

    args: argparse.Namespace
    conn: JsonRpcConnection
    store: HistoryStore
    litellm: LitellmLoader

    async def send_update(self, sess: Session, update: dict[str, Any], turn: Turn | None = None) -> None: ...

    async def say(self, sess: Session, kind: str, text: str, turn: Turn | None = None) -> None: ...

    def _save_meta(self, sess: Session) -> None: ...


log = logging.getLogger("jupyter_acp.agent.llm_turn")

MAX_TOOL_TEXT_FOR_MODEL = 64 * 1024
SYSTEM_PROMPT = (
    "You are a helpful coding assistant working inside Jupyter. The working directory is {cwd}. "
    "Use the tools you are given when they help; tools named client_* act on the user's notebook. "
    "For a task of several steps, keep a plan with the update_plan tool. Answer concisely."
)

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


def _tool_kind(tool: Tool) -> str:
    if tool.read_only:
        return "read"
    lowered = tool.name.lower()
    for word, kind in (
        ("execute", "execute"),
        ("run", "execute"),
        ("delete", "delete"),
        ("edit", "edit"),
        ("write", "edit"),
        ("insert", "edit"),
        ("search", "search"),
        ("fetch", "fetch"),
    ):
        if word in lowered:
            return kind
    return "other"


def _ids(value: Any) -> str:
    ids = [str(v) for v in value] if isinstance(value, list) else []
    return ", ".join(ids[:6]) + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")


def call_title(name: str, tool: Tool | None, arguments: Any) -> str:
    """What a card says about a call: "Edit cell c1", "Run cells c0, c1", "Insert a cell" (never raw JSON)."""
    args = arguments if isinstance(arguments, dict) else {}
    short = name.split("__")[-1]
    cid = args.get("cell_id")
    ids = _ids(args.get("cell_ids"))
    plural = "s" if isinstance(args.get("cell_ids"), list) and len(args["cell_ids"]) != 1 else ""
    known = {
        "client_notebook_outline": "Notebook outline",
        "client_read_cells": f"Read cell{plural} {ids}" if ids else "Read cells",
        "client_insert_cell": "Insert a cell" + (" (markdown)" if args.get("cell_type") == "markdown" else ""),
        "client_edit_cell": f"Edit cell {cid}" if cid else "Edit a cell",
        "client_delete_cells": f"Delete cell{plural} {ids}" if ids else "Delete cells",
        "client_move_cell": f"Move cell {cid}" if cid else "Move a cell",
        "client_execute_cells": f"Run cell{plural} {ids}" if ids else "Run cells",
        "client_execute_code": "Run code in the kernel",
        "client_list_variables": "List kernel variables",
        "client_inspect_variable": f"Inspect {args['name']}"
        if isinstance(args.get("name"), str)
        else "Inspect a variable",
        "client_get_selection": "The user's selection",
    }
    if tool is not None and tool.source == "client-tools" and short in known:
        return known[short]
    if tool is not None and tool.title:
        return tool.title
    return name


def call_content(arguments: Any) -> list[dict[str, Any]]:
    """The code a call carries, as text (a cell's source, scratch code) or a diff (old/new string)."""
    args = arguments if isinstance(arguments, dict) else {}
    if isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
        where = f"cell {args['cell_id']}" if isinstance(args.get("cell_id"), str) else "cell"
        return [{"type": "diff", "path": where, "oldText": args["old_string"], "newText": args["new_string"]}]
    for key in ("source", "code"):
        if isinstance(args.get(key), str):
            text = args[key] if len(args[key]) <= 20_000 else args[key][:20_000] + "\n[... truncated]"
            return [{"type": "content", "content": {"type": "text", "text": text}}]
    return []


def call_meta(name: str) -> dict[str, Any]:
    """The tool's own name travels with a human title (a client matching calls by name finds it)."""
    return {"jupyter_acp": {"toolName": name}}


async def run_turn(
    agent: BuiltinAgent, sess: Session, turn: Turn, text: str, images: list[dict[str, Any]] | None = None
) -> str:
    litellm = await agent.litellm.get()
    vision = session_vision(litellm, getattr(agent.args, "vision", "auto"), sess.model)
    user = user_message(text, images or [], vision, sess.model)
    sess.messages.append(user)
    agent.store.append(sess.id, user)
    tools = [t.to_model() for t in sess.tools.values()]
    kwargs: dict[str, Any] = {}
    if agent.args.api_base:
        kwargs["api_base"] = agent.args.api_base
    if agent.args.api_key:
        kwargs["api_key"] = agent.args.api_key
    if tools:
        kwargs["tools"] = tools
    kwargs["stream_options"] = {"include_usage": True}
    system = {"role": "system", "content": SYSTEM_PROMPT.format(cwd=sess.cwd)}
    out: _Coalescer | None = None
    try:
        for _round in range(int(agent.args.max_turn_requests)):
            turn.partial_text = ""
            stream = await litellm.acompletion(
                model=sess.model,
                messages=[system, *(sess.messages if vision else text_only(sess.messages, sess.model))],
                stream=True,
                timeout=agent.args.model_timeout,
                **kwargs,
            )
            calls: dict[int, dict[str, Any]] = {}
            out = _Coalescer(agent, sess, turn)
            usage: Any = None
            async for chunk in stream:
                usage = getattr(chunk, "usage", None) or usage
                choices = getattr(chunk, "choices", None) or []
                if not choices:
                    continue
                delta = choices[0].delta
                reasoning = getattr(delta, "reasoning_content", None)
                if reasoning:
                    await out.add("agent_thought_chunk", reasoning)
                content = getattr(delta, "content", None)
                if content:
                    turn.partial_text += content
                    await out.add("agent_message_chunk", content)
                for tc in getattr(delta, "tool_calls", None) or []:
                    idx = getattr(tc, "index", None) or 0
                    slot = calls.setdefault(idx, {"id": "", "name": "", "arguments": ""})
                    if getattr(tc, "id", None):
                        slot["id"] = tc.id
                    fn = getattr(tc, "function", None)
                    if fn is not None:
                        if getattr(fn, "name", None):
                            slot["name"] += fn.name
                        if getattr(fn, "arguments", None):
                            slot["arguments"] += fn.arguments
            await out.flush()
            await send_usage(agent, sess, turn, litellm, usage)
            text_out = turn.partial_text
            turn.partial_text = ""
            if not calls:
                reply = {"role": "assistant", "content": text_out}
                sess.messages.append(reply)
                agent.store.append(sess.id, reply)
                return "end_turn"
            ordered = [calls[k] for k in sorted(calls)]
            for n, c in enumerate(ordered):
                c["id"] = c["id"] or f"call_{_round}_{n}"
            assistant = {
                "role": "assistant",
                "content": text_out or None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"] or "{}"},
                    }
                    for c in ordered
                ],
            }
            results: list[dict[str, Any]] = []
            seen: list[dict[str, Any]] = []
            for c in ordered:
                result, shown_images = await run_tool(agent, sess, turn, c["id"], c["name"], c["arguments"])
                results.append({"role": "tool", "tool_call_id": c["id"], "content": result})
                seen.extend(shown_images)
            if seen and vision:
                # a tool message carries text only: the tools' images follow as the user's, so the model sees them
                note = {"type": "text", "text": f"The image output of the tool call(s) above ({len(seen)}):"}
                results.append({"role": "user", "content": [note, *image_parts(seen)]})
            sess.messages.extend([assistant, *results])
            agent.store.append(sess.id, assistant, *results)
        return "max_turn_requests"
    except BaseException:
        if out is not None:
            out.close()
        if turn.partial_text:  # keep what the user saw
            partial = {"role": "assistant", "content": turn.partial_text}
            sess.messages.append(partial)
            try:
                agent.store.append(sess.id, partial)
            except OSError:
                pass
        raise


class _Coalescer:
    """Deltas become updates at once, unless they arrive faster than ``window`` s apart: then they are
    joined (a model streaming thousands of tiny deltas a second costs one update per window, not one per
    delta).  The kind switching (thought -> message) or the stream ending flushes."""

    def __init__(self, agent: BuiltinAgent, sess: Session, turn: Turn, window: float = 0.02) -> None:
        self.agent, self.sess, self.turn, self.window = agent, sess, turn, window
        self.kind = ""
        self.buf: list[str] = []
        self.last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._bg: asyncio.Future[None] | None = None

    async def add(self, kind: str, text: str) -> None:
        if self.buf and kind != self.kind:
            await self.flush()
        self.kind = kind
        self.buf.append(text)
        if time.monotonic() - self.last >= self.window:
            await self.flush()
        elif self._timer is None:  # held back: a pause in the stream must not hold it longer than window
            self._timer = asyncio.get_running_loop().call_later(self.window, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self.buf:
            self._bg = asyncio.ensure_future(self._flush_in_background())

    async def _flush_in_background(self) -> None:
        try:
            await self.flush()
        except Exception:  # budget exceeded or client gone: end the turn (prompt() reports which)
            task = self.sess.turn_task
            if task is not None and not task.done():
                task.cancel()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def flush(self) -> None:
        self.close()
        if self.buf:
            text = "".join(self.buf)
            self.buf.clear()
            self.last = time.monotonic()
            await self.agent.say(self.sess, self.kind, text, self.turn)


async def send_usage(agent: BuiltinAgent, sess: Session, turn: Turn, litellm: Any, usage: Any) -> None:
    """A ``usage_update`` after a model call (when the provider said how many tokens it used)."""
    try:
        update, sess.cost = usage_update(
            litellm, sess.model, usage, sess.cost, int(getattr(agent.args, "context_window", 0) or 0)
        )
    except Exception as exc:  # usage is a courtesy: never the end of a turn
        log.warning("usage could not be computed: %s", type(exc).__name__)
        return
    if update is not None:
        if "cost" in update:
            agent._save_meta(sess)  # the session's cost survives a restart (load / resume)
        await agent.send_update(sess, update, turn)


async def run_tool(
    agent: BuiltinAgent, sess: Session, turn: Turn, call_id: str, name: str, raw_args: str
) -> tuple[str, list[dict[str, Any]]]:
    """Run one tool call; the returned text is what the model reads, with the images the tool answered."""
    tool = sess.tools.get(name)
    try:
        arguments = json.loads(raw_args) if raw_args.strip() else {}
        if not isinstance(arguments, dict):
            raise ValueError("arguments are not a JSON object")
    except ValueError as exc:
        arguments = None
        bad_args = str(exc)
    if tool is not None and tool.source == "plan":
        entries = plan_entries(arguments or {})
        await agent.send_update(sess, {"sessionUpdate": "plan", "entries": entries}, turn)
        return "plan updated", []
    title = call_title(name, tool, arguments)
    shown_content = call_content(arguments)
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": title,
        "kind": _tool_kind(tool) if tool else "other",
        "status": "pending",
        "rawInput": cap_value(arguments if arguments is not None else raw_args),
        "_meta": call_meta(name),
    }
    if shown_content:
        update["content"] = shown_content
    await agent.send_update(sess, update, turn)
    if tool is None or tool.call is None:
        return await _finish(
            agent, sess, turn, call_id, ToolResult(f"[unknown tool: {name}]", True, {"error": "unknown tool"})
        )
    if arguments is None:
        return await _finish(
            agent, sess, turn, call_id, ToolResult(f"[invalid tool arguments: {bad_args}]", True, {"error": bad_args})
        )
    if needs_permission(agent, sess, tool):
        outcome = await agent.conn.request(
            "session/request_permission",
            {
                "sessionId": sess.id,
                "toolCall": {
                    "toolCallId": call_id,
                    "title": title,
                    "kind": _tool_kind(tool),
                    "status": "pending",
                    "rawInput": cap_value(arguments),
                    "_meta": call_meta(name),
                    **({"content": shown_content} if shown_content else {}),
                },
                "options": PERMISSION_OPTIONS,
            },
        )
        chosen = ((outcome or {}).get("outcome") or {}) if isinstance(outcome, dict) else {}
        option = chosen.get("optionId") if chosen.get("outcome") == "selected" else None
        if option == "allow_always":
            sess.always_allowed.add(tool.name)
        elif option != "allow_once":
            if sess.cancelled:
                raise _Cancelled()
            why = "the user rejected this tool call" if option else "the permission request was cancelled"
            return await _finish(agent, sess, turn, call_id, ToolResult(f"[{why}]", True, {"error": why}))
    await agent.send_update(
        sess, {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"}, turn
    )
    result = await tool.call(arguments, sess.id, call_id)
    return await _finish(agent, sess, turn, call_id, result)


class _Cancelled(Exception):
    pass


def needs_permission(agent: BuiltinAgent, sess: Session, tool: Tool) -> bool:
    if tool.read_only or tool.name in sess.always_allowed:
        return False
    policy = agent.args.mcp_permission if tool.source == "mcp" else agent.args.client_tools_permission
    if policy == "ask":
        return True
    return sess.mode != "auto"


async def _finish(
    agent: BuiltinAgent, sess: Session, turn: Turn, call_id: str, result: ToolResult
) -> tuple[str, list[dict[str, Any]]]:
    text = result.text
    shown = text if len(text) <= MAX_TOOL_TEXT_FOR_MODEL else text[:MAX_TOOL_TEXT_FOR_MODEL] + "\n[... truncated]"
    images = [] if result.is_error else result_images(result.raw)
    content: list[dict[str, Any]] = [
        {"type": "content", "content": {"type": "text", "text": cap_value(shown) if len(shown) > 65536 else shown}}
    ]
    content += [
        {"type": "content", "content": {"type": "image", "mimeType": im["mimeType"], "data": im["data"]}}
        for im in images
    ]
    raw = without_image_data(result.raw) if images else result.raw
    await agent.send_update(
        sess,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": "failed" if result.is_error else "completed",
            "content": content,
            "rawOutput": cap_value(raw if raw is not None else text),
        },
        turn,
    )
    return shown, images
