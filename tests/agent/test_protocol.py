"""The agent's protocol rules, through real subprocesses, without a model (echo mode and no-model mode)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from jupyter_acp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError

from .client import AGENT, AgentClient, initialize_params

pytestmark = pytest.mark.timeout(180)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 150))


@pytest.fixture
def state_dir(tmp_path):
    d = tmp_path / "state"
    d.mkdir()
    return str(d)


def env(state_dir: str, **extra: str) -> dict[str, str]:
    return {"JUPYTER_ACP_AGENT_STATE_DIR": state_dir, "JUPYTER_ACP_MODEL": "", **extra}


async def echo_agent(state_dir: str, *args: str) -> AgentClient:
    return await AgentClient.start("--echo", *args, env=env(state_dir), initialize=initialize_params())


async def rpc_error(coro) -> RpcError:
    with pytest.raises(RpcError) as info:
        await coro
    return info.value


def test_stdout_carries_only_protocol_frames_at_debug(tmp_path, state_dir):
    sentinel = "SENTINEL-" + "x7q" * 3
    stdin = (
        f"not json {sentinel}\n"
        + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()})
        + "\n"
    )
    proc = subprocess.run(
        [*AGENT, "--echo", "--log-level", "DEBUG"],
        input=stdin.encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, **env(state_dir), "LITELLM_LOG": "DEBUG"},
    )
    lines = [line for line in proc.stdout.decode().splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    frame = json.loads(lines[0])
    assert frame["jsonrpc"] == "2.0" and frame["id"] == 1
    assert frame["result"]["agentInfo"]["name"] == "jupyter-acp-agent"
    assert frame["result"]["protocolVersion"] == 1
    assert proc.stderr  # logs went to stderr
    assert sentinel.encode() not in proc.stderr  # the malformed line's payload is never logged
    assert proc.returncode == 0  # EOF on stdin ends the agent cleanly


def test_echo_streams_before_answering(state_dir, tmp_path):
    async def go():
        c = await echo_agent(state_dir)
        assert c.init_result["agentCapabilities"]["loadSession"] is False
        sid = (await c.new_session(str(tmp_path)))["sessionId"]
        assert sid.startswith("acp:")
        result = await c.prompt(sid, "hello there general kenobi")
        assert result == {"stopReason": "end_turn"}
        # every update arrived before the response resolved
        assert c.kinds(sid)[0] == "agent_thought_chunk"
        assert c.text(sid) == "hello there general kenobi"
        assert c.kinds(sid).count("agent_message_chunk") == 4
        # a cancel before a turn does not leak into it; an unknown cancel is harmless
        await c.notify("session/cancel", {"sessionId": sid})
        await c.notify("session/cancel", {"sessionId": "acp:never"})
        assert (await c.prompt(sid, "again"))["stopReason"] == "end_turn"
        assert (await c.request("authenticate", {"methodId": "none"})) == {}
        err = await rpc_error(c.prompt("acp:never", "x"))
        assert err.code == INVALID_PARAMS
        err = await rpc_error(c.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}))
        assert err.code == METHOD_NOT_FOUND
        err = await rpc_error(c.request("_unknown/method", {}))
        assert err.code == METHOD_NOT_FOUND
        # echo sessions close, and say so: a client past its session cap closes instead of abandoning them
        assert c.init_result["agentCapabilities"]["sessionCapabilities"] == {"close": {}}
        assert await c.request("session/close", {"sessionId": sid}) == {}
        err = await rpc_error(c.prompt(sid, "closed"))
        assert err.code == INVALID_PARAMS
        assert await c.close() == 0

    run(go())


def test_a_long_history_resumes_and_load_replays_its_tail(state_dir, tmp_path):
    """The 8 MiB budget bounds what is read and replayed, not whether a conversation can go on."""
    d = os.path.join(state_dir, "sessions", "long")
    os.makedirs(d)
    with open(os.path.join(d, "meta.json"), "w") as fh:
        json.dump({"cwd": str(tmp_path), "mode": "ask", "model": ""}, fh)
    filler = "x" * 4000
    with open(os.path.join(d, "messages.jsonl"), "w") as fh:
        fh.write(json.dumps({"role": "user", "content": "FIRST-MESSAGE " + filler}) + "\n")
        for i in range(1200):  # about 9.6 MB
            fh.write(json.dumps({"role": "assistant", "content": f"answer {i} {filler}"}) + "\n")
            fh.write(json.dumps({"role": "user", "content": f"question {i} {filler}"}) + "\n")
        fh.write(json.dumps({"role": "assistant", "content": "LAST-ANSWER"}) + "\n")
    assert os.path.getsize(os.path.join(d, "messages.jsonl")) > 8 * 1024 * 1024

    async def go():
        c = await AgentClient.start(env=env(state_dir), initialize=initialize_params())
        setup = {"sessionId": "acp:long", "cwd": str(tmp_path), "mcpServers": []}
        assert "modes" in await c.request("session/resume", setup)  # resumed, not refused
        assert (await c.prompt("acp:long", "still there?"))["stopReason"] == "end_turn"
        await c.request("session/close", {"sessionId": "acp:long"})
        n0 = len(c.updates["acp:long"])
        await c.request("session/load", setup)
        replay = c.updates["acp:long"][n0:]
        texts = [
            u["content"]["text"] for u in replay if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
        ]
        assert "LAST-ANSWER" in texts and not any(t.startswith("FIRST-MESSAGE") for t in texts)
        replayed = sum(len(json.dumps(u).encode()) for u in replay)
        assert 7 * 1024 * 1024 < replayed <= 8 * 1024 * 1024
        assert await c.close() == 0

    run(go())


def test_prompt_and_session_limits(state_dir, tmp_path):
    async def go():
        c = await echo_agent(state_dir)
        sid = (await c.new_session(str(tmp_path)))["sessionId"]
        blocks = [{"type": "text", "text": "a"}] * 257
        err = await rpc_error(c.request("session/prompt", {"sessionId": sid, "prompt": blocks}))
        assert err.code == INVALID_PARAMS and "256" in err.message
        big = [{"type": "text", "text": "a" * (1024 * 1024 + 1)}]
        err = await rpc_error(c.request("session/prompt", {"sessionId": sid, "prompt": big}))
        assert err.code == INVALID_PARAMS
        audio = [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]  # (echo takes images: it describes them)
        err = await rpc_error(c.request("session/prompt", {"sessionId": sid, "prompt": audio}))
        assert err.code == INVALID_PARAMS and "did not advertise" in err.message
        # exactly 256 blocks is fine
        ok = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "b"}] * 256})
        assert ok["stopReason"] == "end_turn"
        # cwd must be an absolute, existing directory
        for bad in ("relative/dir", str(tmp_path / "missing")):
            err = await rpc_error(c.request("session/new", {"cwd": bad, "mcpServers": []}))
            assert err.code == INVALID_PARAMS
        # 64 sessions per connection, the 65th refused
        for _ in range(63):
            await c.new_session(str(tmp_path))
        err = await rpc_error(c.new_session(str(tmp_path)))
        assert err.code == INVALID_PARAMS and "64" in err.message
        assert await c.close() == 0

    run(go())


def test_concurrency_and_cancel(state_dir, tmp_path):
    async def go():
        c = await echo_agent(state_dir, "--echo-delay", "0.2")
        sids = [(await c.new_session(str(tmp_path)))["sessionId"] for _ in range(5)]
        words = " ".join(f"w{i}" for i in range(100))
        turns = [asyncio.ensure_future(c.prompt(s, words)) for s in sids[:4]]
        while not all(c.updates.get(s) for s in sids[:4]):  # barrier: every turn is streaming
            await asyncio.sleep(0.01)
        assert not any(t.done() for t in turns)
        err = await rpc_error(c.prompt(sids[4], "one too many"))
        assert err.code == INVALID_PARAMS and "concurrent" in err.message
        err = await rpc_error(c.prompt(sids[0], "busy"))
        assert err.code == INVALID_PARAMS and "active" in err.message
        for s in sids[:4]:
            await c.notify("session/cancel", {"sessionId": s})
        results = await asyncio.gather(*turns)
        assert [r["stopReason"] for r in results] == ["cancelled"] * 4
        seen = len(c.updates[sids[0]])
        # the slots are free again; and this turn, which streams at the same pace (0.2 s a word), is the barrier: a
        # cancelled turn that kept streaming would have sent another word by the time this one's two have come
        assert (await c.prompt(sids[4], "free now"))["stopReason"] == "end_turn"
        assert len(c.updates[sids[4]]) >= 2
        assert len(c.updates[sids[0]]) == seen  # nothing after the response
        assert await c.close() == 0

    run(go())


def test_update_budget_per_turn(state_dir, tmp_path):
    async def go():
        c = await echo_agent(state_dir)
        sid = (await c.new_session(str(tmp_path)))["sessionId"]
        ok = await c.prompt(sid, " ".join(["x"] * 2000))  # many tiny chunks are fine
        assert ok["stopReason"] == "end_turn"
        text = ("a " * (512 * 1024)).strip()  # just under 1 MiB, far over 8 MiB of updates
        err = await rpc_error(c.prompt(sid, text, timeout=120))
        assert err.code == INTERNAL_ERROR and "8388608" in err.message
        # the connection goes on
        assert (await c.prompt(sid, "still here"))["stopReason"] == "end_turn"
        assert await c.close() == 0

    run(go())


def test_oversized_frame_ends_the_connection(state_dir):
    async def go():
        c = await echo_agent(state_dir)
        assert c.proc and c.proc.stdin
        c.proc.stdin.write(b"{" + b" " * (4 * 1024 * 1024) + b"}\n")
        await c.proc.stdin.drain()
        code = await asyncio.wait_for(c.proc.wait(), 30)
        assert code == 0

    run(go())


def test_no_model_configured_says_how(state_dir, tmp_path):
    async def go():
        c = await AgentClient.start(env=env(state_dir), initialize=initialize_params())
        caps = c.init_result["agentCapabilities"]
        assert caps["loadSession"] is True
        assert caps["_meta"]["org.mini-me"]["clientTools"]["discovery"] == ["meta", "request"]
        s = await c.new_session(str(tmp_path))
        assert s["modes"]["currentModeId"] == "ask"
        assert "configOptions" not in s
        sid = s["sessionId"]
        assert (await c.prompt(sid, "hi"))["stopReason"] == "end_turn"
        assert "JUPYTER_ACP_MODEL" in c.text(sid)
        await c.request("session/set_mode", {"sessionId": sid, "modeId": "auto"})
        assert c.updates[sid][-1] == {"sessionUpdate": "current_mode_update", "currentModeId": "auto"}
        err = await rpc_error(c.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"}))
        assert err.code == INVALID_PARAMS
        assert await c.close() == 0

    run(go())


def test_load_classifies_errors_and_validates_setup(state_dir, tmp_path):
    async def go():
        c = await AgentClient.start(env=env(state_dir), initialize=initialize_params())
        before = sorted(os.listdir(state_dir))
        for bad in ("web:abc", "acp:../escape", "acp:", "acp:line\nbreak"):
            err = await rpc_error(c.request("session/load", {"sessionId": bad, "cwd": str(tmp_path), "mcpServers": []}))
            assert err.code == INVALID_PARAMS
        assert sorted(os.listdir(state_dir)) == before  # storage never touched
        err = await rpc_error(
            c.request("session/load", {"sessionId": "acp:missing", "cwd": str(tmp_path), "mcpServers": []})
        )
        assert err.code == INVALID_PARAMS
        broken = os.path.join(state_dir, "sessions", "broken")
        os.makedirs(broken)
        with open(os.path.join(broken, "meta.json"), "w") as fh:
            fh.write("{not json")
        err = await rpc_error(
            c.request("session/load", {"sessionId": "acp:broken", "cwd": str(tmp_path), "mcpServers": []})
        )
        assert err.code == INTERNAL_ERROR
        # client-supplied MCP servers are validated before anything starts
        bad_servers = [
            [{"name": "a", "command": "relative/cmd", "args": [], "env": []}],
            [{"name": "a", "command": sys.executable, "args": [], "env": []}] * 2,
            [{"name": "a", "command": sys.executable, "args": [], "env": [{"name": "A=B", "value": "x"}]}],
            [{"name": f"s{i}", "command": sys.executable, "args": [], "env": []} for i in range(17)],
            [{"type": "sse", "name": "a", "url": "http://127.0.0.1:1/sse", "headers": []}],
        ]
        for servers in bad_servers:
            err = await rpc_error(c.new_session(str(tmp_path), servers))
            assert err.code == INVALID_PARAMS
        assert await c.close() == 0

    run(go())


def test_eof_shuts_down_even_with_a_turn_running(state_dir, tmp_path):
    async def go():
        c = await echo_agent(state_dir, "--echo-delay", "1")
        sid = (await c.new_session(str(tmp_path)))["sessionId"]
        turn = asyncio.ensure_future(c.prompt(sid, "a b c d e f g h i j"))
        await asyncio.sleep(0.3)
        assert c.proc and c.proc.stdin
        c.proc.stdin.close()
        t0 = time.monotonic()
        code = await asyncio.wait_for(c.proc.wait(), 20)
        assert code == 0 and time.monotonic() - t0 < 10
        turn.cancel()

    run(go())
