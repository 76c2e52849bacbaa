"""Warm turns on the session's open WebSocket: prompt, cancel and permission answers sent as frames.

Same validation and the same hub calls as the REST routes, the Authorizer asked for ``write`` at each op, every
op answered by a frame carrying its ``ref``, and a bad frame answered without ending the stream.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.websocket import WebSocketClientConnection

from .conftest import message_text, scripted


@pytest.fixture
def acp_agents():
    return {"permission": scripted("permission"), "hang": scripted("hang")}


@pytest.fixture
def acp_config():
    return {"max_prompt_bytes": 4096}


class Reader:
    """Reads a session socket: event arrays into ``events``, op answers (objects) into ``answers``."""

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []

    async def op(self, frame: Any) -> dict[str, Any]:
        """Send a frame (an object, or raw text) and read until its answer."""
        await self.ws.write_message(frame if isinstance(frame, str) else json.dumps(frame))
        return await self.answer()

    async def answer(self) -> dict[str, Any]:
        n = len(self.answers)
        while len(self.answers) == n:
            await self._read()
        return self.answers[-1]

    async def until(self, predicate) -> list[dict[str, Any]]:
        while not predicate(self.events):
            await self._read()
        return self.events

    async def _read(self) -> None:
        msg = await self.ws.read_message()
        assert msg is not None, "the socket closed"
        data = json.loads(msg)
        if isinstance(data, list):
            self.events.extend(data)
        else:
            assert isinstance(data, dict) and "ok" in data, data
            self.answers.append(data)


def ended(turn_id: str):
    return lambda events: any(e["type"] == "turn_ended" and e.get("turn_id") == turn_id for e in events)


async def socket(jp_ws_fetch, sid: str) -> Reader:
    return Reader(await jp_ws_fetch("jupyter-acp", "sessions", sid, "stream", params={"after": "0"}))


async def test_prompt_on_the_socket_runs_a_turn_and_answers_with_its_ref(api, make_notebook, jp_ws_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    r = await socket(jp_ws_fetch, s["id"])
    answer = await r.op({"op": "prompt", "ref": "p1", "text": "one two three"})
    assert answer["ref"] == "p1" and answer["ok"] is True and answer["turn_id"]
    events = await r.until(ended(answer["turn_id"]))
    assert message_text(events, answer["turn_id"]) == "one two three"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "every event once, in order"
    assert [e["seq"] for e in await api.events(s["id"])] == [e["seq"] for e in events], "stored as sent"
    # ACP content blocks too, and a second (warm) turn on the same socket
    answer2 = await r.op({"op": "prompt", "ref": 7, "prompt": [{"type": "text", "text": "four five"}]})
    assert answer2["ref"] == 7 and answer2["ok"]
    assert message_text(await r.until(ended(answer2["turn_id"])), answer2["turn_id"]) == "four five"
    r.ws.close()


async def test_cancel_on_the_socket_ends_the_turn(api, make_notebook, jp_ws_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "hang")
    r = await socket(jp_ws_fetch, s["id"])
    started = await r.op({"op": "prompt", "ref": "a", "text": "wait forever"})
    assert started["ok"]
    busy = await r.op({"op": "prompt", "ref": "b", "text": "again"})
    assert busy == {
        "ref": "b",
        "ok": False,
        "status": 409,
        "error": "a turn is already running in this session; cancel it or wait for it to end",
    }
    answer = await r.op({"op": "cancel", "ref": "c"})
    assert answer == {"ref": "c", "ok": True, "cancelled": True}
    events = await r.until(ended(started["turn_id"]))
    end = next(e for e in events if e["type"] == "turn_ended")
    assert end.get("stop_reason") == "cancelled", end
    assert (await r.op({"op": "cancel", "ref": "d"}))["cancelled"] is False, "nothing left to cancel"
    r.ws.close()


async def test_permission_answer_on_the_socket(api, make_notebook, jp_ws_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "permission")
    r = await socket(jp_ws_fetch, s["id"])
    started = await r.op({"op": "prompt", "ref": "p", "text": "write it"})
    events = await r.until(lambda ev: any(e["type"] == "permission_request" for e in ev))
    request_id = next(e for e in events if e["type"] == "permission_request")["request_id"]
    wrong = await r.op({"op": "permission", "ref": "w", "request_id": request_id, "option_id": "nope"})
    assert wrong["ok"] is False and wrong["status"] == 400 and "nope" in wrong["error"], wrong
    bad_id = await r.op({"op": "permission", "ref": "x", "request_id": "../../etc", "option_id": "allow"})
    assert bad_id["ok"] is False and bad_id["status"] == 400 and "request_id" in bad_id["error"]
    answer = await r.op({"op": "permission", "ref": "q", "request_id": request_id, "option_id": "allow"})
    assert answer == {"ref": "q", "ok": True, "request_id": request_id, "option_id": "allow"}
    events = await r.until(ended(started["turn_id"]))
    assert "permission: allow" in message_text(events, started["turn_id"])
    again = await r.op({"op": "permission", "ref": "z", "request_id": request_id, "option_id": "allow"})
    assert again["ok"] is False and again["status"] == 404, "an answer is used once"
    r.ws.close()


async def test_invalid_frames_are_answered_and_the_socket_keeps_serving(api, make_notebook, jp_ws_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    r = await socket(jp_ws_fetch, s["id"])
    cases = [
        ("not json", 400, "not JSON"),
        ("[1, 2]", 400, "JSON object"),
        (json.dumps({"ref": "u", "op": "delete_everything"}), 400, "unknown op"),
        (json.dumps({"ref": "t", "op": "prompt"}), 400, "either 'text' or 'prompt'"),
        (json.dumps({"ref": "t2", "op": "prompt", "text": "x", "sneaky": 1}), 400, "sneaky"),
        (
            json.dumps({"ref": "i", "op": "prompt", "prompt": [{"type": "image", "mimeType": "x/y", "data": "AA=="}]}),
            400,
            "not accepted",
        ),
        (json.dumps({"ref": "c", "op": "cancel", "extra": True}), 400, "no fields"),
        (json.dumps({"ref": {"nested": 1}, "op": "cancel"}), 400, "ref is a string"),
    ]
    for raw, status, words in cases:
        answer = await r.op(raw)
        assert answer["ok"] is False and answer["status"] == status and words in answer["error"], (raw, answer)
    assert not any(e["type"] == "turn_started" for e in await api.events(s["id"])), "no bad frame acted"
    good = await r.op({"op": "prompt", "ref": "ok", "text": "still here"})
    assert good["ok"] and good["ref"] == "ok"
    assert message_text(await r.until(ended(good["turn_id"])), good["turn_id"]) == "still here"
    r.ws.close()


async def test_an_oversized_frame_is_bounded(api, make_notebook, jp_ws_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    r = await socket(jp_ws_fetch, s["id"])
    # over the prompt route's body bound (max_prompt_bytes * 2 + 4096): refused, the socket stays
    answer = await r.op({"op": "prompt", "ref": "big", "text": "x" * (4096 * 2 + 5000)})
    assert answer["ok"] is False and answer["status"] == 413 and "max_prompt_bytes" in answer["error"], answer
    # within the frame bound but over the prompt's own limit: the route's check answers
    answer = await r.op({"op": "prompt", "ref": "big2", "text": "y" * 5000})
    assert answer["ok"] is False and answer["status"] == 413 and "limit is 4096" in answer["error"], answer
    good = await r.op({"op": "prompt", "ref": "small", "text": "fine"})
    assert good["ok"]
    await r.until(ended(good["turn_id"]))
    # far over it: the server does not buffer it, it closes the socket (1009) instead
    await r.ws.write_message("z" * (4 * (4096 * 2 + 4096) + 65536 + 1024))
    assert await r.ws.read_message() is None
    assert r.ws.close_code == 1009


class ReadOnly(Authorizer):
    """Read everything, write nothing of this extension."""

    def is_authorized(self, handler, user, action, resource):
        return resource != "jupyter_acp" or action == "read"


class TestReadOnlySocket:
    @pytest.fixture
    def server_app_config(self):
        return {"authorizer_class": ReadOnly}

    async def test_a_read_only_socket_streams_but_never_acts(self, jp_serverapp, make_notebook, jp_ws_fetch):
        app = jp_serverapp.web_app.settings["jupyter_acp"]
        session = await app.hub.open_session(make_notebook("nb.ipynb"), "permission")
        r = await socket(jp_ws_fetch, session.id)
        for frame in (
            {"op": "prompt", "ref": 1, "text": "hi"},
            {"op": "cancel", "ref": 2},
            {"op": "permission", "ref": 3, "request_id": "r1", "option_id": "allow"},
        ):
            answer = await r.op(frame)
            assert answer["ok"] is False and answer["status"] == 403, answer
            assert "write access" in answer["error"] and "read only" in answer["error"]
        assert session.turn is None
        assert not any(e["type"] == "turn_started" for e in app.hub.events(session)), "nothing was done"
        # the events still stream: a turn started by someone with write access shows on this socket
        turn_id = await app.hub.prompt(session, [{"type": "text", "text": "from elsewhere"}])
        events = await r.until(lambda ev: any(e["type"] == "permission_request" for e in ev))
        assert any(e["type"] == "turn_started" and e["turn_id"] == turn_id for e in events)
        await app.hub.cancel(session)
        r.ws.close()


async def test_a_cross_site_page_cannot_open_the_socket(
    api, make_notebook, jp_fetch, jp_ws_fetch, jp_http_port, jp_base_url
):
    """The socket now acts (prompts): a page of another origin, riding the user's login cookie, gets no socket
    (Jupyter's own origin check, as for kernel sockets); the same cookie from the server's own origin does."""
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.websocket import websocket_connect

    s = await api.open(make_notebook("nb.ipynb"), "echo")
    resp = await jp_fetch("api", "status")  # token-authenticated: the server sets its login cookie
    cookies = [c.split(";", 1)[0] for c in resp.headers.get_list("Set-Cookie")]
    assert cookies, "the server set no login cookie"
    host = f"127.0.0.1:{jp_http_port}"  # the login cookie is named after the host it was set for
    url = f"ws://{host}{jp_base_url}jupyter-acp/sessions/{s['id']}/stream"

    def request(origin: str) -> HTTPRequest:
        return HTTPRequest(url, headers={"Cookie": "; ".join(cookies), "Origin": origin, "Host": host})

    with pytest.raises(HTTPClientError) as exc:
        await websocket_connect(request("http://evil.example"))
    assert exc.value.code == 403
    ws = await websocket_connect(request(f"http://{host}"))
    await ws.write_message(json.dumps({"op": "cancel", "ref": 1}))
    while True:
        answer = json.loads(await ws.read_message())
        if isinstance(answer, dict):
            break
    assert answer == {"ref": 1, "ok": True, "cancelled": False}
    ws.close()
