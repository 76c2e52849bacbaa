"""The fake Anthropic **Messages** API (``POST /v1/messages``, SSE or one JSON message, and
``count_tokens``), for claude-agent-acp via ``ANTHROPIC_BASE_URL``.

One module per wire format: the Messages event stream is its own (``message_start``,
``content_block_delta``, ...); the shared server and rule plumbing is ``fake_provider_base``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .fake_model import _split
from .fake_provider_base import _ids, _ProviderModel, _text_of


# -- Anthropic Messages ------------------------------------------------------------------------------
class FakeAnthropic(_ProviderModel):
    """``POST /v1/messages`` (any query, e.g. ``?beta=true``; SSE when ``stream`` is true) and
    ``POST /v1/messages/count_tokens``.  ``base`` (``http://127.0.0.1:PORT``) is ``ANTHROPIC_BASE_URL``.
    """

    routes = (
        ("POST", "/v1/messages", "_messages"),
        ("POST", "/v1/messages/count_tokens", "_count_tokens"),
    )

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def normalise(self, body: dict[str, Any]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        for m in body.get("messages") or []:
            if not isinstance(m, dict):
                continue
            content = m.get("content")
            blocks = content if isinstance(content, list) else []
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            if m.get("role") == "user" and results:
                messages.append({"role": "tool", "content": "".join(_text_of(b.get("content")) for b in results)})
            else:
                messages.append({"role": m.get("role", "user"), "content": _text_of(content)})
        tools = [
            {"type": "function", "function": {"name": t.get("name", "")}}
            for t in body.get("tools") or []
            if isinstance(t, dict)
        ]
        return {"messages": messages, "tools": tools, "model": body.get("model")}

    async def _count_tokens(self, request: Any) -> Any:
        from aiohttp import web

        await request.read()
        return web.json_response({"input_tokens": 10})

    async def _messages(self, request: Any) -> Any:
        from aiohttp import web

        body, error = await self._json_body(request)
        if body is None:
            return error
        answer = self.answer(body)
        if answer.get("status"):
            err = {"type": "error", "error": {"type": "api_error", "message": answer.get("text") or "scripted error"}}
            return web.json_response(err, status=int(answer["status"]))
        mid = f"msg_fake_{next(_ids)}"
        model = body.get("model") or "claude-fake"
        call = answer.get("tool_call")
        blocks: list[dict[str, Any]] = []
        if answer.get("text"):
            blocks.append({"type": "text", "text": answer["text"]})
        if call:
            blocks.append(
                {"type": "tool_use", "id": f"toolu_fake_{next(_ids)}", "name": call["name"], "input": call["arguments"]}
            )
        stop = "tool_use" if call else "end_turn"
        usage = {
            "input_tokens": 10,
            "output_tokens": 10,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        message = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return web.json_response(message)

        resp = await self._sse(request)
        delay = float(answer.get("delay") or 0)

        async def send(kind: str, **data: Any) -> None:
            await resp.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())

        await send(
            "message_start",
            message={**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}},
        )
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                await send("content_block_start", index=index, content_block={"type": "text", "text": ""})
                for piece in _split(block["text"], answer.get("chunk")):
                    if delay:
                        await asyncio.sleep(delay)
                    await send("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
            else:
                await send("content_block_start", index=index, content_block={**block, "input": {}})
                args = json.dumps(block["input"])
                half = len(args) // 2
                for part in (args[:half], args[half:]):
                    await send(
                        "content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": part}
                    )
            await send("content_block_stop", index=index)
        await send("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage={"output_tokens": 10})
        await send("message_stop")
        await resp.write_eof()
        return resp
