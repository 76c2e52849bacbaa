"""The spine: agents listed, a session per notebook, an echo turn end to end."""

from __future__ import annotations

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import message_text


async def test_agents_listed(api):
    agents = await api.call("GET", "agents")
    names = {a["name"]: a for a in agents}
    assert {"builtin", "echo"} <= set(names)
    assert names["echo"]["default"] is True
    assert names["builtin"]["available"] is True


async def test_echo_turn_end_to_end(api, make_notebook, jp_root_dir):
    nb = make_notebook("sub/dir/nb.ipynb")
    session = await api.open(nb)
    assert session["notebook"] == "sub/dir/nb.ipynb"
    assert session["agent"] == "echo"
    assert session["cwd"] == str(jp_root_dir / "sub" / "dir")
    again = await api.open(nb)
    assert again["id"] == session["id"], "opening twice returns the same session"
    turn = await api.prompt(session["id"], "hello there notebook")
    events = await api.wait_turn_end(session["id"], turn)
    assert message_text(events, turn) == "hello there notebook"
    assert message_text(events, turn, "agent_thought_chunk")
    ended = [e for e in events if e["type"] == "turn_ended"][-1]
    assert ended["stop_reason"] == "end_turn"
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_unknown_notebook_and_agent(api, make_notebook):
    with pytest.raises(HTTPClientError) as err:
        await api.open("missing.ipynb")
    assert err.value.code == 404
    nb = make_notebook("a.ipynb")
    with pytest.raises(HTTPClientError) as err:
        await api.open(nb, agent="nope")
    assert err.value.code == 404
    with pytest.raises(HTTPClientError) as err:
        await api.open("../outside.ipynb")
    assert err.value.code == 400
