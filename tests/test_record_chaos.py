"""Chaos, bounded: notebooks on the built-in echo agent and a streaming scripted agent, clients prompting and
listening with ``after=``, agents SIGKILLed and SIGSTOPped, the store failing then working again, the server SIGKILLed
and started again on the same data dir, then stopped (SIGTERM) and started once more. At the end what every client
saw is compared with the store: nothing lost, nothing duplicated, no seq given to two events, every prompt the server
accepted with exactly one ``turn_started`` and one ``turn_ended`` with a reason, and no process left behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from jupyter_acp.testing.server import ServerProcess
from jupyter_acp.testing.store_faults import FAULTS

from .conftest import SCRIPTED

NOTEBOOKS = 6
#: seconds of each phase of chaos
PHASE = 5.0


def processes_in(root: Path) -> list[int]:
    """Processes whose working directory is in ``root``: the agents (they run in the notebook's folder)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd == str(root) or cwd.startswith(str(root) + os.sep)):
            out.append(int(pid))
    return out


def agent_pids(root: Path, marker: str) -> list[int]:
    pids = []
    for pid in processes_in(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            pids.append(pid)
    return pids


class Client:
    """One session's user: prompts (over the socket or HTTP, by turns), listens from the last seq it saw."""

    def __init__(self, server: ServerProcess, sid: str, via_http: bool) -> None:
        self.server, self.sid, self.via_http = server, sid, via_http
        self.seen: dict[int, dict[str, Any]] = {}
        self.duplicated = 0
        self.reused: list[tuple[int, Any, Any]] = []
        self.moved = 0
        self.accepted: list[str] = []
        self.last = 0
        self.stop = False

    def take(self, events: list[dict[str, Any]]) -> None:
        for e in events:
            old = self.seen.get(e["seq"])
            if old is not None:
                if old == e:
                    self.duplicated += 1
                else:
                    self.reused.append((e["seq"], old, e))
            self.seen[e["seq"]] = e
            self.last = max(self.last, e["seq"])

    def ended(self, turn: str) -> bool:
        return any(e["type"] == "turn_ended" and e.get("turn_id") == turn for e in self.seen.values())

    async def run(self, http: httpx.AsyncClient) -> None:
        n = 0
        while not self.stop:
            try:
                ws = await websocket_connect(
                    HTTPRequest(
                        f"ws://127.0.0.1:{self.server.port}/jupyter-acp/sessions/{self.sid}/stream?after={self.last}",
                        headers=self.server.headers,
                        connect_timeout=2,
                        request_timeout=2,
                    )
                )
            except Exception:
                await asyncio.sleep(0.3)
                continue
            answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

            async def read(ws: Any = ws, answers: asyncio.Queue[dict[str, Any]] = answers) -> None:
                while True:
                    msg = await ws.read_message()
                    if msg is None:
                        return
                    frame = json.loads(msg)
                    if isinstance(frame, list):
                        self.take(frame)
                    elif frame.get("history_moved"):
                        self.moved += 1
                    else:
                        answers.put_nowait(frame)

            reader = asyncio.ensure_future(read())
            try:
                while not self.stop and not reader.done():
                    n += 1
                    text = f"echo: turn {n} of {self.sid[:6]}"
                    turn = None
                    if self.via_http:
                        try:
                            r = await http.post(self.server.url("sessions", self.sid, "prompt"), json={"text": text})
                            if r.status_code == 202:
                                turn = r.json()["turn_id"]
                        except httpx.HTTPError:
                            break
                    else:
                        try:
                            await ws.write_message(json.dumps({"op": "prompt", "ref": n, "text": text}))
                            answer = await asyncio.wait_for(answers.get(), 10)
                        except Exception:
                            break
                        if answer.get("ok"):
                            turn = answer["turn_id"]
                    if turn is None:  # refused (a turn still runs): wait a little
                        await asyncio.sleep(0.2)
                        continue
                    self.accepted.append(turn)
                    deadline = time.monotonic() + 30
                    while not self.ended(turn) and not reader.done() and time.monotonic() < deadline:
                        await asyncio.sleep(0.02)
            finally:
                reader.cancel()
                ws.close()
            await asyncio.sleep(0.1)

    async def catch_up(self, http: httpx.AsyncClient) -> None:
        """Read everything after the last seq seen, page by page (the final look, as a reconnecting panel)."""
        while True:
            page = (await http.get(self.server.url("sessions", self.sid, "events"), params={"after": self.last})).json()
            if not page:
                return
            self.take(page)


@pytest.mark.timeout(400)  # three server starts on a busy machine; the chaos itself is about 30 s
def test_chaos_nothing_lost_duplicated_or_reused_every_accepted_turn_ended_no_orphans(tmp_path):
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    for i in range(NOTEBOOKS):
        (root / f"nb{i}.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    agents = {
        "echo": {
            "command": sys.executable,
            "args": ["-m", "jupyter_acp.agent", "--echo"],
            "tool_channel": "client-tools",
        },
        "stream": {
            "command": SCRIPTED[0],
            "args": [*SCRIPTED[1:], "stream", "--chunks", "40", "--delay", "0.01"],
        },
    }
    server = ServerProcess(
        root,
        data,
        agents=agents,
        extensions=FAULTS,
        extra_args=["--JupyterACP.turn_idle_timeout=2", "--JupyterACP.cancel_grace=1"],
    )
    server.start(timeout=180)
    clients: list[Client] = []
    try:
        sids = [
            server.open_session(f"nb{i}.ipynb", agent)["id"] for i in range(NOTEBOOKS) for agent in ("echo", "stream")
        ]
        clients = [Client(server, sid, via_http=k % 2 == 1) for k, sid in enumerate(sids)]
        asyncio.run(chaos(server, root, clients))
        # every turn ended; a clean stop and a start: the record as the next user finds it
        server.stop()
        assert not processes_in(root), "no agent outlives a stopped server"
        server.start(timeout=180)
        asyncio.run(catch_up(server, clients))
        server.stop()
        assert not processes_in(root), "no process left behind"
    finally:
        for pid in processes_in(root):
            os.kill(pid, signal.SIGCONT)
        server.stop(signal.SIGKILL)

    db = sqlite3.connect(data / "store.sqlite")
    lost, reused, unended, doubled, unaccounted = [], [], [], [], []
    try:
        for c in clients:
            stored = {
                r[0]: json.loads(r[1])
                for r in db.execute("SELECT seq, data FROM events WHERE session_id = ? ORDER BY seq", (c.sid,))
            }
            lost += [(c.sid, s) for s in c.seen if s not in stored]
            reused += [(c.sid, s) for s, e in c.seen.items() if s in stored and stored[s] != e] + c.reused
            starts = [e["turn_id"] for e in stored.values() if e["type"] == "turn_started"]
            ends = [e for e in stored.values() if e["type"] == "turn_ended"]
            doubled += [t for t in set(starts) if starts.count(t) != 1]
            for t in starts:
                mine = [e for e in ends if e["turn_id"] == t]
                if len(mine) != 1 or not (mine[0].get("stop_reason") or mine[0].get("error_kind")):
                    unended.append((c.sid, t, mine))
            unaccounted += [(c.sid, t) for t in c.accepted if t not in starts]
    finally:
        db.close()
    turns = sum(len(c.accepted) for c in clients)
    summary = (
        f"{turns} accepted turns, {sum(len(c.seen) for c in clients)} events seen; lost {len(lost)}, "
        f"duplicated {sum(c.duplicated for c in clients)}, reused {len(reused)}, unended {len(unended)}, "
        f"accepted but not stored {len(unaccounted)}, started twice {len(doubled)}, history moved {sum(c.moved for c in clients)}"
    )
    print(summary)
    assert turns > len(clients), summary
    assert not lost, (summary, lost[:5])
    assert not reused, (summary, reused[:3])
    assert not unended, (summary, unended[:3])
    assert not unaccounted and not doubled, summary
    assert sum(c.duplicated for c in clients) == 0, summary
    assert sum(c.moved for c in clients) == 0, summary


async def catch_up(server: ServerProcess, clients: list[Client]) -> None:
    async with httpx.AsyncClient(headers=server.headers, timeout=30) as http:
        for c in clients:
            await c.catch_up(http)


async def fault(server: ServerProcess, fail: bool) -> None:
    async with httpx.AsyncClient(headers=server.headers, timeout=10) as http:
        r = await http.post(f"{server.base}/jupyter-acp-testing/store", json={"fail": fail})
        assert r.json()["failing"] is fail


def say(what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} chaos: {what}", flush=True)


async def chaos(server: ServerProcess, root: Path, clients: list[Client]) -> None:
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(headers=server.headers, timeout=10) as http:
        tasks = [asyncio.ensure_future(c.run(http)) for c in clients]
        await asyncio.sleep(PHASE)
        say("agents killed and stopped")
        # an agent killed mid-turn, another stopped (its turns end on the idle timeout)
        for pid in agent_pids(root, "jupyter_acp.testing.agents"):
            os.kill(pid, signal.SIGKILL)
        stopped = agent_pids(root, "jupyter_acp.agent")
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        await asyncio.sleep(PHASE)
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        say("store fails")
        # the store fails (a full disk), then has room again
        await fault(server, True)
        await asyncio.sleep(PHASE / 2)
        await fault(server, False)
        await asyncio.sleep(PHASE / 2)
        say("server killed")
        # the server killed outright, then started again on the same data dir
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        await loop.run_in_executor(None, lambda: server.start(timeout=180))
        say("server started again")
        await asyncio.sleep(PHASE)
        say("clients stop")
        for c in clients:
            c.stop = True
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
        # what is still running ends (each client waits for its own turn's end; a refused prompt left none)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            busy = [c for c in clients if (await http.get(server.url("sessions", c.sid))).json().get("state") == "busy"]
            if not busy:
                break
            await asyncio.sleep(0.2)
