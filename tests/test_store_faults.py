"""A failing transcript store (disk full, locked by another server) never costs the conversation."""

from __future__ import annotations

import sqlite3

import pytest

from jupyter_acp.testing.store_faults import BIG_PROMPT, fill_the_disk

from .conftest import message_text, scripted


@pytest.fixture
def acp_agents():
    # chunks 2 ms apart: each is stored on its own (chunks of one burst are joined into one event, too small to fill
    # a disk)
    return {"stream": scripted("slow", "--chunks", "50", "--delay", "0.002")}


@pytest.fixture
def acp_config():
    return {"store_retry_interval": 0.2}


def _store(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_acp"].hub.store


async def _turn(api, sid, text="go"):
    turn = await api.prompt(sid, text)
    return turn, await api.wait_turn_end(sid, turn)


async def test_disk_full_then_recovered(api, make_notebook, jp_serverapp):
    store = _store(jp_serverapp)
    s = await api.open(make_notebook("nb.ipynb"), "stream")
    await _turn(api, s["id"])
    fill_the_disk(store.db)
    turn, _ = await _turn(api, s["id"], BIG_PROMPT)
    # the notice follows the flush that failed: on a busy machine that flush held the whole turn, turn_ended too
    events = await api.wait_for(s["id"], lambda evs: any(e.get("phase") == "store_failed" for e in evs), timeout=10)
    assert message_text(events, turn) == " ".join(map(str, range(50))), "the turn still streams"
    notices = [e for e in events if e["type"] == "notice" and e.get("phase") == "store_failed"]
    assert notices and "could not be saved" in notices[0]["text"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "replay is whole from memory"
    # the disk has room again: waiting events are written, the user is told
    store.db.execute("PRAGMA max_page_count = 1073741823")
    turn2, events = await _turn(api, s["id"])
    await api.wait_for(s["id"], lambda evs: any(e["type"] == "notice" and "saved again" in e["text"] for e in evs))
    stored = store.read(s["id"])
    assert stored == await api.events(s["id"]), "everything that was streamed is on disk now"
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert sum(e["type"] == "turn_ended" for e in stored) == 3


async def test_store_locked_by_another_server(api, make_notebook, jp_serverapp):
    store = _store(jp_serverapp)
    s = await api.open(make_notebook("nb.ipynb"), "stream")
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        turn, _ = await _turn(api, s["id"])
        events = await api.wait_for(
            s["id"], lambda evs: any(e.get("phase") == "store_failed" for e in evs), timeout=10
        )  # the notice follows the failed flush
        assert message_text(events, turn) == " ".join(map(str, range(50)))
    finally:
        other.execute("ROLLBACK")
        other.close()
    await api.wait_for(s["id"], lambda evs: any(e["type"] == "notice" and "saved again" in e["text"] for e in evs))
    events = await api.events(s["id"])
    assert [e["seq"] for e in store.read(s["id"])] == [e["seq"] for e in events] == list(range(1, len(events) + 1))
