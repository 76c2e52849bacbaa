"""A conversation belongs to a notebook of one server root, never to a path shared by projects.

Two ``jupyter server`` processes on two project roots share one transcript store (one per user); each
has its own ``Untitled.ipynb``.  Neither sees the other's conversation (list, by id, events), each
agent session runs in its own project, and both keep their own history across restarts.  A store
written before sessions carried their root migrates: a session keeps its history for its own root.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time

import nbformat
import pytest

from jupyter_acp.testing.server import ServerProcess

from .conftest import message_text

OLD_SCHEMA = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, notebook TEXT NOT NULL, agent TEXT NOT NULL, cwd TEXT NOT NULL,
    acp_session_id TEXT, created REAL NOT NULL, updated REAL NOT NULL
);
CREATE UNIQUE INDEX sessions_notebook_agent ON sessions (notebook, agent);
CREATE TABLE events (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


def _project(path) -> None:
    path.mkdir(parents=True)
    (path / "Untitled.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))


def _server(root, data) -> ServerProcess:
    """A server on ``root``; servers given the same ``data`` folder share its store (``store.sqlite``)."""
    return ServerProcess(root, data)


def test_two_roots_on_one_store_never_share_a_conversation(tmp_path):
    a_root, b_root, shared = tmp_path / "A", tmp_path / "B", tmp_path / "shared"
    _project(a_root)
    _project(b_root)
    a = _server(a_root, shared)
    b = _server(b_root, shared)
    a.start()
    try:
        sa = a.open_session("Untitled.ipynb", "echo")
        turn, events = a.turn(sa["id"], "secret plan of project A")
        assert message_text(events, turn) == "secret plan of project A"
        assert os.path.realpath(sa["cwd"]) == os.path.realpath(a_root)

        b.start()  # while A runs, on the same store
        try:
            assert b.get("sessions").json() == [], "B's sidebar shows none of A's conversations"
            assert b.get("sessions", notebook="Untitled.ipynb").json() == []
            assert b.get("sessions", sa["id"]).status_code == 404, "A's session id is unknown on B"
            assert b.get("sessions", sa["id"], "events").status_code == 404
            sb = b.open_session("Untitled.ipynb", "echo")
            assert sb["id"] != sa["id"]
            assert os.path.realpath(sb["cwd"]) == os.path.realpath(b_root), "B's agent works in B"
            turn_b, events_b = b.turn(sb["id"], "plan of project B")
            assert "project A" not in json.dumps(events_b)
            # A, still running, does not see B's either
            assert [s["id"] for s in a.get("sessions").json()] == [sa["id"]]
            assert a.get("sessions", sb["id"]).status_code == 404
        finally:
            b.stop()
    finally:
        a.stop()

    # both started again: each finds its own conversation, and only it
    for server, root, own, text in ((b, b_root, sb, "plan of project B"), (a, a_root, sa, "secret plan of project A")):
        server.start()
        try:
            listed = server.get("sessions").json()
            assert [s["id"] for s in listed] == [own["id"]], (root, listed)
            assert os.path.realpath(listed[0]["cwd"]) == os.path.realpath(root)
            history = server.get("sessions", own["id"], "events").json()
            assert message_text(history) == text
            assert server.open_session("Untitled.ipynb", "echo")["id"] == own["id"]
        finally:
            server.stop()


class TestMigratedStore:
    """A store from before roots: a session keeps its history for its own root and no other."""

    @pytest.fixture
    def acp_config(self, jp_root_dir, jp_data_dir, make_notebook):
        make_notebook("sub/Untitled.ipynb")
        make_notebook("Untitled.ipynb")
        path = jp_data_dir / "acp" / "transcripts.sqlite"
        path.parent.mkdir(parents=True)
        db = sqlite3.connect(path)
        db.executescript(OLD_SCHEMA)
        now = time.time()
        root = str(jp_root_dir)
        rows = [
            # this root's notebook in a sub-folder: the root is its cwd minus the folder
            ("a" * 32, "sub/Untitled.ipynb", "echo", os.path.join(root, "sub"), now),
            # this root's notebook at the top
            ("b" * 32, "Untitled.ipynb", "echo", root, now),
            # another project's notebook with the same name
            ("c" * 32, "other/Untitled.ipynb", "builtin", "/srv/elsewhere/other", now),
            # a cwd that does not end with the notebook's folder: no root can be inferred
            ("d" * 32, "x/y.ipynb", "echo", "/somewhere", now),
        ]
        for sid, nb, agent, cwd, ts in rows:
            db.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, NULL, ?, ?)", (sid, nb, agent, cwd, ts, ts))
            events = [
                {
                    "seq": 1,
                    "type": "turn_started",
                    "ts": ts,
                    "turn_id": "t1",
                    "prompt": [{"type": "text", "text": f"question about {nb}"}],
                },
                {
                    "seq": 2,
                    "type": "session_update",
                    "ts": ts,
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": f"answer {sid[0]}"},
                    },
                },
                {"seq": 3, "type": "turn_ended", "ts": ts, "turn_id": "t1", "stop_reason": "end_turn"},
            ]
            db.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?)", [(sid, e["seq"], e["type"], json.dumps(e)) for e in events]
            )
        db.commit()
        db.close()
        return {}

    async def test_old_rows_keep_their_history_for_their_root(self, api, jp_serverapp, jp_root_dir):
        listed = await api.call("GET", "sessions")
        assert sorted(s["id"] for s in listed) == ["a" * 32, "b" * 32], listed
        by_id = {s["id"]: s for s in listed}
        assert os.path.realpath(by_id["a" * 32]["cwd"]) == os.path.realpath(jp_root_dir / "sub")
        events = await api.events("a" * 32)
        assert message_text(events) == "answer a"
        again = await api.open("sub/Untitled.ipynb", "echo")
        assert again["id"] == "a" * 32, "the migrated session is picked up, not replaced"
        turn = await api.prompt(again["id"], "still there")
        events = await api.wait_turn_end(again["id"], turn)
        assert message_text(events, turn) == "still there" and events[0]["seq"] == 1
        from tornado.httpclient import HTTPClientError

        for foreign in ("c" * 32, "d" * 32):
            with pytest.raises(HTTPClientError) as err:
                await api.call("GET", "sessions", foreign)
            assert err.value.code == 404
        store = jp_serverapp.web_app.settings["jupyter_acp"].hub.store
        roots = dict(store.db.execute("SELECT id, root FROM sessions").fetchall())
        assert roots["c" * 32] == "/srv/elsewhere" and roots["d" * 32] == ""
        assert roots["a" * 32] == roots["b" * 32] == os.path.realpath(jp_root_dir)
