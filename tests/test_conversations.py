"""A notebook's past conversations: a reset keeps the earlier one; list, open, resume, delete them.

Real server, real agents (the echo agent, scripted ones, one that lists its own past sessions), the real store.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from typing import Any

import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.httpclient import HTTPClientError

from jupyter_acp.sessions.store import TranscriptStore

from .conftest import scripted

pytestmark = pytest.mark.timeout(120)

#: an agent that lists its own past sessions (``session/list``) and resumes any id
LIST_AGENT = """
import asyncio
import sys
from jupyter_acp.testing import agents as a

class ListAgent(a.ScriptedAgent):
    async def on_initialize(self, params):
        result = await super().on_initialize(params)
        result["agentCapabilities"].setdefault("sessionCapabilities", {})["list"] = {}
        return result

    async def on_session_list(self, params):
        return {"sessions": [
            {"sessionId": "past_1", "cwd": params.get("cwd"), "title": "the agent's own", "updatedAt": "2026-01-01T00:00:00Z"},
            {"sessionId": "elsewhere", "cwd": "/somewhere/else", "title": "another folder"},
        ]}

async def main():
    args = a.parse_args(sys.argv[1:])  # resumable or loadable
    conn = await a.serve_stdio(lambda c: ListAgent(c, args), max_frame_bytes=1 << 26)
    await conn.wait_closed()

asyncio.run(main())
"""


@pytest.fixture
def acp_agents(tmp_path) -> dict[str, Any]:
    script = tmp_path / "list_agent.py"
    script.write_text(LIST_AGENT)
    return {
        "resumable": scripted("resumable"),
        "lister": {"command": sys.executable, "args": [str(script), "resumable"], "title": "lists its sessions"},
        "lister_load": {"command": sys.executable, "args": [str(script), "loadable"], "title": "lists and loads"},
    }


def store_path(jp_data_dir) -> str:
    return str(jp_data_dir / "acp" / "transcripts.sqlite")


async def ask(api, sid: str, text: str) -> list[dict[str, Any]]:
    turn = await api.prompt(sid, text)
    return await api.wait_turn_end(sid, turn)


def prompts(events: list[dict[str, Any]]) -> list[str]:
    return [e["prompt"][0]["text"] for e in events if e["type"] == "turn_started"]


async def test_a_reset_keeps_the_earlier_conversation(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"))
    await ask(api, s["id"], "first question")
    await api.call("POST", "sessions", s["id"], "reset")
    await ask(api, s["id"], "second question")
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    assert [c["title"] for c in convs] == ["second question", "first question"], convs
    assert [c["current"] for c in convs] == [True, False]
    assert all(c["agent"] == "echo" and c["turns"] == 1 and c["kind"] == "ours" for c in convs), convs
    assert convs[1]["ended"] and convs[1]["started"] <= convs[1]["ended"] <= time.time()
    old = await api.call("GET", "sessions", s["id"], "conversations", convs[1]["id"], "events")
    assert prompts(old) == ["first question"], old
    assert not any(e.get("phase") == "session_reset" for e in old), "the marker opens the next conversation"
    new = await api.call("GET", "sessions", s["id"], "conversations", convs[0]["id"], "events")
    assert prompts(new) == ["second question"] and new[0].get("phase") == "session_reset", new
    # paged like the session's events
    page = await api.call("GET", "sessions", s["id"], "conversations", convs[1]["id"], "events", params={"limit": "2"})
    assert page == old[:2]
    tail = await api.call(
        "GET", "sessions", s["id"], "conversations", convs[1]["id"], "events", params={"before": str(old[-1]["seq"])}
    )
    assert tail == old[:-1]


async def test_the_panel_replays_only_the_current_conversation(api, make_notebook, jp_ws_fetch):
    """``conversation=current`` (what the panel asks): the stream's replay and the pages hold the current
    conversation only; without it the session's whole log, as before."""
    s = await api.open(make_notebook("nb.ipynb"))
    await ask(api, s["id"], "old words")
    await api.call("POST", "sessions", s["id"], "reset")
    await ask(api, s["id"], "new words")
    assert prompts(await api.events(s["id"])) == ["old words", "new words"]
    current = await api.call("GET", "sessions", s["id"], "events", params={"after": "0", "conversation": "current"})
    assert prompts(current) == ["new words"] and current[0].get("phase") == "session_reset", current
    older = await api.call(
        "GET", "sessions", s["id"], "events", params={"before": str(current[0]["seq"] + 1), "conversation": "current"}
    )
    assert older == current[:1], "nothing of the earlier conversation before it"
    ws = await jp_ws_fetch(
        "jupyter-acp", "sessions", s["id"], "stream", params={"after": "0", "conversation": "current"}
    )
    frame = json.loads(await ws.read_message())
    ws.close()
    assert [e["seq"] for e in frame] == [e["seq"] for e in current], frame
    with pytest.raises(HTTPClientError) as err:
        await api.call("GET", "sessions", s["id"], "events", params={"conversation": "all of them"})
    assert err.value.code == 400


