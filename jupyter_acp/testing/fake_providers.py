"""Fake model servers in the wire formats of real agents: the OpenAI **Responses** API and the
Anthropic **Messages** API, both streamed as SSE, scripted by the rules of :mod:`.fake_model`.

Real third-party ACP agents (codex-acp, claude-agent-acp) run their own tool loop against their own
provider; pointed at one of these servers on 127.0.0.1 they run offline and deterministically:

- codex-acp: ``CODEX_HOME/config.toml`` with a model provider ``base_url = <FakeResponses.url>`` and
  ``wire_api = "responses"`` (see :func:`codex_config`).
- claude-agent-acp: ``ANTHROPIC_BASE_URL=<FakeAnthropic.base>`` and any ``ANTHROPIC_API_KEY``.

The rules are exactly :class:`.fake_model.FakeModel`'s (``match``, ``role``, ``tool``, ``arguments``,
``text`` with ``{last}``, ``times``, ``status``, ``chunk``, ``delay``, ``reasoning`` is ignored): each
request is first translated into the chat-completions shape (its messages, the last one's role
``user`` or ``tool``, the names of the offered tools) and handed to the same rule engine, whose answer
is then written back in the provider's own event stream.  Tool names are matched by regex, so a rule
``"tool": "client_notebook_outline$"`` finds the tool whatever prefix the agent gives its MCP tools
(``mcp__jupyter__client_notebook_outline``, ``jupyter__client_notebook_outline``, ...).

Every request body is kept in ``.requests`` (the raw provider body) and every path asked for, known or
not, in ``.paths``: agents call more than the one endpoint (token counting, model lists, probes).

``python -m jupyter_acp.testing.fake_providers --api responses|anthropic --port N --script rules.json``
serves one from the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from typing import Any, cast

from .fake_model import FakeModel, _split, load_script, serve_until_interrupted

_ids = itertools.count(1)


def _text_of(content: Any) -> str:
    """The text of a message's content in any of the three providers' shapes."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    out = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif "content" in part:  # anthropic tool_result blocks nest their content
                out.append(_text_of(part["content"]))
            elif "output" in part:
                out.append(_text_of(part["output"]))
    return "".join(out)


class _ProviderModel(FakeModel):
    """Shared plumbing: a normalised request goes through FakeModel's rules."""

    #: set by subclasses: (method, path) pairs served, everything else answers 404 (and is recorded)
    routes: tuple[tuple[str, str, str], ...] = ()

    def __init__(self, rules: list[dict[str, Any]] | None = None, *, port: int = 0, host: str = "127.0.0.1") -> None:
        super().__init__(rules, port=port, host=host)
        self.paths: list[str] = []

    def normalise(self, body: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.answer_for(self.normalise(body))

    def chat_view(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.normalise(body)

    async def _unknown(self, request: Any) -> Any:
        from aiohttp import web

        self.paths.append(f"{request.method} {request.path_qs}")
        return web.json_response({"error": {"message": f"not served: {request.path}", "type": "not_found"}}, status=404)

    async def start(self) -> _ProviderModel:
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)

        def recorded(handler: Any) -> Any:
            async def run(request: Any) -> Any:
                self.paths.append(f"{request.method} {request.path_qs}")
                return await handler(request)

            return run

        for method, path, name in self.routes:
            app.router.add_route(method, path, recorded(getattr(self, name)))
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def _json_body(self, request: Any) -> tuple[dict[str, Any] | None, Any]:
        from aiohttp import web

        try:
            body = await request.json()
        except ValueError:
            return None, web.json_response({"error": {"message": "body is not JSON"}}, status=400)
        if not isinstance(body, dict):
            return None, web.json_response({"error": {"message": "body is not an object"}}, status=400)
        self.requests.append(body)
        return body, None

    @staticmethod
    async def _sse(request: Any) -> Any:
        from aiohttp import web

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        return resp


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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m jupyter_acp.testing.fake_providers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--api", choices=["responses", "anthropic"], required=True)
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--script", help="JSON file of rules")
    args = p.parse_args(argv)
    rules = load_script(args.script) if args.script else []
    cls = FakeResponses if args.api == "responses" else FakeAnthropic
    serve_until_interrupted(
        lambda: cls(rules, port=args.port),
        lambda m: f"fake {args.api} API listening on {m.url if args.api == 'responses' else m.base}",
    )


if __name__ == "__main__":
    main()
