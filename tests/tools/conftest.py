"""Fixtures for the tool-surface tests: a server with RTC (jupyter-server-ydoc + fileid), real
kernels, a real ToolContext, and a Y client that plays the browser.

Every test that starts a kernel runs twice: against local kernels (``[local]``) and against kernels
behind a real ``jupyter kernelgateway`` on 127.0.0.1 (``[gateway]``; the server started with
``GatewayClient.url``), except the few in ``LOCAL_ONLY`` (they reach into the local kernel's process
or kernel specs; ``test_gateway.py`` covers the same ground behind the gateway).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
import pytest

from .helpers import KernelGateway, wait_until

#: tests that run against local kernels only, and why
LOCAL_ONLY = {
    "test_dead_kernel_is_an_answer": "kills the local kernel process (test_gateway.py kills one behind the gateway)",
    "test_tool_lists_follow_each_notebook": "uses a kernel spec made in the test's own data dir",
}


def pytest_generate_tests(metafunc):
    """Tests that start a kernel run against local kernels and kernels behind a gateway."""
    if "kernel_mode" not in metafunc.fixturenames or "start_kernel" not in metafunc.fixturenames:
        return
    if any(m.name == "parametrize" and "kernel_mode" in m.args[0] for m in metafunc.definition.iter_markers()):
        return
    modes = ["local"] if metafunc.function.__name__ in LOCAL_ONLY else ["local", "gateway"]
    metafunc.parametrize("kernel_mode", modes, indirect=True)


@pytest.fixture
def kernel_mode(request) -> str:
    """``local`` or ``gateway``: where the server's kernels run."""
    return getattr(request, "param", "local")


@pytest.fixture(scope="session")
def kernel_gateway():
    """One ``jupyter kernelgateway`` on 127.0.0.1 for the whole run (kernels start in ~1 s)."""
    gw = KernelGateway()
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def gateway_url(request, kernel_mode) -> str | None:
    if kernel_mode != "gateway":
        return None
    return request.getfixturevalue("kernel_gateway").url


@pytest.fixture
def gateway_config() -> dict[str, Any]:
    """Override for more ``GatewayClient`` settings of a gateway-mode server (an auth token, ...)."""
    return {}


@pytest.fixture(scope="session")
def spare_gateways():
    """Gateways a test starts for itself; stopped at the end of the run, after every server's cleanup
    (pytest-jupyter's autouse cleanup stops the server's kernels after our fixtures' teardown)."""
    gateways: list[KernelGateway] = []
    yield gateways
    for gw in gateways:
        gw.stop()


@pytest.fixture
def _gateway_singleton(gateway_url):
    """jupyter_server's GatewayClient is a process-wide singleton: each server gets a fresh one (kept
    after the test: the server's cleanup, which runs last, still talks to the gateway)."""
    from jupyter_server.gateway.gateway_client import GatewayClient

    GatewayClient.clear_instance()


@pytest.fixture
def tools_config() -> dict[str, Any]:
    """Override in a module for other JupyterACPTools settings (default: destructive tools auto-allowed)."""
    return {"permission_policy": "auto"}


@pytest.fixture
def rtc_enabled() -> bool:
    return True


@pytest.fixture
def jp_server_config(
    jp_root_dir,
    jp_data_dir,
    acp_agents,
    acp_config,
    tools_config,
    rtc_enabled,
    gateway_url,
    gateway_config,
    _gateway_singleton,
    server_app_config,
):
    extensions = {"jupyter_acp": True}
    if rtc_enabled:
        extensions.update({"jupyter_server_ydoc": True, "jupyter_server_fileid": True})
    gateway = {"GatewayClient": {"url": gateway_url, "request_timeout": 30.0, **gateway_config}} if gateway_url else {}
    return {
        **gateway,
        "ServerApp": {"jpserver_extensions": extensions, "allow_unauthenticated_access": False, **server_app_config},
        "JupyterACP": {
            "agents": acp_agents,
            "default_agent": "echo",
            "store_path": str(jp_data_dir / "acp" / "transcripts.sqlite"),
            **acp_config,
        },
        "JupyterACPTools": tools_config,
        "SQLiteYStore": {"db_path": str(jp_root_dir / ".rtc_test.db")},
        "BaseFileIdManager": {
            "root_dir": str(jp_root_dir),
            "db_path": str(jp_root_dir / ".fid_test.db"),
            "db_journal_mode": "OFF",
        },
        "YDocExtension": {"document_save_delay": 0.5, "document_cleanup_delay": 60},
    }


@pytest.fixture
def acp(jp_serverapp, jp_fetch):  # jp_fetch: the server only listens when it is requested
    return jp_serverapp.web_app.settings["jupyter_acp"]


@pytest.fixture
def start_kernel(jp_fetch):
    async def start(path: str, kernel_name: str = "python3") -> str:
        body = {"path": path, "name": path.rsplit("/", 1)[-1], "type": "notebook", "kernel": {"name": kernel_name}}
        resp = await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
        return json.loads(resp.body)["kernel"]["id"]

    return start


@pytest.fixture
def tool_ctx(acp):
    async def make(path: str):
        session = await acp.hub.open_session(path, "echo")
        return acp.hub.tool_context(session, "client-tools")

    return make


@pytest.fixture
def call(acp):
    async def run(ctx, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        return await acp.tools.call(ctx, name, args or {})

    return run


@pytest.fixture
def browser(jp_fetch, jp_http_port, jp_base_url, jp_auth_header):
    """A Y client connected to the notebook's collaboration room, as a browser tab would be."""
    from httpx_ws import aconnect_ws
    from jupyter_ydoc import YNotebook
    from pycrdt import Provider
    from pycrdt.websocket.websocket import HttpxWebsocket

    @contextlib.asynccontextmanager
    async def connect(path: str):
        resp = await jp_fetch(
            "api",
            "collaboration",
            "session",
            path,
            method="PUT",
            body=json.dumps({"format": "json", "type": "notebook"}),
        )
        data = json.loads(resp.body)
        room = f"json:notebook:{data['fileId']}"
        url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}api/collaboration/room/{room}?sessionId={data['sessionId']}"
        nb = YNotebook()
        async with httpx.AsyncClient(headers=jp_auth_header) as client:
            async with aconnect_ws(url, client) as ws, Provider(nb.ydoc, HttpxWebsocket(ws, room)):
                await wait_until(lambda: nb.cell_number > 0, timeout=20)
                yield nb

    return connect
