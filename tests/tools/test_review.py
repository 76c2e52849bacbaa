"""Review after, review and rewind (``sessions/review/``), headless, against a real server, a real kernel and the live
document: the built-in agent on a fake model works in "Review after" (no card), the turn's changes are listed, kept
and discarded cell by cell, the turn is rewound (cells and a DataFrame in the same kernel) and the rewind undone."""

from __future__ import annotations

import ast
import asyncio
import json
from typing import Any

import nbformat
import pytest

from jupyter_acp.notebook import provenance as prov
from jupyter_acp.testing.fake_model import FakeModel
from jupyter_acp.testing.files import saved_notebook

from ..conftest import Api, hostile, message_text
from ..users import USER_HEADER, HeaderUsers, ReaderOnlyReads
from .helpers import wait_until

SETUP = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})"
CELLS = [SETUP, "x = 1", "y = 2", "z = 3"]


@pytest.fixture
def tools_config() -> dict[str, Any]:
    return {"permission_policy": "ask"}


@pytest.fixture
def server_app_config() -> dict[str, Any]:
    return {"identity_provider_class": HeaderUsers, "authorizer_class": ReaderOnlyReads}


@pytest.fixture
def fake_model():
    def call(tool: str, arguments: dict[str, Any], role: str = "tool", match: str | None = None) -> dict[str, Any]:
        rule: dict[str, Any] = {"tool": tool, "arguments": arguments, "times": 1, "role": role}
        if match:
            rule["match"] = match
        return rule

    rules = [
        call("client_edit_cell", {"cell_id": "c1", "old_string": "x = 1", "new_string": "x = 10"}, "user", "refactor"),
        call("client_edit_cell", {"cell_id": "c2", "old_string": "y = 2", "new_string": "y = 20"}),
        call("client_replace_in_cell", {"cell_id": "c3", "old": "z = 3", "new": "z = 30"}),
        call("client_insert_cell", {"source": "total = x + y + z", "after_cell_id": "c3"}),
        call("client_execute_code", {"code": "df['a'] = df['a'] * 100\ndf.loc[3] = [7]"}),
        {"role": "tool", "text": "Done: three cells edited, one inserted, df scaled."},
    ]
    with FakeModel(rules) as fm:
        yield fm


@pytest.fixture
def acp_agents(fake_model, tmp_path):
    return {"builtin": fake_model.agent_entry(), "hostile": hostile(tmp_path)}


