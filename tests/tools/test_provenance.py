"""Provenance in cell metadata (``notebook/provenance.py``): written on the live document in the edit's own
transaction, saved by the server, read back by nbformat, kept by ``jupyter nbconvert --to notebook``, capped,
stripped; and refused when an agent hands it in."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from jupyter_acp.notebook import provenance as prov
from jupyter_acp.notebook.document import origin_for
from jupyter_acp.testing.files import saved_notebook


def change(action: prov.Action = "edited", turn: str = "t1", **kw: object) -> prov.AgentChange:
    args: dict[str, object] = {
        "agent_name": "codex",
        "agent_version": "0.4.1",
        "conversation_id": "conv-1",
        "turn_id": turn,
        "tool_call_id": "call-9",
        "prompt": "plot the residuals " * 20,
        "user": "alice",
        "session_id": "s-1",
        "turn_number": 4,
    }
    args.update(kw)
    return prov.agent_change(action, **args)  # type: ignore[arg-type]


async def test_entries_written_with_an_edit_are_saved_and_survive_nbformat_and_nbconvert(
    make_notebook, acp, jp_root_dir
):
    path = make_notebook("prov/nb.ipynb", ["a = 1", "b = 2"])
    nb = await acp.tools.services.notebooks.open(path)
    assert nb.kind == "live"
    cid = nb.cells()[0]["id"]
    origin = origin_for("s-1", "t1")
    updates: list[object] = []
    sub = nb.doc.ydoc.observe(lambda event: updates.append(event))
    _, ycell = nb.ycell(cid)
    with nb._txn(origin, cid, ycell, kind="source"):
        nb.doc.set_cell(nb.find(cid), source="a = 10")
        prov.add_to_ycell(ycell, change(), origin=origin)
    nb.doc.ydoc.unobserve(sub)
    assert len(updates) == 1, "the edit and its record are one Y update"
    assert nb.cells()[0]["source"] == "a = 10"
    (entry,) = prov.history(nb.cells()[0]["metadata"])
    assert isinstance(entry, prov.AgentChange) and entry.prompt == ("plot the residuals " * 20)[:200]
    assert entry.describe().startswith("codex, turn 4: 'plot the residuals") and entry.describe().endswith("(by alice)")

    # saved by the server (jupyter-server-ydoc's autosave), read and validated by nbformat
    file = jp_root_dir / "prov" / "nb.ipynb"

    on_disk = await saved_notebook(file, until=lambda nb: prov.history(nb.cells[0].metadata))
    nbformat.validate(on_disk)
    assert prov.history(on_disk.cells[0].metadata) == [entry]
    assert on_disk.cells[0].source == "a = 10" and not prov.history(on_disk.cells[1].metadata)

    # jupyter nbconvert --to notebook keeps it (run on a copy of what was read whole: the server may save again meanwhile)
    still = jp_root_dir / "prov" / "as_saved.ipynb"
    still.write_text(nbformat.writes(on_disk))
    out = jp_root_dir / "prov" / "converted.ipynb"
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", str(still), "--output", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    converted = nbformat.read(out, as_version=4)
    nbformat.validate(converted)
    assert prov.history(converted.cells[0].metadata) == [entry]

    # the turn's revert takes the edit and its record back together
    await acp.tools.services.notebooks.revert("s-1", path, "t1")
    assert nb.cells()[0]["source"] == "a = 1" and not prov.history(nb.cells()[0]["metadata"])


async def test_a_users_later_edits_are_noted_once_and_strip_removes_every_entry(make_notebook, acp):
    path = make_notebook("prov/user.ipynb", ["x = 1", "y = 2"])
    nb = await acp.tools.services.notebooks.open(path)
    first, second = (c["id"] for c in nb.cells())
    _, ycell = nb.ycell(first)
    _, other = nb.ycell(second)
    assert not prov.note_user_edit(other, "bob"), "a cell no agent changed gets no entry"
    prov.add_to_ycell(ycell, change("inserted"), origin=prov.PROVENANCE_ORIGIN)
    assert prov.note_user_edit(ycell, "bob", at="2025-01-01T00:00:01Z")
    assert prov.note_user_edit(ycell, "bob", at="2025-01-01T00:00:02Z")  # still typing: the same entry
    entries = prov.history(nb.cells()[0]["metadata"])
    assert [type(e).__name__ for e in entries] == ["AgentChange", "UserEdit"]
    assert entries[1] == prov.UserEdit(user="bob", at="2025-01-01T00:00:02Z")
    assert prov.strip_ynotebook(nb.doc) == 1
    assert all(prov.PROVENANCE_KEY not in c["metadata"] for c in nb.cells())


def test_the_last_ten_entries_are_kept():
    cell: dict[str, object] = {"cell_type": "code", "source": "", "metadata": {"tags": ["keep"]}}
    for i in range(13):
        prov.add_to_cell(cell, change(turn=f"t{i}"))
    entries = prov.history(cell["metadata"])  # type: ignore[arg-type]
    assert len(entries) == prov.MAX_ENTRIES
    assert [e.turn_id for e in entries if isinstance(e, prov.AgentChange)] == [f"t{i}" for i in range(3, 13)]
    assert cell["metadata"]["tags"] == ["keep"]  # type: ignore[index]


def test_strip_removes_every_entry_of_a_notebook_and_leaves_the_rest():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("1"), nbformat.v4.new_markdown_cell("m"), nbformat.v4.new_code_cell("2")]
    prov.add_to_cell(nb.cells[0], change())
    prov.add_to_cell(nb.cells[1], change("moved"))
    nb.cells[2].metadata["tags"] = ["t"]
    text = nbformat.writes(nb)
    again = nbformat.reads(text, as_version=4)
    nbformat.validate(again)
    assert prov.strip_notebook(again) == 2
    assert all(prov.PROVENANCE_KEY not in c.metadata for c in again.cells) and again.cells[2].metadata == {
        "tags": ["t"]
    }
    nbformat.validate(again)


def test_malformed_entries_are_left_out_when_read():
    metadata = {"jupyter_acp": {"history": [{"by": "agent"}, "junk", change().as_json(), {"by": "user", "at": "2025"}]}}
    assert [type(e).__name__ for e in prov.history(metadata)] == ["AgentChange", "UserEdit"]
    assert prov.history({"jupyter_acp": "junk"}) == [] and prov.history(None) == []


@pytest.mark.parametrize("key", ["jupyter_acp", "Jupyter_ACP", "jupyter-acp", " jupyter_acp"])
def test_an_agent_cannot_hand_in_provenance_metadata(key):
    with pytest.raises(prov.ProvenanceForgery) as err:
        prov.check_agent_metadata({"tags": [], key: {"history": []}})
    assert "only jupyter-acp writes" in str(err.value) and err.value.rule == "provenance_is_jupyter_acps"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("1", metadata={key: {}})]
    with pytest.raises(prov.ProvenanceForgery):
        prov.check_agent_notebook(nb)
    prov.check_agent_metadata({"tags": ["fine"], "jupyter": {"source_hidden": True}})
    prov.check_agent_metadata(None)
