"""Notebook access: the live Y document when RTC is on, else the open tab, else the file.

* **Live document** (jupyter-server-ydoc): ``get_document(..., copy=False, create=True)`` is the very
  ``YNotebook`` every browser shares, so reads include unsaved edits and writes show up in open tabs
  at once.  Each mutating call is ONE transaction tagged with the agent's origin
  (``jupyter_acp:<session>:<turn>``); an origin-filtered ``pycrdt.UndoManager`` per (session, turn)
  makes "revert the agent's edits of this turn" undo exactly those, never the user's typing.
* **RTC off** (not installed, or ``disable_rtc``): never create a room (its autosave would fight the
  browser).  Edits go to the open tab through the frontend bridge (``applyEdit``), or, with no tab
  open, through the contents manager (read, change, save).

This module holds what every way in shares: the ``Notebook`` model the tools see, its error, the
origin tag and new cell ids.  The backends have a module each (``live``, ``tab``, ``file``);
``access.NotebookAccess`` picks one at call time and keeps the agent-edit undo history.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

#: ``stamping.Stamp`` as the base class sees it (``provenance`` imports this module, so this one does not import it)
Stamp = Callable[..., Any]

ORIGIN_PREFIX = "jupyter_acp"


class NotebookError(Exception):
    """A request about the notebook that cannot be served; the text is for the model."""


def origin_for(session_id: str, turn_id: str | None) -> str:
    return f"{ORIGIN_PREFIX}:{session_id}:{turn_id or '-'}"


def new_cell_id() -> str:
    return uuid.uuid4().hex[:8]


class Notebook:
    """One notebook as the tools see it: a list of nbformat-like cell dicts plus edit operations."""

    kind = "abstract"
    supports_revert = False

    def __init__(self, path: str) -> None:
        self.path = path
        self._positions: tuple[list[dict[str, Any]], dict[Any, int]] | None = None

    # reads
    def cells(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def dirty(self) -> bool | None:
        return None

    def find(self, cell_id: str) -> int:
        for i, c in enumerate(self.cells()):
            if c.get("id") == cell_id:
                return i
        raise NotebookError(
            f"no cell with id {cell_id!r} in {self.path}; call client_notebook_outline for the current ids"
        )

    def cell(self, cell_id: str) -> tuple[int, dict[str, Any]]:
        """(index, the cell's dict) of one cell: the live backend finds it in constant time; the others map their
        cells once per list (a call that asks for many cells does not scan for each)."""
        cells = self.cells()
        kept = self._positions
        if kept is None or kept[0] is not cells:
            positions: dict[Any, int] = {}
            for i in range(len(cells) - 1, -1, -1):  # with duplicate ids, the first wins (as find)
                positions[cells[i].get("id")] = i
            kept = self._positions = (cells, positions)
        at = kept[1].get(cell_id)
        if at is None:
            raise NotebookError(
                f"no cell with id {cell_id!r} in {self.path}; call client_notebook_outline for the current ids"
            )
        return at, cells[at]

    # writes: each is one change of the document, tagged with ``origin``; ``stamp``: the change's provenance entry,
    # written into the cell's metadata with the change itself (``stamping.py``)
    async def insert(self, index: int, cell: dict[str, Any], origin: str, stamp: Stamp | None = None) -> None:
        raise NotImplementedError

    async def set_source(self, cell_id: str, source: str, origin: str, stamp: Stamp | None = None) -> None:
        raise NotImplementedError

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        raise NotImplementedError

    async def move(self, cell_id: str, to_index: int, origin: str, stamp: Stamp | None = None) -> None:
        raise NotImplementedError

    async def clear_outputs(self, cell_ids: list[str], origin: str) -> None:
        """Empty the outputs and the execution counts of these cells (code cells), as one change."""
        raise NotImplementedError
