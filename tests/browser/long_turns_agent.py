"""A scripted ACP agent for long turns in the panel: the prompt's first word picks the scene.

``python tests/browser/long_turns_agent.py``

* ``plan N``: a three-step plan (the first done at once, the second in progress), a line of text, then
  nothing for N seconds (or until the turn is cancelled); then every step done and the turn ends.
* anything else: answers ``You said: TEXT`` (a queued prompt shows up as its own turn).
"""

from __future__ import annotations

import asyncio
from typing import Any

STEPS = ["Read the data", "Fit the model", "Write the summary"]


def _agent_class() -> type:
    from jupyter_acp.testing.agents import ScriptedAgent

    class LongTurnsAgent(ScriptedAgent):
        async def on_session_prompt(self, params: dict[str, Any]) -> Any:
            sid = params.get("sessionId")
            self.cancelled.discard(sid)
            texts = [b.get("text", "") for b in params.get("prompt") or [] if b.get("type") == "text"]
            text = texts[0].strip() if texts else ""
            scene, _, rest = text.partition(" ")
            if scene == "plan":
                hold = float(rest or 60)
                await self._plan(sid, ["completed", "in_progress", "pending"])
                await self._chunk(sid, "Reading the data, then fitting the model.")
                for _ in range(int(hold * 10)):
                    if sid in self.cancelled:
                        return {"stopReason": "cancelled"}
                    await asyncio.sleep(0.1)
                await self._plan(sid, ["completed", "completed", "completed"])
                await self._chunk(sid, " Done: the summary is written.")
                return {"stopReason": "end_turn"}
            await self._chunk(sid, f"You said: {text}")
            return {"stopReason": "end_turn"}

        async def _plan(self, sid: str, states: list[str]) -> None:
            entries = [{"content": c, "priority": "medium", "status": s} for c, s in zip(STEPS, states, strict=True)]
            await self._update(sid, {"sessionUpdate": "plan", "entries": entries})

    return LongTurnsAgent


if __name__ == "__main__":
    from jupyter_acp.testing.agents import serve

    serve(_agent_class())
