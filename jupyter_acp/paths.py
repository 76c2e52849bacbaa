"""Path rules: notebook API paths and agent file paths, confined to the server root."""

from __future__ import annotations

import os
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


def confine(root: str, path: str) -> str:
    """The real absolute path of ``path`` if it lies inside ``root`` (symlinks resolved)."""
    if not isinstance(path, str) or not path:
        raise PathError("a path is required")
    if "\0" in path:
        raise PathError("paths must not contain NUL bytes")
    if len(path) > MAX_PATH_CHARS:
        raise PathError(f"path longer than {MAX_PATH_CHARS} characters")
    if not os.path.isabs(path):
        raise PathError(f"{path!r} is not absolute (ACP paths are absolute)")
    root_real = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != root_real and not real.startswith(root_real.rstrip(os.sep) + os.sep):
        raise PathError(f"{path} is outside the server root")
    return real
