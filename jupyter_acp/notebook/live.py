"""The live backend: the shared ``YNotebook`` of jupyter-server-ydoc, read and written in place.

Its own module because it is the one backend built on pycrdt (one transaction per change, tagged
with the agent's origin, tracked by ``access.NotebookAccess`` for revert); the RTC-off backends are in
``tab`` and ``file``.

A tool finds its cell in constant time, whatever the notebook's size: :class:`LiveIndex`, kept with the
document (one per document, by ``NotebookAccess``), holds the nbformat export the reads use and a map from
cell id to position, both updated from the Y array's own change events instead of being rebuilt. Walking
the Y array to find a cell costs O(n) wrappers, each a Rust call (194 ms to the last of 4,000 cells), and
exporting it all again after every keystroke of a user cost as much; with the index a lookup is one dict
access, one adjustment per structural change since the map was built, and one check on the cell itself.

What following the document costs: the array's own changes come through pycrdt's observer (rare: cells inserted,
deleted, moved); the changes inside cells through the raw deep observer, of which only the path is read (its
first step is the cell's position, found by yrs in O(position): 0.4 ms a keystroke in the last of 10,000 cells,
0.05 ms in a notebook of 1,000; pycrdt's own deep observer, which converts every part of every event, cost
several times that).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from .document import Notebook, NotebookError
from .provenance import add_to_cell, add_to_ycell
from .stamping import Stamp

log = logging.getLogger(__name__)


class Tracker(Protocol):
    """What the live backend asks of ``access.NotebookAccess``, which builds it (named here, not imported: the
    access module imports this one)."""

    def live_index(self, doc: Any) -> LiveIndex: ...

    def track(
        self, doc: Any, origin: str, cell_id: str | None = None, ycell: Any = None, kind: str = "other"
    ) -> None: ...

    def landed(self, origin: str, cell_id: str, source: str) -> None: ...

    def untrack_cells(self, origin: str, cell_ids: list[str]) -> None: ...


def _normalise(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell as Yjs keeps it, as nbformat says it (counts are floats in Yjs, a source may be a list)."""
    count = cell.get("execution_count")
    if isinstance(count, float):
        cell["execution_count"] = int(count)
    src = cell.get("source", "")
    if isinstance(src, list):
        cell["source"] = "".join(src)
    cell.pop("execution_state", None)
    return cell


def export_cells(doc: Any) -> list[dict[str, Any]]:
    """Every cell of the document, exported at once."""
    # one JSON export in Rust: ~10x faster than pycrdt's per-key to_py on a 200-cell notebook
    return [_normalise(c) for c in json.loads(str(doc.ycells))]


