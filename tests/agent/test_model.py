"""The real litellm path against the fake model server: text, reasoning, plan, tools on every channel,
permissions, cancel, failures, and ``session/load`` after a restart.

One agent process (and one litellm import) serves most tests: each test opens its own sessions.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from jupyter_acp.protocol.jsonrpc import INTERNAL_ERROR, RpcError
from jupyter_acp.testing.fake_model import FakeModel

from .client import AgentClient, initialize_params

pytestmark = pytest.mark.timeout(240)

HERE = os.path.dirname(os.path.abspath(__file__))
MCP_SERVER = os.path.join(HERE, "mcp_server.py")
SENTINEL = "zebra-sentinel-4242"
MCP_STDERR_SENTINEL = "mcp-child-stderr-7f3a"  # tests/agent/mcp_server.py writes it to its stderr

RULES: list[dict[str, Any]] = [
    {"match": "^slow", "text": " ".join(f"word{i}" for i in range(40)), "delay": 0.25},
    {"match": "^think", "reasoning": "pondering deeply", "text": "thought done"},
    {
        "match": "^plan",
        "tool": "^update_plan$",
        "arguments": {
            "entries": [{"content": "step one", "status": "in_progress"}, {"content": "step two", "status": "pending"}]
        },
    },
    {
        "match": "^use echo",
        "tool": "^client_echo$",
        "arguments": {"text": "hi", "_meta": {"org.mini-me": {"sessionId": "forged"}}},
    },
    {"match": "^use write", "tool": "^client_write$", "arguments": {"source": "x = 1"}},
    {"match": "^use edit", "tool": "^client_edit_cell$", "arguments": {"cell_id": "c1", "source": "y = 2\nprint(y)"}},
    {"match": "^use fail", "tool": "^client_fail$", "arguments": {}},
    {"match": "^use big", "tool": "^client_big$", "arguments": {}},
    {"match": "^use add", "tool": "__add$", "arguments": {"a": 2, "b": 3}},
    {"match": "^use env", "tool": "__env_keys$", "arguments": {}},
    {"role": "any", "match": "loop-me", "tool": "^client_echo$", "arguments": {"text": "loop-me"}},
    {"match": "^fail model", "status": 400, "text": "scripted failure"},
]

TOOLS = [
    {
        "name": "client_echo",
        "description": "Echo a text",
        "method": "_t/echo",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "client_write",
        "description": "Write a cell",
        "method": "_t/write",
        "inputSchema": {"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"]},
        "annotations": {"readOnlyHint": False, "destructiveHint": True},
    },
    {
        "name": "client_edit_cell",
        "description": "Edit a cell",
        "method": "_t/edit",
        "inputSchema": {"type": "object", "properties": {"cell_id": {"type": "string"}, "source": {"type": "string"}}},
        "annotations": {"readOnlyHint": False, "destructiveHint": True, "title": "Edit a cell"},
    },
    {
        "name": "client_fail",
        "description": "Always fails",
        "method": "_t/fail",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "client_big",
        "description": "Big output",
        "method": "_t/big",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "client_weird",
        "description": "Odd schema",
        "method": "_t/weird",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "mode": {"enum": ["a", "b", None], "default": "a"},
                "n": {"type": ["integer", "null"], "format": "int32"},
                "x": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["mode", "ghost", 3],
        },
        "annotations": {"readOnlyHint": True},
    },
    {"name": "bad tool name!", "description": "skipped", "method": "_t/none", "inputSchema": {}},
    {"name": "client_nomethod", "description": "skipped", "inputSchema": {}},
]


@dataclass
class World:
    loop: asyncio.AbstractEventLoop
    model: FakeModel
    agent: AgentClient
    state: str
    cwd: str
    stderr: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)  # permission answers, first used first
    permission_requests: list[dict[str, Any]] = field(default_factory=list)

    def run(self, coro: Any, timeout: float = 120) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))


def install_client(world: World, agent: AgentClient) -> None:
    async def tools_list(params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": TOOLS}

    def tool(name: str, answer: Any):
        async def handle(params: dict[str, Any]) -> Any:
            world.calls.append((name, params))
            if isinstance(answer, Exception):
                raise answer
            return answer(params) if callable(answer) else answer

        return handle

    async def permission(params: dict[str, Any]) -> dict[str, Any]:
        world.permission_requests.append(params)
        option = world.answers.pop(0) if world.answers else "allow_once"
        return {"outcome": {"outcome": "selected", "optionId": option}}

    agent.handlers.update(
        {
            "_org.mini-me/tools/list": tools_list,
            "_t/echo": tool("echo", lambda p: {"content": [{"type": "text", "text": "echoed " + p.get("text", "")}]}),
            "_t/write": tool("write", {"content": [{"type": "text", "text": "written"}], "isError": False}),
            "_t/edit": tool("edit", {"content": [{"type": "text", "text": "edited"}], "isError": False}),
            "_t/fail": tool("fail", RpcError(-32000, "kaput")),
            "_t/big": tool("big", {"content": [{"type": "text", "text": "B" * (100 * 1024)}]}),
            "session/request_permission": permission,
        }
    )


def agent_args(model: FakeModel) -> list[str]:
    return ["--model", "openai/fake", "--api-base", model.url, "--api-key", "sk-fake", "--max-turn-requests", "3"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    loop = asyncio.new_event_loop()
    model = FakeModel(RULES)
    loop.run_until_complete(model.start())
    base = tmp_path_factory.mktemp("agent-model")
    state, cwd = str(base / "state"), str(base / "cwd")
    os.makedirs(state)
    os.makedirs(cwd)
    stderr = str(base / "agent.stderr")
    agent = loop.run_until_complete(
        AgentClient.start(
            *agent_args(model),
            "--log-level",
            "DEBUG",
            env={"JUPYTER_ACP_AGENT_STATE_DIR": state, "LITELLM_LOG": "DEBUG", "SECRET_VAR": "s3cret"},
            stderr_path=stderr,
            initialize=initialize_params({"discovery": "request"}),
        )
    )
    w = World(loop, model, agent, state, cwd, stderr)
    install_client(w, agent)
    yield w
    loop.run_until_complete(agent.close())
    loop.run_until_complete(model.stop())
    loop.close()


def tool_messages(model: FakeModel) -> list[str]:
    return [m.get("content") for m in model.requests[-1]["messages"] if m.get("role") == "tool"]


def test_text_reasoning_and_plan(world):
    a = world.agent
    s = world.run(a.new_session(world.cwd))
    sid = s["sessionId"]
    assert s["configOptions"][0]["currentValue"] == "openai/fake"
    assert world.run(a.prompt(sid, f"hello {SENTINEL}"))["stopReason"] == "end_turn"
    assert a.text(sid) == f"You said: hello {SENTINEL}"
    assert world.run(a.prompt(sid, "think"))["stopReason"] == "end_turn"
    assert a.text(sid, "agent_thought_chunk") == "pondering deeply"
    assert a.text(sid).endswith("thought done")
    world.run(a.prompt(sid, "plan it"))
    plans = [u for u in a.updates[sid] if u["sessionUpdate"] == "plan"]
    assert [e["content"] for e in plans[-1]["entries"]] == ["step one", "step two"]
    assert a.text(sid).endswith("Tool result: plan updated")
    # the model saw the whole conversation, with the system prompt first
    roles = [m["role"] for m in world.model.requests[-1]["messages"]]
    assert roles[:4] == ["system", "user", "assistant", "user"]


def test_request_mode_client_tool(world):
    a = world.agent
    before = len(a.requests)
    sid = world.run(a.new_session(world.cwd))["sessionId"]
    lists = [p for m, p in a.requests[before:] if m == "_org.mini-me/tools/list"]
    assert lists and lists[-1]["_meta"]["org.mini-me"] == {"sessionId": sid, "reason": "new"}
    assert lists[-1]["cwd"] == os.path.realpath(world.cwd)
    n_perm = len(world.permission_requests)
    assert world.run(a.prompt(sid, "use echo"))["stopReason"] == "end_turn"
    name, params = world.calls[-1]
    assert name == "echo"
    assert params["text"] == "hi"
    assert params["_meta"]["org.mini-me"]["sessionId"] == sid  # the model's forged _meta is replaced
    kinds = a.kinds(sid)
    start = kinds.index("tool_call")
    call = a.updates[sid][start]
    assert call["title"] == "client_echo" and call["rawInput"]["text"] == "hi" and call["kind"] == "read"
    done = [u for u in a.updates[sid] if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]
    assert done and done[-1]["toolCallId"] == call["toolCallId"]
    assert done[-1]["content"][0]["content"]["text"] == "echoed hi"
    assert len(world.permission_requests) == n_perm  # read-only: no question
    assert a.text(sid) == "Tool result: echoed hi"
    # the schemas the model saw: bad entries skipped, odd keywords cleaned, nothing made stricter
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in world.model.requests[-1]["tools"]}
    assert "client_nomethod" not in offered and "bad tool name!" not in offered
    weird = offered["client_weird"]
    assert "$schema" not in weird
    assert weird["required"] == ["mode"]
    assert weird["properties"]["mode"] == {"enum": ["a", "b"], "type": "string"}
    assert weird["properties"]["n"] == {"type": "integer"}
    assert weird["properties"]["x"] == {"type": "string"}


def test_client_tool_errors_and_big_output(world):
    a = world.agent
    sid = world.run(a.new_session(world.cwd))["sessionId"]
    assert world.run(a.prompt(sid, "use fail"))["stopReason"] == "end_turn"
    failed = [u for u in a.updates[sid] if u.get("status") == "failed"]
    assert failed
    assert tool_messages(world.model)[-1] == "[client tool error: kaput]"
    world.run(a.prompt(sid, "use big"))
    done = [u for u in a.updates[sid] if u.get("status") == "completed"][-1]
    assert (
        done["rawOutput"]
        == f"[tool value omitted: {len(json.dumps({'content': [{'type': 'text', 'text': 'B' * 102400}]}))} bytes exceeds 65536-byte limit]"
    )
    # a model that keeps calling tools is stopped after max_turn_requests round trips
    assert world.run(a.prompt(sid, "loop-me"))["stopReason"] == "max_turn_requests"


def test_permissions(world):
    a = world.agent
    sid = world.run(a.new_session(world.cwd))["sessionId"]
    writes = lambda: sum(1 for n, _ in world.calls if n == "write")  # noqa: E731
    w0, p0 = writes(), len(world.permission_requests)
    world.answers[:] = ["reject_once"]
    world.run(a.prompt(sid, "use write"))
    assert writes() == w0 and len(world.permission_requests) == p0 + 1
    req = world.permission_requests[-1]
    assert req["sessionId"] == sid and req["toolCall"]["title"] == "client_write"
    assert {o["optionId"] for o in req["options"]} == {"allow_once", "allow_always", "reject_once"}
    assert "rejected" in tool_messages(world.model)[-1]
    assert [u for u in a.updates[sid] if u.get("status") == "failed"]
    world.answers[:] = ["allow_once"]
    world.run(a.prompt(sid, "use write"))
    assert writes() == w0 + 1 and len(world.permission_requests) == p0 + 2
    world.answers[:] = ["allow_always"]
    world.run(a.prompt(sid, "use write"))
    world.run(a.prompt(sid, "use write"))
    assert writes() == w0 + 3 and len(world.permission_requests) == p0 + 3  # always: asked once
    # auto mode: client tools (policy auto) run without asking
    sid2 = world.run(a.new_session(world.cwd))["sessionId"]
    world.run(a.request("session/set_mode", {"sessionId": sid2, "modeId": "auto"}))
    world.run(a.prompt(sid2, "use write"))
    assert writes() == w0 + 4 and len(world.permission_requests) == p0 + 3


def test_cards_carry_human_titles_and_the_source_as_text(world):
    """The words "Edit cell c1" and the new source as text (what the user must see to decide), in the tool call and
    in the permission request;
    the tool's own name rides in _meta (a client matching an allowed call by name still finds it)."""
    a = world.agent
    sid = world.run(a.new_session(world.cwd))["sessionId"]
    p0 = len(world.permission_requests)
    world.answers[:] = ["allow_once"]
    assert world.run(a.prompt(sid, "use edit"))["stopReason"] == "end_turn"
    call = next(u for u in a.updates[sid] if u["sessionUpdate"] == "tool_call")
    asked = world.permission_requests[p0]["toolCall"]
    for shown in (call, asked):
        assert shown["title"] == "Edit cell c1", shown
        assert shown["content"] == [{"type": "content", "content": {"type": "text", "text": "y = 2\nprint(y)"}}]
        assert shown["_meta"]["jupyter_acp"]["toolName"] == "client_edit_cell"
        assert shown["rawInput"] == {"cell_id": "c1", "source": "y = 2\nprint(y)"}


