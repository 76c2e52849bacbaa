"""The extension starts off the event loop (the server answers while it builds): the hub, store, tools and catalog
are built in a thread.

A request that arrives before that build is done waits for it (the loop keeps serving meanwhile) and is answered as
usual; a build that fails makes every route answer 503 with the reason and a Retry-After, and is logged with its
traceback. ``JupyterACP.startup_delay`` slows the build down; ``JUPYTER_ACP_TEST_STARTUP_FAULT`` makes it fail.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import time

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from .conftest import message_text

FAULT = "the transcript store exploded (a test's fault)"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def acp_config(request, monkeypatch):
    if "failed" in request.node.name:  # a start that fails, once the test listens to the log
        monkeypatch.setenv("JUPYTER_ACP_TEST_STARTUP_FAULT", FAULT)
    return {"startup_delay": 1.5}


def ext(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_acp"]


def test_loading_the_extension_imports_nothing_heavy():
    """What jupyter_server imports at load (the app, every route module) pulls no pydantic, pycrdt, anyio, hub."""
    code = (
        "import sys, jupyter_server.serverapp\n"
        "before = set(sys.modules)\n"
        "from jupyter_acp import _jupyter_server_extension_points as points\n"
        "app = points()[0]['app']\n"
        "from jupyter_acp.http import user_routes, kernel_routes\n"
        "user_routes.handlers(); kernel_routes.handlers()\n"
        "heavy = ('pydantic', 'pycrdt', 'anyio', 'jupyter_acp.sessions.hub', 'jupyter_acp.sessions.store',\n"
        "         'jupyter_acp.tools', 'jupyter_acp.notebook', 'jupyter_acp.channels', 'jupyter_acp.catalog.spec')\n"
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in ('pydantic', 'pycrdt', 'anyio')\n"
        "             or any(m == h or m.startswith(h + '.') for h in heavy)))\n"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


async def test_a_request_before_the_build_is_answered(jp_serverapp, jp_fetch, api, make_notebook):
    app = ext(jp_serverapp)
    assert not app.background.done, "the build (startup_delay 1.5 s) is still running when the test starts"
    t0 = time.monotonic()
    agents = asyncio.ensure_future(api.call("GET", "agents"))
    # the loop is free meanwhile: the server's own routes answer at once
    status = await jp_fetch("api", "status")
    assert status.code == 200 and not agents.done()
    names = {a["name"] for a in await agents}
    assert {"builtin", "echo"} <= names
    assert app.background.done and time.monotonic() - t0 > 0.5
    # and the rest works as always
    s = await api.open(make_notebook("nb.ipynb"))
    turn = await api.prompt(s["id"], "after a slow start")
    events = await api.wait_turn_end(s["id"], turn)
    assert message_text(events, turn) == "after a slow start"


async def test_the_started_server_is_frozen_for_the_collector(jp_serverapp, api):
    """A full collection walks only what was made after the start (a 130 ms pause became 0.6 ms, measured)."""
    app = ext(jp_serverapp)
    assert not app.background.done
    assert gc.get_freeze_count() == 0, "the servers of earlier tests in this process unfroze when they stopped"
    await api.call("GET", "agents")  # waits for the build
    assert app.background.done
    assert gc.get_freeze_count() > 10_000, "the server's modules, classes and settings left the collector"


async def test_a_websocket_before_the_build_waits(jp_serverapp, jp_http_port, jp_base_url, jp_auth_header, api):
    app = ext(jp_serverapp)
    assert not app.background.done
    # a session id no hub knows yet: the stream waits for the hub, then says 404 (not 503, not a crash)
    url = f"ws://127.0.0.1:{jp_http_port}{jp_base_url}jupyter-acp/sessions/{'0' * 32}/stream"
    with pytest.raises(HTTPClientError) as err:
        await websocket_connect(HTTPRequest(url, headers=jp_auth_header))
    assert err.value.code == 404
    assert app.background.done


async def test_a_failed_build_answers_503_everywhere(jp_serverapp, jp_fetch, jp_http_port, jp_base_url, jp_auth_header):
    app = ext(jp_serverapp)
    assert not app.background.done
    handler = Records()
    app.log.addHandler(handler)
    logged = handler.records
    routes = [
        ("GET", ("agents",), None),
        ("POST", ("sessions",), {"notebook": "nb.ipynb"}),
        ("GET", ("sessions", "0" * 32), None),
        ("GET", ("sessions", "0" * 32, "events"), None),
        ("POST", ("sessions", "0" * 32, "prompt"), {"text": "hi"}),
        ("GET", ("agents", "echo", "settings"), None),
        ("GET", ("notebooks", "current-agent"), None),
    ]
    for method, parts, body in routes:
        kwargs = {"method": method}
        if body is not None:
            kwargs["body"] = json.dumps(body)
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("jupyter-acp", *parts, **kwargs)
        resp = err.value.response
        assert err.value.code == 503, (parts, err.value.code)
        assert resp.headers.get("Retry-After"), parts
        message = json.loads(resp.body)["message"]
        assert FAULT in message and "restart the Jupyter server" in message, message
    # the WebSocket route too
    url = f"ws://127.0.0.1:{jp_http_port}{jp_base_url}jupyter-acp/sessions/{'0' * 32}/stream"
    with pytest.raises(HTTPClientError) as err:
        await websocket_connect(HTTPRequest(url, headers=jp_auth_header))
    assert err.value.code == 503
    # a kernel route without a kernel's token: 503 too, but the reason stays in the log
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-acp", "kernel", "whoami", headers={"Authorization": ""})
    assert err.value.code == 503
    assert FAULT not in json.loads(err.value.response.body)["message"]
    # the log says why, with the traceback
    records = [r for r in logged if "could not start" in r.getMessage()]
    assert records and FAULT in records[0].getMessage() and records[0].exc_info, [r.getMessage() for r in records]
    # code outside the routes gets the same reason
    with pytest.raises(RuntimeError, match="exploded"):
        app.hub  # noqa: B018
    app.log.removeHandler(handler)
