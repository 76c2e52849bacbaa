"""Reading a notebook file that a running server may be writing at that moment.

jupyter_server's ``atomic_writing`` is atomic against a failed write (it keeps a backup and puts it back), not against
a reader: it truncates the file and writes it in place. The live document's autosave (jupyter-server-ydoc) saves
whenever the document changed, so a test that reads the file while the agent's last change is saved can read an empty
or half-written file (CI saw ``Notebook does not appear to be JSON: ''``). Every test that reads a notebook a server
holds goes through here: a torn read counts as "not saved yet" and is read again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

__all__ = ["read_saved", "saved_notebook", "saved_notebook_sync"]


def read_saved(path: str | Path) -> nbformat.NotebookNode | None:
    """The notebook on disk, or None while it is missing or caught in the middle of a save."""
    try:
        return nbformat.read(str(path), as_version=4)
    except (OSError, ValueError):  # missing, empty or cut short (NotJSONError is a ValueError)
        return None


def _check(path: str | Path, until: Callable[[nbformat.NotebookNode], object] | None) -> nbformat.NotebookNode | None:
    nb = read_saved(path)
    if nb is None or (until is not None and not until(nb)):
        return None
    return nb


def _timeout_message(path: str | Path, timeout: float) -> str:
    nb = read_saved(path)
    seen = [c.source for c in nb.cells] if nb is not None else "no readable notebook"
    return f"{path}: the saved notebook did not meet the condition in {timeout:g} s; last read: {seen!r}"


async def saved_notebook(
    path: str | Path,
    until: Callable[[nbformat.NotebookNode], object] | None = None,
    timeout: float = 20.0,
) -> nbformat.NotebookNode:
    """The notebook once it reads whole and ``until(nb)`` holds; for tests whose server runs in their event loop."""
    deadline = time.monotonic() + timeout
    while (nb := _check(path, until)) is None:
        if time.monotonic() > deadline:
            raise AssertionError(_timeout_message(path, timeout))
        await asyncio.sleep(0.05)
    return nb


def saved_notebook_sync(
    path: str | Path,
    until: Callable[[nbformat.NotebookNode], object] | None = None,
    timeout: float = 20.0,
) -> nbformat.NotebookNode:
    """As :func:`saved_notebook`, for tests whose server is another process (browser, hub, restart tests)."""
    deadline = time.monotonic() + timeout
    while (nb := _check(path, until)) is None:
        if time.monotonic() > deadline:
            raise AssertionError(_timeout_message(path, timeout))
        time.sleep(0.1)
    return nb
