"""The ``%acp`` magic in a kernel behind a real Jupyter Gateway (``jupyter kernelgateway`` on 127.0.0.1).

The server runs with ``GatewayClient.url``; a notebook kernel is started through the server's session API (so
the gateway starts it, with the request's ``KERNEL_*`` variables as the only environment it passes on), and the
test talks to that kernel's process directly (the gateway runs it on this machine: its connection file).  A
kernel started on the gateway directly, not through our server, is the hostile one: it gets nothing, and what
it guesses is refused.
"""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest
from jupyter_client.asynchronous import AsyncKernelClient
from tornado.httpclient import HTTPClientError

from ..tools.helpers import KernelGateway
from .conftest import Kernel

pytestmark = pytest.mark.timeout(240)

ENV_PROBE = "import os, json\nprint(json.dumps({k: v for k, v in os.environ.items() if 'JUPYTER_ACP' in k}))"


@pytest.fixture(scope="module")
def gateway():
    gw = KernelGateway()
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def gateway_singleton():
    """jupyter_server's GatewayClient is a process-wide singleton: a fresh one for this server, and none left
    behind for the next test's server (torn down after the server: jp_server_config depends on it)."""
    from jupyter_server.gateway.gateway_client import GatewayClient

    GatewayClient.clear_instance()
    yield
    GatewayClient.clear_instance()


@pytest.fixture
def jp_server_config(jp_server_config, gateway, gateway_singleton):
    return {**jp_server_config, "GatewayClient": {"url": gateway.url, "request_timeout": 60.0}}


def connection_file(gw: KernelGateway, kernel_id: str) -> str:
    pid = gw.kernel_pid(kernel_id)
    assert pid, f"the gateway's process for kernel {kernel_id} was not found"
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        args = fh.read().decode().split("\0")
    return args[args.index("-f") + 1]


class GatewayKernel(Kernel):
    """A kernel the gateway runs: started through our server's session API (``path``), or on the gateway
    directly (``direct``); the test's client reads its connection file (the gateway runs it here)."""

    def __init__(self, serverapp, fetch, path: str, gw: KernelGateway, direct: bool = False) -> None:
        super().__init__(serverapp, fetch, path)
        self.gw = gw
        self.direct = direct

    async def start(self) -> GatewayKernel:
        if self.direct:
            body = json.dumps({"name": "python3", "env": {"KERNEL_SOMETHING": "x"}}).encode()
            req = urllib.request.Request(
                self.gw.url + "/api/kernels", data=body, method="POST", headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(req, timeout=60) as resp:
                self.id = json.loads(resp.read())["id"]
        else:
            body = {"path": self.path, "name": self.path, "type": "notebook", "kernel": {"name": "python3"}}
            resp = await self.fetch("api", "sessions", method="POST", body=json.dumps(body))
            self.id = json.loads(resp.body)["kernel"]["id"]
        self.kc = AsyncKernelClient(connection_file=connection_file(self.gw, self.id))
        self.kc.load_connection_file()
        self.kc.start_channels(hb=False)  # no heartbeat: on a loaded machine a missed beat reads as "died"
        await self.kc.wait_for_ready(timeout=90)
        return self


@pytest.fixture
def gw_kernel(acp_server, jp_fetch, jp_asyncio_loop, gateway):
    kernels: list[GatewayKernel] = []

    async def start(path: str = "", *, direct: bool = False, load: bool = True) -> GatewayKernel:
        k = await GatewayKernel(acp_server, jp_fetch, path, gateway, direct=direct).start()
        kernels.append(k)
        if load:
            res = await k.run("%load_ext jupyter_acp")
            assert res.status == "ok", res.text()
        return k

    yield start
    for k in kernels:
        k.stop()
        if k.direct:
            req = urllib.request.Request(f"{gateway.url}/api/kernels/{k.id}", method="DELETE")
            try:
                urllib.request.urlopen(req, timeout=30).close()
            except OSError:
                pass
        else:
            jp_asyncio_loop.run_until_complete(acp_server.kernel_manager.shutdown_kernel(k.id, now=True))


async def probe(k: GatewayKernel) -> dict[str, str]:
    res = await k.run(ENV_PROBE)
    assert res.status == "ok", res.text()
    return json.loads(res.stdout.strip().splitlines()[-1])


def creds(kernel_id: str, token: str) -> dict[str, str]:
    # "Authorization": "" keeps pytest-jupyter's server token out: the kernel routes must not need it
    return {"X-Jupyter-ACP-Token": token, "X-Jupyter-ACP-Kernel": kernel_id, "Authorization": ""}


async def refused(jp_fetch, *parts: str, **kwargs) -> str:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*parts, **kwargs)
    assert err.value.code == 403, (parts, err.value.code)
    return err.value.response.body.decode() if err.value.response else ""