class LiveIndex:
    """The cells of one live document as the tools read them, kept up to date by the document's own events.

    - ``rows``: the nbformat export, one dict per cell; a cell changed since (its source typed, its outputs
      streamed) is re-exported alone, when it is next read;
    - ``maps``: each cell's ``pycrdt.Map`` once fetched (by position, or from the insert event that made it),
      so that the check of a lookup is one access, never a walk from the start of the array;
    - ``ids``: cell id -> (position, from which entry of ``log`` on it must be adjusted); ``log`` lists the
      structural changes (insert or delete of ``k`` cells at a position) since the map was built, so an insert
      in the middle does not rebuild it. Past ``max_log`` changes the map is rebuilt from the export (O(n) dict
      work, once), and so is it when a lookup's check fails; the walk of the Y array is the last resort.

    The lists handed out by :meth:`cells` are never changed afterwards: any change of the document makes the
    next call build a new one (a shallow copy), so callers may keep one as a snapshot and key caches on it.
    """

    #: structural changes adjusted per lookup before the map is rebuilt
    max_log = 64
    #: ids of inserted cells read in the insert event itself (a paste of more rebuilds the map once instead)
    max_insert_ids = 64
    #: changed cells re-exported one by one (past it and a quarter of the notebook, the next read exports all)
    max_dirty = 64

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.rows: list[dict[str, Any] | None] | None = None
        self.maps: list[Any] = []
        self.dirty: set[int] = set()
        self.view: list[dict[str, Any]] | None = None
        self.ids: dict[str, tuple[int, int]] = {}
        self.log: list[tuple[int, int]] = []
        self.ids_valid = False
        #: how lookups were answered (tests and the benchmark read them)
        self.stats = {"hits": 0, "rebuilds": 0, "scans": 0, "exports": 0, "cell_exports": 0}
        self.subscription: Any = None
        self.nested_subscription: Any = None
        try:
            # the array's own changes through pycrdt (its delta, with the inserted cells as pycrdt maps); the
            # changes inside cells through the raw deep observer, reading only each event's path: pycrdt's own
            # deep observer converts every slot of every event (target, delta, path) for each keystroke
            self.subscription = doc.ycells.observe(self._structure)
            self.nested_subscription = doc.ycells.integrated.observe_deep(self._nested)
        except Exception:  # cannot observe: nothing is kept, every read exports and every lookup walks
            log.debug("the live document cannot be observed; its cells are not indexed", exc_info=True)
            self.close()

    @property
    def observed(self) -> bool:
        return self.subscription is not None and self.nested_subscription is not None

    def close(self) -> None:
        if self.subscription is not None:
            try:
                self.doc.ycells.unobserve(self.subscription)
            except Exception:
                log.debug("unobserving a live document failed", exc_info=True)
            self.subscription = None
        if self.nested_subscription is not None:
            try:
                self.nested_subscription.drop()
            except Exception:
                log.debug("unobserving a live document failed", exc_info=True)
            self.nested_subscription = None

    def reset(self) -> None:
        """Forget everything kept (the next read exports the whole document again)."""
        self.rows, self.maps, self.view = None, [], None
        self.dirty.clear()
        self.ids, self.log, self.ids_valid = {}, [], False

    # -- the document's events ---------------------------------------------------------------------
    def _structure(self, event: Any) -> None:
        """Cells inserted, deleted or moved (called before the nested changes of the same transaction)."""
        try:
            self.view = None
            if self.rows is not None:
                self._apply_delta(event.delta)
        except Exception:
            log.warning("a change of the live document could not be followed; its cells are exported again")
            self.reset()

    def _nested(self, events: list[Any]) -> None:
        """Changes inside cells (a source typed, outputs streamed, a count set): each event's path starts with the
        cell's position after the transaction, the array's own delta being applied already (``_structure``).
        Never raises into pycrdt: on any surprise everything kept is dropped, and rebuilt on the next read."""
        try:
            self.view = None
            if self.rows is None:
                return
            for event in events:
                path = event.path
                if not path:
                    continue  # the array's own change: ``_structure`` had it
                pos = path[0]
                if not isinstance(pos, int) or pos >= len(self.rows):
                    raise ValueError(f"an event at {path!r} outside the {len(self.rows)} cells")
                if self.rows[pos] is not None:
                    self.rows[pos] = None
                    self.dirty.add(pos)
                if len(path) == 1 and type(event).__name__ == "MapEvent" and "id" in event.keys:
                    self.ids_valid = False  # a cell's id itself changed
            if len(self.dirty) > self.max_dirty + len(self.rows) // 4:
                self.rows = None  # most cells changed: the next read exports them all at once
        except Exception:
            log.warning("a change of the live document could not be followed; its cells are exported again")
            self.reset()

    def _apply_delta(self, delta: list[dict[str, Any]]) -> None:
        assert self.rows is not None
        pos = 0
        for op in delta:
            if "retain" in op:
                pos += int(op["retain"])
            elif "insert" in op:
                items = list(op["insert"])
                k = len(items)
                if pos < len(self.rows) and self.dirty:  # an append (a notebook loading) moves nothing
                    self.dirty = {p + k if p >= pos else p for p in self.dirty}
                self.rows[pos:pos] = [None] * k
                self.maps[pos:pos] = items
                self.dirty.update(range(pos, pos + k))
                if self.ids_valid:
                    self.log.append((pos, k))
                    if k <= self.max_insert_ids:
                        for j, ymap in enumerate(items):
                            cid = ymap.get("id")
                            if isinstance(cid, str):
                                self.ids[cid] = (pos + j, len(self.log))
                    else:
                        self.ids_valid = False
                pos += k
            elif "delete" in op:
                k = int(op["delete"])
                del self.rows[pos : pos + k]
                del self.maps[pos : pos + k]
                if self.dirty:
                    self.dirty = {p - k if p >= pos + k else p for p in self.dirty if not pos <= p < pos + k}
                if self.ids_valid:
                    self.log.append((pos, -k))
        if len(self.log) > self.max_log:
            self.ids_valid = False  # rebuilt (and the log cleared) by the next lookup
        if len(self.maps) != len(self.rows):
            raise ValueError("the kept cells and their maps disagree")
        if len(self.dirty) > self.max_dirty + len(self.rows) // 4:
            # most cells changed (a notebook loading, a paste of many): the next read exports them all at once,
            # and until then a change costs no bookkeeping of which cells changed
            self.rows = None

    # -- reads ---------------------------------------------------------------------------------------
    def _map(self, pos: int) -> Any:
        ymap = self.maps[pos]
        if ymap is None:
            ymap = self.maps[pos] = self.doc.ycells[pos]
        return ymap

    def cells(self) -> list[dict[str, Any]]:
        """The cells as nbformat-like dicts (shared: do not mutate), the same list while nothing changed."""
        if not self.observed:
            self.stats["exports"] += 1
            return export_cells(self.doc)
        if self.view is not None:
            return self.view
        n = len(self.rows) if self.rows is not None else 0
        if self.rows is None or len(self.dirty) * 4 > n + 4 * self.max_dirty:
            # many cells changed (or none kept yet): one export of everything is cheaper than one per cell
            rows: list[dict[str, Any] | None] = list(export_cells(self.doc))
            self.stats["exports"] += 1
            if self.rows is None or len(self.maps) != len(rows):
                self.maps = [None] * len(rows)
                self.ids_valid = False
            self.rows = rows
        else:
            for pos in self.dirty:
                self.rows[pos] = _normalise(json.loads(str(self._map(pos))))
                self.stats["cell_exports"] += 1
        self.dirty.clear()
        self.view = list(self.rows)  # type: ignore[arg-type]
        return self.view

    def _rebuild_ids(self) -> None:
        rows = self.cells()
        ids: dict[str, tuple[int, int]] = {}
        for i in range(len(rows) - 1, -1, -1):  # backwards: with duplicate ids, the first cell wins (as a scan)
            ids[rows[i].get("id")] = (i, 0)  # type: ignore[index]
        self.ids, self.log, self.ids_valid = ids, [], True
        self.stats["rebuilds"] += 1

    def _position(self, cell_id: str) -> int | None:
        entry = self.ids.get(cell_id)
        if entry is None:
            return None
        pos, start = entry
        for q, k in self.log[start:]:
            if k > 0:
                if pos >= q:
                    pos += k
            elif pos >= q - k:
                pos += k
            elif pos >= q:
                return None  # deleted
        return pos

    def _checked(self, cell_id: str) -> tuple[int, Any] | None:
        pos = self._position(cell_id)
        if pos is None or pos >= len(self.maps):
            return None
        ymap = self._map(pos)
        if ymap.get("id") != cell_id:
            return None
        return pos, ymap

    def lookup(self, cell_id: str) -> tuple[int, Any] | None:
        """(position, the cell's ``pycrdt.Map``) of a cell, or None when the document has no such cell."""
        if not self.observed:
            return self._scan(cell_id)
        if self.rows is None:
            self.cells()  # the first read: the export sizes the kept maps
        if self.ids_valid:
            # every insert since the map was built either added its ids or invalidated the map, and so did a
            # change of a cell's id: an id it lacks, or one whose cell was deleted since, is not in the document
            if cell_id not in self.ids or self._position(cell_id) is None:
                return None
            found = self._checked(cell_id)
            if found is not None:
                self.stats["hits"] += 1
                return found
        self._rebuild_ids()
        found = self._checked(cell_id)
        if found is not None:
            return found
        if cell_id not in self.ids:
            return None
        # the export says the cell is there and the document disagrees: walk it, and start the kept state over
        found = self._scan(cell_id)
        self.reset()
        return found

    def _scan(self, cell_id: str) -> tuple[int, Any] | None:
        self.stats["scans"] += 1
        for i, ymap in enumerate(self.doc.ycells):
            if ymap.get("id") == cell_id:
                return i, ymap
        return None


