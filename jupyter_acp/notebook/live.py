"""The live backend: the shared ``YNotebook`` of jupyter-server-ydoc, read and written in place.

Its own module because it is the one backend built on pycrdt (one transaction per change, tagged
with the agent's origin, tracked by ``access.NotebookAccess`` for revert); the RTC-off backends are in
``tab`` and ``file``.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from .document import Notebook, NotebookError


class Tracker(Protocol):
    """What the live backend asks of ``access.NotebookAccess``, which builds it (named here, not imported: the
    access module imports this one)."""

    def cached_cells(self, doc: Any) -> list[dict[str, Any]]: ...

    def track(
        self, doc: Any, origin: str, cell_id: str | None = None, ycell: Any = None, kind: str = "other"
    ) -> None: ...

    def landed(self, origin: str, cell_id: str, source: str) -> None: ...

    def untrack_cells(self, origin: str, cell_ids: list[str]) -> None: ...


class LiveNotebook(Notebook):
    """The shared ``YNotebook`` of jupyter-server-ydoc."""

    kind = "live"
    supports_revert = True

    def __init__(self, path: str, doc: Any, access: Tracker) -> None:
        super().__init__(path)
        self.doc = doc
        self.access = access

    def cells(self) -> list[dict[str, Any]]:
        """The cells as nbformat-like dicts (shared and cached until the document changes: do not mutate)."""
        return self.access.cached_cells(self.doc)

    @staticmethod
    def export(doc: Any) -> list[dict[str, Any]]:
        # one JSON export in Rust: ~10x faster than pycrdt's per-key to_py on a 200-cell notebook
        cells = json.loads(str(doc.ycells))
        for cell in cells:
            count = cell.get("execution_count")
            if isinstance(count, float):
                cell["execution_count"] = int(count)
            src = cell.get("source", "")
            if isinstance(src, list):
                cell["source"] = "".join(src)
            cell.pop("execution_state", None)
        return cells

    def ycell(self, cell_id: str) -> tuple[int, Any]:
        for i, c in enumerate(self.doc.ycells):
            if c.get("id") == cell_id:
                return i, c
        raise NotebookError(
            f"no cell with id {cell_id!r} in {self.path}; call client_notebook_outline for the current ids"
        )

    def find(self, cell_id: str) -> int:
        return self.ycell(cell_id)[0]

    def dirty(self) -> bool | None:
        try:
            return bool(self.doc.dirty)
        except Exception:
            return None

    def _txn(self, origin: str, cell_id: str | None = None, ycell: Any = None, kind: str = "other") -> Any:
        # before the transaction: the undo managers (the turn's, the cell's) capture it
        self.access.track(self.doc, origin, cell_id, ycell, kind)
        return self.doc.ydoc.transaction(origin=origin)

    async def insert(self, index: int, cell: dict[str, Any], origin: str) -> None:
        ycell = self.doc.create_ycell(cell)
        cid = cell.get("id")
        with self._txn(origin, cid, kind="insert" if cid else "other"):
            self.doc.ycells.insert(index, ycell)
        if cid:
            self.access.landed(origin, cid, str(cell.get("source", "")))

    async def set_source(self, cell_id: str, source: str, origin: str) -> None:
        i, ycell = self.ycell(cell_id)
        with self._txn(origin, cell_id, ycell, kind="source"):
            self.doc.set_cell(i, source=source)  # granular text diff: cursors in open tabs survive
        self.access.landed(origin, cell_id, source)

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        with self._txn(origin):
            for cid in cell_ids:
                i, _ = self.ycell(cid)
                del self.doc.ycells[i]
        self.access.untrack_cells(origin, cell_ids)

    async def move(self, cell_id: str, to_index: int, origin: str) -> None:
        i, ycell = self.ycell(cell_id)
        cell = ycell.to_py()
        cell.pop("execution_state", None)
        self.access.untrack_cells(origin, [cell_id])
        with self._txn(origin):
            del self.doc.ycells[i]
            self.doc.ycells.insert(to_index, self.doc.create_ycell(cell))