async def test_resume_reseeds_an_agent_that_cannot_reload(api, make_notebook):
    """The echo agent offers neither session/load nor session/resume: our transcript of the resumed
    conversation (and only it) goes with the next prompt."""
    s = await api.open(make_notebook("nb.ipynb"))
    await ask(api, s["id"], "apples are red")
    await api.call("POST", "sessions", s["id"], "reset")
    await ask(api, s["id"], "bananas are yellow")
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    again = await api.call("POST", "sessions", s["id"], "conversations", convs[1]["id"], "resume")
    assert again["id"] == s["id"]
    events = await ask(api, s["id"], "what colour")
    after = [e for e in events if e["type"] == "notice"]
    assert any(e.get("phase") == "conversation_resumed" for e in after), after
    assert any(e.get("phase") == "session_recreated" for e in after), after
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    assert [c["title"] for c in convs] == ["apples are red", "bananas are yellow"], "the current one first"
    assert [c["current"] for c in convs] == [True, False] and convs[0]["turns"] == 2, convs
    answer = "".join(
        e["update"]["content"]["text"]
        for e in await api.call("GET", "sessions", s["id"], "conversations", convs[0]["id"], "events")
        if e["type"] == "session_update" and e["update"].get("sessionUpdate") == "agent_message_chunk"
    )
    assert "User: apples are red" in answer, answer
    assert "bananas" not in answer, "only the resumed conversation is re-seeded"


async def test_resume_asks_the_agent_to_resume_its_own_session(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "resumable")
    first = await ask(api, s["id"], "one")
    old_acp = next(e["acp_session_id"] for e in first if e["type"] == "session_ready")
    await api.call("POST", "sessions", s["id"], "reset")
    await ask(api, s["id"], "two")
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    await api.call("POST", "sessions", s["id"], "conversations", convs[1]["id"], "resume")
    events = await ask(api, s["id"], "three")
    ready = [e for e in events if e["type"] == "session_ready"]
    assert ready[-1]["acp_session_id"] == old_acp and ready[-1]["how"] == "resumed", ready


async def test_delete_removes_the_rows_and_never_the_current_one(api, make_notebook, jp_data_dir):
    s = await api.open(make_notebook("nb.ipynb"))
    await ask(api, s["id"], "secret plans")
    await api.call("POST", "sessions", s["id"], "reset")
    await ask(api, s["id"], "public talk")
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    with pytest.raises(HTTPClientError) as err:
        await api.call("DELETE", "sessions", s["id"], "conversations", convs[0]["id"])
    assert err.value.code == 409 and "current conversation" in err.value.response.body.decode()
    done = await api.call("DELETE", "sessions", s["id"], "conversations", convs[1]["id"])
    assert done["deleted"] == convs[1]["id"] and done["events"] > 3
    with pytest.raises(HTTPClientError) as err:
        await api.call("GET", "sessions", s["id"], "conversations", convs[1]["id"], "events")
    assert err.value.code == 404
    listed = await api.call("GET", "sessions", s["id"], "conversations")
    assert [c["id"] for c in listed] == [convs[0]["id"]]
    assert "secret plans" not in json.dumps(await api.events(s["id"]))
    db = sqlite3.connect(store_path(jp_data_dir))
    try:
        assert db.execute("SELECT COUNT(*) FROM conversations WHERE id = ?", (convs[1]["id"],)).fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM events WHERE data LIKE '%secret plans%'").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM events WHERE data LIKE '%public talk%'").fetchone()[0] > 0
    finally:
        db.close()


