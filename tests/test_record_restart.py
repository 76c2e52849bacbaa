"""The record is the truth across a server killed outright: its open turns are ended at the next start, no seq is
given twice, and a client ahead of the server is told the history moved."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_acp.testing.server import ServerProcess

from .conftest import SCRIPTED

#: a streaming agent slow enough to be killed in the middle of its answer
SLOW = {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], "stream", "--chunks", "2000", "--delay", "0.02"]}


def stored(data: Path, sid: str) -> list[dict[str, Any]]:
    """A session's events as the store file holds them (read apart from any server)."""
    db = sqlite3.connect(data / "store.sqlite")
    try:
        rows = db.execute("SELECT data FROM events WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
    finally:
        db.close()
    return [json.loads(r[0]) for r in rows]


def wait_until(predicate: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def server(tmp_path):
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    (root / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    srv = ServerProcess(root, data, agents={"slow": SLOW})
    srv.start(timeout=180)
    try:
        yield srv
    finally:
        srv.stop(signal.SIGKILL)


def kill_mid_turn(server: ServerProcess) -> tuple[str, str]:
    sid = server.open_session("nb.ipynb", "slow")["id"]
    turn = server.post("sessions", sid, "prompt", body={"text": "go"}).json()["turn_id"]
    # mid-answer: some chunks are out (and stored)
    page = lambda: server.get("sessions", sid, "events").json()  # noqa: E731  (one page: the stream goes on)
    wait_until(lambda: sum(e["type"] == "session_update" for e in page()) >= 3)
    server.stop(signal.SIGKILL)
    return sid, turn


@pytest.mark.timeout(300)  # server starts: seconds each, tens on a loaded machine
def test_a_turn_the_server_died_in_is_ended_at_the_next_start_before_any_client_reads(server):
    sid, turn = kill_mid_turn(server)
    assert not [e for e in stored(server.data, sid) if e["type"] == "turn_ended"], "killed: nothing ended it"
    server.start(timeout=180)
    first_read = server.events(sid)
    ends = [e for e in first_read if e["type"] == "turn_ended"]
    assert len(ends) == 1 and ends[0]["turn_id"] == turn, first_read[-3:]
    assert ends[0]["error_kind"] == "server_lost"
    assert "server stopped" in ends[0]["error"]
    assert ends[0] in stored(server.data, sid), "stored, not only said"
    assert server.get("sessions", sid).json()["state"] != "busy"
    # a second restart ends nothing twice
    server.stop()
    server.start(timeout=180)
    again = server.events(sid)
    assert sum(e["type"] == "turn_ended" for e in again) == 1
    seqs = [e["seq"] for e in again]
    assert len(seqs) == len(set(seqs)) and seqs == sorted(seqs)
    # killed with nothing running: nothing to end, and the session's last seq is its last event's (a panel waits
    # until it has seen it before it sends a queued prompt)
    seen = len(again)
    server.open_session("nb.ipynb", "slow")  # the agent warms up: events of this life (seqs reserved past them)
    wait_until(lambda: len(server.events(sid)) > seen)
    server.stop(signal.SIGKILL)
    server.start(timeout=180)
    assert server.get("sessions", sid).json()["last_seq"] == server.events(sid)[-1]["seq"]


class Reader:
    """A client reading a session's events as they come (``GET events?after=``, from the last seq it saw)."""

    def __init__(self, server: ServerProcess, sid: str) -> None:
        self.server, self.sid = server, sid
        self.seen: dict[int, dict[str, Any]] = {}
        self.last = 0

    def poll(self) -> list[dict[str, Any]]:
        try:
            page = self.server.get("sessions", self.sid, "events", after=self.last).json()
        except Exception:
            return []
        for e in page:
            self.seen[e["seq"]] = e
            self.last = max(self.last, e["seq"])
        return page

    def until(self, predicate: Any, timeout: float = 20.0) -> None:
        wait_until(lambda: (self.poll() or True) and predicate(self.seen.values()), timeout)


def fail_store(server: ServerProcess, fail: bool) -> None:
    import httpx

    r = httpx.post(f"{server.base}/jupyter-acp-testing/store", json={"fail": fail}, headers=server.headers)
    assert r.json()["failing"] is fail


@pytest.mark.timeout(300)  # server starts: seconds each, tens on a loaded machine
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_seq_a_client_saw_while_the_store_failed_is_never_given_to_another_event(tmp_path, stop):
    from jupyter_acp.testing.store_faults import FAULTS

    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    (root / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    quick = {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], "stream", "--chunks", "30", "--delay", "0.01"]}
    server = ServerProcess(root, data, agents={"quick": quick}, extensions=FAULTS)
    server.start(timeout=180)
    try:
        sid = server.open_session("nb.ipynb", "quick")["id"]
        reader = Reader(server, sid)
        server.turn(sid, "stored")
        fail_store(server, True)
        lost_turn = server.post("sessions", sid, "prompt", body={"text": "in memory only"}).json()["turn_id"]
        reader.until(lambda evs: any(e["type"] == "turn_ended" and e["turn_id"] == lost_turn for e in evs))
        assert any(e.get("phase") == "store_failed" for e in reader.seen.values()), "the user was told"
        unsaved = {s for s in reader.seen} - {e["seq"] for e in stored(data, sid)}
        assert unsaved, "the second turn was only in memory"
        server.stop(stop)
        server.start(timeout=180)
        history = server.events(sid)
        by_seq = {e["seq"]: e for e in history}
        for seq, e in reader.seen.items():  # a seq the client holds is that event or no event, never another
            assert by_seq.get(seq, e) == e, (seq, e, by_seq.get(seq))
        if stop == signal.SIGTERM:  # the stop said what it could not keep; the next start stores it
            lost = [e for e in history if e.get("phase") == "store_lost"]
            assert len(lost) == 1 and lost[0]["events"] == len(unsaved) and lost_turn in lost[0]["turns"], lost
            assert lost[0] in stored(data, sid)
        turn, after = server.turn(sid, "after the restart")
        new = [e for e in after if e["turn_id" if "turn_id" in e else "seq"] == turn or e["seq"] > max(reader.seen)]
        assert new and min(e["seq"] for e in new) > max(reader.seen), "new events take seqs no client holds"
    finally:
        server.stop(signal.SIGKILL)
