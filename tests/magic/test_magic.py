"""%acp / %%acp in real kernels started by the real server, against real agent subprocesses."""

from __future__ import annotations

import json
import os

import pytest

from ..conftest import message_text

pytestmark = pytest.mark.timeout(120)


async def test_streams_into_the_output(start_kernel, make_notebook, api):
    nb = make_notebook("work/nb.ipynb")
    k = await start_kernel(nb)
    words = " ".join(f"w{i}" for i in range(40))
    res = await k.run(f"%%acp echo\n{words}")
    assert res.status == "ok", res.text()
    shown = res.displays()
    assert shown[0]["msg_type"] == "display_data"
    updates = [m for m in shown if m["msg_type"] == "update_display_data"]
    assert updates, "the answer is updated in place as it streams"
    final = res.final()
    assert final["data"]["text/markdown"].rstrip().endswith(words)
    meta = final["metadata"]["jupyter_acp"]
    assert meta["agent"] == "echo" and meta["notebook"] == "work/nb.ipynb" and meta["format"] == "markdown"
    # the same session the HTTP API sees for this notebook
    sessions = await api.call("GET", "sessions", params={"notebook": nb})
    assert [s["id"] for s in sessions] == [meta["session_id"]]


async def test_session_shared_with_the_api(start_kernel, make_notebook, api):
    nb = make_notebook("shared.ipynb")
    session = await api.open(nb)
    turn = await api.prompt(session["id"], "first question from the sidebar")
    await api.wait_turn_end(session["id"], turn)
    k = await start_kernel(nb)
    res = await k.run('name = "world"\nrows = [1, 2]')
    assert res.status == "ok"
    res = await k.run("%%acp\nhello {name} {rows!r} {missing} {{literal}}")
    assert res.status == "ok", res.text()
    final = res.final()
    assert final["metadata"]["jupyter_acp"]["session_id"] == session["id"]
    assert "hello world [1, 2] {missing} {{literal}}" in final["data"]["text/plain"]
    events = await api.events(session["id"])
    prompts = [e["prompt"][0]["text"] for e in events if e["type"] == "turn_started"]
    assert prompts == ["first question from the sidebar", "hello world [1, 2] {missing} {{literal}}"]
    # the line magic sees the same conversation
    res = await k.run("%acp history")
    assert "first question from the sidebar" in res.text() and "hello world" in res.text()
    res = await k.run("%acp status")
    assert session["id"] in res.text() and "shared.ipynb" in res.text()
    res = await k.run("%acp one line {name}")
    assert res.status == "ok" and "one line world" in res.final()["data"]["text/plain"]
    res = await k.run("%acp agents")
    assert "perm" in res.text() and "echo (default)" in res.text()


async def test_code_format_creates_a_cell(start_kernel, make_notebook):
    nb = make_notebook("code.ipynb")
    k = await start_kernel(nb)
    res = await k.run("%%acp -f code\nx = 41 + 1")
    assert res.status == "ok", res.text()
    payload = res.reply["content"]["payload"]
    assert [p["source"] for p in payload] == ["set_next_input"]
    assert payload[0]["text"].strip() == "x = 41 + 1" and payload[0]["replace"] is False
    assert "inserted in a new cell below" in res.final()["data"]["text/plain"]
    res = await k.run('%%acp --format=json\n{"a": [1, 2]}')
    assert res.final()["data"]["application/json"] == {"a": [1, 2]}


async def test_permission_answered_through_the_api(start_kernel, make_notebook, api):
    nb = make_notebook("perm.ipynb")
    k = await start_kernel(nb)
    answered: list[str] = []

    async def on_msg(msg):
        if answered or msg["msg_type"] not in ("display_data", "update_display_data"):
            return
        if "permission asked" not in msg["content"]["data"].get("text/plain", ""):
            return
        sid = msg["content"]["metadata"]["jupyter_acp"]["session_id"]
        events = await api.events(sid)
        req = [e for e in events if e["type"] == "permission_request"][-1]
        assert [o["optionId"] for o in req["options"]] == ["allow", "reject"]
        await api.call("POST", "sessions", sid, "permissions", req["request_id"], body={"option_id": "allow"})
        answered.append(req["request_id"])

    res = await k.run("%%acp perm\nplease write answer.txt", on_msg=on_msg)
    assert res.status == "ok", res.text()
    assert answered, "the cell showed the permission request while it waited"
    text = res.final()["data"]["text/plain"]
    assert "permission: allow" in text
    assert "permission for Write answer.txt: allow" in text


async def test_permission_answered_in_the_cell(start_kernel, make_notebook, api):
    nb = make_notebook("perm_cell.ipynb")
    k = await start_kernel(nb)
    prompts: list[str] = []

    def answer(prompt: str) -> str:
        prompts.append(prompt)
        return "2"  # the second option: Reject

    res = await k.run("%%acp perm\nplease write answer.txt", stdin=answer)
    assert res.status == "ok", res.text()
    assert prompts and "[1] Allow [2] Reject" in prompts[0]
    text = res.final()["data"]["text/plain"]
    assert "permission: reject" in text and "permission for Write answer.txt: reject" in text
    sid = res.final()["metadata"]["jupyter_acp"]["session_id"]
    resolved = [e for e in await api.events(sid) if e["type"] == "permission_resolved"]
    assert [e.get("option_id") for e in resolved] == ["reject"]


