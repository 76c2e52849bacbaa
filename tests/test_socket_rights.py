"""A socket keeps only the rights its user still has.

The session's stream socket and the frontend bridge used to ask the Authorizer once, at connect: a share revoked
while a stream socket was open still delivered the next turn, and a tab whose user lost ``write`` still answered
for the agent.  Now the Authorizer is asked at every operation (``write`` for what acts) and every
``JupyterACP.socket_recheck_interval`` seconds for what the socket sends out (short here).  A real server, the test
users of ``tests/users.py`` (``colleague`` may do everything until :func:`revoke` takes it away), real sockets.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from .users import USER_HEADER, HeaderUsers, ReaderOnlyReads, revoke

INTERVAL = 0.3


@pytest.fixture
def server_app_config():
    return {"identity_provider_class": HeaderUsers, "authorizer_class": ReaderOnlyReads}


@pytest.fixture
def acp_config():
    return {"socket_recheck_interval": INTERVAL}


async def read_events(ws, predicate, timeout: float = 30.0) -> list[dict]:
    """Event arrays read from a stream socket until ``predicate(events)``."""
    events: list[dict] = []

    async def loop() -> list[dict]:
        while not predicate(events):
            msg = await ws.read_message()
            assert msg is not None, f"the socket closed: {ws.close_code} {ws.close_reason}"
            data = json.loads(msg)
            if isinstance(data, list):
                events.extend(data)
        return events

    return await asyncio.wait_for(loop(), timeout)


async def closed(ws, timeout: float = 5.0) -> list:
    """What the socket sent before it closed, or within ``timeout`` if it stays open (then ``close_code`` is None)."""
    got: list = []

    async def loop() -> None:
        while (msg := await ws.read_message()) is not None:
            got.append(json.loads(msg))

    try:
        await asyncio.wait_for(loop(), timeout)
    except TimeoutError:
        pass
    return got


def ended(turn_id: str):
    return lambda events: any(e["type"] == "turn_ended" and e.get("turn_id") == turn_id for e in events)


async def test_a_stream_socket_whose_user_lost_read_is_closed_before_the_next_turn(api, make_notebook, jp_ws_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    ws = await jp_ws_fetch(
        "jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"}, headers={USER_HEADER: "colleague"}
    )
    first = await api.prompt(s["id"], "while shared")
    await read_events(ws, ended(first))
    with revoke("colleague", "read", "write"):
        await asyncio.sleep(INTERVAL * 4)  # the share is gone; the owner goes on working
        second = await api.prompt(s["id"], "after the share was revoked")
        await api.wait_turn_end(s["id"], second)
        leaked = await closed(ws)
    assert not any(e.get("turn_id") == second for frame in leaked if isinstance(frame, list) for e in frame)
    assert ws.close_code == 1008
    assert "'read'" in ws.close_reason and "jupyter_acp" in ws.close_reason and "rule:" in ws.close_reason


async def test_a_stream_socket_op_is_checked_when_it_arrives(api, make_notebook, jp_ws_fetch):
    """``write`` withdrawn (``read`` kept): the socket refuses the op, and keeps streaming."""
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    ws = await jp_ws_fetch(
        "jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"}, headers={USER_HEADER: "colleague"}
    )
    with revoke("colleague", "write"):
        await ws.write_message(json.dumps({"op": "prompt", "ref": "p", "text": "not allowed"}))
        answer = None
        while answer is None:
            data = json.loads(await asyncio.wait_for(ws.read_message(), 10))
            answer = data if isinstance(data, dict) else None
        assert answer["ok"] is False and answer["status"] == 403 and "write" in answer["error"]
        turn = await api.prompt(s["id"], "the owner's turn")
        await read_events(ws, ended(turn))  # still streams what its user may read
        await asyncio.sleep(INTERVAL * 3)
        assert ws.protocol is not None and ws.close_code is None
    ws.close()


@pytest.fixture
def bridge(jp_serverapp, jp_fetch):  # jp_fetch: the server listens once a client fixture is asked for
    return jp_serverapp.web_app.settings["jupyter_acp"].tools.services.frontend


async def tab(jp_ws_fetch, user: str, client_id: str):
    ws = await jp_ws_fetch("jupyter-acp", "frontend", "ws", params={"clientId": client_id}, headers={USER_HEADER: user})
    await ws.write_message(json.dumps({"method": "focus", "params": {"path": "nb.ipynb"}}))
    return ws


async def wait_until(predicate, timeout: float = 5.0) -> None:
    async def loop() -> None:
        while not predicate():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(loop(), timeout)


async def test_the_bridge_closes_a_tab_whose_user_lost_write(bridge, jp_ws_fetch):
    ws = await tab(jp_ws_fetch, "colleague", "colleague-tab")
    await wait_until(lambda: any(c.focus == "nb.ipynb" for c in bridge.clients.values()))
    with revoke("colleague", "write"):
        await closed(ws)
    assert ws.close_code == 1008 and "'write'" in ws.close_reason and "rule:" in ws.close_reason
    assert not bridge.clients, "the tab no longer answers for the agent"


class TestEveryMessage:
    """With the periodic check far away, a tab's message is still checked when it arrives."""

    @pytest.fixture
    def acp_config(self):
        return {"socket_recheck_interval": 600.0}

    async def test_a_tab_message_after_write_was_withdrawn_is_not_taken(self, bridge, jp_ws_fetch):
        ws = await tab(jp_ws_fetch, "colleague", "colleague-tab")
        await wait_until(lambda: any(c.focus == "nb.ipynb" for c in bridge.clients.values()))
        (client,) = bridge.clients.values()
        with revoke("colleague", "write"):
            await ws.write_message(json.dumps({"method": "focus", "params": {"path": "elsewhere.ipynb"}}))
            await closed(ws)
        assert client.focus == "nb.ipynb", "the message of a user without write was taken"
        assert ws.close_code == 1008 and "'write'" in ws.close_reason
        assert not bridge.clients


def test_the_recheck_interval_is_a_positive_number_of_seconds():
    from traitlets import TraitError

    from jupyter_acp.app import JupyterACP

    with pytest.raises(TraitError, match="socket_recheck_interval must be more than 0"):
        JupyterACP(socket_recheck_interval=0)
    assert JupyterACP().socket_recheck_interval == 60.0
