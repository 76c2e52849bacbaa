"""The seed documents' rules that had no test yet: one assertion each, through a real server.

Seeds: ``/work/shared/seeds/*.txt`` and ``/work/shared/reference/seed-systems.md`` (embacle's tool
host E9/E22, the ACP extensibility rule C2, Moltis's limits M14/M18, the mini-me discovery rule).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import time

import httpx
import pytest

from jupyter_acp.acp.connection import AgentConnection
from jupyter_acp.protocol.jsonrpc import INVALID_PARAMS
from jupyter_acp.sessions.connections.acp_client import ClientEndpoint
from jupyter_acp.tools import ToolDef, text_result

from .agent.client import AgentClient, initialize_params
from .conftest import message_text, scripted

pytestmark = pytest.mark.timeout(240)

#: an agent that asks the client for a method nobody defined, and says what came back
PROBE = textwrap.dedent(
    """
    import asyncio, sys
    from jupyter_acp.protocol.jsonrpc import RpcError, serve_stdio
    from jupyter_acp.testing.agents import ScriptedAgent, parse_args

    class Probe(ScriptedAgent):
        async def on_session_prompt(self, params):
            sid = params["sessionId"]
            try:
                answer = await self.conn.request("_nobody.example/unknown", {"sessionId": sid}, timeout=10)
                await self._chunk(sid, "answered " + repr(answer))
            except RpcError as exc:
                await self._chunk(sid, f"error {exc.code}")
            return {"stopReason": "end_turn"}

    async def main():
        args = parse_args(["stream"])
        conn = await serve_stdio(lambda c: Probe(c, args))
        await conn.wait_closed()

    asyncio.run(main())
    """
)


@pytest.fixture
def acp_agents(tmp_path):
    probe = tmp_path / "probe_agent.py"
    probe.write_text(PROBE)
    return {
        "hold": {**scripted("hang", "--pid-file", str(tmp_path / "hold.pid")), "tool_channel": "mcp-http"},
        "probe": {"command": sys.executable, "args": [str(probe)], "title": "probe"},
        # the built-in agent, with no model and its history where the test can reach it
        "keeper": {
            "command": sys.executable,
            "args": ["-m", "jupyter_acp.agent"],
            "tool_channel": "client-tools",
            "env": {"JUPYTER_ACP_AGENT_STATE_DIR": str(tmp_path / "agent-state"), "JUPYTER_ACP_MODEL": ""},
        },
    }


@pytest.fixture
def acp_config():
    return {"max_sessions_per_agent": 3}


@pytest.fixture
def hub(jp_serverapp, jp_fetch):
    return jp_serverapp.web_app.settings["jupyter_acp"].hub


@pytest.fixture
def sent_to_agents(monkeypatch):
    """Every request the server sends an agent: (agent name, method, params)."""
    sent: list[tuple[str, str, object]] = []
    original = AgentConnection.request

    async def request(self, method, params, **kwargs):
        sent.append((self.name, method, params))
        return await original(self, method, params, **kwargs)

    monkeypatch.setattr(AgentConnection, "request", request)
    return sent


@pytest.fixture
def asked_of_client(monkeypatch):
    """Every request an agent sends the server: (method, params)."""
    asked: list[tuple[str, object]] = []
    original = ClientEndpoint.handle_request

    async def handle_request(self, method, params):
        asked.append((method, params))
        return await original(self, method, params)

    monkeypatch.setattr(ClientEndpoint, "handle_request", handle_request)
    return asked


async def turn(api, sid: str, text: str, timeout: float = 60) -> tuple[str, list]:
    turn_id = await api.prompt(sid, text)
    events = await api.wait_turn_end(sid, turn_id, timeout=timeout)
    return message_text(events, turn_id), events


async def held(api, hub, path: str):
    """A session of the 'hold' agent in a turn that never ends, and a bearer for its MCP endpoint."""
    s = await api.open(path, "hold")
    await api.prompt(s["id"], "hold on")
    await api.wait_for(s["id"], lambda evs: any(e["type"] == "session_ready" for e in evs))
    session = hub.get(s["id"])
    return session, hub.mcp_host.grant(session, hub.connection("hold").generation)


async def mcp(hub, bearer: str, method: str, params: dict | None = None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {bearer}"}
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(hub.mcp_host.url, content=json.dumps(body), headers=headers)


# -- embacle: E22, a timeout around each call ---------------------------------------------------
async def test_a_tool_call_past_the_per_call_timeout_is_refused_in_band(api, hub, make_notebook):
    async def slow(ctx, args):
        await asyncio.sleep(30)
        return text_result("too late")

    hub.tools.register(
        ToolDef(name="client_test_slow", description="Sleeps.", input_schema={"type": "object"}, executor=slow)
    )
    hub.tools.call_timeout = 0.5
    _, bearer = await held(api, hub, make_notebook("slow.ipynb"))
    t0 = time.monotonic()
    resp = await mcp(hub, bearer, "tools/call", {"name": "client_test_slow", "arguments": {}})
    result = resp.json()["result"]
    assert resp.status_code == 200 and result["isError"] and "timed out after 0.5 s" in result["content"][0]["text"]
    assert time.monotonic() - t0 < 10


# -- embacle: E9, a tool withdrawn mid-session ----------------------------------------------------
async def test_kernel_tools_withdrawn_when_the_kernel_goes_are_unlisted_and_refused(api, hub, make_notebook, jp_fetch):
    path = make_notebook("withdrawn.ipynb")
    body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}
    kid = json.loads((await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))).body)["kernel"]["id"]
    _, bearer = await held(api, hub, path)
    listed = {t["name"] for t in (await mcp(hub, bearer, "tools/list")).json()["result"]["tools"]}
    assert "client_execute_code" in listed
    await jp_fetch("api", "kernels", kid, method="DELETE")
    listed = {t["name"] for t in (await mcp(hub, bearer, "tools/list")).json()["result"]["tools"]}
    resp = await mcp(hub, bearer, "tools/call", {"name": "client_execute_code", "arguments": {"code": "1"}})
    assert "client_execute_code" not in listed and "client_read_cells" in listed
    assert resp.status_code == 200 and resp.json()["result"]["isError"], resp.text


# -- ACP extensibility (C2): an unknown request gets -32601 -----------------------------------------
async def test_the_client_answers_an_unknown_agent_request_with_method_not_found(api, make_notebook):
    s = await api.open(make_notebook("probe.ipynb"), "probe")
    text, _ = await turn(api, s["id"], "probe")
    assert text == "error -32601"


# -- echo closes the sessions it yields (max_sessions_per_agent) -----------------------------------
async def test_65_notebooks_on_echo_with_a_cap_of_3_all_answer_and_yielded_sessions_are_closed(
    api, make_notebook, sent_to_agents
):
    for n in range(65):
        s = await api.open(make_notebook(f"many/nb{n}.ipynb"), "echo")
        text, _ = await turn(api, s["id"], f"hello {n}")
        assert text == f"hello {n}", (n, text)
    closes = [m for name, m, _ in sent_to_agents if name == "echo" and m == "session/close"]
    assert len(closes) == 62


# -- mini-me discovery: the list is asked with the reason, and the history budget never blocks a resume
async def test_a_resumed_builtin_session_asks_the_list_for_resume_even_past_the_history_budget(
    api, hub, make_notebook, asked_of_client, tmp_path
):
    first = await api.open(make_notebook("long.ipynb"), "keeper")
    await turn(api, first["id"], "hello")
    acp_id = hub.get(first["id"]).acp_session_id
    # the agent's own history of that session grows past its 8 MiB budget
    history = os.path.join(tmp_path / "agent-state", "sessions", acp_id.split(":", 1)[1], "messages.jsonl")
    with open(history, "a", encoding="utf-8") as fh:
        for i in range(1100):
            fh.write(json.dumps({"role": "user", "content": f"q{i} " + "x" * 4000}) + "\n")
            fh.write(json.dumps({"role": "assistant", "content": f"a{i} " + "y" * 4000}) + "\n")
    assert os.path.getsize(history) > 8 * 1024 * 1024
    # three other notebooks on the built-in agent: the first yields its agent session (cap 3)
    for n in range(3):
        other = await api.open(make_notebook(f"other{n}.ipynb"), "keeper")
        await turn(api, other["id"], "hi")
    assert hub.get(first["id"]).acp_generation is None
    _, events = await turn(api, first["id"], "still there?")
    notices = [e.get("text", "") for e in events if e["type"] == "notice"]
    reasons = [p["_meta"]["org.mini-me"]["reason"] for m, p in asked_of_client if m == "_org.mini-me/tools/list"]
    assert reasons[-1] == "resume" and any("resumed" in n for n in notices), (reasons, notices)


# -- Moltis M18: MCP set-up data over 1 MiB is refused --------------------------------------------
async def test_mcp_setup_data_over_1_mib_is_invalid_params(tmp_path):
    agent = await AgentClient.start(
        env={"JUPYTER_ACP_AGENT_STATE_DIR": str(tmp_path / "state"), "JUPYTER_ACP_MODEL": ""},
        initialize=initialize_params(),
    )
    try:
        env = [{"name": f"V{i}", "value": "v" * 4096} for i in range(256)]  # 256 x 4 KiB = 1 MiB + the names
        servers = [{"name": "big", "command": sys.executable, "args": [], "env": env}]
        with pytest.raises(Exception) as info:
            await agent.new_session(str(tmp_path), servers)
        assert getattr(info.value, "code", None) == INVALID_PARAMS and "1048576 bytes" in str(info.value)
    finally:
        await agent.close()
