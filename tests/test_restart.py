"""A real server process stopped with SIGTERM and started again keeps every conversation."""

from __future__ import annotations


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
            notices = [e["text"] for e in after[len(old):] if e["type"] == "notice"]
            assert any(expected in n for n in notices), (agent, notices)
            assert message_text(after, turn2) == "0 1 2 3 4"
            assert "replayed history" not in message_text(after), "a load's replay is not recorded twice"
            seqs = [e["seq"] for e in after]
            assert seqs == list(range(1, len(seqs) + 1))
    finally:
        server.stop()
