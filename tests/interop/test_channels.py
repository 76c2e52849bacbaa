"""One scenario, the built-in agent, every channel: client-tools, loopback MCP over HTTP, the stdio shim.

The model is the same scripted fake for each; the only difference is how the tools reach the agent.
Each channel must serve both calls and give the very same answer, the notebook's cells as read.

| channel      | tools reach the agent as                      | the agent's own permission requests        |
|--------------|-----------------------------------------------|--------------------------------------------|
| client-tools | org.mini-me client tools over the ACP pipe    | none (the agent asks only of MCP tools)    |
| mcp-http     | loopback MCP server given in session/new      | one per call, answered for the user        |
| mcp-stdio    | ``python -m jupyter_acp.channels.mcp_stdio``  | one per call, answered for the user        |

The built-in agent asks its own permission before every MCP tool; both calls here only read, which the project's
gate never asks about, so the project answers those requests itself ("allow once", audited ``answered``) and the
user sees no card on any channel.
"""

from __future__ import annotations

import sys

import pytest

from jupyter_acp.testing.fake_model import FakeModel

from .conftest import (
    EXPECTED_ANSWER,
    EXPECTED_CELLS,
    PROMPT,
    SCENARIO_RULES,
    isolated_env,
    run_turn_answering_permissions,
    turn_summary,
    write_notebook,
)

#: channel -> the agent's own permission requests answered for the user per turn (no card is shown on any)
CHANNELS = {"client-tools": 0, "mcp-http": 2, "mcp-stdio": 2}


@pytest.fixture
def fake_model():
    with FakeModel(SCENARIO_RULES) as fm:
        yield fm


@pytest.fixture
def acp_agents(fake_model, agent_home):
    env = {
        **isolated_env(agent_home),
        "JUPYTER_ACP_MODEL": "openai/fake",
        "JUPYTER_ACP_API_BASE": fake_model.url,
        "OPENAI_API_KEY": "sk-fake",
        "JUPYTER_ACP_AGENT_STATE_DIR": str(agent_home / "state"),
    }
    return {
        f"builtin-{channel}": {
            "command": sys.executable,
            "args": ["-m", "jupyter_acp.agent"],
            "env": env,
            "tool_channel": channel,
        }
        for channel in CHANNELS
    }


@pytest.mark.parametrize("channel", list(CHANNELS))
async def test_builtin_agent_reads_the_notebook_over(channel, api, jp_root_dir, fake_model):
    path = write_notebook(jp_root_dir, "census/zebras.ipynb")
    s = await api.open(path, f"builtin-{channel}")
    turn, events = await run_turn_answering_permissions(api, s["id"], PROMPT, timeout=60)
    got = turn_summary(events, turn)
    assert got["end"].get("stop_reason") == "end_turn", got["end"]
    assert got["end"].get("tool_calls_served") == 2, got["end"]
    assert (await api.call("GET", "sessions", s["id"]))["tool_channels"] == [channel]
    # the same answer over every channel: the cells exactly as the tool read them
    assert got["text"] == EXPECTED_ANSWER
    # a read is never a card: the agent's own requests about the two reads were answered as the gate would
    assert got["permissions"] == []
    answered = [e for e in events if e["type"] == "audit" and e.get("decision") == "answered" and e["turn_id"] == turn]
    assert len(answered) == CHANNELS[channel], answered
    # and the model was handed the same tool results, whatever carried them
    tool_msgs = [m["content"] for m in fake_model.requests[-1]["messages"] if m.get("role") == "tool"]
    assert len(tool_msgs) == 2 and tool_msgs[0].startswith("notebook: census/zebras.ipynb (2 cells")
    assert tool_msgs[1] == EXPECTED_CELLS
