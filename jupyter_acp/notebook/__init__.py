"""Notebook access for the tools: live Y document, edits tagged with the agent's origin, undo, execution.

``document`` the model the tools see; the backends ``live`` (Y document), ``tab`` (the open tab, RTC off),
``file`` (the contents manager); ``access`` picks one and keeps the undo history; ``execute`` runs a cell.
"""

from .access import NotebookAccess
from .document import Notebook, NotebookError, new_cell_id, origin_for
from .execute import execute_cell
from .file import FileNotebook
from .live import LiveNotebook
from .tab import TabNotebook

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