async def test_the_magic_in_a_gateway_kernel_uses_the_server(gw_kernel, make_notebook, acp_server, api, caplog):
    from jupyter_server.gateway.managers import GatewayMappingKernelManager

    assert isinstance(acp_server.kernel_manager, GatewayMappingKernelManager)
    k = await gw_kernel(make_notebook("gw/magic.ipynb"))
    env = await probe(k)
    # the gateway passed on our KERNEL_* pair (and nothing of the server's own environment)
    app = acp_server.web_app.settings["jupyter_acp"]
    assert env.get("KERNEL_JUPYTER_ACP_URL") == app._acp_kernel_url, env
    assert len(env.get("KERNEL_JUPYTER_ACP_TOKEN", "")) >= 32, env
    assert set(env) == {"KERNEL_JUPYTER_ACP_URL", "KERNEL_JUPYTER_ACP_TOKEN"}, env
    # jupyter_server logs a gateway start request's arguments, env included: never the kernel's token
    assert "GatewayKernelManager started kernel" in caplog.text
    assert env["KERNEL_JUPYTER_ACP_TOKEN"] not in caplog.text

    res = await k.run("%acp status")
    assert res.status == "ok", res.text()
    assert "mode: server" in res.text() and "gw/magic.ipynb" in res.text(), res.text()
    res = await k.run("%%acp echo\nhello from behind the gateway")
    assert res.status == "ok", res.text()
    assert "hello from behind the gateway" in res.final()["data"]["text/plain"], res.text()
    # the turn ran in the server, in the notebook's session the sidebar sees
    session = await api.open("gw/magic.ipynb", "echo")
    events = await api.events(session["id"])
    assert [e["prompt"][0]["text"] for e in events if e["type"] == "turn_started"] == ["hello from behind the gateway"]


