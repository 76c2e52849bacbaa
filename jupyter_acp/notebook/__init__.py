"""Notebook access for the tools: live Y document, edits tagged with the agent's origin, undo, execution."""

from .document import (
    FileNotebook,
    LiveNotebook,
    Notebook,
    NotebookAccess,
    NotebookError,
    TabNotebook,
    new_cell_id,
    origin_for,
)
from .execute import execute_cell

__all__ = [
    "FileNotebook",
    "LiveNotebook",
    "Notebook",
    "NotebookAccess",
    "NotebookError",
    "TabNotebook",
    "execute_cell",
    "new_cell_id",
    "origin_for",
]
