"""A notebook's current agent is one server-side fact the Agent panel and the ``%acp`` magic follow.

The panel's route (``notebooks/current-agent``) and the kernel's (``kernel/current-agent``, ``%acp use``) change
and read the same value; ``%%acp`` naming no agent and ``POST sessions`` naming none use it; a change is a notice
in every session of the notebook (what every panel watching it sees, live); it survives a server restart and a
rename; a read-only user cannot change it; an unknown agent is refused naming the known ones.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import nbformat
import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.httpclient import HTTPClientError

from jupyter_acp.testing.server import ServerProcess

from .conftest import SCRIPTED, hostile, scripted
from .magic.conftest import acp_server, start_kernel, wait_until  # noqa: F401 - fixtures of the real kernels

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def acp_agents(tmp_path):
    return {"other": scripted("stream"), "hostile": hostile(tmp_path)}


async def current(api, path: str) -> dict:
    return await api.call("GET", "notebooks", "current-agent", params={"path": path})


async def put_current(api, path: str, agent, by: str = "panel") -> dict:
    return await api.call("PUT", "notebooks", "current-agent", params={"path": path}, body={"agent": agent, "by": by})


def changes(events: list[dict]) -> list[tuple[str, str, str]]:
    return [(e["previous"], e["agent"], e["by"]) for e in events if e.get("phase") == "current_agent"]


async def test_the_panel_and_the_magic_change_and_read_one_agent(api, make_notebook, start_kernel):  # noqa: F811
    path = make_notebook("nb.ipynb")
    k = await start_kernel(path)
    first = await current(api, path)
    assert (first["agent"], first["chosen"], first["default_agent"]) == ("echo", False, "echo"), first
    echo = await api.open(path)  # the panel opens the notebook's session naming no agent: the current one
    assert echo["agent"] == "echo"

    # the panel's picker changes it: the kernel reads it, and %%acp naming no agent goes to it
    res = await put_current(api, path, "other")
    assert (res["agent"], res["chosen"], res["previous"], res["session"]["agent"]) == ("other", True, "echo", "other")
    status = await k.run("%acp status")
    assert "agent: other" in status.text(), status.text()
    ran = await k.run("%%acp\nhello from the cell")
    assert ran.status == "ok" and "0 1 2 3 4" in ran.text(), ran.text()
    other_id = res["session"]["id"]
    prompts = [e for e in await api.events(other_id) if e["type"] == "turn_started"]
    assert len(prompts) == 1, "the cell's prompt went to the panel's agent"
    assert not [e for e in await api.events(echo["id"]) if e["type"] == "turn_started"]
    assert (await api.open(path))["id"] == other_id, "POST sessions naming no agent opens the current one"

    # the magic changes it back: the panel's route reads it, and the change is said in both sessions
    used = await k.run("%acp use echo")
    assert used.status == "ok", used.text()
    assert "this notebook's agent is now 'echo' (it was 'other'): the Agent panel shows" in used.text(), used.text()
    now = await current(api, path)
    assert (now["agent"], now["chosen"]) == ("echo", True), now
    for sid in (echo["id"], other_id):
        assert changes(await api.events(sid)) == [("echo", "other", "panel"), ("other", "echo", "magic")], sid
    notice = [e for e in await api.events(other_id) if e.get("phase") == "current_agent"][-1]
    assert notice["text"] == "The notebook's agent is now echo (changed with %acp use in the notebook; it was other)."
    agents = await k.run("%acp agents")
    assert "echo (default) ← in use" in agents.text(), agents.text()

    # the kernel's own route too, and it answers only for its own notebook
    other_nb = make_notebook("elsewhere.ipynb")
    await put_current(api, other_nb, "other")
    probe = await k.run(
        "import json, os, urllib.request\n"
        "req = urllib.request.Request(os.environ['JUPYTER_ACP_URL'] + 'jupyter-acp/kernel/current-agent')\n"
        "req.add_header('X-Jupyter-ACP-Token', os.environ['JUPYTER_ACP_TOKEN'])\n"
        "req.add_header('X-Jupyter-ACP-Kernel', %r)\n"
        "print(json.dumps(json.loads(urllib.request.urlopen(req).read())))" % k.id
    )
    seen = json.loads(probe.stdout.strip().splitlines()[-1])
    assert (seen["notebook"], seen["agent"]) == ("nb.ipynb", "echo"), seen


async def test_a_watching_panel_sees_the_change_live(api, make_notebook, jp_ws_fetch):
    path = make_notebook("nb.ipynb")
    s = await api.open(path)
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"})
    try:
        await put_current(api, path, "other", by="api")
        deadline = asyncio.get_running_loop().time() + 20
        seen: list[dict] = []
        while not changes(seen):
            left = deadline - asyncio.get_running_loop().time()
            assert left > 0, seen
            seen += json.loads(await asyncio.wait_for(ws.read_message(), left))
        assert changes(seen) == [("echo", "other", "api")]
    finally:
        ws.close()
    # the same agent again: nothing changes, nothing said
    await put_current(api, path, "other")
    assert len(changes(await api.events(s["id"]))) == 1


async def test_unknown_agents_and_bad_requests_are_refused_with_the_rule(api, make_notebook):
    path = make_notebook("nb.ipynb")
    for agent in ("nobody", None):
        with pytest.raises(HTTPClientError) as err:
            await put_current(api, path, agent)
        assert err.value.code == 400
        body = json.loads(err.value.response.body)["message"]
        assert "the agents are: " in body and "echo" in body and "other" in body, body
    with pytest.raises(HTTPClientError) as err:
        await api.call("GET", "notebooks", "current-agent")
    assert err.value.code == 400 and b"?path=" in err.value.response.body
    with pytest.raises(HTTPClientError) as err:
        await put_current(api, "missing.ipynb", "other")
    assert err.value.code == 404
    assert (await current(api, path))["agent"] == "echo", "a refused change changes nothing"


async def test_a_rename_keeps_the_notebooks_agent(api, make_notebook, jp_fetch):
    path = make_notebook("dir/nb.ipynb")
    await put_current(api, path, "other")
    await jp_fetch("api", "contents", "dir", method="PATCH", body=json.dumps({"path": "moved"}))
    assert (await current(api, "moved/nb.ipynb"))["agent"] == "other"
    assert (await current(api, "dir/nb.ipynb"))["chosen"] is False


class ReadOnlyUser(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        return action == "read"


class TestReadOnlyUser:
    @pytest.fixture
    def server_app_config(self):
        return {"authorizer_class": ReadOnlyUser}

    async def test_reads_but_cannot_change_it(self, api, make_notebook):
        path = make_notebook("nb.ipynb")
        assert (await current(api, path))["agent"] == "echo"
        with pytest.raises(HTTPClientError) as err:
            await put_current(api, path, "other")
        assert err.value.code == 403
        assert (await current(api, path))["agent"] == "echo"


def test_the_agent_survives_a_server_restart(tmp_path):
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    (root / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    agents = {"other": {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], "stream"]}}
    server = ServerProcess(root, data, agents=agents)
    server.start()
    try:
        url = server.url("notebooks", "current-agent")
        resp = httpx.put(url, params={"path": "nb.ipynb"}, json={"agent": "other"}, headers=server.headers, timeout=10)
        assert resp.status_code == 200, resp.text
        server.stop()
        server.start()
        after = server.get("notebooks", "current-agent", path="nb.ipynb").json()
        assert (after["agent"], after["chosen"]) == ("other", True), after
        assert server.open_session("nb.ipynb")["agent"] == "other"
    finally:
        server.stop()


# -- the wrong-token message of a kernel on a Jupyter Gateway (a kernel restart there keeps its old token) ---------
def kernel_creds(kernel_id: str, token: str) -> dict[str, str]:
    return {"X-Jupyter-ACP-Token": token, "X-Jupyter-ACP-Kernel": kernel_id, "Authorization": ""}


async def wrong_token_message(jp_fetch) -> str:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-acp", "kernel", "whoami", headers=kernel_creds("k" * 36, "0" * 64))
    assert err.value.code == 403
    return json.loads(err.value.response.body)["message"]


async def test_a_local_kernels_wrong_token_says_restart_it(acp_server, jp_fetch):  # noqa: F811
    message = await wrong_token_message(jp_fetch)
    assert "restart the kernel from Jupyter" in message and "Gateway" not in message, message


class TestGatewayKernel:
    @pytest.fixture
    def jp_server_config(self, jp_server_config):
        from jupyter_server.gateway.gateway_client import GatewayClient

        GatewayClient.clear_instance()  # a process-wide singleton: this server's own, none left behind
        # no gateway needs to answer: the token is checked before any kernel is looked up
        yield {**jp_server_config, "GatewayClient": {"url": "http://127.0.0.1:9"}}
        GatewayClient.clear_instance()

    async def test_a_gateway_kernels_wrong_token_says_start_a_new_one(self, acp_server, jp_fetch):  # noqa: F811
        message = await wrong_token_message(jp_fetch)
        assert "shut it down and start a new kernel" in message and "Jupyter Gateway" in message, message
        assert "restarting a kernel keeps its old token" in message, message


async def test_switching_the_agent_stops_the_old_agents_waiting_turn_and_says_why(api, make_notebook):
    path = make_notebook("nb.ipynb")
    old = await put_current(api, path, "hostile")
    sid = old["session"]["id"]
    options = [{"optionId": "once", "name": "Allow", "kind": "allow_once"}]
    ask = {"do": "permission", "toolCall": {"toolCallId": "c1", "title": "Insert a cell"}, "options": options}
    turn = await api.prompt(sid, json.dumps([ask]))
    await api.wait_for(sid, lambda evs: any(e["type"] == "permission_request" for e in evs))
    await put_current(api, path, "other")
    # the old agent's turn ends (its card answered cancelled), and its conversation says why
    events = await api.wait_turn_end(sid, turn, timeout=30)
    end = next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn)
    assert end.get("stop_reason") == "cancelled", end
    resolved = [e for e in events if e["type"] == "permission_resolved"]
    assert resolved and "cancel" in json.dumps(resolved[-1]), resolved
    why = [e for e in events if e.get("phase") == "turn_stopped_by_agent_change"]
    assert len(why) == 1 and "changed to other" in why[0]["text"], why
    assert not (await api.call("GET", "sessions", sid)).get("pending_permissions")
