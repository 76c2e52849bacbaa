"""Fixtures for the tool-surface tests: a server with RTC (jupyter-server-ydoc + fileid), real
kernels, a real ToolContext, and a Y client that plays the browser."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import httpx
import pytest

from .helpers import wait_until


@pytest.fixture
def tools_config() -> dict[str, Any]:
    """Override in a module for other JupyterACPTools settings (default: destructive tools auto-allowed)."""
    return {"permission_policy": "auto"}


@pytest.fixture
def rtc_enabled() -> bool:
    return True


@pytest.fixture
def jp_server_config(jp_root_dir, jp_data_dir, acp_agents, acp_config, tools_config, rtc_enabled):
    extensions = {"jupyter_acp": True}
    if rtc_enabled:
        extensions.update({"jupyter_server_ydoc": True, "jupyter_server_fileid": True})
    return {
        "ServerApp": {"jpserver_extensions": extensions, "allow_unauthenticated_access": False},
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
            "api", "collaboration", "session", path, method="PUT", body=json.dumps({"format": "json", "type": "notebook"})
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