def test_mcp_over_stdio(world):
    a = world.agent
    server = {
        "name": "local",
        "command": sys.executable,
        "args": [MCP_SERVER, "stdio"],
        "env": [{"name": "GIVEN_VAR", "value": "yes"}],
    }
    sid = world.run(a.new_session(world.cwd, [server]), 90)["sessionId"]
    p0 = len(world.permission_requests)
    world.answers[:] = ["allow_once", "allow_once"]
    assert world.run(a.prompt(sid, "use add"))["stopReason"] == "end_turn"
    assert len(world.permission_requests) == p0 + 1  # every MCP tool asks by default
    done = [u for u in a.updates[sid] if u.get("status") == "completed"][-1]
    assert done["content"][0]["content"]["text"] == "5"
    assert a.text(sid) == "Tool result: 5"
    world.run(a.prompt(sid, "use env"))
    keys = tool_messages(world.model)[-1].split(",")
    assert "GIVEN_VAR" in keys and "SECRET_VAR" not in keys and "OPENAI_API_KEY" not in keys
    # only the configured env (the seed): not even the MCP SDK's default HOME, LOGNAME, PATH, SHELL, TERM, USER
    assert not {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"} & set(keys), keys
    world.run(a.request("session/close", {"sessionId": sid}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mcp_over_http(world):
    a = world.agent
    port = free_port()

    async def start_server():
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            MCP_SERVER,
            "http",
            str(port),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for _ in range(300):
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                return proc
            except OSError:
                await asyncio.sleep(0.1)
        raise AssertionError("MCP HTTP server did not start")

    proc = world.run(start_server(), 60)
    try:
        server = {"type": "http", "name": "web", "url": f"http://127.0.0.1:{port}/mcp", "headers": []}
        sid = world.run(a.new_session(world.cwd, [server]), 90)["sessionId"]
        world.run(a.request("session/set_mode", {"sessionId": sid, "modeId": "auto"}))
        world.answers[:] = ["allow_once"]
        assert world.run(a.prompt(sid, "use add"))["stopReason"] == "end_turn"
        calls = [u for u in a.updates[sid] if u["sessionUpdate"] == "tool_call"]
        assert calls[-1]["title"] == "web__add"
        assert a.text(sid) == "Tool result: 5"
        world.run(a.request("session/close", {"sessionId": sid}))
    finally:
        proc.terminate()
        world.run(proc.wait(), 20)


def test_cancel_mid_stream(world):
    a = world.agent
    sid = world.run(a.new_session(world.cwd))["sessionId"]

    async def go():
        turn = asyncio.ensure_future(a.prompt(sid, "slow answer"))
        while a.kinds(sid).count("agent_message_chunk") < 2:
            await asyncio.sleep(0.05)
        await a.notify("session/cancel", {"sessionId": sid})
        result = await turn
        seen = len(a.updates[sid])
        # barrier: the same slow answer in another session, until three of its words came (0.25 s each): a
        # cancelled turn that kept streaming would have sent a word of its own by then
        other = (await a.new_session(world.cwd))["sessionId"]
        again = asyncio.ensure_future(a.prompt(other, "slow answer"))
        while a.kinds(other).count("agent_message_chunk") < 3:
            await asyncio.sleep(0.05)
        await a.notify("session/cancel", {"sessionId": other})
        await again
        return result, seen

    result, seen = world.run(go())
    assert result == {"stopReason": "cancelled"}
    assert len(a.updates[sid]) == seen  # no update after the response
    assert a.kinds(sid).count("agent_message_chunk") < 40
    assert world.run(a.prompt(sid, "hello again"))["stopReason"] == "end_turn"


def test_model_failure_is_an_error_not_a_crash(world):
    a = world.agent
    sid = world.run(a.new_session(world.cwd))["sessionId"]
    with pytest.raises(RpcError) as info:
        world.run(a.prompt(sid, "fail model"))
    assert info.value.code == INTERNAL_ERROR and "turn failed" in info.value.message
    assert world.run(a.prompt(sid, "hello"))["stopReason"] == "end_turn"


def test_load_replays_history_after_restart(world):
    a = world.agent
    sid = world.run(a.new_session(world.cwd))["sessionId"]
    world.run(a.request("session/set_mode", {"sessionId": sid, "modeId": "auto"}))
    world.run(a.prompt(sid, "hello one"))
    world.run(a.prompt(sid, "use echo"))

    async def reload():
        b = await AgentClient.start(
            *agent_args(world.model),
            env={"JUPYTER_ACP_AGENT_STATE_DIR": world.state},
            initialize=initialize_params({"discovery": "request"}),
        )
        b.handlers["_org.mini-me/tools/list"] = a.handlers["_org.mini-me/tools/list"]
        result = await b.request("session/load", {"sessionId": sid, "cwd": world.cwd, "mcpServers": []})
        replay = list(b.updates.get(sid, []))
        lists = [p for m, p in b.requests if m == "_org.mini-me/tools/list"]
        code = await b.close()
        return result, replay, lists, code

    result, replay, lists, code = world.run(reload(), 90)
    assert [(u["sessionUpdate"], u["content"]["text"]) for u in replay] == [
        ("user_message_chunk", "hello one"),
        ("agent_message_chunk", "You said: hello one"),
        ("user_message_chunk", "use echo"),
        ("agent_message_chunk", "Tool result: echoed hi"),
    ]
    assert result["modes"]["currentModeId"] == "auto"
    assert lists[-1]["_meta"]["org.mini-me"]["reason"] == "load"
    assert code == 0


def test_meta_mode_client_tools(world, tmp_path):
    async def go():
        b = await AgentClient.start(
            *agent_args(world.model),
            env={"JUPYTER_ACP_AGENT_STATE_DIR": str(tmp_path)},
            initialize=initialize_params({"discovery": "meta", "tools": TOOLS}),
        )
        install_client(world, b)
        sid = (await b.new_session(world.cwd))["sessionId"]
        result = await b.prompt(sid, "use echo", timeout=90)
        lists = [m for m, _ in b.requests if m == "_org.mini-me/tools/list"]
        text = b.text(sid)
        await b.close()
        return result, lists, text

    result, lists, text = world.run(go(), 120)
    assert result["stopReason"] == "end_turn"
    assert lists == []  # meta mode never asks
    assert text == "Tool result: echoed hi"


def test_wire_stayed_clean_and_payloads_unlogged(world):
    """Runs last in this module: the shared agent ran at DEBUG with LITELLM_LOG=DEBUG throughout."""
    assert world.agent.bad_frames == []
    with open(world.stderr, encoding="utf-8", errors="replace") as fh:
        err = fh.read()
    assert err  # it did log
    assert SENTINEL not in err
    assert MCP_STDERR_SENTINEL not in err  # an MCP child's stderr stays out of the agent's log
    assert "s3cret" not in err and "sk-fake" not in err
