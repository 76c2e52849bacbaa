"""History is bounded and replayed in pages, never whole.

50 agent updates of 3.8 MiB each once made ``stream?after=0`` send one 190 MiB WebSocket frame and
``GET events`` the same.  Now: one event's stored text is capped (the cut is marked), the replay sends
the latest page in bounded frames (older pages on demand with ``events?before=``), ``GET events`` is
bounded by a page, a pending permission request and the running turn's start are sent even when older
than the page, and a session past its byte cap has its oldest turns compacted.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from .conftest import scripted

MiB = 2**20
BIG = int(3.8 * MiB)
EVENT_CAP = 256 * 1024  # c.JupyterACP.max_event_bytes default
PAGE = 1 * MiB  # c.JupyterACP.replay_page_bytes default
REPLAY = 256 * 1024  # c.JupyterACP.stream_replay_bytes default: what opening a conversation sends at once
FRAME_BOUND = 2 * EVENT_CAP


@pytest.fixture
def acp_agents():
    return {"perm": scripted("permission")}


def _hub(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_acp"].hub


async def fill(hub, session, n: int = 50, size: int = BIG, turn_id: str = "fill") -> None:
    """One turn of ``n`` agent updates of ``size`` characters each, through the hub's real path."""
    hub.emit(session, "turn_started", turn_id=turn_id, prompt=[{"type": "text", "text": "fill"}])
    for i in range(n):
        text = f"<{turn_id}:{i}>" + "x" * size
        hub.emit(
            session,
            "session_update",
            update={"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
        )
        await asyncio.sleep(0)  # stored (and fanned out) one by one, as an agent's frames are
    hub.emit(session, "turn_ended", turn_id=turn_id, stop_reason="end_turn", tool_calls_served=0)
    await asyncio.sleep(0.05)


async def get_events(jp_fetch, sid: str, **params) -> tuple[list[dict], int]:
    resp = await jp_fetch("jupyter-acp", "sessions", sid, "events", params={k: str(v) for k, v in params.items()})
    return json.loads(resp.body), len(resp.body)


async def read_replay(ws, last_seq: int) -> tuple[list[dict], list[int]]:
    """Frames until the event with ``last_seq``: (events, frame sizes)."""
    got: list[dict] = []
    sizes: list[int] = []
    while not got or got[-1]["seq"] < last_seq:
        msg = await asyncio.wait_for(ws.read_message(), 30)
        assert msg is not None, f"stream closed after {len(got)} events, frames {sizes}"
        sizes.append(len(msg.encode()))
        batch = json.loads(msg)
        assert isinstance(batch, list) and batch
        got.extend(batch)
    return got, sizes


async def test_big_history_replays_in_pages(api, make_notebook, jp_serverapp, jp_fetch, jp_ws_fetch):
    hub = _hub(jp_serverapp)
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    session = hub.get(s["id"])
    await fill(hub, session)
    last = session.seq

    # one event's stored text is capped, the cut said
    rows = hub.store.db.execute(
        "SELECT MAX(length(data)), SUM(data LIKE '%… [cut: 3._ MiB not kept]%') FROM events WHERE session_id = ?",
        (s["id"],),
    ).fetchone()
    assert rows[0] <= EVENT_CAP, rows
    assert rows[1] == 50, "every big update says what was cut"

    # the WebSocket replays the latest page only, in bounded frames
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"})
    replay, sizes = await read_replay(ws, last)
    ws.close()
    assert max(sizes) <= FRAME_BOUND, sizes
    # the socket's replay is smaller than a page: the latest events, what the panel draws first
    assert sum(sizes) <= REPLAY + EVENT_CAP, sizes
    seqs = [e["seq"] for e in replay]
    assert seqs == sorted(seqs) and seqs[-1] == last
    assert seqs[0] > 1, "older history exists: the first replayed seq says so"
    assert not any(e.get("pinned") for e in replay), "nothing pending, nothing pinned"

    # older pages on demand: before=<first seq>, ascending, bounded, back to the start
    pages = [replay]
    first = seqs[0]
    while first > 1:
        page, size = await get_events(jp_fetch, s["id"], before=first)
        assert page, f"nothing before {first}"
        assert size <= PAGE + EVENT_CAP
        ps = [e["seq"] for e in page]
        assert ps == sorted(ps) and ps[-1] < first
        pages.insert(0, page)
        first = ps[0]
    all_seqs = [e["seq"] for p in pages for e in p]
    assert all_seqs == list(range(1, last + 1)), "every event exactly once across the pages"

    # GET events: a page, not everything
    page, size = await get_events(jp_fetch, s["id"], after=0)
    assert size <= PAGE + EVENT_CAP and page[0]["seq"] == 1 and page[-1]["seq"] < last
    page, _ = await get_events(jp_fetch, s["id"], after=0, limit=3)
    assert [e["seq"] for e in page] == [1, 2, 3]
    page, _ = await get_events(jp_fetch, s["id"], before=last + 1, limit=2)
    assert [e["seq"] for e in page] == [last - 1, last]
    # always at least one event, however small the page
    page, _ = await get_events(jp_fetch, s["id"], after=10, limit=1)
    assert [e["seq"] for e in page] == [11]


async def test_a_long_history_of_small_events_opens_with_its_latest_page_in_one_frame(
    api, make_notebook, jp_serverapp, jp_ws_fetch
):
    """What opening a conversation sends is one frame: the panel draws it once, its last answer included."""
    hub = _hub(jp_serverapp)
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    session = hub.get(s["id"])
    await fill(hub, session, n=3000, size=200)
    last = session.seq
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"})
    replay, sizes = await read_replay(ws, last)
    ws.close()
    seqs = [e["seq"] for e in replay]
    assert seqs[0] > 1 and seqs[-1] == last and seqs == list(range(seqs[0], last + 1))
    assert len(sizes) == 1, f"{len(replay)} events in frames of {sizes} bytes"
    assert sizes[0] <= REPLAY + len(replay) + 2


async def test_small_history_replays_whole(api, make_notebook, jp_ws_fetch):
    """The common case is unchanged: a reconnect with little history gets it all, in one frame."""
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    turn = await api.prompt(s["id"], "one two three")
    events = await api.wait_turn_end(s["id"], turn)
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"})
    replay, sizes = await read_replay(ws, events[-1]["seq"])
    ws.close()
    assert replay == events and len(sizes) == 1


async def test_pending_permission_and_running_turn_survive_the_page(
    api, make_notebook, jp_serverapp, jp_fetch, jp_ws_fetch
):
    hub = _hub(jp_serverapp)
    s = await api.open(make_notebook("nb.ipynb"), "perm")
    turn = await api.prompt(s["id"], "write it")
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    request = next(e for e in events if e["type"] == "permission_request")
    started = next(e for e in events if e["type"] == "turn_started")
    session = hub.get(s["id"])
    # the agent keeps talking while the user has not answered: far more than a page
    for _i in range(12):
        hub.emit(
            session,
            "session_update",
            update={
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_1",
                "content": [{"type": "content", "content": {"type": "text", "text": "y" * (300 * 1024)}}],
            },
        )
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"})
    replay, sizes = await read_replay(ws, session.seq)
    pinned = [e for e in replay if e.get("pinned")]
    assert [e["seq"] for e in pinned] == [started["seq"], request["seq"]], "still matters: sent though older"
    assert pinned[1]["request_id"] == request["request_id"]
    rest = [e for e in replay if not e.get("pinned")]
    assert rest[0]["seq"] > request["seq"] + 1, "the page itself starts later"
    assert [e["seq"] for e in replay] == sorted(e["seq"] for e in replay)
    assert max(sizes) <= FRAME_BOUND
    # the card still works: answer it, the turn ends
    await api.call("POST", "sessions", s["id"], "permissions", request["request_id"], body={"option_id": "allow"})
    live: list[dict] = []
    while not any(e["type"] == "turn_ended" for e in live):  # GET events?after=0 is a page: the stream says it
        msg = await asyncio.wait_for(ws.read_message(), 30)
        assert msg is not None
        live += json.loads(msg)
    ws.close()
    assert any(e["type"] == "turn_ended" and e["turn_id"] == turn for e in live)


async def test_live_fan_out_is_capped_too(api, make_notebook, jp_serverapp, jp_ws_fetch):
    hub = _hub(jp_serverapp)
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    session = hub.get(s["id"])
    await asyncio.sleep(0.05)
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": str(session.seq)})
    await fill(hub, session, n=3)
    live, sizes = await read_replay(ws, session.seq)
    ws.close()
    assert max(sizes) <= FRAME_BOUND, sizes
    texts = [e["update"]["content"]["text"] for e in live if e["type"] == "session_update"]
    assert len(texts) == 3 and all(re.search(r"… \[cut: 3\.\d MiB not kept\]$", t) for t in texts), [
        t[-40:] for t in texts
    ]
    assert texts[0].startswith("<fill:0>xxx")


class TestCompaction:
    @pytest.fixture
    def acp_config(self):
        return {"max_session_bytes": 3 * MiB}

    async def test_oldest_turns_are_compacted(self, api, make_notebook, jp_serverapp, jp_fetch):
        hub = _hub(jp_serverapp)
        s = await api.open(make_notebook("nb.ipynb"), "echo")
        session = hub.get(s["id"])
        for t in range(5):  # each turn about 2.5 MiB once capped
            await fill(hub, session, n=10, size=MiB, turn_id=f"turn{t}")
        db = hub.store.db
        total = db.execute("SELECT SUM(length(data)) FROM events WHERE session_id = ?", (s["id"],)).fetchone()[0]
        assert total <= 3 * MiB, total
        rows = [
            json.loads(r[0])
            for r in db.execute("SELECT data FROM events WHERE session_id = ? ORDER BY seq", (s["id"],))
        ]
        starts = [e["turn_id"] for e in rows if e["type"] == "turn_started"]
        assert starts == [f"turn{t}" for t in range(5)], "prompts and turn ends stay; only updates go"
        assert sum(e["type"] == "turn_ended" for e in rows) == 5
        notices = [e for e in rows if e["type"] == "notice" and e.get("phase") == "compacted"]
        assert notices and "turn" in notices[0]["text"] and "MiB" in notices[0]["text"]
        assert "max_session_bytes" in notices[0]["text"], "the notice names the setting"
        last_updates = [
            e for e in rows if e["type"] == "session_update" and "<turn4:" in e["update"]["content"]["text"]
        ]
        assert len(last_updates) == 10, "the latest turn is whole"
        assert not any("<turn0:" in e["update"]["content"]["text"] for e in rows if e["type"] == "session_update")
        # what is left still pages cleanly, and GET events agrees with the store
        seqs = [e["seq"] for e in rows]
        got: list[int] = []
        after = 0
        while True:
            page, _ = await get_events(jp_fetch, s["id"], after=after)
            if not page:
                break
            got += [e["seq"] for e in page]
            after = page[-1]["seq"]
        assert got == seqs
