"""The live document's kept cells and id map (``notebook.live.LiveIndex``) follow every change, and find a cell
without walking the notebook.

A real ``YNotebook`` changed the ways a notebook changes: the agent's inserts, deletes and moves, the user's
typing, outputs streaming in, a second client's updates arriving over the wire (``apply_update``), a cell's id
rewritten. After every step the index must say what a fresh export and a walk of the array say.
"""

from __future__ import annotations

import random

import pycrdt
from jupyter_ydoc import YNotebook

from jupyter_acp.notebook.live import LiveIndex, export_cells


def notebook(n: int) -> YNotebook:
    nb = YNotebook()
    cells = [
        {
            "id": f"c{i}",
            "cell_type": "code",
            "source": f"value_{i} = {i}",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
        }
        for i in range(n)
    ]
    nb.set({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    return nb


def walk(nb: YNotebook, cid: str) -> int | None:
    """Where the cell is, from a fresh export (one Rust call: walking pycrdt's array is quadratic)."""
    ids = [c.get("id") for c in export_cells(nb)]
    return ids.index(cid) if cid in ids else None


def agrees(nb: YNotebook, index: LiveIndex, probe: list[str]) -> None:
    assert index.cells() == export_cells(nb)
    for cid in probe:
        found = index.lookup(cid)
        where = walk(nb, cid)
        assert (found[0] if found else None) == where, cid
        if found is not None:
            assert found[1].get("id") == cid


def test_the_index_says_what_the_document_says_after_every_kind_of_change():
    rng = random.Random(28)
    nb = notebook(30)
    other = YNotebook()  # a second client (a browser), kept in sync over updates
    other.ydoc.apply_update(nb.ydoc.get_update())
    index = LiveIndex(nb)
    made = 0
    for step in range(400):
        n = len(nb.ycells)
        kind = rng.choice(["insert", "insert_many", "delete", "move", "type", "output", "remote", "id", "txn"])
        if kind == "insert" or n < 3:
            made += 1
            nb.ycells.insert(rng.randint(0, n), nb.create_ycell({"id": f"n{made}", "cell_type": "code", "source": ""}))
        elif kind == "insert_many":  # a paste: more cells than the insert event's ids are read for
            cells = []
            for _ in range(rng.choice([2, LiveIndex.max_insert_ids + 3])):
                made += 1
                cells.append(nb.create_ycell({"id": f"n{made}", "cell_type": "markdown", "source": "#"}))
            with nb.ydoc.transaction():
                pos = rng.randint(0, n)
                for j, c in enumerate(cells):
                    nb.ycells.insert(pos + j, c)
        elif kind == "delete":
            i = rng.randrange(n)
            del nb.ycells[i : min(n, i + rng.randint(1, 3 if n < 60 else 40))]
        elif kind == "move":
            i, j = rng.randrange(n), rng.randrange(n)
            cell = nb.ycells[i].to_py()
            with nb.ydoc.transaction():
                del nb.ycells[i]
                nb.ycells.insert(min(j, n - 1), nb.create_ycell(cell))
        elif kind == "type":
            src = nb.ycells[rng.randrange(n)]["source"]
            src.insert(len(src), "x")
        elif kind == "output":
            cell = nb.ycells[rng.randrange(n)]
            if "outputs" in cell:
                cell["outputs"].append(pycrdt.Map({"output_type": "stream", "name": "stdout", "text": "hi\n"}))
                cell["execution_count"] = step
        elif kind == "remote":  # the other client changes the document; its update arrives
            before = nb.ydoc.get_state()
            other.ydoc.apply_update(nb.ydoc.get_update(other.ydoc.get_state()))
            m = len(other.ycells)
            made += 1
            with other.ydoc.transaction():
                other.ycells.insert(
                    rng.randint(0, m), other.create_ycell({"id": f"r{made}", "cell_type": "raw", "source": "r"})
                )
                del other.ycells[rng.randrange(m)]
                other.ycells[rng.randrange(m)]["source"].insert(0, "# ")
            nb.ydoc.apply_update(other.ydoc.get_update(before))
        elif kind == "id":
            cell = nb.ycells[rng.randrange(n)]
            made += 1
            cell["id"] = f"renamed{made}"
        else:  # several changes in one transaction: the positions of the nested events are the final ones
            with nb.ydoc.transaction():
                nb.ycells[rng.randrange(n)]["source"].insert(0, "y")
                made += 1
                nb.ycells.insert(0, nb.create_ycell({"id": f"n{made}", "cell_type": "code", "source": "z"}))
                nb.ycells[rng.randrange(n)]["source"].insert(0, "w")
        ids = [c.get("id") for c in nb.ycells]
        probe = rng.sample(ids, min(5, len(ids))) + ["missing", f"n{made + 1}"]
        if step % 3:
            agrees(nb, index, probe)
        else:  # reads and lookups may also come after several changes, or lookups before any read
            for cid in probe:
                found = index.lookup(cid)
                assert (found[0] if found else None) == walk(nb, cid)
    assert index.stats["scans"] == 0, index.stats


def test_a_lookup_in_a_big_notebook_neither_walks_nor_exports_it():
    nb = notebook(10_000)
    index = LiveIndex(nb)
    assert index.lookup("c9999")[0] == 9999
    first = dict(index.stats)
    assert first["exports"] == 1 and first["rebuilds"] == 1 and first["scans"] == 0
    for _ in range(20):
        assert index.lookup("c9999")[0] == 9999
    # an insert in the middle, a delete near the top, the user typing at the end: the map is adjusted, not rebuilt
    nb.ycells.insert(5000, nb.create_ycell({"id": "mid", "cell_type": "code", "source": ""}))
    del nb.ycells[10]
    nb.ycells[9999]["source"].insert(0, "# typed\n")
    assert index.lookup("c9999")[0] == 9999
    assert index.lookup("mid")[0] == 4999
    assert index.lookup("c10") is None
    cells = index.cells()
    assert cells[9999]["source"].startswith("# typed") and cells[4999]["id"] == "mid" and len(cells) == 10_000
    stats = index.stats
    assert stats["exports"] == 1 and stats["rebuilds"] == 1 and stats["scans"] == 0, stats
    assert stats["cell_exports"] == 2  # the inserted cell and the typed one, alone
    assert index.cells() is cells  # unchanged since: the same list


def test_a_document_that_cannot_be_observed_is_read_afresh_every_time():
    nb = notebook(3)

    class Unobservable:
        ycells = type("A", (), {"observe": lambda self, cb: (_ for _ in ()).throw(RuntimeError("no"))})()

    index = LiveIndex(Unobservable())
    assert not index.observed
    index.doc = nb  # reads and lookups fall back to the export and the walk
    assert index.cells() == export_cells(nb) and index.lookup("c2")[0] == 2 and index.stats["scans"] == 1


async def test_the_cell_tools_never_walk_a_big_live_notebook(make_notebook, tool_ctx, call, monkeypatch):
    """Before the index, finding a cell walked the Y array (O(n) Rust calls): edit scanned three times."""
    n = 2000
    path = make_notebook("big/nb.ipynb", [f"v_{i} = {i}" for i in range(n)])
    ctx = await tool_ctx(path)
    page = await call(ctx, "client_notebook_outline", {"start": n - 5})  # opens the live document
    ids = [c["id"] for c in page["structuredContent"]["cells"]]
    last = ids[-1]
    walks: list[int] = []
    real_iter = pycrdt.Array.__iter__

    def counting(self):
        walks.append(len(self))
        return real_iter(self)

    monkeypatch.setattr(pycrdt.Array, "__iter__", counting)
    calls = [
        ("client_read_cells", {"cell_ids": [last]}),
        ("client_edit_cell", {"cell_id": last, "old_string": f"v_{n - 1}", "new_string": "edited"}),
        ("client_replace_in_cell", {"cell_id": last, "old": "edited", "new": "replaced"}),
        ("client_insert_cell", {"source": "new = 1", "after_cell_id": ids[0]}),
        ("client_move_cell", {"cell_id": last, "to_index": 0}),
        ("client_clear_outputs", {"cell_ids": [last]}),
        ("client_delete_cells", {"cell_ids": [ids[1]]}),
        ("client_notebook_outline", {"start": n - 100}),
    ]
    for name, args in calls:
        res = await call(ctx, name, args)
        assert not res["isError"], (name, res)
    assert [w for w in walks if w >= n] == [], f"{len(walks)} walks of the cells"
    monkeypatch.undo()
    nb = await ctx.services.notebooks.open(path)
    cells = nb.cells()
    assert cells[0]["id"] == last and cells[0]["source"] == "replaced = 1999" and len(cells) == n
    assert cells == export_cells(nb.doc)
