"""The spine: agents listed, a session per notebook, an echo turn end to end."""

from __future__ import annotations

import sys

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


async def test_rename_keeps_the_conversation_and_kernel_follows(api, jp_fetch, make_notebook, jp_root_dir):
    import json

    nb = make_notebook("old/nb.ipynb")
    session = await api.open(nb)
    assert session["kernel_id"] is None
    turn = await api.prompt(session["id"], "before rename")
    await api.wait_turn_end(session["id"], turn)
    (jp_root_dir / "new").mkdir()
    await jp_fetch("api", "contents", "old", "nb.ipynb", method="PATCH", body=json.dumps({"path": "new/renamed.ipynb"}))
    moved = await api.call("GET", "sessions", params={"notebook": "new/renamed.ipynb"})
    assert [s["id"] for s in moved] == [session["id"]]
    assert moved[0]["cwd"] == str(jp_root_dir / "new")
    assert await api.call("GET", "sessions", params={"notebook": "old/nb.ipynb"}) == []
    again = await api.open("new/renamed.ipynb")
    assert again["id"] == session["id"]
    # a kernel started for the notebook is the session's kernel, looked up when asked
    resp = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps({"path": "new/renamed.ipynb", "type": "notebook", "name": "", "kernel": {"name": "python3"}}),
    )
    kernel_id = json.loads(resp.body)["kernel"]["id"]
    try:
        assert (await api.call("GET", "sessions", session["id"]))["kernel_id"] == kernel_id
        turn = await api.prompt(session["id"], "after rename")
        events = await api.wait_turn_end(session["id"], turn)
        assert any(e["type"] == "notice" and "renamed" in e["text"] for e in events)
    finally:
        await jp_fetch("api", "sessions", json.loads(resp.body)["id"], method="DELETE")


async def test_reset_starts_a_new_conversation_in_the_same_session(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"))
    turn = await api.prompt(s["id"], "remember me")
    await api.wait_turn_end(s["id"], turn)
    before = await api.events(s["id"])
    again = await api.call("POST", "sessions", s["id"], "reset")
    assert again["id"] == s["id"]
    turn = await api.prompt(s["id"], "fresh start")
    events = await api.wait_turn_end(s["id"], turn)
    assert events[: len(before)] == before, "the transcript keeps everything"
    assert any(e["type"] == "notice" and e.get("phase") == "session_reset" for e in events)
    ready = [e for e in events if e["type"] == "session_ready"]
    assert len(ready) == 2 and ready[0]["acp_session_id"] != ready[1]["acp_session_id"]


@pytest.fixture
def acp_agents():
    # the built-in agent with a model configured offers it as a config option (no model server is needed)
    return {
        "modelled": {
            "command": sys.executable,
            "args": ["-m", "jupyter_acp.agent", "--models", "openai/a,openai/b"],
            "env": {"JUPYTER_ACP_MODEL": "openai/a"},
        }
    }


async def test_modes_and_config_options(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "modelled")
    ready = await api.wait_for(s["id"], lambda evs: any(e["type"] == "session_ready" for e in evs))
    ready = [e for e in ready if e["type"] == "session_ready"][0]
    modes = {m["id"] for m in ready["modes"]["availableModes"]}
    assert {"ask", "auto"} <= modes
    switched = await api.call("POST", "sessions", s["id"], "mode", body={"mode_id": "auto"})
    assert switched["modes"]["currentModeId"] == "auto"
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "mode", body={"mode_id": "yolo"})
    assert err.value.code == 400
    option = ready["config_options"][0]
    assert option["id"] == "model" and option["currentValue"] == "openai/a"
    changed = await api.call("POST", "sessions", s["id"], "config", body={"config_id": "model", "value": "openai/b"})
    assert changed["config_options"][0]["currentValue"] == "openai/b"
    for body in ({"config_id": "nope", "value": "x"}, {"config_id": "model", "value": "openai/unknown"}):
        with pytest.raises(HTTPClientError) as err:
            await api.call("POST", "sessions", s["id"], "config", body=body)
        assert err.value.code == 400
    events = await api.events(s["id"])
    assert [e["modes"]["currentModeId"] for e in events if e["type"] == "session_config"] == ["auto", "auto"]
