"""A scripted ACP agent for the panel's header meter, background badges and keyboard.

``python tests/browser/badges_agent.py``: the prompt's first word picks the scene.

* ``usage``: two ``usage_update`` reports (the second with a cost), then an answer.
* ``ask``: a finished tool call (a plain tool card), then a tool call whose permission it asks
  (Allow once / Reject); answers ``permission: OPTION_ID`` (or ends cancelled).
* ``work``: a running turn that says one line and waits until it is cancelled (or 120 s pass).
* anything else: the scripted ``stream`` behaviour (three numbered chunks).
"""

from __future__ import annotations

import asyncio
from typing import Any


def _agent_class() -> type:
    from jupyter_acp.testing.agents import ScriptedAgent

    class BadgesAgent(ScriptedAgent):
        async def on_session_prompt(self, params: dict[str, Any]) -> Any:
            sid = params.get("sessionId")
            self.cancelled.discard(sid)
            texts = [b.get("text", "") for b in params.get("prompt") or [] if b.get("type") == "text"]
            scene = (texts[0].strip() if texts else "").split(" ", 1)[0]
            if scene == "usage":
                await self._update(sid, {"sessionUpdate": "usage_update", "used": 1200, "size": 200000})
                await self._chunk(sid, "Counting tokens… ")
                await self._update(
                    sid,
                    {
                        "sessionUpdate": "usage_update",
                        "used": 53000,
                        "size": 200000,
                        "cost": {"amount": 0.045, "currency": "USD"},
                    },
                )
                await self._chunk(sid, "Counted.")
                return {"stopReason": "end_turn"}
            if scene == "ask":
                await self._update(
                    sid,
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": "call_read",
                        "title": "Read cell c1",
                        "kind": "read",
                        "status": "completed",
                        "rawInput": {"cell_id": "c1"},
                        "content": [{"type": "content", "content": {"type": "text", "text": "x = 1"}}],
                    },
                )
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
                if outcome.get("outcome") == "cancelled" or sid in self.cancelled:
                    return {"stopReason": "cancelled"}
                status = "completed" if outcome.get("optionId") == "allow" else "failed"
                await self._update(
                    sid, {"sessionUpdate": "tool_call_update", "toolCallId": "call_edit", "status": status}
                )
                await self._chunk(sid, f"permission: {outcome.get('optionId')}")
                return {"stopReason": "end_turn"}
            if scene == "work":
                await self._chunk(sid, "Working on it…")
                for _ in range(1200):
                    if sid in self.cancelled:
                        return {"stopReason": "cancelled"}
                    await asyncio.sleep(0.1)
                return {"stopReason": "end_turn"}
            return await super().on_session_prompt(params)

    return BadgesAgent


if __name__ == "__main__":
    from jupyter_acp.testing.agents import serve

    serve(_agent_class())
