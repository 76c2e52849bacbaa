"""A scripted ACP agent with every kind of session config option, for the header's pickers.

``python tests/browser/options_agent.py``: a "mode" select (category mode, which supersedes the
session's `modes`, also sent), a grouped "Model" select and an "Extended thinking" boolean.
`session/set_config_option` answers the full set; the value "refuse" is refused. A prompt saying
"switch yourself" makes the agent change its options by itself (`config_option_update`).
"""

from __future__ import annotations

import copy
from typing import Any

from jupyter_acp.protocol.jsonrpc import INVALID_PARAMS, RpcError
from jupyter_acp.testing.agents import ScriptedAgent, serve

OPTIONS = [
    {
        "id": "mode",
        "name": "Session mode",
        "category": "mode",
        "type": "select",
        "currentValue": "code",
        "options": [
            {"value": "ask", "name": "Ask", "description": "Ask before changing anything"},
            {"value": "code", "name": "Code", "description": "Edit cells and run code"},
            {"value": "plan", "name": "Plan", "description": "Only plan, change nothing"},
        ],
    },
    {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": "small",
        "options": [
            {
                "group": "fast",
                "name": "Fast",
                "options": [{"value": "small", "name": "Small"}, {"value": "refuse", "name": "Unavailable"}],
            },
            {
                "group": "smart",
                "name": "Smart",
                "options": [{"value": "large", "name": "Large", "description": "slower, better"}],
            },
        ],
    },
    {
        "id": "thinking",
        "name": "Extended thinking",
        "category": "thought_level",
        "type": "boolean",
        "currentValue": False,
    },
]


class OptionsAgent(ScriptedAgent):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.options: dict[str, list[dict[str, Any]]] = {}

    async def on_session_new(self, params: dict[str, Any]) -> Any:
        result = await super().on_session_new(params)
        sid = result["sessionId"]
        self.options[sid] = copy.deepcopy(OPTIONS)
        modes = {
            "currentModeId": "code",
            "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
        }
        return {**result, "modes": modes, "configOptions": self.options[sid]}

    async def on_session_set_config_option(self, params: dict[str, Any]) -> Any:
        opts = self.options.get(params.get("sessionId"))
        opt = next((o for o in opts or [] if o["id"] == params.get("configId")), None)
        if opt is None or params.get("value") == "refuse":
            raise RpcError(INVALID_PARAMS, "that model is not available on your plan")
        opt["currentValue"] = params.get("value")
        return {"configOptions": opts}

    async def on_session_prompt(self, params: dict[str, Any]) -> Any:
        sid = params.get("sessionId")
        texts = [b.get("text", "") for b in params.get("prompt") or [] if b.get("type") == "text"]
        if any("switch yourself" in t for t in texts) and sid in self.options:  # a preamble may follow
            for o in self.options[sid]:
                if o["id"] == "mode":
                    o["currentValue"] = "plan"
                if o["id"] == "thinking":
                    o["currentValue"] = not o["currentValue"]
            await self._update(sid, {"sessionUpdate": "config_option_update", "configOptions": self.options[sid]})
            await self._chunk(sid, "I switched to planning.")
            return {"stopReason": "end_turn"}
        return await super().on_session_prompt(params)


if __name__ == "__main__":
    serve(OptionsAgent)
