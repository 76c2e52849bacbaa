"""The fake OpenAI **Responses** API (``POST /v1/responses``, SSE or one JSON response), and the
``config.toml`` that points codex at it.

One module per wire format: the Responses event stream is its own (``response.output_item.added``,
``response.output_text.delta``, ...); the shared server and rule plumbing is ``fake_provider_base``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any, cast

from .fake_model import _split
from .fake_provider_base import _ids, _ProviderModel, _text_of


# -- OpenAI Responses ----------------------------------------------------------------------------------
class FakeResponses(_ProviderModel):
    """``POST /v1/responses`` (SSE when ``stream`` is true, else one JSON response), ``GET /v1/models``.

    ``url`` (``http://127.0.0.1:PORT/v1``) is the provider's ``base_url``.
    """

    def __init__(self, rules: list[dict[str, Any]] | None = None, *, port: int = 0, host: str = "127.0.0.1") -> None:
        super().__init__(rules, port=port, host=host)
        self._namespaced: dict[str, tuple[str, str]] = {}

    routes = (
        ("POST", "/v1/responses", "_responses"),
        ("POST", "/responses", "_responses"),
        ("GET", "/v1/models", "_models"),
        ("GET", "/models", "_models"),
    )

    def normalise(self, body: dict[str, Any]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        items = body.get("input")
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        for item in items or []:
            if not isinstance(item, dict):
                continue
            kind = item.get("type", "message")
            if kind == "message":
                messages.append({"role": item.get("role", "user"), "content": _text_of(item.get("content"))})
            elif kind in ("function_call_output", "custom_tool_call_output", "mcp_call_output"):
                messages.append({"role": "tool", "content": _text_of(item.get("output"))})
            elif kind in ("function_call", "custom_tool_call"):
                messages.append({"role": "assistant", "content": ""})
        tools = []
        for t in body.get("tools") or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                # codex groups each MCP server's tools: {"type": "namespace", "name": "mcp__jupyter", "tools": [...]};
                # a rule sees them qualified ("mcp__jupyter__client_read_cells"), the call names them apart
                for inner in t.get("tools") or []:
                    if isinstance(inner, dict) and inner.get("name"):
                        qualified = f"{t.get('name')}__{inner['name']}"
                        self._namespaced[qualified] = (cast(str, t.get("name")), inner["name"])
                        tools.append({"type": "function", "function": {"name": qualified}})
                continue
            name = t.get("name") or (t.get("function") or {}).get("name") or ""
            tools.append({"type": "function", "function": {"name": name}})
        return {"messages": messages, "tools": tools, "model": body.get("model")}

    def _usage(self) -> dict[str, Any]:
        return {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20,
        }

    def _output_items(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if answer.get("text"):
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{next(_ids)}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": answer["text"], "annotations": []}],
                }
            )
        call = answer.get("tool_call")
        if call:
            item = {
                "type": "function_call",
                "id": f"fc_{next(_ids)}",
                "call_id": f"call_{next(_ids)}",
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]),
                "status": "completed",
            }
            if call["name"] in self._namespaced:
                item["namespace"], item["name"] = self._namespaced[call["name"]]
            items.append(item)
        return items

    def _response(self, rid: str, model: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": model,
            "output": output,
            "usage": self._usage() if status == "completed" else None,
            "error": None,
            "incomplete_details": None,
        }

    async def _responses(self, request: Any) -> Any:
        from aiohttp import web

        body, error = await self._json_body(request)
        if body is None:
            return error
        answer = self.answer(body)
        if answer.get("status"):
            err = {"error": {"message": answer.get("text") or "scripted error", "type": "server_error", "code": None}}
            return web.json_response(err, status=int(answer["status"]))
        rid = f"resp_{next(_ids)}"
        model = body.get("model") or "fake"
        items = self._output_items(answer)
        if not body.get("stream"):
            return web.json_response(self._response(rid, model, "completed", items))

        resp = await self._sse(request)
        seq = itertools.count()
        delay = float(answer.get("delay") or 0)

        async def send(kind: str, **data: Any) -> None:
            payload = {"type": kind, "sequence_number": next(seq), **data}
            await resp.write(f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode())

        await send("response.created", response=self._response(rid, model, "in_progress", []))
        await send("response.in_progress", response=self._response(rid, model, "in_progress", []))
        for index, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                await send(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
                part = {"type": "output_text", "text": "", "annotations": []}
                await send(
                    "response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part
                )
                for piece in _split(text, answer.get("chunk")):
                    if delay:
                        await asyncio.sleep(delay)
                    await send(
                        "response.output_text.delta",
                        item_id=item["id"],
                        output_index=index,
                        content_index=0,
                        delta=piece,
                    )
                await send(
                    "response.output_text.done", item_id=item["id"], output_index=index, content_index=0, text=text
                )
                await send(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part={**part, "text": text},
                )
            else:
                await send(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "arguments": "", "status": "in_progress"},
                )
                args = item["arguments"]
                await send("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=args)
                await send(
                    "response.function_call_arguments.done", item_id=item["id"], output_index=index, arguments=args
                )
            await send("response.output_item.done", output_index=index, item=item)
        await send("response.completed", response=self._response(rid, model, "completed", items))
        await resp.write_eof()
        return resp


def codex_config(base_url: str, model: str = "fake-model", approval_policy: str = "never") -> str:
    """A ``config.toml`` for ``CODEX_HOME`` that points codex at a :class:`FakeResponses` server."""
    return (
        f'model = "{model}"\n'
        'model_provider = "fake"\n'
        f'approval_policy = "{approval_policy}"\n'
        'sandbox_mode = "workspace-write"\n'
        "[model_providers.fake]\n"
        'name = "Fake local"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
    )
