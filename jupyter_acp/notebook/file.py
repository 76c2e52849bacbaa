"""The file backend: RTC off and no tab open, the notebook on disk through the contents manager
(read, change, save).

Its own module so each way into a notebook (``live``, ``tab``, ``file``) reads on its own.
"""

from __future__ import annotations

from typing import Any

from jupyter_core.utils import ensure_async

from .document import Notebook


class FileNotebook(Notebook):
    """The notebook on disk through the contents manager (RTC off and no tab open)."""

    kind = "file"

    def __init__(self, path: str, cm: Any, model: dict[str, Any]) -> None:
        super().__init__(path)
        self.cm = cm
        self.model = model

    def cells(self) -> list[dict[str, Any]]:
        out = []
        for c in self.model["content"]["cells"]:
            cell = dict(c)
            src = cell.get("source", "")
            cell["source"] = "".join(src) if isinstance(src, list) else src
            out.append(cell)
        return out

    def dirty(self) -> bool | None:
        return False

    async def _save(self) -> None:
        model = {"type": "notebook", "format": "json", "content": self.model["content"]}
        await ensure_async(self.cm.save(model, self.path))

    async def insert(self, index: int, cell: dict[str, Any], origin: str) -> None:
        import nbformat

        self.model["content"]["cells"].insert(index, nbformat.from_dict(cell))
        await self._save()

    async def set_source(self, cell_id: str, source: str, origin: str) -> None:
        self.model["content"]["cells"][self.find(cell_id)]["source"] = source
        await self._save()

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        drop = set(cell_ids)
        self.model["content"]["cells"] = [c for c in self.model["content"]["cells"] if c.get("id") not in drop]
        await self._save()

    async def move(self, cell_id: str, to_index: int, origin: str) -> None:
        cells = self.model["content"]["cells"]
        cell = cells.pop(self.find(cell_id))
        cells.insert(to_index, cell)
        await self._save()

    async def set_outputs(self, cell_id: str, outputs: list[dict[str, Any]], execution_count: int | None) -> None:
        import nbformat

        cell = self.model["content"]["cells"][self.find(cell_id)]
        cell["outputs"] = [nbformat.from_dict(o) for o in outputs]
        cell["execution_count"] = execution_count
        await self._save()