class LiveNotebook(Notebook):
    """The shared ``YNotebook`` of jupyter-server-ydoc."""

    kind = "live"
    supports_revert = True

    def __init__(self, path: str, doc: Any, access: Tracker) -> None:
        super().__init__(path)
        self.doc = doc
        self.access = access
        self.index = access.live_index(doc)

    def cells(self) -> list[dict[str, Any]]:
        """The cells as nbformat-like dicts (shared and kept until the document changes: do not mutate)."""
        return self.index.cells()

    @staticmethod
    def export(doc: Any) -> list[dict[str, Any]]:
        return export_cells(doc)

    def ycell(self, cell_id: str) -> tuple[int, Any]:
        found = self.index.lookup(cell_id)
        if found is None:
            raise NotebookError(
                f"no cell with id {cell_id!r} in {self.path}; call client_notebook_outline for the current ids"
            )
        return found

    def find(self, cell_id: str) -> int:
        return self.ycell(cell_id)[0]

    def cell(self, cell_id: str) -> tuple[int, dict[str, Any]]:
        pos = self.find(cell_id)
        return pos, self.cells()[pos]

    def dirty(self) -> bool | None:
        try:
            return bool(self.doc.dirty)
        except Exception:
            return None

    def _txn(self, origin: str, cell_id: str | None = None, ycell: Any = None, kind: str = "other") -> Any:
        # before the transaction: the undo managers (the turn's, the cell's) capture it
        self.access.track(self.doc, origin, cell_id, ycell, kind)
        return self.doc.ydoc.transaction(origin=origin)

    async def insert(self, index: int, cell: dict[str, Any], origin: str, stamp: Stamp | None = None) -> None:
        if stamp is not None:  # in the cell as it is created: one transaction, one Y update
            cell = {**cell, "metadata": dict(cell.get("metadata") or {})}
            add_to_cell(cell, stamp("inserted"))
        ycell = self.doc.create_ycell(cell)
        cid = cell.get("id")
        with self._txn(origin, cid, kind="insert" if cid else "other"):
            self.doc.ycells.insert(index, ycell)
        if cid:
            self.access.landed(origin, cid, str(cell.get("source", "")))

    async def set_source(self, cell_id: str, source: str, origin: str, stamp: Stamp | None = None) -> None:
        i, ycell = self.ycell(cell_id)
        with self._txn(origin, cell_id, ycell, kind="source"):
            self.doc.set_cell(i, source=source)  # granular text diff: cursors in open tabs survive
            if stamp is not None:
                add_to_ycell(ycell, stamp("edited"), origin=origin)
        self.access.landed(origin, cell_id, source)

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        # every position found before the transaction (the index follows the document between transactions),
        # then deleted from the last up so the earlier positions hold
        positions = sorted({self.find(cid) for cid in cell_ids}, reverse=True)
        with self._txn(origin):
            for i in positions:
                del self.doc.ycells[i]
        self.access.untrack_cells(origin, cell_ids)

    async def move(self, cell_id: str, to_index: int, origin: str, stamp: Stamp | None = None) -> None:
        i, ycell = self.ycell(cell_id)
        cell = ycell.to_py()
        cell.pop("execution_state", None)
        if stamp is not None:
            add_to_cell(cell, stamp("moved"))
        self.access.untrack_cells(origin, [cell_id])
        with self._txn(origin):
            del self.doc.ycells[i]
            self.doc.ycells.insert(to_index, self.doc.create_ycell(cell))

    async def clear_outputs(self, cell_ids: list[str], origin: str) -> None:
        found = [self.ycell(cid)[1] for cid in cell_ids]
        with self._txn(origin):
            for ycell in found:
                outputs = ycell.get("outputs")
                if outputs is not None and len(outputs):
                    outputs.clear()
                if ycell.get("execution_count") is not None:
                    ycell["execution_count"] = None
