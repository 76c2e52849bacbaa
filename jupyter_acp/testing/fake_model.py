"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, scripted by rules.

For tests, demos and users' own CI: point any OpenAI-compatible client (litellm's ``openai/<name>``
with ``api_base=<url>``) at it and get deterministic answers, streamed or not, including tool calls.

Rules are tried in order; the first that matches the request answers it:

``match``      regex searched in the text of the last message (default: matches anything)
``role``       role the last message must have: ``"user"`` (default), ``"tool"`` or ``"any"``
``tool``       regex on the offered tool names: answer with a call to the first tool that matches
               (the rule is skipped when no offered tool matches)
``arguments``  the tool call's arguments (a JSON object, default ``{}``)
``text``       the answer's text; ``{last}`` is replaced by the last message's text
``repeat``     repeat ``text`` this many times (long streams for benchmarks)
``reasoning``  text streamed first as ``reasoning_content`` (a thinking model)
``chunk``      characters per streamed chunk (default: one word per chunk)
``delay``      seconds to wait before each streamed chunk (slow models, cancellation tests)
``status``     answer with this HTTP error status instead (``text`` is the error message)
``times``      use the rule at most this many times

Every answer reports ``usage`` (about four characters a token; with ``stream_options.include_usage`` a
streamed answer ends with a usage chunk, as OpenAI's does).  ``images_of(message)`` lists the image URLs a
request's message carried.

With no rule matching, a tool result is answered ``"Tool result: {last}"`` and anything else
``"You said: {last}"``.

Use it in-process (``FakeModel(rules).start_in_thread()`` or ``await FakeModel(rules).start()``) or as
``python -m jupyter_acp.testing.fake_model --port N --script rules.json`` (a JSON list of rules, or an
object with a ``rules`` list).  Every request body is kept in ``FakeModel.requests``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import sys
import threading
import time
from typing import Any, Self

_ids = itertools.count(1)


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def images_of(message: dict[str, Any]) -> list[str]:
    """The image URLs (``data:`` URLs from the built-in agent) in a chat message's content parts."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        str((p.get("image_url") or {}).get("url", "")) if isinstance(p.get("image_url"), dict) else str(p["image_url"])
        for p in content
        if isinstance(p, dict) and p.get("type") == "image_url" and p.get("image_url")
    ]


def usage_of(body: dict[str, Any], answer: dict[str, Any]) -> dict[str, int]:
    """Token counts as a provider reports them: about four characters a token (an image counts 85)."""
    prompt = 0
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            prompt += len(message_text(m)) // 4 + 4 + 85 * len(images_of(m))
    completion = len(answer.get("text") or "") // 4 + len(answer.get("reasoning") or "") // 4 + 1
    if answer.get("tool_call"):
        completion += len(json.dumps(answer["tool_call"])) // 4
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _split(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size:
        return [text[i : i + size] for i in range(0, len(text), size)]
    return re.findall(r"\S*\s*|\s+", text)[:-1] or [text]


class FakeModel:
    """The server.  ``url`` (``http://127.0.0.1:PORT/v1``) is what clients take as their API base."""

    def __init__(self, rules: list[dict[str, Any]] | None = None, *, port: int = 0, host: str = "127.0.0.1") -> None:
        self.rules = [dict(r) for r in (rules or [])]
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] = []
        #: (start, end) wall-clock times of every request served, answer streamed to its end included
        self.spans: list[tuple[float, float]] = []
        self._uses: dict[int, int] = {}
        self._runner: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def agent_entry(self, *args: str, model: str = "openai/fake", **env: str) -> dict[str, Any]:
        """A ``c.JupyterACP.agents`` entry: the built-in agent talking to this fake model."""
        import sys

        return {
            "command": sys.executable,
            "args": ["-m", "jupyter_acp.agent", *args],
            "env": {"JUPYTER_ACP_MODEL": model, "JUPYTER_ACP_API_BASE": self.url, "OPENAI_API_KEY": "sk-fake", **env},
        }

    # -- what the model was sent -----------------------------------------------------------------
    def chat_view(self, body: dict[str, Any]) -> dict[str, Any]:
        """A request in the chat-completions shape (provider fakes translate theirs)."""
        return body

    def tool_results(self) -> list[str]:
        """The text of every tool result the model was sent, in order (what the model saw of a tool's answer)."""
        out = []
        for body in list(self.requests):
            for m in self.chat_view(body).get("messages") or []:
                if isinstance(m, dict) and m.get("role") == "tool":
                    out.append(message_text(m))
        return out

    def busy_seconds(self, since: float, until: float) -> float:
        """Seconds between ``since`` and ``until`` (wall clock) during which the model was answering a request:
        the model's own time in a turn, which no client can save (requests at once counted once)."""
        total, reach = 0.0, since
        for start, end in sorted(self.spans):
            start, end = max(start, reach), min(end, until)
            if end > start:
                total += end - start
                reach = end
        return total

    # -- choosing an answer ----------------------------------------------------------------------
    def answer_for(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        last_role = last.get("role", "user")
        last_text = message_text(last)
        tool_names = [(t.get("function") or {}).get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
        for i, rule in enumerate(self.rules):
            if rule.get("times") is not None and self._uses.get(i, 0) >= int(rule["times"]):
                continue
            role = rule.get("role", "user")
            if role != "any" and role != last_role:
                continue
            if rule.get("match") is not None and not re.search(rule["match"], last_text, re.S):
                continue
            answer: dict[str, Any] = {k: rule[k] for k in ("reasoning", "chunk", "delay", "status") if k in rule}
            if rule.get("tool") is not None:
                name = next((n for n in tool_names if re.search(rule["tool"], n)), None)
                if name is None:
                    continue
                answer["tool_call"] = {"name": name, "arguments": rule.get("arguments") or {}}
                answer["text"] = rule.get("text", "").replace("{last}", last_text)
            else:
                answer["text"] = rule.get("text", "").replace("{last}", last_text) * int(rule.get("repeat", 1))
            self._uses[i] = self._uses.get(i, 0) + 1
            return answer
        if last_role == "tool":
            return {"text": f"Tool result: {last_text}"}
        return {"text": f"You said: {last_text}"}

    # -- HTTP ------------------------------------------------------------------------------------
    async def _completions(self, request: Any) -> Any:
        from aiohttp import web

        try:
            body = await request.json()
        except ValueError:
            return web.json_response(
                {"error": {"message": "body is not JSON", "type": "invalid_request_error"}}, status=400
            )
        self.requests.append(body)
        answer = self.answer_for(body)
        model = body.get("model", "fake")
        if answer.get("status"):
            err = {"error": {"message": answer.get("text") or "scripted error", "type": "server_error", "code": None}}
            return web.json_response(err, status=int(answer["status"]))
        cid = f"chatcmpl-{next(_ids)}"
        created = int(time.time())
        tool_call = answer.get("tool_call")
        call_id = f"call_{next(_ids)}"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": answer.get("text") or None}
            if answer.get("reasoning"):
                message["reasoning_content"] = answer["reasoning"]
            if tool_call:
                message["tool_calls"] = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool_call["name"], "arguments": json.dumps(tool_call["arguments"])},
                    }
                ]
            return web.json_response(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_call else "stop"}
                    ],
                    "usage": usage_of(body, answer),
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        delay = float(answer.get("delay") or 0)

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        await send({"role": "assistant", "content": ""})
        size = answer.get("chunk")
        for piece in _split(answer.get("reasoning") or "", size):
            if delay:
                await asyncio.sleep(delay)
            await send({"reasoning_content": piece})
        for piece in _split(answer.get("text") or "", size):
            if delay:
                await asyncio.sleep(delay)
            await send({"content": piece})
        if tool_call:
            args = json.dumps(tool_call["arguments"])
            await send(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": tool_call["name"], "arguments": ""},
                        }
                    ]
                }
            )
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                await send({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
        await send({}, "tool_calls" if tool_call else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            # as OpenAI does: one last chunk without choices, with the usage
            last = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": []}
            last["usage"] = usage_of(body, answer)
            await resp.write(b"data: " + json.dumps(last).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _models(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "fake"}]})

    def _add_routes(self, app: Any) -> None:
        """The wire format's routes (the provider servers of ``fake_providers`` serve others)."""
        for prefix in ("/v1", ""):
            app.router.add_post(prefix + "/chat/completions", self._completions)
            app.router.add_get(prefix + "/models", self._models)

    async def start(self) -> Self:
        """Start serving in the running event loop."""
        from aiohttp import web

        @web.middleware
        async def timed(request: Any, handler: Any) -> Any:
            started = time.time()
            try:
                return await handler(request)
            finally:
                self.spans.append((started, time.time()))

        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[timed])
        self._add_routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- in a thread of its own (synchronous tests) ----------------------------------------------
    def start_in_thread(self) -> FakeModel:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # pragma: no cover - reported to the caller
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-model", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise failure[0]
        return self

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FakeModel:
        return self.start_in_thread()

    def __exit__(self, *exc: Any) -> None:
        self.stop_thread()


def load_script(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, dict):
        data = data.get("rules") or []
    if not isinstance(data, list):
        raise ValueError("a script is a JSON list of rules or an object with a 'rules' list")
    return data


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m jupyter_acp.testing.fake_model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--script", help="JSON file of rules")
    args = p.parse_args(argv)
    rules = load_script(args.script) if args.script else []
    serve_until_interrupted(lambda: FakeModel(rules, port=args.port), lambda m: f"fake model listening on {m.url}")


def serve_until_interrupted(make: Any, banner: Any) -> None:
    """Run one fake server from the command line until Ctrl+C (shared by every fake's ``main``)."""

    async def serve() -> None:
        model = await make().start()
        print(banner(model), flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(0)


if __name__ == "__main__":
    main()
