"""Each kernel has its own secret, and the kernel routes act only for that kernel's notebook: a kernel runs any code
its notebook holds, so what the kernel holds must open no more than that notebook.

Two real kernels (A on a.ipynb, B on b.ipynb) started through the real server's session API; each reads
its own ``JUPYTER_ACP_TOKEN`` from its environment, and A then tries to act for B with its own token.
"""

from __future__ import annotations

import base64
import json
import os

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import wait_until

pytestmark = pytest.mark.timeout(180)

ENV_PROBE = (
    "import os, json\n"
    "print(json.dumps({'pid': os.getpid(), 'url': os.environ.get('JUPYTER_ACP_URL'), "
    "'token': os.environ.get('JUPYTER_ACP_TOKEN')}))"
)


async def probe(k) -> dict:
    res = await k.run(ENV_PROBE)
    assert res.status == "ok", res.text()
    return json.loads(res.stdout.strip().splitlines()[-1])


def creds(kernel_id: str, token: str) -> dict[str, str]:
    # "Authorization": "" keeps pytest-jupyter's server token out: the kernel routes must not need it
    return {"X-Jupyter-ACP-Token": token, "X-Jupyter-ACP-Kernel": kernel_id, "Authorization": ""}


def server_secret_forms(acp_server) -> list[str]:
    secret = acp_server.web_app.settings["jupyter_acp"]._acp_kernel_secret
    assert secret, "the kernel API is started"
    if isinstance(secret, str):
        return [secret]
    return [secret.hex(), base64.urlsafe_b64encode(secret).decode().rstrip("="), base64.b64encode(secret).decode()]


async def expect(jp_fetch, code: int, *parts: str, **kwargs) -> None:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*parts, **kwargs)
    assert err.value.code == code, (parts, err.value.code, err.value.response.body if err.value.response else None)


async def test_a_kernel_token_opens_only_its_own_notebook(start_kernel, make_notebook, api, jp_fetch, acp_server):
    a = await start_kernel(make_notebook("a.ipynb"))
    b = await start_kernel(make_notebook("b.ipynb"))
    env_a, env_b = await probe(a), await probe(b)

    # A's own token works for A
    resp = await jp_fetch(
        "jupyter-acp", "kernel", "whoami", params={"kernel_id": a.id}, headers=creds(a.id, env_a["token"])
    )
    assert json.loads(resp.body)["notebook"] == "a.ipynb"

    # A asks whoami for B: with its own id in the header, or claiming to be B
    await expect(
        jp_fetch,
        403,
        "jupyter-acp",
        "kernel",
        "whoami",
        params={"kernel_id": b.id},
        headers=creds(a.id, env_a["token"]),
    )
    assert env_a["token"] and env_b["token"] and env_a["token"] != env_b["token"], "each kernel has its own secret"
    await expect(
        jp_fetch,
        403,
        "jupyter-acp",
        "kernel",
        "whoami",
        params={"kernel_id": b.id},
        headers=creds(b.id, env_a["token"]),
    )
    await expect(
        jp_fetch,
        403,
        "jupyter-acp",
        "kernel",
        "whoami",
        params={"kernel_id": b.id},
        headers={"X-Jupyter-ACP-Token": env_a["token"], "Authorization": ""},
    )
    # A prompts B's notebook
    body = json.dumps({"kernel_id": b.id, "text": "hello from A"})
    await expect(
        jp_fetch, 403, "jupyter-acp", "kernel", "prompt", method="POST", body=body, headers=creds(a.id, env_a["token"])
    )
    await expect(
        jp_fetch, 403, "jupyter-acp", "kernel", "session", method="POST", body=body, headers=creds(a.id, env_a["token"])
    )

    # B's session waits for a permission answer (asked through the user's API)
    session = await api.open("b.ipynb", "perm")
    sid = session["id"]
    await api.prompt(sid, "please write answer.txt")
    events = await api.wait_for(sid, lambda evs: any(e["type"] == "permission_request" for e in evs))
    rid = [e for e in events if e["type"] == "permission_request"][-1]["request_id"]
    answer = json.dumps({"option_id": "allow"})
    for kid in (a.id, b.id):  # A's token, whichever id it names
        await expect(
            jp_fetch,
            403,
            "jupyter-acp",
            "kernel",
            "sessions",
            sid,
            "permissions",
            rid,
            method="POST",
            body=answer,
            headers=creds(kid, env_a["token"]),
        )
        await expect(
            jp_fetch, 403, "jupyter-acp", "kernel", "sessions", sid, "events", headers=creds(kid, env_a["token"])
        )
        await expect(jp_fetch, 403, "jupyter-acp", "kernel", "sessions", sid, headers=creds(kid, env_a["token"]))
        await expect(
            jp_fetch,
            403,
            "jupyter-acp",
            "kernel",
            "sessions",
            sid,
            "cancel",
            method="POST",
            body="{}",
            headers=creds(kid, env_a["token"]),
        )
    assert not [e for e in await api.events(sid) if e["type"] == "permission_resolved"], "A's answer must not land"

    # B, with its own token, sees and answers its own notebook's request
    resp = await jp_fetch("jupyter-acp", "kernel", "sessions", sid, "events", headers=creds(b.id, env_b["token"]))
    assert any(e["type"] == "permission_request" for e in json.loads(resp.body)["events"])
    await jp_fetch(
        "jupyter-acp",
        "kernel",
        "sessions",
        sid,
        "permissions",
        rid,
        method="POST",
        body=answer,
        headers=creds(b.id, env_b["token"]),
    )
    resolved = [e for e in await api.events(sid) if e["type"] == "permission_resolved"]
    assert [e.get("option_id") for e in resolved] == ["allow"]

    # a token that is no kernel's, and the agents list, also need a kernel's own pair
    await expect(jp_fetch, 403, "jupyter-acp", "kernel", "agents", headers=creds(a.id, env_b["token"]))
    resp = await jp_fetch("jupyter-acp", "kernel", "agents", headers=creds(a.id, env_a["token"]))
    assert "echo" in {x["name"] for x in json.loads(resp.body)}


