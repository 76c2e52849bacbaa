"""Finding the way into a notebook at call time (live document, open tab, or file) and keeping the
agent-edit undo history per (session, turn) for revert.

Split from ``document`` because choosing a backend and remembering the agent's edits is a job of
its own (server settings, the YStore's config, pycrdt undo managers), apart from the backends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pycrdt
from jupyter_core.utils import ensure_async

from .document import ORIGIN_PREFIX, Notebook, NotebookError
from .file import FileNotebook
from .live import LiveIndex, LiveNotebook
from .tab import TabNotebook

log = logging.getLogger(__name__)


#: the origin of a per-cell revert's own change (deleting a cell the agent inserted): no undo manager includes it
REVERT_ORIGIN = f"{ORIGIN_PREFIX}-revert"


@dataclass
class CellEdits:
    """The agent's edits of one cell in one turn, undoable alone (per-cell revert)."""

    #: agent-origin changes inside the cell (its source); None for a cell the agent inserted
    undo: pycrdt.UndoManager | None
    inserted: bool = False
    #: the source the agent left: an inserted cell the user has typed in since is not deleted
    source: str | None = None
    count: int = 0


@dataclass
class TurnEdits:
    doc: Any
    undo: pycrdt.UndoManager
    count: int = 0
    cell_ids: set[str] = field(default_factory=set)
    #: cell id -> its edits in this turn (deleted and moved cells are not here: they revert with the turn)
    cells: dict[str, CellEdits] = field(default_factory=dict)
    #: changes not attributed to one undoable cell (deletes, moves): the turn stays revertable for them
    others: int = 0


