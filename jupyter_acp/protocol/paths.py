"""Notebook API paths: relative to the server root, never leaving it. (Agent file paths: ``tools/files.py``.)"""

from __future__ import annotations

import posixpath

MAX_PATH_CHARS = 4096


class PathError(ValueError):
    """A path that is malformed or leaves the server root; the message says which."""


def notebook_api_path(path: str) -> str:
    """Normalise a Jupyter API path (relative to the root); refuse escapes and junk."""
    if not isinstance(path, str) or not path.strip():
        raise PathError("a notebook path is required")
    if "\0" in path:
        raise PathError("paths must not contain NUL bytes")
    if len(path) > MAX_PATH_CHARS:
        raise PathError(f"path longer than {MAX_PATH_CHARS} characters")
    clean = posixpath.normpath(path.replace("\\", "/").lstrip("/"))
    if clean in (".", "") or clean == ".." or clean.startswith("../"):
        raise PathError(f"{path!r} is outside the server root")
    return clean
