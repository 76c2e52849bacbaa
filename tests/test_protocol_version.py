"""The ACP version is negotiated, never assumed: an agent answering another ``protocolVersion`` than 1 is refused
with both versions named, the v2 draft by its name, and an answer with no version at all said as such."""

from __future__ import annotations

import pytest

from jupyter_acp.acp import v1

from .conftest import scripted
from .test_turns import ended


@pytest.fixture
def acp_agents():
    return {"v2": scripted("v2_draft"), "nover": scripted("no_version"), "v99": scripted("bad_version")}


@pytest.mark.parametrize(
    "agent, words",
    [
        ("v2", ["ACP protocol version 2", "the v2 draft", "speaks ACP protocol version 1 only"]),
        ("nover", ["without a protocolVersion", "speaks ACP protocol version 1"]),
        ("v99", ["protocol version 99", "this client speaks ACP protocol version 1"]),
    ],
)
async def test_an_agent_of_another_protocol_version_is_refused_with_both_versions_named(
    api, make_notebook, agent, words
):
    s = await api.open(make_notebook("nb.ipynb"), agent)
    turn = await api.prompt(s["id"], "go")
    end = ended(await api.wait_turn_end(s["id"], turn), turn)
    for word in words:
        assert word in end["error"], end["error"]
    described = {a["name"]: a for a in await api.call("GET", "agents")}[agent]
    assert described["state"] == "dead"
    assert words[0] in described["error"]


def test_only_version_1_is_spoken():
    assert v1.version_refusal("a", {"protocolVersion": 1}) is None
    # JSON true is not the integer 1, whatever Python's bool says
    assert v1.version_refusal("a", {"protocolVersion": True}) is not None
    assert "without a protocolVersion" in (v1.version_refusal("a", ["not", "an", "object"]) or "")
    assert v1.initialize_params({}, {"name": "x"})["protocolVersion"] == 1
