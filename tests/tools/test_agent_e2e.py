"""The built-in agent on the fake model edits a live notebook through the client tools, end to end.

One permission card per change: when the user allowed the agent's own request for a tool call,
the client's gate does not ask again for that same call.
"""

from __future__ import annotations

import json

import pytest

from jupyter_acp.testing.fake_model import FakeModel

from ..conftest import Api, message_text


@pytest.fixture
def tools_config():
    return {"permission_policy": "ask"}


@pytest.fixture
def fake_model():
    rules = [
        {
            "tool": "client_edit_cell",
            "match": "change x",
            "arguments": {"cell_id": "cellA", "old_string": "x = 1", "new_string": "x = 2"},
            "times": 1,
        },
        {"role": "tool", "text": "Done: x is 2 now."},
    ]
    with FakeModel(rules) as fm:
        yield fm


@pytest.fixture
def acp_agents(fake_model):
    return {"builtin": fake_model.agent_entry()}


async def test_agent_edits_a_cell_after_one_permission(jp_fetch, acp, make_notebook, fake_model, jp_root_dir):
    import nbformat

    api = Api(jp_fetch)
    path = make_notebook("work/nb.ipynb", ["x = 1"])
    nb = nbformat.read(jp_root_dir / path, as_version=4)
    nb.cells[0].id = "cellA"
    nbformat.write(nb, jp_root_dir / path)
    s = await api.open(path, "builtin")
    turn = await api.prompt(s["id"], "please change x")
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs), 60)
    requests = [e for e in events if e["type"] == "permission_request"]
    assert len(requests) == 1 and requests[0]["source"] == "agent"
    allow = next(o for o in requests[0]["options"] if o["kind"] == "allow_once")
    await api.call(
        "POST", "sessions", s["id"], "permissions", requests[0]["request_id"], body={"option_id": allow["optionId"]}
    )
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    assert [e for e in events if e["type"] == "permission_request"] == requests, "no second card for the same call"
    end = [e for e in events if e["type"] == "turn_ended"][-1]
    assert end.get("stop_reason") == "end_turn", end
    assert "x is 2 now" in message_text(events, turn)
    updates = [e["update"] for e in events if e["type"] == "session_update"]
    done = [u for u in updates if u.get("sessionUpdate") == "tool_call_update" and u.get("status") == "completed"]
    assert done, "the tool call completed"
    doc = await acp.tools.services.notebooks.open(path)
    assert [c.get("source") for c in doc.cells()] == ["x = 2"]
    tool_msgs = [m for r in fake_model.requests for m in r.get("messages", []) if m.get("role") == "tool"]
    assert tool_msgs and "error" not in json.dumps(tool_msgs[-1]).lower()[:200]
