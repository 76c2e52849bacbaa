"""A real server process stopped with SIGTERM and started again keeps every conversation."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import nbformat

from .conftest import SCRIPTED, message_text

TOKEN = "restart-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, root, data, pid_dir):
        self.root, self.data, self.pid_dir = root, data, pid_dir
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self):
        self.port = free_port()
        agents = {
            name: {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], behaviour, "--pid-file", str(self.pid_dir / name)]}
            for name, behaviour in (("plain", "stream"), ("resumable", "resumable"), ("loadable", "loadable"))
        }
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(self.data / "runtime"), "JUPYTER_DATA_DIR": str(self.data)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
             f"--ServerApp.root_dir={self.root}", f"--IdentityProvider.token={TOKEN}", "--allow-root",
             f"--JupyterACP.agents={json.dumps(agents)}", f"--JupyterACP.store_path={self.data / 'store.sqlite'}",
             "--ServerApp.jpserver_extensions={'jupyter_acp': True}"],
            env=env, stdout=subprocess.DEVNULL, stderr=open(self.data / "server.log", "ab"),
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if self.get("agents").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("server did not start: " + (self.data / "server.log").read_text()[-2000:])

    def url(self, *parts):
        return f"http://127.0.0.1:{self.port}/jupyter-acp/" + "/".join(parts)

    def get(self, *parts, **params):
        return httpx.get(self.url(*parts), params=params, headers={"Authorization": f"token {TOKEN}"}, timeout=10)

    def post(self, *parts, body=None):
        return httpx.post(self.url(*parts), json=body or {}, headers={"Authorization": f"token {TOKEN}"}, timeout=10)

    def turn(self, sid, text):
        turn = self.post("sessions", sid, "prompt", body={"text": text}).json()["turn_id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            events = self.get("sessions", sid, "events").json()
            if any(e["type"] == "turn_ended" and e["turn_id"] == turn for e in events):
                return turn, events
            time.sleep(0.05)
        raise AssertionError(f"turn did not end: {events}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


EXPECTED = {
    "plain": "seeded with the recent history",
    "resumable": "agent session resumed",
    "loadable": "agent session loaded",
}


def test_history_and_sessions_survive_a_server_restart(tmp_path):
    root, data, pids = tmp_path / "root", tmp_path / "data", tmp_path / "pids"
    for d in (root, data, pids):
        d.mkdir()
    for agent in EXPECTED:
        (root / f"{agent}.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    server = Server(root, data, pids)
    server.start()
    try:
        before: dict[str, tuple[str, list]] = {}
        for agent in EXPECTED:
            sid = server.post("sessions", body={"notebook": f"{agent}.ipynb", "agent": agent}).json()["id"]
            turn1, events = server.turn(sid, "first question")
            assert message_text(events, turn1) == "0 1 2 3 4"
            before[agent] = (sid, events)
        agent_pids = [int((pids / agent).read_text().split()[0]) for agent in EXPECTED]
        server.stop()
        assert not [p for p in agent_pids if _alive(p)], "no agent may outlive the server"

        server.start()
        for agent, expected in EXPECTED.items():
            sid, old = before[agent]
            again = server.post("sessions", body={"notebook": f"{agent}.ipynb", "agent": agent}).json()
            assert again["id"] == sid
            history = server.get("sessions", sid, "events").json()
            assert history[: len(old)] == old, "history kept whole across the restart"
            turn2, after = server.turn(sid, "second question")
            notices = [e["text"] for e in after[len(old):] if e["type"] == "notice"]
            assert any(expected in n for n in notices), (agent, notices)
            assert message_text(after, turn2) == "0 1 2 3 4"
            assert "replayed history" not in message_text(after), "a load's replay is not recorded twice"
            seqs = [e["seq"] for e in after]
            assert seqs == list(range(1, len(seqs) + 1))
    finally:
        if server.proc and server.proc.poll() is None:
            server.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False
