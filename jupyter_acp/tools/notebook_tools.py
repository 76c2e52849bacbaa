"""Notebook tools: outline, read, search, insert, edit (stale-edit refusal), replace, delete, move, clear outputs,
execute cells, the run plan.

Every tool is bound to the session's notebook; cells are addressed by id (an index is a
convenience).  Mutating calls are one change of the live document each, tagged with the agent's
origin (see ``notebook/document.py``), and answer the cell id with a short diff.

The tools live by job: ``cell_reading`` (outline, read), ``cell_search`` (search), ``cell_editing`` (insert,
edit, delete, move), ``cell_patching`` (replace, clear outputs), ``cell_running`` (execute, the run plan);
``notebook_shared`` holds their availability checks.  This module
lists them in the order agents see them.
"""

from __future__ import annotations

from .cell_editing import delete_cells, edit_cell, editing_tools, insert_cell, move_cell
from .cell_patching import patching_tools
from .cell_reading import notebook_outline, read_cells, reading_tools
from .cell_running import execute_cells, running_tools
from .cell_search import search_tools
from .notebook_shared import CELL_TYPES, has_kernel, writable, writable_with_kernel
from .surface import ToolDef

__all__ = [
    "CELL_TYPES",
    "delete_cells",
    "edit_cell",
    "execute_cells",
    "has_kernel",
    "insert_cell",
    "move_cell",
    "notebook_outline",
    "notebook_tools",
    "read_cells",
    "writable",
    "writable_with_kernel",
]

TOOLS_DOC = "Cells are addressed by id (see client_notebook_outline)."


def notebook_tools() -> list[ToolDef]:
    return [*reading_tools(), *search_tools(), *editing_tools(), *patching_tools(), *running_tools()]
