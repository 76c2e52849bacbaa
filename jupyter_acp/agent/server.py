"""The agent's ACP side: sessions, prompts, and the echo answer."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from typing import Any

from .. import __version__
from ..acp.wire import INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcConnection, RpcError, serve_stdio

NO_MODEL_MESSAGE = (
    "No model is configured for the built-in agent. Set JUPYTER_ACP_MODEL to a litellm model string "
    "(for example `openai/gpt-4o-mini` with OPENAI_API_KEY, or `ollama/llama3` with OLLAMA_API_BASE) "
    "and restart Jupyter, or pick the `echo` agent to try things out."
)


class BuiltinAgent:
    def __init__(self, conn: JsonRpcConnection, args: argparse.Namespace) -> None:
        self.conn = conn
        self.args = args
        self.sessions: dict[str, dict[str, Any]] = {}
        self.cancelled: set[str] = set()

    def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/cancel" and isinstance(params, dict):
            self.cancelled.add(str(params.get("sessionId")))

    async def handle_request(self, method: str, params: Any) -> Any:
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            return {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False, "promptCapabilities": {"embeddedContext": True}},
                "agentInfo": {"name": "jupyter-acp-agent", "title": "Jupyter ACP built-in agent", "version": __version__},
                "authMethods": [],
            }
        if method == "session/new":
            sid = "jacp_" + uuid.uuid4().hex
            self.sessions[sid] = {"cwd": params.get("cwd")}
            return {"sessionId": sid}
        if method == "session/prompt":
            sid = params.get("sessionId")
            if sid not in self.sessions:
                raise RpcError(INVALID_PARAMS, f"unknown session {sid!r}")
            self.cancelled.discard(sid)
            text = " ".join(b.get("text", "") for b in params.get("prompt") or [] if b.get("type") == "text")
            if self.args.echo:
                return await self._echo(sid, text)
            await self._say(sid, "agent_message_chunk", NO_MODEL_MESSAGE)
            return {"stopReason": "end_turn"}
        raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})

    async def _say(self, sid: str, kind: str, text: str) -> None:
        await self.conn.notify(
            "session/update", {"sessionId": sid, "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}}
        )

    async def _echo(self, sid: str, text: str) -> dict[str, Any]:
        await self._say(sid, "agent_thought_chunk", "Echoing your prompt.")
        words = text.split(" ")
        for i, word in enumerate(words):
            if sid in self.cancelled:
                return {"stopReason": "cancelled"}
            await self._say(sid, "agent_message_chunk", word if i == 0 else " " + word)
            await asyncio.sleep(0)
        return {"stopReason": "end_turn"}


async def run(args: argparse.Namespace) -> None:
    conn = await serve_stdio(lambda c: BuiltinAgent(c, args))
    await conn.wait_closed()
