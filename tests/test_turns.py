"""Turns against real agent subprocesses: streaming, permissions, cancel, watchdog, crashes, bad frames."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import message_text, process_alive, scripted


@pytest.fixture
def acp_agents(tmp_path):
    return {
        "stream": scripted("stream", "--chunks", "300"),
        "slow": scripted("slow", "--chunks", "400", "--delay", "0.02"),
        "perm": scripted("permission"),
        "crash": scripted("crash"),
        "resumable_crash": scripted("crash"),
        "garbage": scripted("garbage"),
        "big": scripted("big_frame", "--size", str(300_000)),
        "flood": scripted("flood_stderr", "--size", str(2 * 1024 * 1024)),
        "hang": scripted("hang"),
        "auth": scripted("needs_auth"),
        "noinit": scripted("exit_at_init"),
        "badver": scripted("bad_version"),
        "fs": scripted("fs"),
        "victim": scripted("slow", "--chunks", "400", "--delay", "0.02", "--pid-file", str(tmp_path / "victim.pid")),
    }


@pytest.fixture
def acp_config():
    return {"turn_idle_timeout": 1.5, "cancel_grace": 1.0, "max_frame_bytes": 200_000}


def ended(events, turn):
    return [e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn][-1]


async def test_streaming_order_preserved(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "stream")
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn)
    assert message_text(events, turn) == " ".join(str(i) for i in range(300))
    assert ended(events, turn)["stop_reason"] == "end_turn"


async def test_permission_answered_through_the_api(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "perm")
    turn = await api.prompt(s["id"], "write it")
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    req = [e for e in events if e["type"] == "permission_request"][0]
    assert req["turn_id"] == turn
    assert [o["optionId"] for o in req["options"]] == ["allow", "reject"]
    assert req["tool_call"]["toolCallId"] == "call_1"
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "permissions", req["request_id"], body={"option_id": "bogus"})
    assert err.value.code == 400
    await api.call("POST", "sessions", s["id"], "permissions", req["request_id"], body={"option_id": "reject"})
    events = await api.wait_turn_end(s["id"], turn)
    assert message_text(events, turn) == "permission: reject"
    resolved = [e for e in events if e["type"] == "permission_resolved"]
    assert resolved == [dict(resolved[0], request_id=req["request_id"], option_id="reject")]
    with pytest.raises(HTTPClientError) as err:  # answered already
        await api.call("POST", "sessions", s["id"], "permissions", req["request_id"], body={"option_id": "allow"})
    assert err.value.code == 404


async def test_cancel_answers_pending_permission_cancelled(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "perm")
    turn = await api.prompt(s["id"], "write it")
    await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    assert (await api.call("POST", "sessions", s["id"], "cancel"))["cancelled"] is True
    events = await api.wait_turn_end(s["id"], turn)
    assert any(e["type"] == "permission_resolved" and e.get("cancelled") for e in events)
    assert ended(events, turn)["stop_reason"] == "cancelled"


async def test_cancel_mid_stream(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "slow")
    turn = await api.prompt(s["id"], "go")
    await api.wait_for(s["id"], lambda evs: len(message_text(evs, turn)) > 5)
    await api.call("POST", "sessions", s["id"], "cancel")
    events = await api.wait_turn_end(s["id"], turn)
    assert ended(events, turn)["stop_reason"] == "cancelled"
    assert len(message_text(events, turn).split()) < 400


async def test_second_prompt_while_busy_is_refused(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "slow")
    turn = await api.prompt(s["id"], "go")
    with pytest.raises(HTTPClientError) as err:
        await api.prompt(s["id"], "again")
    assert err.value.code == 409
    await api.call("POST", "sessions", s["id"], "cancel")
    await api.wait_turn_end(s["id"], turn)


async def test_watchdog_ends_a_silent_turn(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hang")
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn, timeout=20)
    end = ended(events, turn)
    assert end["error_kind"] == "timeout"
    assert "sent nothing" in end["error"]


async def test_crash_mid_turn_then_next_prompt_recovers(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "crash")
    turn = await api.prompt(s["id"], "first")
    events = await api.wait_turn_end(s["id"], turn)
    end = ended(events, turn)
    assert end["error_kind"] == "agent_failed"
    assert "code 3" in end["error"] and "boom" in end["error"]
    assert message_text(events, turn) == "about to crash"
    # the next prompt restarts the agent; the conversation is re-seeded and the user told so
    turn2 = await api.prompt(s["id"], "second")
    events = await api.wait_turn_end(s["id"], turn2)
    notices = [e["text"] for e in events if e["type"] == "notice"]
    assert any("restarted" in n for n in notices)
    assert any("seeded with the recent history" in n for n in notices)
    assert ended(events, turn2)["error_kind"] == "agent_failed"  # it crashes again, by script


async def test_garbage_and_unknown_ids_are_reported_not_fatal(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "garbage")
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn)
    assert ended(events, turn)["stop_reason"] == "end_turn"
    assert message_text(events, turn) == "0 1 2 3 4"


async def test_oversized_frame_is_skipped_and_reported(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "big")
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn)
    assert ended(events, turn)["stop_reason"] == "end_turn"
    assert message_text(events, turn) == "0 1 2 3 4"
    assert any(e["type"] == "notice" and "frame limit" in e["text"] for e in events)


async def test_stderr_flood_does_not_deadlock(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "flood")
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn, timeout=30)
    assert ended(events, turn)["stop_reason"] == "end_turn"


@pytest.mark.parametrize(
    "agent, expected",
    [("auth", "needs you to log in"), ("noinit", "refusing to start"), ("badver", "protocol version 99")],
)
async def test_agents_that_cannot_serve_give_clear_errors(api, make_notebook, agent, expected):
    s = await api.open(make_notebook("nb.ipynb"), agent)
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn)
    end = ended(events, turn)
    assert expected in end["error"]
    if agent == "auth":
        assert end["error_kind"] == "needs_login"
        assert "scripted login" in end["error"]
    agents = {a["name"]: a for a in await api.call("GET", "agents")}
    assert agents[agent]["state"] in ("needs_login", "dead")


async def test_two_notebooks_in_one_folder_stay_apart(api, make_notebook):
    a = await api.open(make_notebook("shared/a.ipynb"), "echo")
    b = await api.open(make_notebook("shared/b.ipynb"), "echo")
    assert a["id"] != b["id"] and a["cwd"] == b["cwd"]
    ta = await api.prompt(a["id"], "alpha words")
    tb = await api.prompt(b["id"], "beta words")
    ea = await api.wait_turn_end(a["id"], ta)
    eb = await api.wait_turn_end(b["id"], tb)
    assert message_text(ea) == "alpha words"
    assert message_text(eb) == "beta words"
    listed = await api.call("GET", "sessions", params={"notebook": "shared/a.ipynb"})
    assert [x["id"] for x in listed] == [a["id"]]


async def test_fs_confined_to_root(api, make_notebook, jp_root_dir, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "secret.txt"
    outside.write_text("top secret")
    (jp_root_dir / "inside.txt").write_text("hello inside")
    os.symlink(outside, jp_root_dir / "link.txt")
    s = await api.open(make_notebook("nb.ipynb"), "fs")

    async def run(text: str) -> str:
        turn = await api.prompt(s["id"], text)
        return message_text(await api.wait_turn_end(s["id"], turn), turn)

    assert await run(f"read {jp_root_dir / 'inside.txt'}") == "ok: hello inside"
    for path in (
        str(outside),
        f"{jp_root_dir}/../{outside.parent.name}/secret.txt",
        str(jp_root_dir / "link.txt"),
        "relative.txt",
        str(jp_root_dir) + "/" + "a" * 5000,
        f"{jp_root_dir}/inside.txt\x00.png",
    ):
        answer = await run(f"read {path}")
        assert answer.startswith("error -32602"), (path, answer)
        assert "top secret" not in answer
    assert (await run(f"write {outside} pwned")).startswith("error -32602")
    assert outside.read_text() == "top secret"
    assert "notebook tools" in await run(f"write {jp_root_dir / 'nb.ipynb'} {{}}")
    # a write inside the root asks the user first (the one gate: kind edit, with the file's diff)
    turn = await api.prompt(s["id"], f"write {jp_root_dir / 'new' / 'file.txt'} written")
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    card = [e for e in events if e["type"] == "permission_request"][-1]
    assert card["tool_call"]["kind"] == "edit" and card["tool_call"]["content"][0]["newText"] == "written"
    await api.call("POST", "sessions", s["id"], "permissions", card["request_id"], body={"option_id": "allow_once"})
    assert message_text(await api.wait_turn_end(s["id"], turn), turn) == "ok"
    assert (jp_root_dir / "new" / "file.txt").read_text() == "written"
    assert (await run(f"read {jp_root_dir / 'missing.txt'}")).startswith("error -32002")


async def test_prompt_limits(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "prompt", body={"text": "x" * (1024 * 1024 + 1)})
    assert err.value.code == 413
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "prompt", body={"prompt": [{"type": "text", "text": "a"}] * 257})
    assert err.value.code == 413
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "prompt", body={"text": "a", "prompt": []})
    assert err.value.code == 400


async def test_no_orphan_after_server_stop(api, make_notebook, jp_serverapp, tmp_path):
    pid_file = tmp_path / "pids"
    app = jp_serverapp.web_app.settings["jupyter_acp"]
    from jupyter_acp.catalog.agents import AgentSpec

    app.agent_specs["stubborn"] = AgentSpec.model_validate(
        scripted("ignore_eof", "--pid-file", str(pid_file), "--child")
    )
    s = await api.open(make_notebook("nb.ipynb"), "stubborn")
    turn = await api.prompt(s["id"], "go")
    await api.wait_turn_end(s["id"], turn)
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2
    await app.hub.stop()
    for _ in range(50):
        alive = [p for p in pids if process_alive(p)]
        if not alive:
            break
        await asyncio.sleep(0.1)
    assert not alive, f"orphaned agent processes: {alive}"


async def test_agent_env_is_curated(api, make_notebook, jp_serverapp, monkeypatch):
    app = jp_serverapp.web_app.settings["jupyter_acp"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-pass")
    monkeypatch.setenv("JUPYTER_TOKEN", "server-token-never")
    monkeypatch.setenv("RANDOM_SECRET", "nope")
    env = app.agent_env(app.agent_specs["echo"])
    assert env["OPENAI_API_KEY"] == "sk-test-pass"
    assert "JUPYTER_TOKEN" not in env and "RANDOM_SECRET" not in env
    token = jp_serverapp.identity_provider.token
    assert token and token not in json.dumps(env)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
async def test_killed_or_frozen_agent_mid_turn_then_next_prompt_works(api, make_notebook, tmp_path, sig):
    s = await api.open(make_notebook("nb.ipynb"), "victim")
    turn = await api.prompt(s["id"], "go")
    await api.wait_for(s["id"], lambda evs: len(message_text(evs, turn)) > 10)
    pid = int((tmp_path / "victim.pid").read_text().split()[0])
    os.kill(pid, sig)
    events = await api.wait_turn_end(s["id"], turn, timeout=30)
    end = ended(events, turn)
    if sig == signal.SIGKILL:
        assert end["error_kind"] == "agent_failed" and "-9" in end["error"]
    else:
        assert end["error_kind"] == "timeout" and "was stopped" in end["error"]
    streamed = message_text(events, turn)
    assert streamed and "0 1 2" in streamed, "what arrived before the fault is kept"
    turn2 = await api.prompt(s["id"], "again")
    events = await api.wait_turn_end(s["id"], turn2, timeout=30)
    assert ended(events, turn2)["stop_reason"] == "end_turn"
    assert any(e["type"] == "notice" and "seeded" in e["text"] for e in events)
    assert int((tmp_path / "victim.pid").read_text().split()[0]) != pid, "a fresh agent process"
    await asyncio.sleep(0.5)
    assert not process_alive(pid), "the frozen or killed agent is gone"


class TestQueue:
    @pytest.fixture
    def acp_config(self):
        return {"max_concurrent_turns": 1, "cancel_grace": 1.0}

    async def test_turns_past_the_limit_wait_in_line(self, api, make_notebook):
        a = await api.open(make_notebook("a.ipynb"), "slow")
        b = await api.open(make_notebook("b.ipynb"), "slow")
        c = await api.open(make_notebook("c.ipynb"), "slow")
        ta = await api.prompt(a["id"], "first")
        await api.wait_for(a["id"], lambda evs: len(message_text(evs, ta)) > 3)
        tb = await api.prompt(b["id"], "second")
        tc = await api.prompt(c["id"], "third")
        eb = await api.wait_for(b["id"], lambda evs: any(e.get("phase") == "queued" for e in evs))
        assert not message_text(eb, tb), "nothing streams while queued"
        await api.call("POST", "sessions", c["id"], "cancel")  # cancelling a queued turn ends it
        ec = await api.wait_turn_end(c["id"], tc)
        assert ended(ec, tc)["stop_reason"] == "cancelled"
        await api.call("POST", "sessions", a["id"], "cancel")
        await api.wait_turn_end(a["id"], ta)
        await api.wait_for(b["id"], lambda evs: len(message_text(evs, tb)) > 3)
        await api.call("POST", "sessions", b["id"], "cancel")
        eb = await api.wait_turn_end(b["id"], tb)
        assert ended(eb, tb)["stop_reason"] == "cancelled"


class TestSessionCap:
    @pytest.fixture
    def acp_config(self):
        return {"max_sessions_per_agent": 2}

    async def test_least_recently_used_session_yields_and_comes_back(self, api, make_notebook):
        sids = []
        for name in ("a", "b", "c"):
            s = await api.open(make_notebook(f"{name}.ipynb"), "stream")
            turn = await api.prompt(s["id"], "go")
            await api.wait_turn_end(s["id"], turn)
            sids.append(s["id"])
        # a yielded its agent session to c; using a again re-opens it (re-seeded: the agent cannot load)
        turn = await api.prompt(sids[0], "back again")
        events = await api.wait_turn_end(sids[0], turn)
        assert ended(events, turn)["stop_reason"] == "end_turn"
        assert any(e["type"] == "notice" and "seeded" in e["text"] for e in events)
        assert len([e for e in events if e["type"] == "session_ready"]) == 2
