"""An ACP agent built on the ACP SDK (``agent-client-protocol``, a test dependency) that speaks MCP over ACP.

``python tests/sdk_mcp_acp_agent.py`` advertises ``mcpCapabilities.acp`` (and nothing else of MCP), keeps the
``"acp"`` servers of ``session/new`` (parsed by the SDK's own schema: an entry off the schema would be dropped), and
on each prompt does what its text says, over ``mcp/connect`` / ``mcp/message`` / ``mcp/disconnect``:

  ``servers?``                 the acp servers it was given, as JSON
  ``call TOOL {json}``         connect, initialize, call TOOL with the arguments, disconnect; answers the result
  ``list``                     connect, initialize, tools/list, disconnect; answers the tool names
  ``forged``                   mcp/connect with a server id it was never given; answers the error
  ``connect ID``               mcp/connect with server id ID (then disconnect); answers ``"connected"`` or the error
  ``stale``                    mcp/message on a connection it already disconnected; answers the error

The answer is one agent message chunk holding JSON.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from acp import RequestError, run_agent, update_agent_message_text
from acp.schema import (
    AcpMcpServer,
    AgentCapabilities,
    InitializeResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptResponse,
)


class McpOverAcpAgent:
    def __init__(self) -> None:
        self.servers: dict[str, list[str]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, **kw: Any) -> Any:
        caps = AgentCapabilities(mcp_capabilities=McpCapabilities(acp=True, http=False, sse=False))
        return InitializeResponse(protocol_version=1, agent_capabilities=caps)

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kw: Any) -> Any:
        sid = uuid.uuid4().hex
        self.servers[sid] = [s.server_id for s in mcp_servers or [] if isinstance(s, AcpMcpServer)]
        return NewSessionResponse(session_id=sid)

    async def _rpc(self, method: str, params: dict[str, Any]) -> Any:
        return await self.conn._conn.send_request(method, params)

    async def _connect(self, sid: str) -> str:
        answer = await self._rpc("mcp/connect", {"serverId": self.servers[sid][0]})
        cid = answer["connectionId"]
        await self._rpc(
            "mcp/message",
            {
                "connectionId": cid,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "sdk-agent"}},
            },
        )
        await self.conn._conn.send_notification(
            "mcp/message", {"connectionId": cid, "method": "notifications/initialized"}
        )
        return cid

    async def _do(self, sid: str, text: str) -> Any:
        verb, _, rest = text.partition(" ")
        if verb == "servers?":
            return self.servers[sid]
        if verb == "forged":
            await self._rpc("mcp/connect", {"serverId": "f" * 32})
            return "forged id accepted"
        if verb == "connect":
            answer = await self._rpc("mcp/connect", {"serverId": rest})
            await self._rpc("mcp/disconnect", {"connectionId": answer["connectionId"]})
            return "connected"
        cid = await self._connect(sid)
        try:
            if verb == "list":
                listed = await self._rpc("mcp/message", {"connectionId": cid, "method": "tools/list", "params": {}})
                return [t["name"] for t in listed["tools"]]
            if verb == "stale":
                await self._rpc("mcp/disconnect", {"connectionId": cid})
                await self._rpc("mcp/message", {"connectionId": cid, "method": "tools/list", "params": {}})
                return "stale connection accepted"
            name, _, args = rest.partition(" ")
            params = {"name": name, "arguments": json.loads(args or "{}")}
            return await self._rpc("mcp/message", {"connectionId": cid, "method": "tools/call", "params": params})
        finally:
            if verb != "stale":
                await self._rpc("mcp/disconnect", {"connectionId": cid})

    async def prompt(self, session_id: str, prompt: list[Any], **kw: Any) -> Any:
        text = " ".join(getattr(b, "text", "") for b in prompt).strip()
        try:
            result: Any = await self._do(session_id, text)
        except RequestError as exc:
            result = {"error": {"code": exc.code, "message": str(exc)}}
        await self.conn.session_update(session_id, update_agent_message_text(json.dumps(result)))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kw: Any) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(run_agent(McpOverAcpAgent()))
