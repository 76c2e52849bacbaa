"""The record is the truth, in one server: a client ahead of the server is told the history moved, one row the store
refuses never blocks the others, saving resumes at the next flush once the disk has room, and an accepted prompt's
``turn_started`` is stored before the answer leaves."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from jupyter_acp.magic import turn as magic_turn
from jupyter_acp.testing.store_faults import BIG_PROMPT, fill_the_disk

from .conftest import message_text, scripted


@pytest.fixture
def acp_agents():
    # chunks 2 ms apart: each stored on its own (enough pages to fill a small disk)
    return {"stream": scripted("slow", "--chunks", "50", "--delay", "0.002"), "echo": scripted("echo_prompt")}


@pytest.fixture
def acp_config():
    # a long timed retry: saving must resume at the next flush, not on this timer
    return {"store_retry_interval": 60.0}


def _hub(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_acp"].hub


def ended(turn_id: str):
    return lambda events: any(e["type"] == "turn_ended" and e.get("turn_id") == turn_id for e in events)


async def _turn(api, sid, text="go"):
    turn = await api.prompt(sid, text)
    return turn, await api.wait_turn_end(sid, turn)


async def test_a_client_ahead_of_the_server_is_told_the_history_moved_and_sees_its_own_next_turn(
    api, make_notebook, jp_ws_fetch
):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    _, before = await _turn(api, s["id"], "echo: one")
    ahead = before[-1]["seq"] + 50  # the client saw events of a store this server does not have
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": str(ahead)})
    first = json.loads(await ws.read_message())
    assert isinstance(first, dict) and first.get("history_moved") is True, first
    assert first["seq"] == before[-1]["seq"] and first["after"] == ahead and "history" in first["text"]
    events: list[dict[str, Any]] = []
    while not ended(before[-1]["turn_id"])(events):  # then the server's history from the start
        events += json.loads(await ws.read_message())
    assert [e["seq"] for e in events] == [e["seq"] for e in before]
    await ws.write_message(json.dumps({"op": "prompt", "ref": 1, "text": "echo: two"}))
    turn = None
    while turn is None or not ended(turn)(events):
        frame = json.loads(await ws.read_message())
        if isinstance(frame, dict):
            turn = frame["turn_id"]
        else:
            events += frame
    assert message_text(events, turn) == "echo: two", "its own next turn, seen live"
    ws.close()


def test_the_magic_following_a_turn_stops_with_the_reason_when_the_history_moved():
    class View:
        footer: str | None = None

        def finish(self, footer: str | None = None) -> None:
            self.footer = footer

    class Backend:
        def events(self, sid: str, after: int, wait: float) -> dict[str, Any]:
            return {"events": [], "history_moved": {"after": after, "seq": 3, "text": "it ends at event 3"}}

    class Magics:
        backend = Backend()
        poll_wait = 0.1

    view = View()
    magic_turn._follow(Magics(), "sid", "turn", 40, view, timeout=5)  # type: ignore[arg-type]
    assert view.footer and "moved" in view.footer and "it ends at event 3" in view.footer


async def test_one_row_the_store_refuses_never_blocks_the_others_and_is_said(api, make_notebook, jp_serverapp):
    hub = _hub(jp_serverapp)
    bad = await api.open(make_notebook("bad.ipynb"), "echo")
    good = await api.open(make_notebook("good.ipynb"), "echo")
    # a row SQLite refuses (a constraint) for one session only: the store itself works
    hub.store.db.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.session_id = '%s' "
        "BEGIN SELECT RAISE(ABORT, 'refused row'); END" % bad["id"]
    )
    try:
        turn, events = await _turn(api, bad["id"], "echo: lost row")
        assert message_text(events, turn) == "echo: lost row", "the conversation goes on"
        notice = await api.wait_for(bad["id"], lambda evs: any(e.get("phase") == "store_refused" for e in evs))
        text = next(e["text"] for e in notice if e.get("phase") == "store_refused")
        assert "could not be saved" in text and "refused row" in text
        turn2, events2 = await _turn(api, good["id"], "echo: kept")
        stored = hub.store.read(good["id"])
        assert [e["seq"] for e in stored] == [e["seq"] for e in events2], "the other session is stored whole"
        assert any(e["type"] == "turn_ended" and e["turn_id"] == turn2 for e in stored)
        assert hub.log.failed is None, "the store did not fail"
        # the refused events stay in this server's replays
        assert ended(turn)(await api.events(bad["id"]))
    finally:
        hub.store.db.execute("DROP TRIGGER refuse")


async def test_saving_resumes_at_the_next_flush_once_the_disk_has_room(api, make_notebook, jp_serverapp):
    hub = _hub(jp_serverapp)
    store = hub.store
    s = await api.open(make_notebook("nb.ipynb"), "stream")
    await _turn(api, s["id"])
    fill_the_disk(store.db)  # SQLITE_FULL, as a full disk
    await _turn(api, s["id"], BIG_PROMPT)
    # the notice follows the flush that failed: on a busy machine that flush held the whole turn, turn_ended too
    await api.wait_for(s["id"], lambda evs: any(e.get("phase") == "store_failed" for e in evs), timeout=10)
    store.db.execute("PRAGMA max_page_count = 1073741823")  # room again
    started = time.monotonic()
    turn, _ = await _turn(api, s["id"])
    await api.wait_for(s["id"], lambda evs: any("saved again" in e.get("text", "") for e in evs), timeout=10)
    assert time.monotonic() - started < 10, "not the 60 s timer"
    stored = store.read(s["id"])
    assert [e["seq"] for e in stored] == [e["seq"] for e in await api.events(s["id"])]
    assert sum(e["type"] == "turn_ended" for e in stored) == 3


async def test_an_accepted_prompt_is_stored_before_its_answer_leaves(api, make_notebook, jp_serverapp, jp_ws_fetch):
    hub = _hub(jp_serverapp)
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    await _turn(api, s["id"], "echo: warm")
    timed = hub.log.schedule_flush
    hub.log.schedule_flush = lambda soon=False: None  # no timed flush: only what the answer itself stores
    try:
        turn = await api.prompt(s["id"], "echo: http")
        assert any(e["type"] == "turn_started" and e["turn_id"] == turn for e in hub.store.read(s["id"])), "HTTP"
        hub.log.flush()
        await api.wait_turn_end(s["id"], turn)
        ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"})
        await ws.write_message(json.dumps({"op": "prompt", "ref": 1, "text": "echo: socket"}))
        while True:
            frame = json.loads(await ws.read_message())
            if isinstance(frame, dict) and frame.get("ref") == 1:
                break
        turn = frame["turn_id"]
        assert any(e["type"] == "turn_started" and e["turn_id"] == turn for e in hub.store.read(s["id"])), "socket"
        ws.close()
    finally:
        hub.log.schedule_flush = timed
        hub.log.flush()
