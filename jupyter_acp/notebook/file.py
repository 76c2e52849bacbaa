"""The file backend: RTC off and no tab open, the notebook on disk through the contents manager
(read, change, save).

Its own module so each way into a notebook (``live``, ``tab``, ``file``) reads on its own.
"""

from __future__ import annotations

from typing import Any

from jupyter_core.utils import ensure_async

from .document import Notebook
from .provenance import add_to_cell
from .stamping import Stamp


class FileNotebook(Notebook):
    """The notebook on disk through the contents manager (RTC off and no tab open)."""

    kind = "file"

    def __init__(self, path: str, cm: Any, model: dict[str, Any]) -> None:
        super().__init__(path)
        self.cm = cm
        self.model = model
        self._cells: list[dict[str, Any]] | None = None

    def cells(self) -> list[dict[str, Any]]:
        """The cells with their sources as strings (kept until this object writes the notebook)."""
        if self._cells is None:
            out = []
            for c in self.model["content"]["cells"]:
                cell = dict(c)
                src = cell.get("source", "")
                cell["source"] = "".join(src) if isinstance(src, list) else src
                out.append(cell)
            self._cells = out
        return self._cells

    def dirty(self) -> bool | None:
        return False

    async def _save(self) -> None:
        self._cells = None  # the next read sees this write
        model = {"type": "notebook", "format": "json", "content": self.model["content"]}
        await ensure_async(self.cm.save(model, self.path))

    async def insert(self, index: int, cell: dict[str, Any], origin: str, stamp: Stamp | None = None) -> None:
        import nbformat

        if stamp is not None:
            cell = {**cell, "metadata": dict(cell.get("metadata") or {})}
            add_to_cell(cell, stamp("inserted"))
        self.model["content"]["cells"].insert(index, nbformat.from_dict(cell))
        await self._save()

    async def set_source(self, cell_id: str, source: str, origin: str, stamp: Stamp | None = None) -> None:
        cell = self.model["content"]["cells"][self.find(cell_id)]
        cell["source"] = source
        if stamp is not None:
            add_to_cell(cell, stamp("edited"))
        await self._save()

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        drop = set(cell_ids)
        self.model["content"]["cells"] = [c for c in self.model["content"]["cells"] if c.get("id") not in drop]
        await self._save()

    async def move(self, cell_id: str, to_index: int, origin: str, stamp: Stamp | None = None) -> None:
        cells = self.model["content"]["cells"]
        cell = cells.pop(self.find(cell_id))
        if stamp is not None:
            add_to_cell(cell, stamp("moved"))
        cells.insert(to_index, cell)
        await self._save()

    async def set_outputs(
        self, cell_id: str, outputs: list[dict[str, Any]], execution_count: int | None, stamp: Stamp | None = None
    ) -> None:
        import nbformat

        cell = self.model["content"]["cells"][self.find(cell_id)]
        if stamp is not None:
            add_to_cell(cell, stamp("ran"))
        cell["outputs"] = [nbformat.from_dict(o) for o in outputs]
        cell["execution_count"] = execution_count
        await self._save()

    async def clear_outputs(self, cell_ids: list[str], origin: str) -> None:
        cells = self.model["content"]["cells"]
        for cid in cell_ids:
            cell = cells[self.find(cid)]
            if cell.get("cell_type") == "code":
                cell["outputs"] = []
                cell["execution_count"] = None
        await self._save()
