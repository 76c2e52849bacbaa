"""A scripted ACP agent that runs its commands in the client's terminals (``terminal/*``), for the sidebar's card.

``python tests/browser/terminal_agent.py``: the prompt ``run the tests`` reports a tool call, runs a slow
test-like command in a client terminal (``terminal/create``), embeds it in the tool call's content
(``{"type": "terminal"}``), waits for its exit, releases it and says how it went. Anything else is a script
of the hostile agent (``jupyter_acp.testing.hostile``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from jupyter_acp.protocol.jsonrpc import serve_stdio  # the lab's PYTHONPATH holds this checkout
from jupyter_acp.testing.hostile import HostileAgent

SLOW_TESTS = (
    'for i in 1 2 3 4 5 6 7 8 9 10; do echo "tests/test_sales.py::test_month_$i PASSED    [$((i * 10))%]"; '
    "sleep 0.6; done; echo; echo '10 passed in 6.02s'"
)


def script(command: str) -> list[dict[str, Any]]:
    call = "call_tests"
    return [
        {
            "do": "update",
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": call,
                "title": "Run the tests",
                "kind": "execute",
                "status": "pending",
                "rawInput": {"command": command},
            },
        },
        {"do": "terminal", "method": "create", "params": {"command": command}, "as": "t"},
        {
            "do": "update",
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call,
                "status": "in_progress",
                "content": [{"type": "terminal", "terminalId": "$t"}],
            },
        },
        {"do": "terminal", "method": "wait_for_exit", "params": {"terminalId": "$t"}},
        {"do": "terminal", "method": "output", "params": {"terminalId": "$t"}},
        {"do": "terminal", "method": "release", "params": {"terminalId": "$t"}},
        {"do": "update", "update": {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"}},
    ]


class TerminalAgent(HostileAgent):
    async def handle_request(self, method: str, params: Any) -> Any:
        if method == "session/prompt" and isinstance(params, dict):
            texts = [b.get("text", "") for b in params.get("prompt") or [] if b.get("type") == "text"]
            if texts and texts[0].strip() == "run the tests":
                sid = str(params.get("sessionId"))
                results = await self.run(sid, script(SLOW_TESTS))
                exit_status = results[3].get("ok") or {}
                output = (results[4].get("ok") or {}).get("output", "")
                last = output.strip().splitlines()[-1] if output.strip() else "(no output)"
                if "error" in results[1]:
                    await self._say(sid, f"I could not run the tests: {results[1]['error']['message']}")
                else:
                    await self._say(sid, f"The tests ran (exit code {exit_status.get('exitCode')}): {last}")
                return {"stopReason": "end_turn"}
        return await super().handle_request(method, params)


def main() -> None:
    async def run() -> None:
        conn = await serve_stdio(lambda c: TerminalAgent(c, None), max_frame_bytes=64 * 1024 * 1024)
        await conn.wait_closed()

    asyncio.run(run())


if __name__ == "__main__":
    main()
