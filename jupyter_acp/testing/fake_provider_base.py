"""What the fake provider servers share: an aiohttp server that records every request and path,
turns a provider's request into the chat-completions shape :class:`.fake_model.FakeModel`'s rules
match, and streams SSE; plus the text of a message in any provider's shape.

Split from ``fake_providers`` so each wire format (``fake_responses``, ``fake_anthropic``) is a
module of its own on top of this one.
"""

from __future__ import annotations

import itertools
from typing import Any

from .fake_model import FakeModel

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

    def _add_routes(self, app: Any) -> None:
        def recorded(handler: Any) -> Any:
            async def run(request: Any) -> Any:
                self.paths.append(f"{request.method} {request.path_qs}")
                return await handler(request)

            return run

        for method, path, name in self.routes:
            app.router.add_route(method, path, recorded(getattr(self, name)))
        app.router.add_route("*", "/{tail:.*}", self._unknown)

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
