"""Put a notebook's cells back as they were: a rewind, a restore, a discarded change of a turn's review.

``put_cells`` makes the notebook equal to a list of cells (as ``Notebook.cells()`` answered them earlier) by changing
only the cells that differ, in one transaction of the live document under ``REWIND_ORIGIN``: the open tabs see one
change, the cells that did not change keep their cursors, and no undo manager of an agent's turn includes it (a
rewind is not the agent's edit; the rewind's own undo is its checkpoint).  A cell whose source alone differs gets a
granular text change; one whose type, outputs or metadata differ is replaced whole.
"""

from __future__ import annotations

import json
from typing import Any

from .diff import stable_keys
from .document import ORIGIN_PREFIX, Notebook, NotebookError
from .file import FileNotebook
from .live import LiveNotebook, export_cells

#: the origin of a rewind's (or a discard's) own change: no undo manager includes it
REWIND_ORIGIN = f"{ORIGIN_PREFIX}-rewind"

_IGNORED = ("execution_state",)


def cell_key(cell: dict[str, Any]) -> str:
    """What a cell is, as compared: not its running state, nor the trust the server gives it (``metadata.trusted``
    comes and goes with a reload)."""
    out = {k: v for k, v in cell.items() if k not in _IGNORED}
    metadata = out.get("metadata")
    if isinstance(metadata, dict) and "trusted" in metadata:
        out["metadata"] = {k: v for k, v in metadata.items() if k != "trusted"}
    return json.dumps(out, sort_keys=True, default=str)


def _same_but_source(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return cell_key({**a, "source": ""}) == cell_key({**b, "source": ""})


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


async def put_cells(nb: Notebook, target: list[dict[str, Any]]) -> list[str]:
    """Make ``nb``'s cells equal ``target``; answers the ids of the cells changed, added or removed."""
    if isinstance(nb, LiveNotebook):
        return _put_live(nb, target)
    if isinstance(nb, FileNotebook):
        return await _put_file(nb, target)
    raise NotebookError(
        f"{nb.path} is open in a tab without real-time collaboration: its cells cannot be put back from the server. "
        "Enable collaboration (jupyter-server-ydoc) or close the tab, and try again"
    )


def _put_live(nb: LiveNotebook, target: list[dict[str, Any]]) -> list[str]:
    """Cells not wanted are deleted, cells out of order (the fewest: those off the longest run kept in order) are
    taken out and put back where ``target`` has them, new ones inserted, and the cells that stay keep their Y
    objects (their per-cell undo, the cursors of open tabs) with only what differs in them changed."""
    doc = nb.doc
    ycells = doc.ycells
    changed: list[str] = []
    with doc.ydoc.transaction(origin=REWIND_ORIGIN):
        current = export_cells(doc)
        ids: list[Any] = [c.get("id") for c in current]
        rows: list[dict[str, Any]] = list(current)
        want = [c.get("id") for c in target]
        wanted = set(want)
        kept_in_order = stable_keys([str(i) for i in ids], [str(i) for i in want])
        for i in range(len(ids) - 1, -1, -1):
            if ids[i] not in wanted or str(ids[i]) not in kept_in_order:
                del ycells[i]
                changed.append(str(ids.pop(i)))
                rows.pop(i)
        for i, cell in enumerate(target):
            cid = cell.get("id")
            if i < len(ids) and ids[i] == cid:
                if cell_key(rows[i]) == cell_key(cell):
                    continue
                if _same_but_source(rows[i], cell):
                    doc.set_cell(i, source=_source(cell))
                else:
                    doc.set_cell(i, value=cell)
                rows[i] = cell
                changed.append(str(cid))
                continue
            ycells.insert(i, doc.create_ycell(cell))
            ids.insert(i, cid)
            rows.insert(i, cell)
            changed.append(str(cid))
    return list(dict.fromkeys(changed))


async def _put_file(nb: FileNotebook, target: list[dict[str, Any]]) -> list[str]:
    import nbformat

    before = {c.get("id"): cell_key(c) for c in nb.cells()}
    changed = [str(c.get("id")) for c in target if before.get(c.get("id")) != cell_key(c)]
    changed += [str(cid) for cid in before if cid not in {c.get("id") for c in target}]
    nb.model["content"]["cells"] = [nbformat.from_dict(c) for c in target]  # type: ignore[no-untyped-call]
    await nb._save()
    return list(dict.fromkeys(changed))