async def test_another_notebooks_conversation_is_unknown_here(api, make_notebook, jp_data_dir):
    """A hostile request names session A and a conversation of session B: 404 for read, resume and delete."""
    a = await api.open(make_notebook("a.ipynb"))
    b = await api.open(make_notebook("b.ipynb"))
    await ask(api, b["id"], "b's private words")
    await api.call("POST", "sessions", b["id"], "reset")
    b_old = (await api.call("GET", "sessions", b["id"], "conversations"))[1]["id"]
    for method, tail in (("GET", ["events"]), ("POST", ["resume"]), ("DELETE", [])):
        with pytest.raises(HTTPClientError) as err:
            await api.call(method, "sessions", a["id"], "conversations", b_old, *tail)
        assert err.value.code == 404, (method, tail)
        assert "no conversation" in err.value.response.body.decode()
    assert prompts(await api.call("GET", "sessions", b["id"], "conversations", b_old, "events")) == [
        "b's private words"
    ]


async def test_a_reset_while_the_disk_is_full_keeps_each_event_in_its_conversation(
    api, make_notebook, jp_serverapp, jp_data_dir
):
    """Events waiting in memory (the store failing) are saved, once it works again, under the conversation they
    were said in; the session's current conversation is saved too."""
    store = jp_serverapp.web_app.settings["jupyter_acp"].hub.store
    s = await api.open(make_notebook("nb.ipynb"))
    await ask(api, s["id"], "before the disk filled")
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")
    try:
        await ask(api, s["id"], "while it is full " + "x" * 200_000)
        # the store does fail (its notice follows the flush that failed, perhaps after turn_ended)
        await api.wait_for(s["id"], lambda evs: any(e.get("phase") == "store_failed" for e in evs), timeout=10)
        await api.call("POST", "sessions", s["id"], "reset")
        await ask(api, s["id"], "after the reset")
    finally:
        store.db.execute("PRAGMA max_page_count = 1073741823")
    await ask(api, s["id"], "once it works again")
    await api.wait_for(s["id"], lambda evs: any("saved again" in (e.get("text") or "") for e in evs))
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    assert [c["title"] for c in convs] == ["after the reset", "before the disk filled"], convs
    old = await api.call("GET", "sessions", s["id"], "conversations", convs[1]["id"], "events")
    new = await api.call("GET", "sessions", s["id"], "conversations", convs[0]["id"], "events")
    assert [p[:16] for p in prompts(old)] == ["before the disk ", "while it is full"], old
    assert prompts(new) == ["after the reset", "once it works again"], new
    db = sqlite3.connect(store_path(jp_data_dir))
    try:
        assert db.execute("SELECT conversation FROM sessions WHERE id = ?", (s["id"],)).fetchone()[0] == 2
    finally:
        db.close()


class ReadOnlyConversations(Authorizer):
    """A user who may read this extension's conversations but not change them (resume, delete)."""

    def is_authorized(self, handler, user, action, resource):
        return action == "read" or "/conversations" not in handler.request.path


class TestReadOnlyUser:
    @pytest.fixture
    def server_app_config(self):
        return {"authorizer_class": ReadOnlyConversations}

    async def test_lists_and_opens_but_cannot_resume_or_delete(self, api, make_notebook):
        s = await api.open(make_notebook("nb.ipynb"))
        await ask(api, s["id"], "keep me")
        await api.call("POST", "sessions", s["id"], "reset")
        convs = await api.call("GET", "sessions", s["id"], "conversations")
        assert len(convs) == 2
        assert prompts(await api.call("GET", "sessions", s["id"], "conversations", convs[1]["id"], "events")) == [
            "keep me"
        ]
        for method, tail in (("POST", ["resume"]), ("DELETE", [])):
            with pytest.raises(HTTPClientError) as err:
                await api.call(method, "sessions", s["id"], "conversations", convs[1]["id"], *tail)
            assert err.value.code == 403, (method, tail)
        assert len(await api.call("GET", "sessions", s["id"], "conversations")) == 2


async def test_the_agents_own_sessions_of_this_folder_are_listed_and_resumable(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "lister")
    await ask(api, s["id"], "hello")  # the agent runs: listing never starts one
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    theirs = [c for c in convs if c["kind"] == "agent"]
    assert [(c["id"], c["title"]) for c in theirs] == [("agent:past_1", "the agent's own")], convs
    with pytest.raises(HTTPClientError) as err:  # listed for another folder: not this notebook's
        await api.call("POST", "sessions", s["id"], "conversations", "agent:elsewhere", "resume")
    assert err.value.code == 404
    await api.call("POST", "sessions", s["id"], "conversations", "agent:past_1", "resume")
    events = await ask(api, s["id"], "go on")
    ready = [e for e in events if e["type"] == "session_ready"]
    assert ready[-1]["acp_session_id"] == "past_1" and ready[-1]["how"] == "resumed", ready
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    current = [c for c in convs if c["current"]]
    assert current[0]["kind"] == "ours" and current[0]["title"] == "the agent's own", convs
    assert not [c for c in convs if c["kind"] == "agent"], "now one of ours, listed once"


