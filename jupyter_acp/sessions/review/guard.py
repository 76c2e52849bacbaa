"""What an agent's ``fs/write_text_file`` of a notebook may not do: forge or erase who changed its cells.

``metadata.jupyter_acp`` is written by jupyter-acp alone (``notebook/provenance.py``).  The notebook tools never take
metadata from an agent; the one other way an agent writes a notebook is ``fs/write_text_file`` of its ``.ipynb``.
Such a write is refused when the new text carries the key anywhere (the notebook's metadata or a cell's, any
spelling), and the entries the file holds now are carried over to the cells of the same id, so that overwriting a
notebook does not erase the record either.  The card the user is asked on shows the text as it will be written.
What this cannot stop is said in ``docs/security.md``: code the agent runs in the kernel or a terminal writes files
as the user does.
"""

from __future__ import annotations

import json
from typing import Any

from ...notebook.provenance import PROVENANCE_KEY, ProvenanceForgery, check_agent_notebook
from ...tools.files import FileRefused


def _cells(nb: Any) -> list[Any]:
    cells = nb.get("cells") if isinstance(nb, dict) else None
    return cells if isinstance(cells, list) else []


def guard_notebook_write(path: str, old: str | None, content: str) -> str:
    """The text to write for an agent's ``fs/write_text_file`` of ``path``; raises ``FileRefused`` for a forgery."""
    if not str(path).lower().endswith(".ipynb"):
        return content
    try:
        nb = json.loads(content)
    except ValueError:
        return content  # not JSON: no metadata in it (and no notebook Jupyter would open)
    if not isinstance(nb, dict):
        return content
    try:
        check_agent_notebook(nb)
    except ProvenanceForgery as exc:
        raise FileRefused(
            exc.rule, f"fs/write_text_file of {path} refused (rule: {exc.rule}): {exc}. Nothing was written."
        ) from None
    if not old:
        return content
    try:
        before = json.loads(old)
    except ValueError:
        return content
    kept: dict[str, Any] = {}
    for cell in _cells(before):
        metadata = cell.get("metadata") if isinstance(cell, dict) else None
        if isinstance(metadata, dict) and PROVENANCE_KEY in metadata and isinstance(cell.get("id"), str):
            kept[cell["id"]] = metadata[PROVENANCE_KEY]
    carried = 0
    for cell in _cells(nb):
        if isinstance(cell, dict) and cell.get("id") in kept:
            metadata = cell.get("metadata")
            if not isinstance(metadata, dict):
                metadata = cell["metadata"] = {}
            metadata[PROVENANCE_KEY] = kept[cell["id"]]
            carried += 1
    if not carried:
        return content
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
