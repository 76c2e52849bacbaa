"""A test client for the built-in agent: a real subprocess driven over stdio with the project's wire."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from jupyter_acp.protocol.jsonrpc import METHOD_NOT_FOUND, JsonRpcConnection, RpcError

AGENT = [sys.executable, "-m", "jupyter_acp.agent"]


class AgentClient:
    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.conn: JsonRpcConnection | None = None
        self.updates: dict[str, list[dict[str, Any]]] = {}
        self.events: list[tuple[str, Any]] = []  # ("update", sid) / ("request", method) in arrival order
        self.handlers: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.init_result: dict[str, Any] = {}
        self.stderr_path: str | None = None
        self.bad_frames: list[str] = []  # anything on the agent's stdout that is not JSON-RPC

    # handler protocol
    def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/update":
            sid = params.get("sessionId")
            self.updates.setdefault(sid, []).append(params.get("update"))
            self.events.append(("update", sid))

    async def handle_request(self, method: str, params: Any) -> Any:
        self.requests.append((method, params))
        self.events.append(("request", method))
        handler = self.handlers.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, "Method not found")
        return await handler(params or {})

    @classmethod
    async def start(
        cls,
        *args: str,
        env: dict[str, str] | None = None,
        stderr_path: str | None = None,
        initialize: dict[str, Any] | None = None,
    ) -> AgentClient:
        self = cls()
        full_env = {**os.environ, **(env or {})}
        self.stderr_path = stderr_path
        err = open(stderr_path, "wb") if stderr_path else asyncio.subprocess.DEVNULL
        self.proc = await asyncio.create_subprocess_exec(
            *AGENT,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=full_env,
            limit=1 << 24,
        )
        if stderr_path:
            err.close()  # type: ignore[union-attr]
        assert self.proc.stdin and self.proc.stdout
        self.conn = JsonRpcConnection(
            self.proc.stdout,
            self.proc.stdin,
            self,
            max_frame_bytes=64 << 20,
            name="agent",
            on_bad_frame=self.bad_frames.append,
        )
        self.conn.start()
        if initialize is not None:
            self.init_result = await self.request("initialize", initialize)
        return self

    async def request(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
        assert self.conn
        return await self.conn.request(method, params, timeout=timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        assert self.conn
        await self.conn.notify(method, params)

    async def new_session(self, cwd: str, mcp_servers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return await self.request("session/new", {"cwd": cwd, "mcpServers": mcp_servers or []})

    async def prompt(self, sid: str, text: str, timeout: float = 60.0) -> dict[str, Any]:
        return await self.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, timeout
        )

    def text(self, sid: str, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u["content"]["text"] for u in self.updates.get(sid, []) if u.get("sessionUpdate") == kind and "content" in u
        )

    def kinds(self, sid: str) -> list[str]:
        return [u.get("sessionUpdate") for u in self.updates.get(sid, [])]

    async def close(self, timeout: float = 20.0) -> int | None:
        if self.conn:
            self.conn.close()
        if self.proc is None:
            return None
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            return await self.proc.wait()


def initialize_params(client_tools: dict[str, Any] | None = None) -> dict[str, Any]:
    caps: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}}
    if client_tools is not None:
        caps["_meta"] = {"org.mini-me": {"clientTools": client_tools}}
    return {"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": {"name": "test", "version": "0"}}
