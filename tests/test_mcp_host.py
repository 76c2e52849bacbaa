"""The loopback MCP tool host: the same tools for agents that know no client-tools convention."""

from __future__ import annotations

import json
import os
import signal

import httpx
import pytest

from jupyter_acp.tools import ToolDef, text_result

from .conftest import message_text, scripted


def agent(behaviour: str, channel: str, *extra: str) -> dict:
    return {**scripted(behaviour, *extra), "tool_channel": channel}


@pytest.fixture
def acp_agents(tmp_path):
    return {
        "via_http": agent("mcp_client", "mcp-http"),
        "via_stdio": agent("mcp_client", "mcp-stdio"),
        "via_auto": agent("mcp_client", "auto"),
        "no_tools": agent("mcp_client", "none"),
        "hold": agent("hang", "mcp-http", "--pid-file", str(tmp_path / "hold.pid")),
    }


async def _echo_tool(ctx, args):
    return text_result(f"{ctx.notebook}: {json.dumps(args, sort_keys=True)}", {"args": args})


@pytest.fixture
def hub(jp_serverapp):
    hub = jp_serverapp.web_app.settings["jupyter_acp"].hub
    hub.tools.register(
        ToolDef(
            name="client_test_echo",
            description="Echo the arguments back (test tool).",
            input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
            executor=_echo_tool,
        )
    )
    return hub


async def turn_text(api, sid, text):
    turn = await api.prompt(sid, text)
    events = await api.wait_turn_end(sid, turn, timeout=60)
    return message_text(events, turn), [e for e in events if e["type"] == "turn_ended"][-1]


@pytest.mark.parametrize("name", ["via_http", "via_stdio", "via_auto"])
async def test_agent_lists_and_calls_tools_over_each_mcp_channel(api, hub, make_notebook, name):
    s = await api.open(make_notebook(f"{name}.ipynb"), name)
    listed, _ = await turn_text(api, s["id"], "list")
    tools = {t["name"]: t for t in json.loads(listed)["result"]["tools"]}
    assert "client_test_echo" in tools
    assert tools["client_test_echo"]["annotations"]["readOnlyHint"] is True
    called, end = await turn_text(api, s["id"], 'call client_test_echo {"x": 7}')
    result = json.loads(called)["result"]
    assert result["isError"] is False
    assert result["content"][0]["text"] == f'{name}.ipynb: {{"x": 7}}'
    assert result["structuredContent"] == {"args": {"x": 7}}
    assert end["tool_calls_served"] == 1
    unknown, end = await turn_text(api, s["id"], "call client_nope {}")
    assert json.loads(unknown)["result"]["isError"] is True
    assert "unknown tool" in json.loads(unknown)["result"]["content"][0]["text"]
    assert end["tool_calls_served"] == 0
    assert set(end["tool_channels"]) & {"mcp-http", "mcp-stdio"}  # the sidebar says "No notebook tool used"
    session = await api.call("GET", "sessions", s["id"])
    expected = {"via_http": ["mcp-http"], "via_stdio": ["mcp-stdio"], "via_auto": ["mcp-stdio"]}[name]
    assert session["tool_channels"] == expected


async def test_first_prompt_tells_the_agent_about_the_notebook(api, hub, make_notebook):
    s = await api.open(make_notebook("sub/pre.ipynb"), "via_http")
    # a slash command keeps the prompt to itself: no preamble in front of it, nor after it
    command, _ = await turn_text(api, s["id"], "/compact")
    assert json.loads(command) == ["/compact"]
    first, _ = await turn_text(api, s["id"], "preamble?")
    # after the user's words, never before them
    assert first.startswith("after: ") and "sub/pre.ipynb" in first and "never edit .ipynb" in first
    second, _ = await turn_text(api, s["id"], "preamble?")
    assert second == "no preamble"
    s2 = await api.open(make_notebook("plain.ipynb"), "no_tools")
    assert (await turn_text(api, s2["id"], "preamble?"))[0] == "no preamble"
    assert (await turn_text(api, s2["id"], "list"))[0] == json.dumps(
        {"error": "no MCP server was given in session/new"}
    )


async def _held_session(api, hub, make_notebook):
    s = await api.open(make_notebook("held.ipynb"), "hold")
    turn = await api.prompt(s["id"], "hold on")
    await api.wait_for(s["id"], lambda evs: any(e["type"] == "session_ready" for e in evs))
    session = hub.get(s["id"])
    bearer = hub.mcp_host.grant(session, hub.connection("hold").generation)
    return s, turn, session, bearer