async def test_the_server_secret_is_in_no_kernel_and_not_in_the_runtime_file(
    start_kernel, make_notebook, acp_server, jp_runtime_dir
):
    k = await start_kernel(make_notebook("env.ipynb"))
    env = await probe(k)
    forms = server_secret_forms(acp_server)
    with open(f"/proc/{env['pid']}/environ", "rb") as fh:
        environ = fh.read().decode(errors="replace")
    for form in forms:
        assert form not in environ, "the server-wide kernel secret reached a kernel's environment"
        assert os.environ.get("JUPYTER_ACP_TOKEN") != form, "the server-wide secret is in the server's os.environ"
    assert f"JUPYTER_ACP_TOKEN={env['token']}" in environ.split("\0")
    assert env["url"] and env["url"].startswith("http")
    info_path = jp_runtime_dir / f"jupyter_acp-{os.getpid()}.json"
    assert os.stat(info_path).st_mode & 0o777 == 0o600
    raw = info_path.read_text()
    info = json.loads(raw)
    assert info["url"] == env["url"] and info["pid"] == os.getpid()
    for form in [*forms, env["token"]]:
        assert form not in raw, "the runtime file hands out a secret"


async def test_a_restarted_kernel_keeps_its_token_and_the_magic(start_kernel, make_notebook, jp_fetch, acp_server):
    nb = make_notebook("restart.ipynb")
    k = await start_kernel(nb)
    before = await probe(k)
    res = await k.run("%%acp echo\nbefore the restart")
    assert res.status == "ok" and "before the restart" in res.final()["data"]["text/plain"], res.text()

    await jp_fetch("api", "kernels", k.id, "restart", method="POST", body="{}")
    await k.kc.wait_for_ready(timeout=90)

    async def restarted():
        try:
            return (await probe(k))["pid"] != before["pid"]
        except AssertionError:
            return False

    await wait_until(restarted, timeout=60)
    after = await probe(k)
    assert after["token"] == before["token"] and after["url"] == before["url"], (
        "a restarted kernel keeps its id and token"
    )
    res = await k.run("%load_ext jupyter_acp")
    assert res.status == "ok", res.text()
    res = await k.run("%%acp echo\nafter the restart")
    assert res.status == "ok", res.text()
    final = res.final()
    assert "after the restart" in final["data"]["text/plain"]
    assert final["metadata"]["jupyter_acp"]["notebook"] == nb


async def test_a_kernel_started_without_env_gets_the_whole_environment_and_its_token(
    acp_server, jp_fetch, monkeypatch, jp_asyncio_loop
):
    """``POST api/kernels`` passes no ``env``: the hook must hand over a full copy of the server's, plus the token."""
    from jupyter_acp.http.kernel_routes import kernel_token

    monkeypatch.setenv("ACP_TEST_INHERITED", "from-the-server")
    resp = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": "python3"}))
    kid = json.loads(resp.body)["id"]
    try:
        km = acp_server.kernel_manager.get_kernel(kid)
        pid = km.provisioner.process.pid
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = dict(item.split("=", 1) for item in fh.read().decode(errors="replace").split("\0") if "=" in item)
        app = acp_server.web_app.settings["jupyter_acp"]
        assert environ["JUPYTER_ACP_TOKEN"] == kernel_token(app._acp_kernel_secret, kid)
        assert environ["JUPYTER_ACP_URL"] == app._acp_kernel_url
        assert environ.get("ACP_TEST_INHERITED") == "from-the-server" and environ.get("PATH") == os.environ["PATH"]
    finally:
        await acp_server.kernel_manager.shutdown_kernel(kid, now=True)
