"""A user's edit of a cell an agent changed, noted in the cell's provenance (``provenance.note_user_edit``).

Once an agent has changed a notebook's live document, the document is followed: a change of a cell's source whose
transaction is not jupyter-acp's own (an agent's edit, a run, a rewind, a revert: their origins start with
``jupyter_acp``) is a user's, typed in a browser tab.  The note is written after that transaction (never inside an
observer) under ``PROVENANCE_ORIGIN``, which no undo manager includes.  Typing is one transaction per keystroke: a
cell is noted at most once per ``every`` seconds (consecutive notes of the same user are one entry anyway, its time
moving on).  The Y update carries no user name, so the note says "a user" (``user: null``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ...notebook.document import ORIGIN_PREFIX
from ...notebook.provenance import note_user_edit

log = logging.getLogger(__name__)


class UserEditNotes:
    """Follows the live documents agents changed; notes users' later edits of agents' cells."""

    #: documents followed at once (the least recently added dropped first)
    max_docs = 64

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self._docs: dict[int, tuple[Any, Any]] = {}
        self._noted: dict[tuple[int, str], float] = {}

    def follow(self, doc: Any) -> None:
        """Start following a live ``YNotebook`` (once per document)."""
        key = id(doc)
        known = self._docs.get(key)
        if known is not None and known[0] is doc:
            return
        try:
            sub = doc.ycells.observe_deep(lambda events, txn: self._changed(doc, events, txn))
        except Exception:
            log.debug("a live document could not be followed for users' edits", exc_info=True)
            return
        while len(self._docs) >= self.max_docs:
            old_doc, old_sub = self._docs.pop(next(iter(self._docs)))
            self._drop(old_doc, old_sub)
        self._docs[key] = (doc, sub)

    @staticmethod
    def _drop(doc: Any, sub: Any) -> None:
        try:
            doc.ycells.unobserve(sub)
        except Exception:
            log.debug("unobserving a live document failed", exc_info=True)

    def close(self) -> None:
        for doc, sub in self._docs.values():
            self._drop(doc, sub)
        self._docs.clear()

    def _changed(self, doc: Any, events: list[Any], txn: Any) -> None:
        try:
            origin = getattr(txn, "origin", None)
            if isinstance(origin, str) and origin.startswith(ORIGIN_PREFIX):
                return  # jupyter-acp's own change (an agent's, a run, a rewind, a note)
            positions = set()
            for event in events:
                path = getattr(event, "path", None)
                if path and len(path) >= 2 and isinstance(path[0], int) and path[1] == "source":
                    positions.add(path[0])
            if positions:
                asyncio.get_event_loop().call_soon(self._note, doc, sorted(positions))
        except Exception:  # never raise into pycrdt
            log.debug("following a user's edit failed", exc_info=True)

    def _note(self, doc: Any, positions: list[int]) -> None:
        now = time.monotonic()
        for pos in positions:
            try:
                if pos >= len(doc.ycells):
                    continue
                ycell = doc.ycells[pos]
                cid = str(ycell.get("id"))
                if now - self._noted.get((id(doc), cid), -1e9) < self.every:
                    continue
                if note_user_edit(ycell, None):
                    self._noted[(id(doc), cid)] = now
            except Exception:
                log.debug("noting a user's edit failed", exc_info=True)
        if len(self._noted) > 10_000:
            self._noted.clear()
