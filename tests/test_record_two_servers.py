"""Two servers on one store (JupyterHub named servers of one user, two ``jupyter lab`` in one home): the same
notebook opened in both is one conversation, each server's events are stored, no seq is given twice, and a restart
shows the whole of it."""

from __future__ import annotations

import json
import signal
import sqlite3

import nbformat
import pytest

from jupyter_acp.testing.server import ServerProcess

from .conftest import SCRIPTED

ECHO = {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], "echo_prompt"]}


@pytest.mark.timeout(300)  # server starts: seconds each, tens on a loaded machine
def test_two_servers_on_one_store_share_a_notebook_s_conversation_and_both_keep_saving(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for name in ("nb", "other"):
        (root / f"{name}.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    # one data dir, so one store (as named servers of one JupyterHub user)
    data = tmp_path / "data"
    store = data / "store.sqlite"
    a = ServerProcess(root, data, agents={"echo": ECHO})
    b = ServerProcess(root, data, agents={"echo": ECHO})
    a.start(timeout=180)
    b.start(timeout=180)  # both loaded the store before either opened the notebook
    try:
        sid = a.open_session("nb.ipynb", "echo")["id"]
        turn_a, _ = a.turn(sid, "echo: from a")
        assert b.open_session("nb.ipynb", "echo")["id"] == sid, "the stored session, not a second one"
        turn_b, seen_b = b.turn(sid, "echo: from b")
        other = b.open_session("other.ipynb", "echo")["id"]
        turn_o, seen_o = b.turn(other, "echo: elsewhere")
        turn_a2, seen_a = a.turn(sid, "echo: a again")

        db = sqlite3.connect(store)
        rows = {
            s: [json.loads(r[0]) for r in db.execute("SELECT data FROM events WHERE session_id = ? ORDER BY seq", (s,))]
            for s in (sid, other)
        }
        db.close()
        for turn in (turn_a, turn_b, turn_a2):
            assert [e["type"] for e in rows[sid] if e.get("turn_id") == turn] == ["turn_started", "turn_ended"], turn
        assert [e["seq"] for e in rows[other]] == [e["seq"] for e in seen_o], "the other notebook is stored whole"
        for seen in (seen_a, seen_b):  # what each server's clients saw is what the store holds
            stored = {e["seq"]: e for e in rows[sid]}
            assert all(stored.get(e["seq"]) == e for e in seen), "no event overwritten by the other server"
        assert not [e for s in (sid, other) for e in b.events(s) if e.get("phase") in ("store_failed", "store_refused")]

        b.stop()
        b.start(timeout=180)
        history = b.events(sid)
        ids = [e.get("turn_id") for e in history if e["type"] == "turn_ended"]
        assert {turn_a, turn_b, turn_a2} <= set(ids), "the whole conversation after a restart"
        seqs = [e["seq"] for e in history]
        assert seqs == sorted(set(seqs))
    finally:
        a.stop(signal.SIGKILL)
        b.stop(signal.SIGKILL)