class NotebookAccess:
    """Finds the right way into a notebook at call time, and keeps the agent-edit undo history."""

    #: turns whose edits stay revertable, per session
    max_turns_kept = 20
    #: notebooks whose exported cells are kept while unchanged (least recently used dropped first)
    cells_kept = 64

    def __init__(self, serverapp: Any, frontend: Any = None) -> None:
        self.serverapp = serverapp
        self.frontend = frontend
        self._edits: dict[str, TurnEdits] = {}  # origin -> undo history
        self._order: list[str] = []
        #: id(doc) -> the document's kept cells and id map (least recently used first)
        self._indexes: dict[int, LiveIndex] = {}

    def live_index(self, doc: Any) -> LiveIndex:
        """The kept cells of a live document (``live.LiveIndex``), one per document, the few last used kept."""
        index = self._indexes.pop(id(doc), None)
        if index is not None and index.doc is not doc:  # a recycled id: another document
            index.close()
            index = None
        if index is None:
            index = LiveIndex(doc)
            while len(self._indexes) >= self.cells_kept:
                self._indexes.pop(next(iter(self._indexes))).close()
        self._indexes[id(doc)] = index  # a hit moves to the end
        return index

    @property
    def ydoc_ext(self) -> Any:
        return self.serverapp.web_app.settings.get("jupyter_server_ydoc")

    @property
    def rtc(self) -> bool:
        ext = self.ydoc_ext
        return ext is not None and not getattr(ext, "disable_rtc", False)

    async def writable(self, path: str) -> bool:
        cm = self.serverapp.contents_manager
        try:
            model = await ensure_async(cm.get(path, content=False))
        except Exception:
            return False
        return bool(model.get("writable", True))

    def _configure_ystore(self) -> None:
        """jupyter-server-ydoc (3.0.4) builds the YStore of a room made by ``get_document(create=True)``
        without its config, so ``SQLiteYStore.db_path`` is ignored and ``.jupyter_ystore.db`` lands in
        the server's CWD.  Hand it a subclass that carries the extension's config."""
        ext = self.ydoc_ext
        if getattr(ext, "_jupyter_acp_ystore_configured", False):
            return
        base = ext.ystore_class
        config = ext.config

        class ConfiguredYStore(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                kwargs.setdefault("config", config)
                super().__init__(*args, **kwargs)

        ConfiguredYStore.__name__ = base.__name__
        ConfiguredYStore.__qualname__ = base.__qualname__
        try:
            ext.ystore_class = ConfiguredYStore
        except Exception:
            log.debug("could not hand the YStore its config", exc_info=True)
        ext._jupyter_acp_ystore_configured = True

    async def open_if_live(self, path: str) -> LiveNotebook | None:
        """The live document of a notebook when a room already holds it (never creates one: reading another
        notebook must not open a room whose autosave would then run), else None."""
        if not self.rtc:
            return None
        try:
            doc = await self.ydoc_ext.get_document(
                path=path, content_type="notebook", file_format="json", copy=False, create=False
            )
        except Exception:
            return None
        return LiveNotebook(path, doc, self) if doc is not None else None

    async def open(self, path: str) -> Notebook:
        if self.rtc:
            self._configure_ystore()
            try:
                doc = await self.ydoc_ext.get_document(
                    path=path, content_type="notebook", file_format="json", copy=False, create=True
                )
            except Exception as exc:
                raise NotebookError(f"could not open the live document of {path}: {exc}") from exc
            if doc is None:
                raise NotebookError(f"could not open the live document of {path}")
            return LiveNotebook(path, doc, self)
        if self.frontend is not None and self.frontend.has_tab(path):
            try:
                res = await self.frontend.request("getCells", {"path": path}, path=path, timeout=5)
                if isinstance(res, dict) and isinstance(res.get("cells"), list):
                    return TabNotebook(path, self.frontend, res["cells"], res.get("dirty"))
            except Exception as exc:
                log.info("tab for %s did not answer getCells (%s); using the file", path, exc)
        cm = self.serverapp.contents_manager
        try:
            model = await ensure_async(cm.get(path, content=True, type="notebook"))
        except Exception as exc:
            raise NotebookError(f"could not read {path}: {exc}") from exc
        return FileNotebook(path, cm, model)

    # -- agent-edit history --------------------------------------------------------------------
    def track(self, doc: Any, origin: str, cell_id: str | None = None, ycell: Any = None, kind: str = "other") -> None:
        """Before one agent change (``kind``: ``source`` of ``cell_id`` whose map is ``ycell``, ``insert``
        of ``cell_id``, or ``other``): undo managers for the turn and, for a source edit, for that cell."""
        entry = self._edits.get(origin)
        if entry is not None and entry.doc is doc:
            entry.count += 1
        else:
            um = pycrdt.UndoManager(scopes=[doc.ycells], capture_timeout_millis=0)
            um.include_origin(origin)
            entry = self._edits[origin] = TurnEdits(doc=doc, undo=um, count=1)
            if origin in self._order:
                self._order.remove(origin)
            self._order.append(origin)
            session_prefix = origin.rsplit(":", 1)[0] + ":"
            mine = [o for o in self._order if o.startswith(session_prefix)]
            for old in mine[: -self.max_turns_kept]:
                self._order.remove(old)
                self._edits.pop(old, None)
        if cell_id is None or kind == "other":
            entry.others += 1
            return
        entry.cell_ids.add(cell_id)
        cell = entry.cells.get(cell_id)
        if kind == "insert":
            entry.cells[cell_id] = CellEdits(undo=None, inserted=True, count=1)
            return
        if cell is None:
            cum = pycrdt.UndoManager(scopes=[ycell], capture_timeout_millis=0)
            cum.include_origin(origin)
            cell = entry.cells[cell_id] = CellEdits(undo=cum)
        cell.count += 1

    def landed(self, origin: str, cell_id: str, source: str) -> None:
        """After an agent change of ``cell_id``: the source it left."""
        entry = self._edits.get(origin)
        cell = entry.cells.get(cell_id) if entry is not None else None
        if cell is not None:
            cell.source = source

    def untrack_cells(self, origin: str, cell_ids: list[str]) -> None:
        """Cells the agent deleted or moved: no per-cell undo for them (the turn's revert still has them)."""
        entry = self._edits.get(origin)
        if entry is None:
            return
        for cid in cell_ids:
            entry.cells.pop(cid, None)

    def cells_with_edits(self, session_id: str) -> dict[str, list[str | None]]:
        """Cell id -> the turns (oldest first; None: outside a turn) whose agent edits of it can be undone alone."""
        prefix = f"{ORIGIN_PREFIX}:{session_id}:"
        out: dict[str, list[str | None]] = {}
        for origin in self._order:
            if not origin.startswith(prefix):
                continue
            key = origin[len(prefix) :]
            for cid in self._edits[origin].cells:
                out.setdefault(cid, []).append(None if key == "-" else key)
        return out

    async def _check_doc(self, path: str, origin: str, entry: TurnEdits) -> None:
        if self.rtc:
            current = await self.ydoc_ext.get_document(
                path=path, content_type="notebook", file_format="json", copy=False, create=False
            )
            if current is not None and current is not entry.doc:
                self._forget(origin)
                raise NotebookError(
                    "the notebook's live document was reloaded since; these edits can no longer be reverted"
                )

    def _origins_of_cell(self, session_id: str, cell_id: str, turn_id: str | None) -> list[str]:
        prefix = f"{ORIGIN_PREFIX}:{session_id}:"
        found = [
            o
            for o in self._order
            if o.startswith(prefix)
            and cell_id in self._edits[o].cells
            and (turn_id is None or o == f"{prefix}{turn_id}")
        ]
        if not found:
            which = f" in turn {turn_id!r}" if turn_id is not None else ""
            raise NotebookError(
                f"no agent edits of cell {cell_id!r}{which} can be undone alone (none recorded, already reverted or "
                "accepted, or the cell was moved or deleted by the agent: revert the whole turn from the panel instead)"
            )
        return found

    async def revert_cell(self, session_id: str, path: str, cell_id: str, turn_id: str | None = None) -> dict[str, Any]:
        """Undo the agent's edits of one cell (of one turn, or of every turn that edited it, newest first),
        leaving the user's own edits of it and the agent's other edits alone. A cell the agent inserted is
        deleted, unless the user has typed in it since (then it is refused: delete it yourself)."""
        origins = self._origins_of_cell(session_id, cell_id, turn_id)
        for origin in origins:
            await self._check_doc(path, origin, self._edits[origin])
        # an inserted cell the user typed in since the agent's last edit of it: refuse before undoing anything
        newest = self._edits[origins[-1]]
        left = newest.cells[cell_id].source
        current = self._source_of(newest.doc, cell_id)
        for origin in origins:
            if self._edits[origin].cells[cell_id].inserted:
                if current is not None and left is not None and current != left:
                    raise NotebookError(
                        f"cell {cell_id!r} was inserted by the agent and you have edited it since; undoing it would "
                        "delete your edits: delete the cell yourself, or click Accept to keep it"
                    )
        edits = 0
        turns: list[str | None] = []
        for origin in reversed(origins):
            entry = self._edits[origin]
            cell = entry.cells.pop(cell_id)
            edits += cell.count
            key = origin.rsplit(":", 1)[1]
            turns.append(None if key == "-" else key)
            if cell.inserted:
                found = self.live_index(entry.doc).lookup(cell_id)
                if found is not None:
                    with entry.doc.ydoc.transaction(origin=REVERT_ORIGIN):
                        del entry.doc.ycells[found[0]]
            elif cell.undo is not None:
                while cell.undo.can_undo():
                    cell.undo.undo()
            if not entry.cells and not entry.others:
                self._forget(origin)  # nothing of this turn is left to revert
        return {"cell_id": cell_id, "turn_id": turns[0] if len(turns) == 1 else None, "turns": turns, "edits": edits}

    def accept_cell(self, session_id: str, cell_id: str) -> dict[str, Any]:
        """The user keeps the agent's edits of one cell: no per-cell undo is offered for it any more (the
        whole turn's revert still includes them)."""
        prefix = f"{ORIGIN_PREFIX}:{session_id}:"
        n = 0
        for origin in self._order:
            if origin.startswith(prefix) and self._edits[origin].cells.pop(cell_id, None) is not None:
                n += 1
        return {"cell_id": cell_id, "accepted": n}

    def _source_of(self, doc: Any, cell_id: str) -> str | None:
        found = self.live_index(doc).lookup(cell_id)
        return None if found is None else str(found[1].get("source", ""))

    def turns_with_edits(self, session_id: str) -> list[str]:
        prefix = f"{ORIGIN_PREFIX}:{session_id}:"
        return [o[len(prefix) :] for o in self._order if o.startswith(prefix)]

    async def revert(self, session_id: str, path: str, turn_id: str | None = None) -> dict[str, Any]:
        """Undo the agent-origin transactions of one turn (default: the latest turn with edits)."""
        turns = self.turns_with_edits(session_id)
        if not turns:
            raise NotebookError("the agent has made no edits to revert in this session")
        key = turn_id if turn_id is not None else turns[-1]
        if key not in turns:
            raise NotebookError(f"no agent edits recorded for turn {key!r}")
        origin = f"{ORIGIN_PREFIX}:{session_id}:{key}"
        entry = self._edits[origin]
        await self._check_doc(path, origin, entry)
        steps = 0
        while entry.undo.can_undo():
            entry.undo.undo()
            steps += 1
        self._forget(origin)
        return {"turn_id": None if key == "-" else key, "undone": steps, "edits": entry.count}

    def _forget(self, origin: str) -> None:
        self._edits.pop(origin, None)
        if origin in self._order:
            self._order.remove(origin)
