"""A real server process stopped with SIGTERM and started again keeps every conversation."""

from __future__ import annotations

import json
import time

import nbformat

from jupyter_acp.testing.server import ServerProcess

from .conftest import SCRIPTED, message_text, process_alive

EXPECTED = {
    "plain": "seeded with the recent history",
    "resumable": "agent session resumed",
    "loadable": "agent session loaded",
}
BEHAVIOUR = {"plain": "stream", "resumable": "resumable", "loadable": "loadable"}


def test_history_and_sessions_survive_a_server_restart(tmp_path):
    root, data, pids = tmp_path / "root", tmp_path / "data", tmp_path / "pids"
    for d in (root, data, pids):
        d.mkdir()
    agents = {
        name: {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], BEHAVIOUR[name], "--pid-file", str(pids / name)]}
        for name in EXPECTED
    }
    for agent in EXPECTED:
        (root / f"{agent}.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    server = ServerProcess(root, data, agents=agents)
    server.start()
    try:
        before: dict[str, tuple[str, list]] = {}
        for agent in EXPECTED:
            sid = server.open_session(f"{agent}.ipynb", agent)["id"]
            turn1, events = server.turn(sid, "first question")
            assert message_text(events, turn1) == "0 1 2 3 4"
            before[agent] = (sid, events)
        agent_pids = [int((pids / agent).read_text().split()[0]) for agent in EXPECTED]
        server.stop()
        assert not [p for p in agent_pids if process_alive(p)], "no agent may outlive the server"

        server.start()
        for agent, expected in EXPECTED.items():
            sid, old = before[agent]
            assert server.open_session(f"{agent}.ipynb", agent)["id"] == sid
            history = server.get("sessions", sid, "events").json()
            assert history[: len(old)] == old, "history kept whole across the restart"
            turn2, after = server.turn(sid, "second question")
            notices = [e["text"] for e in after[len(old) :] if e["type"] == "notice"]
            assert any(expected in n for n in notices), (agent, notices)
            assert message_text(after, turn2) == "0 1 2 3 4"
            assert "replayed history" not in message_text(after), "a load's replay is not recorded twice"
            seqs = [e["seq"] for e in after]
            assert seqs == list(range(1, len(seqs) + 1))
    finally:
        server.stop()


def test_sigterm_mid_turn_then_restart_keeps_history_and_secrets_stay_put(tmp_path, monkeypatch):
    """SIGTERM while a turn streams: the turn's end is recorded, the next server serves on; the server
    token and the kernel secret never reach an agent's environment or the transcript."""
    root, data, pids = tmp_path / "root", tmp_path / "data", tmp_path / "pids"
    for d in (root, data, pids):
        d.mkdir()
    (root / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-key-intended")
    agents = {
        "slow": {
            "command": SCRIPTED[0],
            "args": [*SCRIPTED[1:], "slow", "--chunks", "2000", "--delay", "0.01", "--pid-file", str(pids / "slow")],
        }
    }
    server = ServerProcess(root, data, agents=agents, token="server-token-must-not-leak")
    server.start()
    try:
        sid = server.open_session("nb.ipynb", "slow")["id"]
        turn = server.post("sessions", sid, "prompt", body={"text": "go"}).json()["turn_id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            events = server.get("sessions", sid, "events").json()
            if sum(e["type"] == "session_update" for e in events) > 20:
                break
            time.sleep(0.05)
        agent_pid = int((pids / "slow").read_text().split()[0])
        environ = open(f"/proc/{agent_pid}/environ", "rb").read().decode(errors="replace")
        runtime = next((data / "runtime").glob("jupyter_acp-*.json"))
        assert "token" not in json.loads(runtime.read_text()), "the runtime file hands out no kernel secret"
        kernel_secret = "JUPYTER_ACP_TOKEN="  # the secret lives in the server's memory and each kernel's env only
        assert "server-token-must-not-leak" not in environ
        assert kernel_secret not in environ
        assert "sk-provider-key-intended" in environ, "provider keys are meant to pass"
        server.stop()  # SIGTERM mid-turn
        assert not process_alive(agent_pid)

        server.start()
        history = server.get("sessions", sid, "events").json()
        ends = [e for e in history if e["type"] == "turn_ended" and e["turn_id"] == turn]
        assert len(ends) == 1 and ends[0]["error_kind"] == "shutdown", ends
        assert [e["seq"] for e in history] == list(range(1, len(history) + 1))
        text = json.dumps(history)
        assert "server-token-must-not-leak" not in text and kernel_secret not in text
        server.post("sessions", sid, "cancel")
    finally:
        server.stop()
    log = (data / "server.log").read_text()
    assert kernel_secret not in log
