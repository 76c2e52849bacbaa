"""A scripted ACP agent that speaks the client-tools convention in request mode (for the tool tests).

At ``session/new`` it asks ``_org.mini-me/tools/list`` while the client still awaits the answer, and
remembers the list per session.  Prompts:
  ``tools``                          -> the names it was given for this session (JSON)
  ``call <method> <json> [<sid>]``   -> calls a client tool (optionally naming another session id)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any


class Agent:
    def __init__(self) -> None:
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.tools: dict[str, list[str]] = {}
        self.count = 0

    def send(self, msg: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await fut

    def chunk(self, sid: str, text: str) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": sid,
                    "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
                },
            }
        )

    async def handle(self, msg: dict[str, Any]) -> None:
        if "method" not in msg:
            fut = self.pending.pop(msg.get("id"), None)
            if fut and not fut.done():
                fut.set_result({"error": msg["error"]} if "error" in msg else {"result": msg.get("result")})
            return
        method, params, rid = msg["method"], msg.get("params") or {}, msg.get("id")
        result: Any = None
        if method == "initialize":
            result = {
                "protocolVersion": 1,
                "authMethods": [],
                "agentCapabilities": {"_meta": {"org.mini-me": {"clientTools": {"discovery": ["request"]}}}},
            }
        elif method == "session/new":
            self.count += 1
            sid = f"s{self.count}-{os.getpid()}"
            answer = await self.request(
                "_org.mini-me/tools/list",
                {"cwd": params.get("cwd"), "_meta": {"org.mini-me": {"sessionId": sid, "reason": "new"}}},
            )
            tools = (answer.get("result") or {}).get("tools") or []
            self.tools[sid] = [t["name"] for t in tools] + [f"cwd={params.get('cwd')}"]
            result = {"sessionId": sid}
        elif method == "session/prompt":
            sid = params["sessionId"]
            text = params["prompt"][-1].get("text", "")
            if text == "tools":
                self.chunk(sid, json.dumps(self.tools.get(sid)))
            elif text.startswith("call "):
                parts = text.split(" ", 3)
                method_name, args = parts[1], json.loads(parts[2])
                as_sid = parts[3] if len(parts) > 3 else sid
                answer = await self.request(method_name, {**args, "_meta": {"org.mini-me": {"sessionId": as_sid}}})
                self.chunk(sid, json.dumps(answer))
            result = {"stopReason": "end_turn"}
        elif rid is not None:
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
            return
        if rid is not None:
            self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            asyncio.ensure_future(self.handle(msg))


if __name__ == "__main__":
    asyncio.run(Agent().main())
