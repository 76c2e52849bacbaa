"""The tab backend: RTC off, a browser tab has the notebook open; its cells came from the tab and
every edit goes back to it through the frontend bridge (``applyEdit``).

Its own module so each way into a notebook (``live``, ``tab``, ``file``) reads on its own.
"""

from __future__ import annotations

from typing import Any

from .document import Notebook, NotebookError
from .provenance import add_to_cell
from .stamping import Stamp


class TabNotebook(Notebook):
    """RTC off, a browser tab has the notebook open: reads and edits go through that tab."""

    kind = "tab"

    def __init__(self, path: str, frontend: Any, cells: list[dict[str, Any]], dirty: bool | None) -> None:
        super().__init__(path)
        self.frontend = frontend
        self._cells = cells
        self._dirty = dirty

    def cells(self) -> list[dict[str, Any]]:
        return self._cells

    def dirty(self) -> bool | None:
        return self._dirty

    async def _edit(self, op: dict[str, Any]) -> None:
        res = await self.frontend.request("applyEdit", {"path": self.path, **op}, path=self.path)
        if isinstance(res, dict) and res.get("error"):
            raise NotebookError(f"the open tab refused the edit: {res['error']}")

    async def insert(self, index: int, cell: dict[str, Any], origin: str, stamp: Stamp | None = None) -> None:
        if stamp is not None:  # the tab's insert takes the cell's metadata with it
            cell = {**cell, "metadata": dict(cell.get("metadata") or {})}
            add_to_cell(cell, stamp("inserted"))
        await self._edit({"op": "insert", "index": index, "cell": cell})

    async def set_source(self, cell_id: str, source: str, origin: str, stamp: Stamp | None = None) -> None:
        # the open tab's setSource carries no metadata: no provenance entry here (with RTC off and a tab open)
        await self._edit({"op": "setSource", "cellId": cell_id, "source": source})

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        await self._edit({"op": "delete", "cellIds": cell_ids})

    async def move(self, cell_id: str, to_index: int, origin: str, stamp: Stamp | None = None) -> None:
        await self._edit({"op": "move", "cellId": cell_id, "toIndex": to_index})

    async def clear_outputs(self, cell_ids: list[str], origin: str) -> None:
        # the tab's own setOutputs (what an execution's outputs use), once per cell
        for cid in cell_ids:
            await self._edit({"op": "setOutputs", "cellId": cid, "outputs": [], "executionCount": None})