def test_an_older_store_is_split_at_its_reset_markers(tmp_path):
    """A store from before conversations: each session_reset marker starts one; the last is current."""
    path = str(tmp_path / "old.sqlite")
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE sessions (id TEXT PRIMARY KEY, notebook TEXT NOT NULL, agent TEXT NOT NULL, cwd TEXT NOT NULL,
            acp_session_id TEXT, created REAL NOT NULL, updated REAL NOT NULL, root TEXT NOT NULL DEFAULT '');
        CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, size INTEGER,
            data TEXT NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
        PRAGMA user_version = 1;
        """
    )
    sid = "a" * 32
    db.execute("INSERT INTO sessions VALUES (?, 'nb.ipynb', 'echo', '/r', 'acp2', 1, 2, '/r')", (sid,))
    evs = [
        {"type": "session_ready", "acp_session_id": "acp1", "ts": 10},
        {"type": "turn_started", "turn_id": "t1", "prompt": [{"type": "text", "text": "old one"}], "ts": 11},
        {"type": "turn_ended", "turn_id": "t1", "ts": 12},
        {"type": "notice", "phase": "session_reset", "text": "new conversation", "ts": 20},
        {"type": "session_ready", "acp_session_id": "acp2", "ts": 21},
        {"type": "turn_started", "turn_id": "t2", "prompt": [{"type": "text", "text": "new one"}], "ts": 22},
    ]
    for seq, e in enumerate(evs, start=1):
        db.execute("INSERT INTO events VALUES (?, ?, ?, NULL, ?)", (sid, seq, e["type"], json.dumps({"seq": seq, **e})))
    db.commit()
    db.close()
    store = TranscriptStore(path)
    store.open()
    try:
        convs = store.conversations(sid)
        assert [(c.number, c.title, c.turns, c.acp_session_id) for c in convs] == [
            (2, "new one", 1, "acp2"),
            (1, "old one", 1, "acp1"),
        ]
        assert convs[1].started == 10 and convs[1].ended == 12 and convs[0].ended is None
        assert store.load_sessions("/r")[0].conversation == 2
        assert [e["seq"] for e in store.read_conversation(sid, 1)] == [1, 2, 3]
        assert [e["seq"] for e in store.read_conversation(sid, 2)] == [4, 5, 6]
        assert any("1 earlier conversations" in n for n in store.notices), store.notices
    finally:
        store.close()


async def test_an_adopted_agent_session_keeps_what_session_load_replays(api, make_notebook):
    """Our transcript has nothing of the agent's own session: what session/load replays of it is recorded
    (unlike a conversation of ours, whose replay is dropped as a duplicate)."""
    s = await api.open(make_notebook("nb.ipynb"), "lister_load")
    await ask(api, s["id"], "hello")
    await api.call("POST", "sessions", s["id"], "conversations", "agent:past_1", "resume")
    events = await ask(api, s["id"], "go on")
    ready = [e for e in events if e["type"] == "session_ready"]
    assert ready[-1]["acp_session_id"] == "past_1" and ready[-1]["how"] == "loaded", ready
    current = next(c for c in await api.call("GET", "sessions", s["id"], "conversations") if c["current"])
    adopted = await api.call("GET", "sessions", s["id"], "conversations", current["id"], "events")
    replayed = [e for e in adopted if e["type"] == "session_update" and "replayed history" in json.dumps(e)]
    assert len(replayed) == 1 and replayed[0]["seq"] < next(e["seq"] for e in adopted if e["type"] == "turn_started")
    # our own conversation, resumed with session/load, does not get the replay a second time
    first = next(c for c in await api.call("GET", "sessions", s["id"], "conversations") if not c["current"])
    await api.call("POST", "sessions", s["id"], "conversations", first["id"], "resume")
    await ask(api, s["id"], "back again")
    mine = await api.call("GET", "sessions", s["id"], "conversations", first["id"], "events")
    assert not [e for e in mine if "replayed history" in json.dumps(e)], mine
