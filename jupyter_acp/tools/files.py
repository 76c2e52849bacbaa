"""What an agent's ``fs/read_text_file`` and ``fs/write_text_file`` may touch: what the contents API may.

The usual server runs in the user's home, so "inside the root" is not enough: the root then holds the
server's token (``runtime/jpserver-*.json``), Jupyter's config (``~/.jupyter``), kernel specs and IPython
startup files that run in every new kernel. Rules, checked on the *resolved* path:

- inside the server root (symlinks resolved; ``..``, NUL bytes, relative and overlong paths refused);
- hidden files and folders (a component starting with ``.``) refused unless ``ContentsManager.allow_hidden``;
- Jupyter's runtime, config and data folders, IPython's folder and ``.ipynb_checkpoints`` always refused;
- ``.ipynb`` targets refused for writing whatever the name that led there (``nb.ipynb/.``, a symlink),
  case-insensitively: the notebook tools edit the live document instead.

No check-then-use race: the file is opened with ``O_NOFOLLOW`` and the rules are checked again on the
real path of the opened descriptor (``/proc/self/fd``) before a byte is read or written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from typing import Any

MAX_PATH_CHARS = 4096
MAX_READ_BYTES = 8 * 1024 * 1024
CHECKPOINTS = ".ipynb_checkpoints"


class FileRefused(Exception):
    """A path an agent may not use; ``rule`` names the rule and the message says how to change it."""

    def __init__(self, rule: str, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.rule = rule
        self.missing = missing


def _jupyter_dirs(serverapp: Any) -> list[str]:
    """Folders no agent touches: Jupyter's runtime, config and data paths and IPython's folder."""
    from jupyter_core import paths

    found: list[str] = [paths.jupyter_runtime_dir(), paths.jupyter_config_dir(), paths.jupyter_data_dir()]
    found += paths.jupyter_config_path() + paths.jupyter_path()
    for attr in ("runtime_dir", "config_dir", "data_dir"):
        value = getattr(serverapp, attr, None)
        if isinstance(value, str) and value:
            found.append(value)
    try:
        from IPython.paths import get_ipython_dir

        found.append(get_ipython_dir())
    except Exception:  # IPython missing or its dir unknowable: fall back to the usual place
        found.append(os.path.join(os.path.expanduser("~"), ".ipython"))
    out = []
    for path in found:
        real = os.path.realpath(path)
        if real not in out and real != os.sep:
            out.append(real)
    return out


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


#: a file is read in pieces of at most this much when only some of its lines are asked
LINE_PIECE = 1024 * 1024


def _read_lines(fh: Any, line: Any, limit: Any, max_bytes: int, path: Any) -> bytes:
    """``limit`` lines from line ``line`` (1-based; lines end with ``\n``), holding only those."""
    start = max(line - 1, 0) if isinstance(line, int) else 0
    end = start + limit if isinstance(limit, int) and limit >= 0 else None
    out = bytearray()
    index = 0
    while end is None or index < end:
        piece = fh.readline(LINE_PIECE)
        if not piece:
            break
        if index >= start:
            out += piece
            if len(out) > max_bytes:
                raise FileRefused("too_large", f"the lines asked of {path} are more than {max_bytes} bytes")
        if piece.endswith(b"\n"):
            index += 1
    return bytes(out)


@dataclass
class FileRules:
    root: str
    allow_hidden: bool
    forbidden: list[str]

    @classmethod
    def for_folder(cls, folder: str) -> FileRules:
        """The rules without a server (the magic's local mode): rooted at ``folder``, hidden files refused."""
        return cls(root=os.path.realpath(folder), allow_hidden=False, forbidden=_jupyter_dirs(None))

    @classmethod
    def for_server(cls, serverapp: Any) -> FileRules:
        cm = getattr(serverapp, "contents_manager", None)
        return cls(
            root=os.path.realpath(serverapp.root_dir),
            allow_hidden=bool(getattr(cm, "allow_hidden", False)),
            forbidden=_jupyter_dirs(serverapp),
        )

    # -- rules -----------------------------------------------------------------------------------
    def resolve(self, path: Any) -> str:
        """The real path an agent's path leads to, if the rules allow it."""
        if not isinstance(path, str) or not path:
            raise FileRefused("path", "a path is required")
        if "\0" in path:
            raise FileRefused("path", "paths must not contain NUL bytes")
        if len(path) > MAX_PATH_CHARS:
            raise FileRefused("path", f"path longer than {MAX_PATH_CHARS} characters")
        if not os.path.isabs(path):
            raise FileRefused("path", f"{path!r} is not absolute (ACP paths are absolute)")
        real = os.path.realpath(path)
        self.check(real, shown=path)
        return real

    def check(self, real: str, shown: str) -> None:
        if not _inside(real, self.root):
            raise FileRefused(
                "outside_root", f"{shown} is outside the server root; agents see only what Jupyter serves"
            )
        for folder in self.forbidden:
            if _inside(real, folder) or _inside(folder, real) and real != self.root:
                raise FileRefused(
                    "jupyter_dirs",
                    f"{shown} is in (or holds) Jupyter's or IPython's own folders ({folder}): agents never read or "
                    "write the server's tokens, config, kernel specs or startup files. This cannot be changed.",
                )
        parts = os.path.relpath(real, self.root).split(os.sep) if real != self.root else []
        if CHECKPOINTS in parts:
            raise FileRefused("checkpoints", f"{shown} is in {CHECKPOINTS}: the notebook's history is not for agents")
        if not self.allow_hidden and any(p.startswith(".") and p not in (".", "..") for p in parts):
            raise FileRefused(
                "hidden_files",
                f"{shown} is hidden (a name starting with '.'), and the contents API hides it too. The owner can "
                "allow hidden files with ContentsManager.allow_hidden = True.",
            )

    def check_writable(self, real: str, shown: str) -> None:
        if real.lower().endswith(".ipynb"):
            raise FileRefused(
                "notebook_files",
                f"writing {shown} is refused: it is a notebook ({os.path.basename(real)}), and writing its JSON "
                "would fight the open notebook. Use the notebook tools (client_insert_cell, client_edit_cell, "
                "client_delete_cells) instead.",
            )

    def _opened_path(self, fd: int, shown: str) -> str:
        """The real path of an open descriptor, checked again (the path may have changed since resolve)."""
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # no /proc: fall back to the resolved path's identity check by the caller
            return ""
        self.check(real, shown)
        return real

    # -- read and write --------------------------------------------------------------------------
    def read(self, path: Any, line: Any = None, limit: Any = None, max_bytes: int = MAX_READ_BYTES) -> str:
        return self.read_counted(path, line, limit, max_bytes)[0]

    def read_counted(
        self, path: Any, line: Any = None, limit: Any = None, max_bytes: int = MAX_READ_BYTES
    ) -> tuple[str, int]:
        """The text (and its size in bytes) of a file, or of ``limit`` lines from line ``line`` (1-based).

        At most ``max_bytes`` are ever held: a whole file larger than that is refused before it is read, and a
        part of a larger file is read a line (or a 1 MiB piece of one) at a time, keeping only the part asked,
        so many reads at once hold what they answer, not the files they read."""
        real = self.resolve(path)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            raise FileRefused("missing", f"Resource not found: {path}", missing=True) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise FileRefused("symlink_race", f"{path} changed while it was opened") from None
            raise FileRefused("unreadable", f"{path} cannot be read: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as fh:
            self._opened_path(fh.fileno(), path)
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise FileRefused("missing", f"Resource not found: {path} is not a regular file", missing=True)
            if isinstance(line, int) or isinstance(limit, int):
                data = _read_lines(fh, line, limit, max_bytes, path)
            else:
                if info.st_size > max_bytes:
                    raise FileRefused("too_large", f"{path} is larger than {max_bytes} bytes")
                data = fh.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise FileRefused("too_large", f"{path} grew past {max_bytes} bytes while it was read")
        return data.decode("utf-8", errors="replace"), len(data)

    def size(self, path: Any) -> int:
        """The size of the file a path leads to (what a read of all of it would hold), if the rules allow it."""
        real = self.resolve(path)
        try:
            return os.stat(real).st_size
        except FileNotFoundError:
            raise FileRefused("missing", f"Resource not found: {path}", missing=True) from None
        except OSError as exc:
            raise FileRefused("unreadable", f"{path} cannot be read: {exc.strerror}") from None

    def current_text(self, real: str) -> str | None:
        """What a file holds now (for the diff shown before a write); None for a new file."""
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            return fh.read(MAX_READ_BYTES).decode("utf-8", errors="replace")

    def prepare_write(self, path: Any) -> str:
        real = self.resolve(path)
        self.check_writable(real, path)
        return real

    def write(self, path: str, real: str, content: str) -> None:
        """Write ``content`` to what ``prepare_write`` resolved, re-checked on the opened descriptor."""
        parent = os.path.dirname(real)
        self._make_parents(parent, path)
        created = False
        flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            try:
                fd = os.open(real, flags | os.O_CREAT | os.O_EXCL, 0o644)
                created = True
            except FileExistsError:
                fd = os.open(real, flags)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise FileRefused(
                    "symlink_race", f"{path} became a symlink while it was written; nothing was written"
                ) from None
            raise FileRefused("unwritable", f"{path} cannot be written: {exc.strerror}") from None
        try:
            try:
                opened = self._opened_path(fd, path)
                if opened:
                    self.check_writable(opened, path)
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise FileRefused("unwritable", f"{path} is not a regular file")
            except FileRefused:
                if created:
                    with contextlib.suppress(OSError):
                        os.unlink(real)
                raise
            os.ftruncate(fd, 0)
            data = content.encode("utf-8")
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            os.close(fd)

    def _make_parents(self, parent: str, shown: str) -> None:
        missing = []
        current = parent
        while not os.path.isdir(current):
            missing.append(current)
            up = os.path.dirname(current)
            if up == current:
                break
            current = up
        for folder in reversed(missing):
            self.check(os.path.realpath(folder), shown)
            try:
                os.mkdir(folder, 0o755)
            except FileExistsError:
                pass
            self.check(os.path.realpath(folder), shown)