def make(jp_root_dir, path: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, src in enumerate(CELLS):
        cell = nbformat.v4.new_code_cell(src)
        cell["id"] = f"c{i}"
        nb.cells.append(cell)
    (jp_root_dir / path).write_text(nbformat.writes(nb))
    return path


async def kernel_value(acp, kid: str, expression: str) -> Any:
    conn = await acp.tools.services.kernels.connection(kid)
    text = await conn.evaluate(f"__import__('json').dumps({expression})", prefer_subshell=False)
    return json.loads(ast.literal_eval(text))


def sources(cells: list[dict[str, Any]]) -> list[str]:
    return [c["source"] for c in cells]


# local kernels only: the same code behind a Jupyter Gateway passed (81 s here), and the checkpoint's gateway path is
# test_checkpoint_gateway.py's; the journey's own cost stays under a minute
@pytest.mark.parametrize("kernel_mode", ["local"], indirect=True)
async def test_a_turn_in_review_after_is_listed_kept_discarded_rewound_and_the_rewind_undone(
    jp_fetch, acp, jp_root_dir, start_kernel, fake_model, browser
):
    api = Api(jp_fetch)
    path = make(jp_root_dir, "review.ipynb")
    kid = await start_kernel(path)
    assert (await acp.tools.services.kernels.run_code(kid, SETUP))["status"] == "ok"
    s = await api.open(path, "builtin")
    described = await api.call("POST", "sessions", s["id"], "policy", body={"policy": "review"})
    assert described["policy"] == "review"

    turn = await api.prompt(s["id"], "refactor the constants and scale df")
    events = await api.wait_turn_end(s["id"], turn, timeout=90)
    mine = [e for e in events if e.get("turn_id") == turn or e["type"] == "permission_request"]
    assert not [e for e in events if e["type"] == "permission_request"], "Review after asks no card"
    end = next(e for e in mine if e["type"] == "turn_ended")
    assert end.get("stop_reason") == "end_turn", end
    assert end["review"]["changes"] == 4 and end["review"]["after"] is True, end  # went ahead unasked: opens by itself
    calls = [e for e in mine if e["type"] == "audit" and e["power"] == "tool"]
    assert len(calls) == 5 and all(a["rule"].startswith("review") for a in calls), calls
    answered = [e for e in mine if e["type"] == "audit" and e["decision"] == "answered"]
    assert answered and all("review" in a["rule"] for a in answered), "the agent's own requests answered by the policy"

    # provenance in the live document: who, which turn, which prompt, which user
    nb = await acp.tools.services.notebooks.open(path)
    cells = nb.cells()
    assert sources(cells) == [SETUP, "x = 10", "y = 20", "z = 30", "total = x + y + z"]
    for cell in cells[1:]:
        last = prov.last_agent_change(cell["metadata"])
        assert last is not None and last.turn_id == turn and last.user == "owner", cell
        assert last.prompt == "refactor the constants and scale df" and last.agent.name
        assert last.turn_number == 1, "the first turn is turn 1, even before its turn_started is stored"
    assert prov.history(cells[4]["metadata"])[-1].action == "inserted"  # type: ignore[union-attr]
    assert prov.last_agent_change(cells[0]["metadata"]) is None, "the cell the agent did not touch has no entry"

    # the user's later edit of an agent's cell is noted (typed in a browser tab: the collaboration room)
    async with browser(path) as tab:
        ycell = next(c for c in tab.ycells if c.get("id") == "c3")
        ycell["source"].insert(len(str(ycell["source"])), "1")
        await wait_until(lambda: isinstance(prov.history(nb.cell("c3")[1]["metadata"])[-1], prov.UserEdit))
    assert sources(nb.cells())[3] == "z = 301"

    changes = await api.call("GET", "sessions", s["id"], "turns", turn, "changes")
    assert {(c["cell_id"], c["change"]) for c in changes["changes"]} == {
        ("c1", "modified"),
        ("c2", "modified"),
        ("c3", "modified"),
        (cells[4]["id"], "added"),
    }
    c1 = next(c for c in changes["changes"] if c["cell_id"] == "c1")
    assert c1["before"] == {"cell_type": "code", "source": "x = 1"} and c1["after"]["source"] == "x = 10"
    kernel = changes["checkpoint"]["kernel"]
    assert "df" in kernel["saved"] and kernel["bytes"] > 0, changes["checkpoint"]

    # discard one, keep the three others
    left = await api.call(
        "POST", "sessions", s["id"], "turns", turn, "review", body={"decision": "discard", "cell_id": "c2"}
    )
    assert {c["cell_id"] for c in left["changes"]} == {"c1", "c3", cells[4]["id"]}
    assert sources(nb.cells())[2] == "y = 2"
    left = await api.call("POST", "sessions", s["id"], "turns", turn, "review", body={"decision": "keep"})
    assert left["changes"] == [] and {d["cell_id"] for d in left["decided"]} == {"c1", "c2", "c3", cells[4]["id"]}
    after = sources(nb.cells())
    assert after == [SETUP, "x = 10", "y = 2", "z = 301", "total = x + y + z"]
    assert await kernel_value(acp, kid, "df['a'].tolist()") == [100, 200, 300, 7]

    # rewind: the cells and df as before the turn, in the same kernel
    rewound = await api.call("POST", "sessions", s["id"], "turns", turn, "rewind")
    assert rewound["turn_id"] == turn and rewound["undo_checkpoint"]
    assert "df" in rewound["kernel"]["restored"], rewound["kernel"]
    assert sources(nb.cells()) == CELLS
    assert await kernel_value(acp, kid, "df['a'].tolist()") == [1, 2, 3]

    # undo the rewind: as after
    again = await api.call("POST", "sessions", s["id"], "checkpoints", rewound["undo_checkpoint"], "restore")
    assert sources(nb.cells()) == after
    assert await kernel_value(acp, kid, "df['a'].tolist()") == [100, 200, 300, 7]
    assert again["undo_checkpoint"] and again["undo_checkpoint"] != rewound["undo_checkpoint"]

    events = await api.events(s["id"])
    done = [e["action"] for e in events if e["type"] == "audit" and e.get("power") == "review"]
    assert done == ["review/discard", "review/keep", "review/rewind", "review/restore"], done

    # a read-only user may neither review nor rewind, and is told the rule
    for method, parts, body in [
        ("GET", ("turns", turn, "changes"), None),
        ("POST", ("turns", turn, "review"), {"decision": "keep"}),
        ("POST", ("turns", turn, "rewind"), {}),
        ("POST", ("checkpoints", rewound["undo_checkpoint"], "restore"), {}),
    ]:
        kwargs: dict[str, Any] = {"method": method, "headers": {USER_HEADER: "reader"}, "raise_error": False}
        if body is not None:
            kwargs["body"] = json.dumps(body)
        resp = await jp_fetch("jupyter-acp", "sessions", s["id"], *parts, **kwargs)
        assert resp.code == 403 and "rule:" in resp.body.decode() and "'write'" in resp.body.decode(), parts
    # write without execute: the kernel part needs execute
    resp = await jp_fetch(
        "jupyter-acp", "sessions", s["id"], "turns", turn, "rewind",
        method="POST", body="{}", headers={USER_HEADER: "writer"}, raise_error=False,
    )  # fmt: skip
    assert resp.code == 403 and "'execute'" in resp.body.decode()


async def test_a_hostile_agent_can_neither_forge_nor_erase_provenance(jp_fetch, acp, jp_root_dir):
    api = Api(jp_fetch)
    path = make(jp_root_dir, "forge.ipynb")
    s = await api.open(path, "hostile")
    await api.call("POST", "sessions", s["id"], "policy", body={"policy": "review"})

    async def turn(actions: list[dict[str, Any]]) -> tuple[str, list[Any], list[dict[str, Any]]]:
        turn_id = await api.prompt(s["id"], json.dumps(actions))
        events = await api.wait_turn_end(s["id"], turn_id, timeout=60)
        return turn_id, json.loads(message_text(events, turn_id)), events

    first, _, _ = await turn(
        [{"do": "tool", "name": "client_edit_cell", "args": {"cell_id": "c1", "old_string": "1", "new_string": "2"}}]
    )
    nb = await acp.tools.services.notebooks.open(path)
    mine = nb.cell("c1")[1]["metadata"][prov.PROVENANCE_KEY]
    assert prov.last_agent_change(nb.cell("c1")[1]["metadata"]).turn_id == first  # type: ignore[union-attr]
    saved = await saved_notebook(
        jp_root_dir / path, until=lambda nb: any(c.get("id") == "c1" and c.source == "x = 2" for c in nb.cells)
    )
    on_disk = json.loads(nbformat.writes(saved))
    forged = json.loads(json.dumps(on_disk))
    forged["cells"][1]["metadata"] = {"Jupyter_ACP": {"history": [{"by": "user", "user": "alice", "at": "2020"}]}}
    erased = json.loads(json.dumps(on_disk))
    erased["cells"][1]["metadata"], erased["cells"][1]["source"] = {}, "x = 3"  # an edit that drops the record
    _, results, events = await turn(
        [
            {"do": "fs_write", "path": str(jp_root_dir / path), "content": json.dumps(forged)},
            {"do": "fs_write", "path": str(jp_root_dir / "copy.ipynb"), "content": json.dumps(forged)},
            {"do": "tool", "name": "client_insert_cell", "args": {"source": "x", "metadata": {"jupyter_acp": {}}}},
            {
                "do": "tool",
                "name": "client_create_notebook",
                "args": {"path": "n2.ipynb", "cells": [{"source": "x", "metadata": {"jupyter_acp": {}}}]},
            },
            {"do": "fs_write", "path": str(jp_root_dir / path), "content": json.dumps(erased)},
        ]
    )
    # no fs/write_text_file of a notebook at all (rule notebook_files: the notebook tools are the way in)
    for r in (results[0], results[1], results[4]):
        assert r["error"]["data"]["rule"] == "notebook_files", r
    assert not (jp_root_dir / "copy.ipynb").exists() and not (jp_root_dir / "n2.ipynb").exists()
    for r in results[2:4]:  # and no tool takes metadata
        assert "invalid arguments" in json.dumps(r) and "metadata" in json.dumps(r), r
    cell = nb.cell("c1")[1]
    assert cell["source"] == "x = 2" and cell["metadata"][prov.PROVENANCE_KEY] == mine, "the record is as it was"
    assert "Jupyter_ACP" not in json.dumps(nb.cells())
    refused = [e for e in events if e["type"] == "audit" and e["decision"] == "refused"]
    assert len(refused) == 5, refused

    # "Remove agent marks": the user strips them before sharing
    stripped = await api.call("POST", "sessions", s["id"], "provenance", "strip")
    assert stripped == {"notebook": path, "cells": 1}
    assert all(prov.PROVENANCE_KEY not in c["metadata"] for c in nb.cells())


class TestWhatNoCheckpointUndoesIsAsked:
    @pytest.fixture
    def tools_config(self) -> dict[str, Any]:
        # review from the configuration; no namespace saved, so a run cannot be undone
        return {"permission_policy": "review", "checkpoint_bytes": 0}

    @pytest.mark.parametrize("kernel_mode", ["local"], indirect=True)
    async def test_terminals_file_writes_and_unsaved_runs_are_asked_while_edits_are_not(
        self, jp_fetch, acp, jp_root_dir, start_kernel
    ):
        api = Api(jp_fetch)
        path = make(jp_root_dir, "asked.ipynb")
        await start_kernel(path)
        s = await api.open(path, "hostile")
        actions = [
            {"do": "tool", "name": "client_edit_cell", "args": {"cell_id": "c1", "old_string": "1", "new_string": "5"}},
            {"do": "tool", "name": "client_execute_code", "args": {"code": "q = 1"}},
            {"do": "fs_write", "path": str(jp_root_dir / "out.txt"), "content": "hello"},
            {"do": "terminal", "method": "create", "params": {"command": "echo", "args": ["hi"]}},
        ]
        turn_id = await api.prompt(s["id"], json.dumps(actions))
        seen: set[str] = set()
        cards: list[dict[str, Any]] = []
        for _ in range(600):
            events = await api.events(s["id"])
            for e in events:
                if e["type"] == "permission_request" and e["request_id"] not in seen:
                    seen.add(e["request_id"])
                    cards.append(e)
                    reject = next(o for o in e["options"] if o["kind"] == "reject_once")
                    await api.call(
                        "POST",
                        "sessions",
                        s["id"],
                        "permissions",
                        e["request_id"],
                        body={"option_id": reject["optionId"]},
                    )
            if any(e["type"] == "turn_ended" and e["turn_id"] == turn_id for e in events):
                break
            await asyncio.sleep(0.05)
        tools = [c["tool_call"]["_meta"]["jupyter_acp"]["tool"] for c in cards]
        assert tools == ["client_execute_code", "fs/write_text_file", "terminal/create"], tools
        text = json.dumps(cards[0]["tool_call"]["content"])
        assert "policy is 'review'" in text and "checkpoint_bytes = 0" in text, text
        nb = await acp.tools.services.notebooks.open(path)
        assert nb.cell("c1")[1]["source"] == "x = 5", "the edit went ahead unasked"
        audits = [e for e in events if e["type"] == "audit" and e["action"] == "client_edit_cell"]
        assert audits and audits[0]["rule"].startswith("review (JupyterACPTools.permission_policy = 'review')")
        assert not (jp_root_dir / "out.txt").exists()


async def test_discarding_a_cell_the_user_edited_since_keeps_the_users_edit(jp_fetch, acp, jp_root_dir, browser):
    api = Api(jp_fetch)
    path = make(jp_root_dir, "mine.ipynb")
    s = await api.open(path, "hostile")
    await api.call("POST", "sessions", s["id"], "policy", body={"policy": "review"})
    edit = {"cell_id": "c1", "old_string": "x = 1", "new_string": "x = 10"}
    move = {"cell_id": "c3", "to_index": 0}
    turn_id = await api.prompt(
        s["id"],
        json.dumps(
            [
                {"do": "tool", "name": "client_edit_cell", "args": edit},
                {"do": "tool", "name": "client_move_cell", "args": move},
                {"do": "tool", "name": "client_delete_cells", "args": {"cell_ids": ["c2"]}},
            ]
        ),
    )
    events = await api.wait_turn_end(s["id"], turn_id, timeout=60)
    assert not [e for e in events if e["type"] == "permission_request"]
    nb = await acp.tools.services.notebooks.open(path)
    assert sources(nb.cells()) == ["z = 3", SETUP, "x = 10"]
    async with browser(path) as tab:  # the user types at the end of the agent's cell
        ycell = next(c for c in tab.ycells if c.get("id") == "c1")
        ycell["source"].insert(len(str(ycell["source"])), "  # mine")
        await wait_until(lambda: nb.cell("c1")[1]["source"] == "x = 10  # mine")
    changes = await api.call("GET", "sessions", s["id"], "turns", turn_id, "changes")
    assert [(c["cell_id"], c["change"]) for c in changes["changes"]] == [
        ("c3", "moved"),
        ("c1", "modified"),
        ("c2", "removed"),
    ], changes

    left = await api.call("POST", "sessions", s["id"], "turns", turn_id, "review", body={"decision": "discard"})
    assert left["changes"] == [] and "not_discarded" not in left, left
    # the agent's edit undone, the user's kept; the moved cell back in its place, the deleted one back
    assert sources(nb.cells()) == CELLS[:1] + ["x = 1  # mine", "y = 2", "z = 3"], sources(nb.cells())