async def test_interrupt_cancels_the_turn(start_kernel, make_notebook, api, acp_server):
    nb = make_notebook("cancel.ipynb")
    k = await start_kernel(nb)
    interrupted: list[bool] = []

    async def on_msg(msg):
        if (
            not interrupted
            and msg["msg_type"] == "update_display_data"
            and "3 " in msg["content"]["data"].get("text/plain", "")
        ):
            interrupted.append(True)
            await acp_server.kernel_manager.interrupt_kernel(k.id)

    res = await k.run("%%acp slow\ncount slowly", on_msg=on_msg)
    assert interrupted
    assert res.status == "ok", res.text()
    assert res.final()["data"]["text/plain"].rstrip().endswith("cancelled")
    sid = res.final()["metadata"]["jupyter_acp"]["session_id"]
    events = await api.events(sid)
    ended = [e for e in events if e["type"] == "turn_ended"]
    assert ended and ended[-1]["stop_reason"] == "cancelled"
    assert "199" not in message_text(events)


async def test_line_cancel_and_reset(start_kernel, make_notebook, api):
    nb = make_notebook("sidebar.ipynb")
    session = await api.open(nb, agent="perm")
    turn = await api.prompt(session["id"], "started in the sidebar")
    await api.wait_for(session["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    k = await start_kernel(nb)
    res = await k.run("%acp use perm\n%acp cancel")
    assert res.status == "ok" and "cancelled the running turn" in res.text(), res.text()
    events = await api.wait_turn_end(session["id"], turn)
    assert [e for e in events if e["type"] == "turn_ended"][-1]["stop_reason"] == "cancelled"
    res = await k.run("%acp cancel")
    assert "nothing to cancel" in res.text()
    res = await k.run("%acp history")
    assert "started in the sidebar" in res.text()
    before = await api.call("GET", "sessions", session["id"])
    res = await k.run("%acp reset")
    assert res.status == "ok" and "new conversation" in res.text(), res.text()
    events = await api.wait_for(
        session["id"], lambda evs: any(e["type"] == "session_ready" and e["seq"] > before["last_seq"] for e in evs)
    )
    readies = [e["acp_session_id"] for e in events if e["type"] == "session_ready"]
    assert len(set(readies)) == 2, "the agent got a new ACP session"
    res = await k.run("%acp history")
    assert "started in the sidebar" not in res.text()


async def test_clear_errors(start_kernel, make_notebook):
    nb = make_notebook("errors.ipynb")
    k = await start_kernel(nb)
    res = await k.run("%%acp nope\nhello")
    assert res.status == "error" and "no agent named 'nope'" in res.text()
    assert "Traceback" not in res.text()
    res = await k.run("%%acp -f pdf\nhello")
    assert "unknown format 'pdf'" in res.text()
    res = await k.run("%%acp\n   ")
    assert "the prompt is empty" in res.text()
    res = await k.run("%%acp login\nhello")
    assert res.status == "error" and "log in" in res.text(), res.text()
    res = await k.run("%acp fix")
    assert "no error to explain" in res.text() or res.status == "ok"
    res = await k.run("%%acp slow --timeout 1\ncount")
    assert res.status == "ok" and "timed out after 1 s" in res.final()["data"]["text/plain"], res.text()
    res = await k.run("1/0")
    res = await k.run("%acp fix")
    assert res.status == "ok", res.text()
    assert "ZeroDivisionError" in res.final()["data"]["text/plain"]


async def test_kernel_routes_need_the_secret(acp_server, jp_fetch, jp_runtime_dir):
    from tornado.httpclient import HTTPClientError

    from jupyter_acp.http.kernel_routes import kernel_token

    # each kernel has its own token (tests/magic/test_kernel_secret.py); this is the one kernel "nope" would get
    app = acp_server.web_app.settings["jupyter_acp"]
    url, token = app._acp_kernel_url, kernel_token(app._acp_kernel_secret, "nope")
    assert url.startswith("http") and token
    assert token != acp_server.identity_provider.token
    info_path = jp_runtime_dir / f"jupyter_acp-{os.getpid()}.json"
    assert os.stat(info_path).st_mode & 0o777 == 0o600
    info = json.loads(info_path.read_text())
    assert info["url"] == url and "token" not in info and info["pid"] == os.getpid()
    for headers in ({}, {"X-Jupyter-ACP-Token": "wrong"}, {"Authorization": "token wrong"}):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch(
                "jupyter-acp",
                "kernel",
                "agents",
                headers={**headers, "Authorization": headers.get("Authorization", "")},
            )
        assert err.value.code == 403
    mine = {"X-Jupyter-ACP-Token": token, "X-Jupyter-ACP-Kernel": "nope", "Authorization": ""}
    resp = await jp_fetch("jupyter-acp", "kernel", "agents", headers=mine)
    assert "echo" in {a["name"] for a in json.loads(resp.body)}
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-acp", "kernel", "whoami", params={"kernel_id": "nope"}, headers=mine)
    assert err.value.code == 404
    # the server's own API does not accept the kernel secret
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-acp", "agents", headers={"Authorization": f"token {token}"})
    assert err.value.code == 403