async def test_a_kernel_started_on_the_gateway_directly_gets_nothing(gw_kernel, make_notebook, acp_server, jp_fetch):
    ours = await gw_kernel(make_notebook("gw/ours.ipynb"))
    other = await gw_kernel(make_notebook("gw/other.ipynb"))
    hostile = await gw_kernel(direct=True)
    env_ours, env_other, env_hostile = await probe(ours), await probe(other), await probe(hostile)
    token = env_ours["KERNEL_JUPYTER_ACP_TOKEN"]
    # each kernel of ours has its own token; the one started behind our back has none
    assert env_other["KERNEL_JUPYTER_ACP_TOKEN"] != token
    assert env_hostile == {}, env_hostile
    res = await hostile.run("%acp status")
    assert res.status == "ok" and "mode: local" in res.text(), res.text()

    # our kernel's own pair works
    resp = await jp_fetch(
        "jupyter-acp", "kernel", "whoami", params={"kernel_id": ours.id}, headers=creds(ours.id, token)
    )
    assert json.loads(resp.body)["notebook"] == "gw/ours.ipynb"
    # the hostile kernel guesses: its own id, or ours, with made-up tokens, the server's tokens, the HMAC of nothing
    guesses = ["0" * 64, "guess", acp_server.identity_provider.token or "x", env_other["KERNEL_JUPYTER_ACP_TOKEN"]]
    for kid in (hostile.id, ours.id):
        for guess in guesses:
            body = await refused(
                jp_fetch, "jupyter-acp", "kernel", "whoami", params={"kernel_id": kid}, headers=creds(kid, guess)
            )
            assert "wrong jupyter_acp kernel token" in body, body
        await refused(
            jp_fetch,
            "jupyter-acp",
            "kernel",
            "prompt",
            method="POST",
            body=json.dumps({"kernel_id": kid, "text": "hi"}),
            headers=creds(kid, guesses[0]),
        )
    # and our kernel's token does not open another id (the hostile one's, or the other notebook's kernel)
    for kid in (hostile.id, other.id):
        await refused(jp_fetch, "jupyter-acp", "kernel", "agents", headers=creds(kid, token))
    # no kernel token lives in the server's environment (every start request copies its KERNEL_* variables)
    import os

    assert not [k for k in os.environ if "JUPYTER_ACP_TOKEN" in k and os.environ[k]]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestUnreachableServer:
    """``kernel_server_url`` names a URL the kernel cannot reach: the magic runs its agent locally and says why."""

    @pytest.fixture
    def acp_config(self):
        return {"kernel_server_url": f"http://127.0.0.1:{closed_port()}/"}

    async def test_the_magic_falls_back_and_says_why(self, gw_kernel, make_notebook, acp_server):
        k = await gw_kernel(make_notebook("gw/far.ipynb"))
        env = await probe(k)
        assert env["KERNEL_JUPYTER_ACP_URL"] == acp_server.web_app.settings["jupyter_acp"].kernel_server_url
        res = await k.run("%%acp echo\nanybody there")
        assert res.status == "ok", res.text()
        assert "cannot be reached" in res.stderr and "runs inside this kernel" in res.stderr, res.text()
        assert "anybody there" in res.text()


def hub_snippet() -> str:
    """The single-user ``jupyter_server_config.py`` of ``docs/jupyterhub.md``."""
    import re
    import textwrap
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "jupyterhub.md").read_text(encoding="utf-8")
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", doc, re.S)]
    return next(b for b in blocks if "jupyter_server_config.py" in b)


class TestTheHubSnippet:
    """docs/jupyterhub.md's single-user config, run as a hub would run it, drives the gateway server."""

    @pytest.fixture
    def hub_config(self, gateway, jp_http_port, jp_base_url, monkeypatch):
        from traitlets.config import Config

        monkeypatch.setenv("JUPYTER_GATEWAY_URL", gateway.url)
        monkeypatch.setenv("JUPYTERHUB_SERVICE_URL", f"http://0.0.0.0:{jp_http_port}{jp_base_url}")
        monkeypatch.setenv("POD_IP", "127.0.0.1")
        c = Config()
        exec(compile(hub_snippet(), "docs/jupyterhub.md single-user snippet", "exec"), {"c": c})
        return c

    @pytest.fixture
    def jp_server_config(self, jp_server_config, hub_config):
        return {
            **jp_server_config,
            "GatewayClient": dict(hub_config.GatewayClient),
            "JupyterACP": {
                **jp_server_config["JupyterACP"],
                "kernel_server_url": hub_config.JupyterACP.kernel_server_url,
            },
        }

    async def test_the_snippet_configures_a_working_gateway_server(
        self, hub_config, gw_kernel, make_notebook, acp_server, jp_http_port, jp_base_url
    ):
        from jupyter_acp.app import JupyterACP

        acp = JupyterACP(config=hub_config)  # every JupyterACP setting of the snippet exists and takes its value
        assert "codex" in acp.agents and acp.default_agent == "builtin"
        expected = f"http://127.0.0.1:{jp_http_port}{jp_base_url}"
        assert hub_config.JupyterACP.kernel_server_url == expected
        k = await gw_kernel(make_notebook("gw/hub.ipynb"))
        assert (await probe(k))["KERNEL_JUPYTER_ACP_URL"] == expected  # not the server's own "localhost" URL
        res = await k.run("%acp status")
        assert res.status == "ok" and "mode: server" in res.text() and "gw/hub.ipynb" in res.text(), res.text()
        res = await k.run("%%acp echo\nfrom the hub's kernel")
        assert res.status == "ok" and "from the hub's kernel" in res.final()["data"]["text/plain"], res.text()
