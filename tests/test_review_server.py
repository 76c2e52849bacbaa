"""Review and rewind across a server restart (the turn's record and checkpoint are stored, not held in memory); the
guard of an agent's notebook writes over ``fs/*`` (``metadata.jupyter_acp`` is jupyter-acp's alone)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import nbformat

from jupyter_acp.notebook import provenance as prov
from jupyter_acp.testing.files import saved_notebook_sync
from jupyter_acp.testing.server import ServerProcess

from .conftest import hostile, message_text


def notebook(root, name: str, cells: list[str]) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, src in enumerate(cells):
        cell = nbformat.v4.new_code_cell(src)
        cell["id"] = f"c{i}"
        nb.cells.append(cell)
    (root / name).write_text(nbformat.writes(nb))
    return name


def saved_sources(root, path: str, expected: list[str], timeout: float = 20) -> list[str]:
    """The notebook's sources on disk, once the live document's autosave wrote ``expected`` (or the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = [c.source for c in nbformat.read(root / path, as_version=4).cells]
        except Exception:  # caught in the middle of a save
            got = []
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def hostile_turn(server: ServerProcess, sid: str, actions: list[dict[str, Any]]) -> tuple[str, list, list]:
    turn, events = server.turn(sid, json.dumps(actions), timeout=60)
    return turn, json.loads(message_text(events, turn)), events


def test_a_turn_that_ended_before_a_server_restart_is_reviewed_and_rewound(tmp_path):
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    path = notebook(root, "nb.ipynb", ["a = 1", "b = 2"])
    agents = {"hostile": hostile(tmp_path)}
    server = ServerProcess(root, data, agents=agents, extra_args=["--JupyterACPTools.permission_policy=review"])
    server.start()
    try:
        body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}
        resp = httpx.post(f"{server.base}/api/sessions", json=body, headers=server.headers, timeout=60)
        resp.raise_for_status()
        sid = server.open_session(path, "hostile")["id"]
        turn, results, events = hostile_turn(
            server,
            sid,
            [
                {
                    "do": "tool",
                    "name": "client_edit_cell",
                    "args": {"cell_id": "c0", "old_string": "a = 1", "new_string": "a = 5"},
                },
                {"do": "tool", "name": "client_insert_cell", "args": {"source": "c = a + b"}},
                {"do": "tool", "name": "client_execute_code", "args": {"code": "v = 41 + 1"}},
            ],
        )
        assert all("ok" in r for r in results), results
        assert not [e for e in events if e["type"] == "permission_request"], "review asks no card"
        end = next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn)
        assert end["review"]["changes"] == 2 and end["review"]["checkpoint"], end
        # the live document's autosave writes the file
        on_disk = saved_notebook_sync(root / path, until=lambda nb: nb.cells[0].source.startswith("a = 5"))
        assert prov.last_agent_change(on_disk.cells[0].metadata).turn_id == turn  # type: ignore[union-attr]

        server.stop()
        server.start()

        changes = server.get("sessions", sid, "turns", turn, "changes").json()
        assert {(c["cell_id"], c["change"]) for c in changes["changes"]} == {
            ("c0", "modified"),
            (on_disk.cells[2].id, "added"),
        }, changes
        assert "v" in changes["checkpoint"]["kernel"]["saved"] or changes["checkpoint"]["kernel"]["saved"] == []
        rewound = server.post("sessions", sid, "turns", turn, "rewind")
        assert rewound.status_code == 200, rewound.text
        answer = rewound.json()
        assert set(answer["restored_cells"]) == {"c0", on_disk.cells[2].id}
        assert answer["kernel"]["restored"] == [], "the kernel that held the namespace did not survive the restart"
        assert "never_restored" in answer and answer["undo_checkpoint"]
        assert saved_sources(root, path, ["a = 1", "b = 2"]) == ["a = 1", "b = 2"]
        again = server.post("sessions", sid, "turns", turn, "rewind")
        assert again.status_code == 409 and "nothing to rewind" in again.json()["message"], again.text
        undone = server.post("sessions", sid, "checkpoints", answer["undo_checkpoint"], "restore")
        assert undone.status_code == 200, undone.text
        assert saved_sources(root, path, ["a = 5", "b = 2", "c = a + b"]) == ["a = 5", "b = 2", "c = a + b"]
    finally:
        server.stop()


def test_a_notebook_written_over_fs_keeps_its_record_and_takes_no_forged_one():
    """Behind the rule that no agent writes a notebook over ``fs/*`` (``notebook_files``), the guard of
    ``fs/write_text_file`` refuses a forged record and carries the present one over (should that rule ever go)."""
    import pytest

    from jupyter_acp.sessions.review.guard import guard_notebook_write
    from jupyter_acp.tools.files import FileRefused

    entry = {"history": [{"by": "agent", "action": "edited", "agent": {"name": "a"}, "conversation_id": "c",
                          "turn_id": "t", "at": "2026-01-01T00:00:00Z"}]}  # fmt: skip
    old = {"cells": [{"id": "k", "cell_type": "code", "source": "1", "metadata": {"jupyter_acp": entry}}]}
    new = {"cells": [{"id": "k", "cell_type": "code", "source": "2", "metadata": {}}]}
    kept = json.loads(guard_notebook_write("nb.ipynb", json.dumps(old), json.dumps(new)))
    assert kept["cells"][0]["metadata"]["jupyter_acp"] == entry and kept["cells"][0]["source"] == "2"
    for forged in ({"metadata": {"jupyter-acp": {}}}, {"cells": [{"id": "k", "metadata": {"JUPYTER_ACP": {}}}]}):
        with pytest.raises(FileRefused) as err:
            guard_notebook_write("x.ipynb", None, json.dumps(forged))
        assert err.value.rule == "provenance_is_jupyter_acps"
    assert guard_notebook_write("x.txt", None, '{"metadata": {"jupyter_acp": 1}}').startswith("{")
