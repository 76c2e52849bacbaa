"""The WebSocket stream (replay + live, reconnects) and authentication on every route."""

from __future__ import annotations

import json
import re

import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.httpclient import HTTPClientError
from tornado.websocket import WebSocketClientConnection

from .conftest import message_text, scripted


@pytest.fixture
def acp_agents():
    return {"slow": scripted("slow", "--chunks", "200", "--delay", "0.01")}


async def read_until(ws: WebSocketClientConnection, stop, limit: int = 100_000) -> list[dict]:
    got: list[dict] = []
    for _ in range(limit):
        msg = await ws.read_message()
        if msg is None:
            break
        batch = json.loads(msg)
        assert isinstance(batch, list) and batch, "each message is a non-empty array of events"
        got.extend(batch)
        if stop(got):
            break
    return got


async def test_websocket_reconnect_mid_turn_loses_nothing(api, make_notebook, jp_ws_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "slow")
    turn = await api.prompt(s["id"], "go")
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"})
    first = await read_until(ws, lambda got: sum(e["type"] == "session_update" for e in got) >= 30)
    ws.close()
    last = first[-1]["seq"]
    ws2 = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": str(last)})
    second = await read_until(ws2, lambda got: any(e["type"] == "turn_ended" for e in got))
    ws2.close()
    seen = [e["seq"] for e in first + second]
    assert seen == list(range(1, len(seen) + 1)), "every event exactly once, in order"
    stored = await api.events(s["id"])
    assert [e["seq"] for e in stored] == seen
    assert message_text(first + second, turn) == " ".join(str(i) for i in range(200))


async def test_two_watchers_see_the_same_events(api, make_notebook, jp_ws_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    a = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream")
    b = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream")
    await api.prompt(s["id"], "one two three")
    done = lambda got: any(e["type"] == "turn_ended" for e in got)  # noqa: E731
    ea, eb = await read_until(a, done), await read_until(b, done)
    assert ea == eb and message_text(ea) == "one two three"


def _routes(jp_serverapp):
    app = jp_serverapp.web_app.settings["jupyter_acp"]
    for pattern, handler in app.handlers:
        path = re.sub(r"\(\?P<session_id>[^)]*\)", "0" * 32, pattern)
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", "abc", path)
        path = re.sub(r"\([^)]*\)", "abc", path)
        methods = [
            m
            for m in ("get", "post", "put", "patch", "delete")
            if m in handler.__dict__ or any(m in base.__dict__ for base in handler.__mro__[:2])
        ]
        yield path.lstrip("/"), handler, methods


async def test_every_route_refuses_unauthenticated_requests(jp_serverapp, jp_fetch, http_server_client, jp_base_url):
    routes = list(_routes(jp_serverapp))
    assert len(routes) >= 8
    checked = 0
    for path, _handler, methods in routes:
        for method in methods:
            url = f"{jp_base_url.rstrip('/')}/{path}"
            kwargs = {"method": method.upper(), "raise_error": False, "follow_redirects": False}
            if method in ("post", "put", "patch"):
                kwargs["body"] = "{}"
            resp = await http_server_client.fetch(url, **kwargs)
            assert resp.code in (401, 403, 302), f"{method.upper()} {path} answered {resp.code} without credentials"
            checked += 1
    assert checked >= 9


class DenyAgents(Authorizer):
    """An Authorizer that lets everything through except this extension."""

    def is_authorized(self, handler, user, action, resource):
        return resource != "jupyter_acp"


class TestDeniedByAuthorizer:
    @pytest.fixture
    def server_app_config(self):
        return {"authorizer_class": DenyAgents}

    async def test_every_route_refuses_users_the_authorizer_denies(self, jp_serverapp, jp_fetch, jp_ws_fetch):
        await _check_denied(jp_serverapp, jp_fetch, jp_ws_fetch)


async def _check_denied(jp_serverapp, jp_fetch, jp_ws_fetch):
    checked = 0
    for path, handler, methods in _routes(jp_serverapp):
        parts = path.split("/")
        for method in methods:
            if path.endswith("/stream") or "websocket" in handler.__name__.lower():
                with pytest.raises(HTTPClientError) as err:
                    await jp_ws_fetch(*parts)
                assert err.value.code == 403
                checked += 1
                continue
            with pytest.raises(HTTPClientError) as err:
                kwargs = {"method": method.upper()}
                if method in ("post", "put", "patch"):
                    kwargs["body"] = "{}"
                await jp_fetch(*parts, **kwargs)
            assert err.value.code == 403, f"{method.upper()} {path} answered {err.value.code}"
            checked += 1
    assert checked >= 8


async def test_cross_site_requests_are_refused(jp_serverapp, http_server_client, jp_base_url, make_notebook):
    """A browser's login cookie alone (no XSRF token, or a foreign Origin) opens nothing."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    make_notebook("nb.ipynb")
    token = jp_serverapp.identity_provider.token
    resp = await http_server_client.fetch(f"{jp_base_url}api/me?token={token}")
    login = resp.headers.get_list("Set-Cookie")[0].split(";", 1)[0]
    url = f"{jp_base_url}jupyter-acp/sessions"
    body = json.dumps({"notebook": "nb.ipynb"})
    forged = await http_server_client.fetch(url, method="POST", body=body, headers={"Cookie": login}, raise_error=False)
    assert forged.code == 403
    xsrf = "2|abcdef12|0123456789abcdef0123456789abcdef|1796000000"
    ok = await http_server_client.fetch(
        url,
        method="POST",
        body=body,
        raise_error=False,
        headers={"Cookie": f"{login}; _xsrf={xsrf}", "X-XSRFToken": xsrf},
    )
    assert ok.code == 201, "the same request with the XSRF token passes: the refusal above was the XSRF check"
    sid = json.loads(ok.body)["id"]
    ws_url = f"ws://127.0.0.1:{jp_serverapp.port}{jp_base_url}jupyter-acp/sessions/{sid}/stream"
    with pytest.raises(Exception) as err:
        await websocket_connect(HTTPRequest(ws_url, headers={"Cookie": login, "Origin": "http://evil.test"}))
    assert "403" in str(err.value)
