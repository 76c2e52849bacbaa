"""The tools through the client-tools channel, with a real agent subprocess in request mode."""

from __future__ import annotations

import json
import os
import sys

import pytest

AGENT = os.path.join(os.path.dirname(__file__), "agent.py")


@pytest.fixture
def acp_agents():
    entry = {
        "command": sys.executable,
        "args": [AGENT],
        "tool_channel": "client-tools",
        "client_tools_discovery": "request",
    }
    return {"tools": entry, "other": entry}


def last_text(events, turn_id):
    texts = [e["update"]["content"]["text"] for e in events if e["type"] == "session_update"]
    return texts[-1]


async def test_request_mode_lists_follow_each_notebook_and_calls_are_bound(make_notebook, start_kernel, api, acp):
    py = make_notebook("one/py.ipynb", ["x = 1"])
    bare = make_notebook("one/bare.ipynb", ["y = 2"])
    elsewhere = make_notebook("two/far.ipynb", ["z = 3"])
    await start_kernel(py)
    sessions = [await api.open(p, "tools") for p in (py, bare, elsewhere)]

    lists = []
    for s in sessions:
        turn = await api.prompt(s["id"], "tools")
        events = await api.wait_turn_end(s["id"], turn, timeout=60)
        lists.append(json.loads(last_text(events, turn)))
    assert "client_execute_cells" in lists[0] and "client_list_variables" in lists[0]
    assert "client_execute_cells" not in lists[1] and "client_notebook_outline" in lists[1]
    assert lists[0][-1].endswith("/one") and lists[2][-1].endswith("/two")

    # a call through the pipe answers for the session's own notebook
    turn = await api.prompt(sessions[1]["id"], "call _jupyter-acp/notebook_outline {}")
    events = await api.wait_turn_end(sessions[1]["id"], turn, timeout=60)
    answer = json.loads(last_text(events, turn))
    assert answer["result"]["structuredContent"]["path"] == "one/bare.ipynb"

    # a call naming another agent's session is refused
    foreign = await api.open(py, "other")
    turn = await api.prompt(foreign["id"], "tools")  # make sure it is set up
    await api.wait_turn_end(foreign["id"], turn, timeout=60)
    foreign_acp = acp.hub.get(foreign["id"]).acp_session_id
    turn = await api.prompt(sessions[1]["id"], f"call _jupyter-acp/notebook_outline {{}} {foreign_acp}")
    events = await api.wait_turn_end(sessions[1]["id"], turn, timeout=60)
    answer = json.loads(last_text(events, turn))
    assert "error" in answer and "does not own" in answer["error"]["message"]
