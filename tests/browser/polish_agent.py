"""A scripted ACP agent for the panel's rough edges: the prompt's first word picks the scene.

``python tests/browser/polish_agent.py``

* ``think``: a thought, then an answer (the thought is finished: "Thought", not "Thinking…").
* ``ponder``: a thought, then nothing until the turn is cancelled (Esc) or 60 s pass.
* ``reject``: a permission request (Allow / Reject); a rejected call ends ``failed``, as agents report it.
* ``code``: an answer with headings and code blocks (a long line, indentation, a language label).
* ``plot``: a tool call whose result carries an image (ACP image content and an MCP-style ``rawOutput``)
  and an HTML table.
* ``error``: the turn fails with a raw provider error (``litellm.AuthenticationError ...``).
* anything else: the scripted ``stream`` behaviour (three numbered chunks).
"""

from __future__ import annotations

import asyncio
import base64
import struct
import zlib
from typing import Any


def png(width: int, height: int, rgb: tuple[int, int, int] = (30, 120, 200)) -> str:
    """A solid ``width`` x ``height`` PNG, base64 (a stand-in for a matplotlib figure)."""
    row = b"\x00" + bytes(rgb) * width
    raw = row * height

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    body = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(body).decode()


CODE_ANSWER = """# A heading the size of a chat heading

Here is the fix:

```python
def monthly_totals(df):
    # indentation survives: no wrapping
    return df.groupby(df["date"].dt.to_period("M"))["amount"].sum().rename("total").reset_index().sort_values("date", ascending=True)
```

## Second heading

```
plain block without a language
```
"""

TABLE_HTML = (
    "<table><thead><tr><th></th><th>month</th><th>total</th></tr></thead><tbody>"
    "<tr><th>0</th><td>2024-01</td><td>120</td></tr><tr><th>1</th><td>2024-02</td><td>98</td></tr>"
    "</tbody></table>"
)

RAW_ERROR = (
    "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided: sk-fake. "
    "You can find your API key at https://platform.openai.com/account/api-keys. (code -32603)"
)


def _agent_class() -> type:
    from jupyter_acp.protocol.jsonrpc import RpcError
    from jupyter_acp.testing.agents import ScriptedAgent

    class PolishAgent(ScriptedAgent):
        async def on_session_prompt(self, params: dict[str, Any]) -> Any:
            sid = params.get("sessionId")
            self.cancelled.discard(sid)
            texts = [b.get("text", "") for b in params.get("prompt") or [] if b.get("type") == "text"]
            text = texts[0].strip() if texts else ""
            scene = text.split(" ", 1)[0]
            if scene == "think":
                await self._chunk(sid, "Let me look at the data first.", "agent_thought_chunk")
                await asyncio.sleep(0.2)
                await self._chunk(sid, "The answer is 42.")
                return {"stopReason": "end_turn"}
            if scene == "ponder":
                await self._chunk(sid, "Pondering for a long while…", "agent_thought_chunk")
                for _ in range(600):
                    if sid in self.cancelled:
                        return {"stopReason": "cancelled"}
                    await asyncio.sleep(0.1)
                return {"stopReason": "end_turn"}
            if scene == "reject":
                call = {
                    "toolCallId": "call_edit",
                    "title": "Edit cell c1",
                    "kind": "edit",
                    "status": "pending",
                    "rawInput": {"cell_id": "c1", "source": "x = 2"},
                }
                await self._update(sid, {"sessionUpdate": "tool_call", **call})
                answer = await self.conn.request(
                    "session/request_permission",
                    {
                        "sessionId": sid,
                        "toolCall": call,
                        "options": [
                            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                        ],
                    },
                )
                outcome = (answer or {}).get("outcome") or {}
                if outcome.get("optionId") == "reject":
                    await self._update(
                        sid,
                        {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": "call_edit",
                            "status": "failed",
                            "rawOutput": {"error": "the user rejected this tool call"},
                        },
                    )
                    await self._chunk(sid, "You rejected the edit; nothing changed.")
                else:
                    await self._update(
                        sid, {"sessionUpdate": "tool_call_update", "toolCallId": "call_edit", "status": "completed"}
                    )
                    await self._chunk(sid, "Edited.")
                return {"stopReason": "end_turn"}
            if scene == "code":
                await self._chunk(sid, CODE_ANSWER)
                return {"stopReason": "end_turn"}
            if scene == "plot":
                image = png(640, 480)
                await self._update(
                    sid,
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": "call_plot",
                        "title": "Run cell c2",
                        "kind": "execute",
                        "status": "in_progress",
                        "rawInput": {"cell_ids": ["c2"]},
                    },
                )
                await self._update(
                    sid,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": "call_plot",
                        "status": "completed",
                        "content": [
                            {
                                "type": "content",
                                "content": {"type": "text", "text": "[display] image/png image (attached as image #1)"},
                            },
                            {
                                "type": "content",
                                "content": {
                                    "type": "resource",
                                    "resource": {"uri": "output:c2/1", "mimeType": "text/html", "text": TABLE_HTML},
                                },
                            },
                        ],
                        # the built-in agent's rawOutput: the MCP result, whose image blocks are the plots
                        "rawOutput": {
                            "content": [
                                {"type": "text", "text": "[display] image/png image (attached as image #1)"},
                                {"type": "image", "data": image, "mimeType": "image/png"},
                            ],
                            "structuredContent": {
                                "status": "ok",
                                "images": [{"type": "image", "mime": "image/png", "index": 1}],
                            },
                        },
                    },
                )
                await self._chunk(sid, "See the chart above.")
                return {"stopReason": "end_turn"}
            if scene == "error":
                raise RpcError(-32603, RAW_ERROR)
            return await super().on_session_prompt(params)

    return PolishAgent


if __name__ == "__main__":
    from jupyter_acp.testing.agents import serve

    serve(_agent_class())
