"""Server lives on one store: which server wrote a session last, and whether it still runs.

Several servers may share one store (JupyterHub named servers of one user share a data dir; so do two ``jupyter
lab`` in one home). Each server's life has an id and holds an exclusive ``flock`` on a file of its own next to the
store for as long as it runs: the kernel drops the lock when the process ends, however it ends (SIGKILL too), so a
lock another process can take marks a life that is over. A turn left open by a life that is over was cut by the
server's death (ended at the next start, ``server_lost``); a turn of a life still running is that server's own.

Apart from the transcript because it is about processes, not conversations; the store's folder is private
(``store_file.py``), and so are these files (0600).

Also here: the store's last words. A server that stops while the store fails writes, next to it, what could not be
kept (how many events of which turns); the next start stores it as a notice in each session it names.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import uuid
from typing import Any

log = logging.getLogger(__name__)


class Lives:
    """This server's life on a store, and a test of other lives."""

    def __init__(self, store_path: str) -> None:
        self.id = uuid.uuid4().hex[:16]
        on_disk = store_path != ":memory:" and not store_path.startswith("file:")
        self._prefix = os.path.abspath(store_path) + "-life-" if on_disk else None
        self._fd: int | None = None
        self.last_words_path = os.path.abspath(store_path) + "-unsaved.json" if on_disk else None

    def _path(self, life: str) -> str | None:
        if self._prefix is None or not life or not all(c in "0123456789abcdef" for c in life):
            return None
        return self._prefix + life

    def claim(self) -> None:
        """Hold this life's lock until the process ends (or ``release``); lives found over are swept."""
        path = self._path(self.id)
        if path is None:
            return
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._fd = fd
        except OSError as exc:  # a store folder without locks: every other life counts as over
            log.warning("jupyter_acp: could not mark this server's life next to the store (%s)", exc)
            return
        folder, base = os.path.split(path[: -len(self.id)])
        with contextlib.suppress(OSError):
            for name in os.listdir(folder):
                if name.startswith(base) and name != os.path.basename(path) and not self.alive(name[len(base) :]):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(folder, name))

    def alive(self, life: str) -> bool:
        """Whether another server's life still runs (its lock is held)."""
        if life == self.id:
            return True
        path = self._path(life)
        if path is None:
            return False
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True  # held: that server runs
        finally:
            os.close(fd)
        return False

    def release(self) -> None:
        if self._fd is None:
            return
        path = self._path(self.id)
        with contextlib.suppress(OSError):
            if path:
                os.unlink(path)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None

    # -- last words: what a stop could not save ------------------------------------------------------
    def write_last_words(self, lost: dict[str, Any]) -> bool:
        """Write what could not be kept (session id -> counts, turns, reason); False if even that failed."""
        if self.last_words_path is None:
            return False
        old = self.read_last_words()
        for sid, entry in old.items():  # an earlier stop's words not yet told
            lost.setdefault(sid, entry)
        try:
            fd = os.open(self.last_words_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(lost, fh)
            return True
        except OSError as exc:
            log.error("jupyter_acp: could not even write what was not saved (%s)", exc)
            return False

    def read_last_words(self) -> dict[str, Any]:
        if self.last_words_path is None:
            return {}
        try:
            with open(self.last_words_path) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def forget_last_words(self) -> None:
        if self.last_words_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.last_words_path)