async def post(host, bearer=None, body=None, headers=None, raw=None):
    """POST to the host from this event loop (the server shares it: never block it)."""
    h = {"Content-Type": "application/json", **(headers or {})}
    if bearer is not None:
        h["Authorization"] = f"Bearer {bearer}"
    data = raw if raw is not None else json.dumps(body or {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(host.url, content=data, headers=h)


async def test_bearer_rules(api, hub, make_notebook):
    s, turn, session, bearer = await _held_session(api, hub, make_notebook)
    host = hub.mcp_host
    assert len(bearer) == 64
    assert (await post(host, bearer)).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    init = (
        await post(
            host,
            bearer,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "initialize",
                "params": {"protocolVersion": "2025-03-26", "capabilities": {}},
            },
        )
    ).json()["result"]
    assert init["protocolVersion"] == "2025-03-26" and init["capabilities"]["tools"]["listChanged"] is False
    unknown_version = (
        await post(
            host,
            bearer,
            {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}},
        )
    ).json()["result"]
    assert unknown_version["protocolVersion"] == "2025-11-25"
    # a call during the turn works and is counted
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "client_test_echo"}}
    answer = (await post(host, bearer, call)).json()["result"]
    assert answer["isError"] is False and answer["content"][0]["text"] == "held.ipynb: {}"
    # refusals, all alike
    none = await post(host, None)
    wrong = await post(host, "0" * 64)
    assert none.status_code == wrong.status_code == 401
    assert none.headers["WWW-Authenticate"] == "Bearer" and none.json() == wrong.json()
    in_body = await post(host, None, {"jsonrpc": "2.0", "id": 1, "method": "ping", "auth": bearer})
    assert in_body.status_code == 401
    assert (await post(host, bearer, headers={"Origin": "http://evil.test"})).status_code == 403
    async with httpx.AsyncClient() as client:
        got = await client.get(host.url, headers={"Authorization": f"Bearer {bearer}"})
    assert got.status_code == 405
    assert (await post(host, bearer, {"jsonrpc": "2.0", "method": "notifications/initialized"})).status_code == 204
    assert (await post(host, bearer, raw="{not json")).json()["error"]["code"] == -32700
    assert (await post(host, bearer, {"jsonrpc": "1.0", "id": 1, "method": "ping"})).json()["error"]["code"] == -32600
    assert (await post(host, bearer, {"jsonrpc": "2.0", "id": 9, "method": "nope"})).json()["error"]["code"] == -32601
    sse = await post(host, bearer, headers={"Accept": "text/event-stream"})
    assert sse.headers["Content-Type"].startswith("text/event-stream")
    assert json.loads(sse.text.split("data: ", 1)[1]) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    # once the turn ends, the bearer still lists but no longer acts
    await api.call("POST", "sessions", s["id"], "cancel")
    await api.wait_turn_end(s["id"], turn)
    listed = (await post(host, bearer, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"})).json()["result"]["tools"]
    assert "client_test_echo" in [t["name"] for t in listed]
    outside = (await post(host, bearer, call)).json()["result"]
    assert outside["isError"] is True and outside["structuredContent"]["error"] == "outside_turn"


async def test_agent_death_revokes_its_bearers(api, hub, make_notebook, tmp_path):
    s, turn, session, bearer = await _held_session(api, hub, make_notebook)
    assert (await post(hub.mcp_host, bearer)).status_code == 200
    pid = int((tmp_path / "hold.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    await api.wait_turn_end(s["id"], turn)
    assert (await post(hub.mcp_host, bearer)).status_code == 401
    assert hub.mcp_host.open_grants == 0


async def test_server_stop_closes_the_host(api, hub, make_notebook):
    s, turn, session, bearer = await _held_session(api, hub, make_notebook)
    host = hub.mcp_host
    await hub.stop()
    with pytest.raises(httpx.ConnectError):
        await post(host, bearer)
    host.stop()  # idempotent


async def test_answers_fit_the_mcp_sdk_types(api, hub, make_notebook):
    """The host writes MCP's wire shapes by hand (no SDK import on the server): pin them to the SDK's types."""
    import mcp.types as mt

    s, turn, session, bearer = await _held_session(api, hub, make_notebook)
    host = hub.mcp_host
    init = (
        await post(
            host,
            bearer,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
            },
        )
    ).json()
    parsed = mt.InitializeResult.model_validate(init["result"])
    assert "held.ipynb" in (parsed.instructions or "")  # the notebook context, without touching the prompt
    listed = (await post(host, bearer, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).json()
    tools = mt.ListToolsResult.model_validate(listed["result"]).tools
    assert {"client_read_cells", "client_test_echo"} <= {t.name for t in tools}
    assert all(t.annotations is not None and t.annotations.read_only_hint is not None for t in tools)
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "client_test_echo", "arguments": {"x": 1}},
    }
    mt.CallToolResult.model_validate((await post(host, bearer, call)).json()["result"])
    error = (await post(host, bearer, {"jsonrpc": "2.0", "id": 4, "method": "nope"})).json()
    mt.JSONRPCError.model_validate(error)
    await api.call("POST", "sessions", s["id"], "cancel")
    await api.wait_turn_end(s["id"], turn)
