"""Notebook access: the live Y document when RTC is on, else the open tab, else the file.

* **Live document** (jupyter-server-ydoc): ``get_document(..., copy=False, create=True)`` is the very
  ``YNotebook`` every browser shares, so reads include unsaved edits and writes show up in open tabs
  at once.  Each mutating call is ONE transaction tagged with the agent's origin
  (``jupyter_acp:<session>:<turn>``); an origin-filtered ``pycrdt.UndoManager`` per (session, turn)
  makes "revert the agent's edits of this turn" undo exactly those, never the user's typing.
* **RTC off** (not installed, or ``disable_rtc``): never create a room (its autosave would fight the
  browser).  Edits go to the open tab through the frontend bridge (``applyEdit``), or, with no tab
  open, through the contents manager (read, change, save).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import pycrdt

log = logging.getLogger(__name__)

ORIGIN_PREFIX = "jupyter_acp"


class NotebookError(Exception):
    """A request about the notebook that cannot be served; the text is for the model."""


def origin_for(session_id: str, turn_id: str | None) -> str:
    return f"{ORIGIN_PREFIX}:{session_id}:{turn_id or '-'}"


def new_cell_id() -> str:
    return uuid.uuid4().hex[:8]


@dataclass
class TurnEdits:
    doc: Any
    undo: pycrdt.UndoManager
    count: int = 0
    cell_ids: set[str] = field(default_factory=set)


class Notebook:
    """One notebook as the tools see it: a list of nbformat-like cell dicts plus edit operations."""

    kind = "abstract"
    supports_revert = False

    def __init__(self, path: str) -> None:
        self.path = path

    # reads
    def cells(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def dirty(self) -> bool | None:
        return None

    def find(self, cell_id: str) -> int:
        for i, c in enumerate(self.cells()):
            if c.get("id") == cell_id:
                return i
        raise NotebookError(
            f"no cell with id {cell_id!r} in {self.path}; call client_notebook_outline for the current ids"
        )

    # writes: each is one change of the document, tagged with ``origin``
    async def insert(self, index: int, cell: dict[str, Any], origin: str) -> None:
        raise NotImplementedError

    async def set_source(self, cell_id: str, source: str, origin: str) -> None:
        raise NotImplementedError

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        raise NotImplementedError

    async def move(self, cell_id: str, to_index: int, origin: str) -> None:
        raise NotImplementedError


def _cell_py(ycell: Any) -> dict[str, Any]:
    cell = ycell.to_py()
    if isinstance(cell.get("execution_count"), float):
        cell["execution_count"] = int(cell["execution_count"])
    src = cell.get("source", "")
    if isinstance(src, list):
        cell["source"] = "".join(src)
    return cell


class LiveNotebook(Notebook):
    """The shared ``YNotebook`` of jupyter-server-ydoc."""

    kind = "live"
    supports_revert = True

    def __init__(self, path: str, doc: Any, access: NotebookAccess) -> None:
        super().__init__(path)
        self.doc = doc
        self.access = access

    def cells(self) -> list[dict[str, Any]]:
        """The cells as nbformat-like dicts (shared and cached until the document changes: do not mutate)."""
        return self.access.cached_cells(self.doc)

    @staticmethod
    def export(doc: Any) -> list[dict[str, Any]]:
        # one JSON export in Rust: ~10x faster than pycrdt's per-key to_py on a 200-cell notebook
        cells = json.loads(str(doc.ycells))
        for cell in cells:
            count = cell.get("execution_count")
            if isinstance(count, float):
                cell["execution_count"] = int(count)
            src = cell.get("source", "")
            if isinstance(src, list):
                cell["source"] = "".join(src)
            cell.pop("execution_state", None)
        return cells

    def ycell(self, cell_id: str) -> tuple[int, Any]:
        for i, c in enumerate(self.doc.ycells):
            if c.get("id") == cell_id:
                return i, c
        raise NotebookError(
            f"no cell with id {cell_id!r} in {self.path}; call client_notebook_outline for the current ids"
        )

    def find(self, cell_id: str) -> int:
        return self.ycell(cell_id)[0]

    def dirty(self) -> bool | None:
        try:
            return bool(self.doc.dirty)
        except Exception:
            return None

    def _txn(self, origin: str) -> Any:
        self.access.track(self.doc, origin)
        return self.doc.ydoc.transaction(origin=origin)

    async def insert(self, index: int, cell: dict[str, Any], origin: str) -> None:
        ycell = self.doc.create_ycell(cell)
        with self._txn(origin):
            self.doc.ycells.insert(index, ycell)

    async def set_source(self, cell_id: str, source: str, origin: str) -> None:
        i, _ = self.ycell(cell_id)
        with self._txn(origin):
            self.doc.set_cell(i, source=source)  # granular text diff: cursors in open tabs survive

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        with self._txn(origin):
            for cid in cell_ids:
                i, _ = self.ycell(cid)
                del self.doc.ycells[i]

    async def move(self, cell_id: str, to_index: int, origin: str) -> None:
        i, ycell = self.ycell(cell_id)
        cell = ycell.to_py()
        cell.pop("execution_state", None)
        with self._txn(origin):
            del self.doc.ycells[i]
            self.doc.ycells.insert(to_index, self.doc.create_ycell(cell))


class FileNotebook(Notebook):
    """The notebook on disk through the contents manager (RTC off and no tab open)."""

    kind = "file"

    def __init__(self, path: str, cm: Any, model: dict[str, Any]) -> None:
        super().__init__(path)
        self.cm = cm
        self.model = model

    def cells(self) -> list[dict[str, Any]]:
        out = []
        for c in self.model["content"]["cells"]:
            cell = dict(c)
            src = cell.get("source", "")
            cell["source"] = "".join(src) if isinstance(src, list) else src
            out.append(cell)
        return out

    def dirty(self) -> bool | None:
        return False

    async def _save(self) -> None:
        model = {"type": "notebook", "format": "json", "content": self.model["content"]}
        res = self.cm.save(model, self.path)
        if asyncio.iscoroutine(res):
            await res

    async def insert(self, index: int, cell: dict[str, Any], origin: str) -> None:
        import nbformat

        self.model["content"]["cells"].insert(index, nbformat.from_dict(cell))
        await self._save()

    async def set_source(self, cell_id: str, source: str, origin: str) -> None:
        self.model["content"]["cells"][self.find(cell_id)]["source"] = source
        await self._save()

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        drop = set(cell_ids)
        self.model["content"]["cells"] = [c for c in self.model["content"]["cells"] if c.get("id") not in drop]
        await self._save()

    async def move(self, cell_id: str, to_index: int, origin: str) -> None:
        cells = self.model["content"]["cells"]
        cell = cells.pop(self.find(cell_id))
        cells.insert(to_index, cell)
        await self._save()

    async def set_outputs(self, cell_id: str, outputs: list[dict[str, Any]], execution_count: int | None) -> None:
        import nbformat

        cell = self.model["content"]["cells"][self.find(cell_id)]
        cell["outputs"] = [nbformat.from_dict(o) for o in outputs]
        cell["execution_count"] = execution_count
        await self._save()


class TabNotebook(Notebook):
    """RTC off, a browser tab has the notebook open: reads and edits go through that tab."""

    kind = "tab"

    def __init__(self, path: str, frontend: Any, cells: list[dict[str, Any]], dirty: bool | None) -> None:
        super().__init__(path)
        self.frontend = frontend
        self._cells = cells
        self._dirty = dirty

    def cells(self) -> list[dict[str, Any]]:
        return self._cells

    def dirty(self) -> bool | None:
        return self._dirty

    async def _edit(self, op: dict[str, Any]) -> None:
        res = await self.frontend.request("applyEdit", {"path": self.path, **op}, path=self.path)
        if isinstance(res, dict) and res.get("error"):
            raise NotebookError(f"the open tab refused the edit: {res['error']}")

    async def insert(self, index: int, cell: dict[str, Any], origin: str) -> None:
        await self._edit({"op": "insert", "index": index, "cell": cell})

    async def set_source(self, cell_id: str, source: str, origin: str) -> None:
        await self._edit({"op": "setSource", "cellId": cell_id, "source": source})

    async def delete(self, cell_ids: list[str], origin: str) -> None:
        await self._edit({"op": "delete", "cellIds": cell_ids})

    async def move(self, cell_id: str, to_index: int, origin: str) -> None:
        await self._edit({"op": "move", "cellId": cell_id, "toIndex": to_index})


class NotebookAccess:
    """Finds the right way into a notebook at call time, and keeps the agent-edit undo history."""

    #: turns whose edits stay revertable, per session
    max_turns_kept = 20

    def __init__(self, serverapp: Any, frontend: Any = None) -> None:
        self.serverapp = serverapp
        self.frontend = frontend
        self._edits: dict[str, TurnEdits] = {}  # origin -> undo history
        self._order: list[str] = []
        #: id(doc) -> [doc, subscription, version, cells or None]: reads skip the export while nothing changed
        self._cells_cache: dict[int, list[Any]] = {}

    def cached_cells(self, doc: Any) -> list[dict[str, Any]]:
        entry = self._cells_cache.get(id(doc))
        if entry is None or entry[0] is not doc:
            if entry is not None:
                self._unobserve(entry)
            entry = [doc, None, 0, None]

            def changed(_event: Any, entry: list[Any] = entry) -> None:
                entry[3] = None

            try:
                entry[1] = doc.ydoc.observe(changed)
            except Exception:
                entry[1] = False  # cannot observe: never cache
            self._cells_cache[id(doc)] = entry
            while len(self._cells_cache) > 32:
                old = self._cells_cache.pop(next(iter(self._cells_cache)))
                self._unobserve(old)
        if entry[3] is None or entry[1] is False:
            entry[3] = LiveNotebook.export(doc)
        return entry[3]

    @staticmethod
    def _unobserve(entry: list[Any]) -> None:
        try:
            if entry[1]:
                entry[0].ydoc.unobserve(entry[1])
        except Exception:
            pass

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
            model = cm.get(path, content=False)
            if asyncio.iscoroutine(model):
                model = await model
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
            model = cm.get(path, content=True, type="notebook")
            if asyncio.iscoroutine(model):
                model = await model
        except Exception as exc:
            raise NotebookError(f"could not read {path}: {exc}") from exc
        return FileNotebook(path, cm, model)

    # -- agent-edit history --------------------------------------------------------------------
    def track(self, doc: Any, origin: str) -> None:
        entry = self._edits.get(origin)
        if entry is not None and entry.doc is doc:
            entry.count += 1
            return
        um = pycrdt.UndoManager(scopes=[doc.ycells], capture_timeout_millis=0)
        um.include_origin(origin)
        self._edits[origin] = TurnEdits(doc=doc, undo=um, count=1)
        if origin in self._order:
            self._order.remove(origin)
        self._order.append(origin)
        session_prefix = origin.rsplit(":", 1)[0] + ":"
        mine = [o for o in self._order if o.startswith(session_prefix)]
        for old in mine[: -self.max_turns_kept]:
            self._order.remove(old)
            self._edits.pop(old, None)

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
        if self.rtc:
            current = await self.ydoc_ext.get_document(
                path=path, content_type="notebook", file_format="json", copy=False, create=False
            )
            if current is not None and current is not entry.doc:
                self._forget(origin)
                raise NotebookError(
                    "the notebook's live document was reloaded since; these edits can no longer be reverted"
                )
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
