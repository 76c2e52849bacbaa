"""The project's other notebooks: list them, read one, create a new one (never overwriting).

The same rules as the agent's ``fs/*`` methods decide what these may touch (``files.FileRules``: inside the
server root with symlinks resolved, no hidden files unless the contents manager allows them, never Jupyter's
or IPython's own folders nor ``.ipynb_checkpoints``): the rules are asked, not copied. A path is relative to
the server root (as the notebook's own path is) or absolute inside it, and names a ``.ipynb``.

Reading prefers the live document when a collaboration room already holds the notebook (what its open tabs
show, unsaved edits included) and never opens a room for it; else it reads the file, through the rules'
own ``read`` (``O_NOFOLLOW``, the opened descriptor checked again). Creating asks the gate with the new
notebook's cells on the card, reserves the name with ``O_CREAT | O_EXCL`` (an existing file, a notebook
or anything else, is never replaced, whatever raced) and then saves it through the contents manager, so
Jupyter's save hooks, file ids and the file browser see it as any new notebook.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import posixpath
import stat
import time
from typing import Any

from jupyter_core.utils import ensure_async

from ..notebook import new_cell_id
from .cell_patching import IDS_SHOWN
from .files import FileRefused, FileRules
from .notebook_shared import CELL_TYPES, _svc
from .render import first_line, render_outputs
from .services import gate
from .surface import ToolContext, ToolDef, error_result, text_result

#: entries one listing answers
MAX_ENTRIES = 500
#: characters one read answers
READ_BUDGET = 40_000


def _refused(exc: FileRefused) -> dict[str, Any]:
    return error_result(str(exc), kind="not_found" if exc.missing else "refused", structured={"rule": exc.rule})


def _full(rules: FileRules, path: str) -> str:
    """The agent's path as an absolute one: relative paths are relative to the server root."""
    if not isinstance(path, str) or not path:
        raise FileRefused("path", "a path is required")
    return path if os.path.isabs(path) else os.path.join(rules.root, path)


def _api_path(rules: FileRules, real: str) -> str:
    rel = os.path.relpath(real, rules.root)
    return "" if rel == "." else rel.replace(os.sep, "/")


def _notebook_path(rules: FileRules, path: str) -> tuple[str, str, str]:
    """(the absolute path asked, its real path, its path from the root) of a notebook the rules allow."""
    full = _full(rules, path)
    real = rules.resolve(full)
    if not real.lower().endswith(".ipynb"):
        raise FileRefused("not_a_notebook", f"{path} is not a notebook (.ipynb); fs/read_text_file reads other files")
    return full, real, _api_path(rules, real)


# -- list ---------------------------------------------------------------------------------------------------
def _listing(rules: FileRules, folder: str, this_notebook: str) -> dict[str, Any]:
    """The folder's notebooks and subfolders the rules allow (file system calls: run in a worker thread)."""
    real = rules.resolve(_full(rules, folder) if folder != "." else rules.root)
    if not os.path.isdir(real):
        raise FileRefused("missing", f"{folder} is not a folder", missing=True)
    notebooks: list[dict[str, Any]] = []
    folders: list[str] = []
    try:
        entries = sorted(os.scandir(real), key=lambda e: e.name.lower())
    except OSError as exc:
        raise FileRefused("unreadable", f"{folder} cannot be listed: {exc.strerror}") from None
    for entry in entries:
        if len(notebooks) + len(folders) >= MAX_ENTRIES:
            break
        target = os.path.realpath(entry.path)
        try:
            rules.check(target, shown=entry.path)
            info = os.stat(target)
        except (FileRefused, OSError):
            continue  # hidden, Jupyter's own, outside the root, gone: the contents API does not show them either
        if stat.S_ISDIR(info.st_mode):
            folders.append(_api_path(rules, target))
        elif entry.name.lower().endswith(".ipynb") and stat.S_ISREG(info.st_mode):
            path = _api_path(rules, target)
            notebooks.append(
                {
                    "path": path,
                    "size": info.st_size,
                    "modified": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.st_mtime)),
                    "this_notebook": path == this_notebook,
                }
            )
    return {"folder": _api_path(rules, real), "notebooks": notebooks, "folders": folders}


async def list_notebooks(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    rules = _svc(ctx).file_rules()
    folder = args.get("folder")
    if folder is None:
        folder = posixpath.dirname(ctx.notebook) or "."
    try:
        structured = await asyncio.to_thread(_listing, rules, folder, ctx.notebook)
    except FileRefused as exc:
        return _refused(exc)
    notebooks, folders = structured["notebooks"], structured["folders"]
    lines = [
        f"folder: {structured['folder'] or '(the server root)'}: {len(notebooks)} notebook(s), {len(folders)} folder(s)"
    ]
    for nb in notebooks:
        mark = " (this notebook)" if nb["this_notebook"] else ""
        lines.append(f"- {nb['path']}{mark}: {nb['size']} bytes, modified {nb['modified']}")
    lines += [f"- {f}/ (folder)" for f in folders]
    if len(notebooks) + len(folders) >= MAX_ENTRIES:
        lines.append(f"… stopped at {MAX_ENTRIES} entries")
        structured["stopped"] = MAX_ENTRIES
    return text_result("\n".join(lines), structured)


# -- read ---------------------------------------------------------------------------------------------------
async def read_notebook(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    import nbformat

    svc = _svc(ctx)
    rules = svc.file_rules()
    try:
        full, real, path = _notebook_path(rules, args["path"])
    except FileRefused as exc:
        return _refused(exc)
    live = await svc.notebooks.open_if_live(path)
    if live is not None:
        cells, via = live.cells(), "live"
    else:
        try:
            text = rules.read(full)
        except FileRefused as exc:
            return _refused(exc)
        try:
            nb = nbformat.reads(text, as_version=4)  # type: ignore[no-untyped-call]  # nbformat is untyped
        except Exception as exc:
            return error_result(f"{path} is not a readable notebook: {type(exc).__name__}: {exc}", kind="failed")
        cells = []
        for c in nb.cells:
            cell = dict(c)
            src = cell.get("source", "")
            cell["source"] = "".join(src) if isinstance(src, list) else src
            cells.append(cell)
        via = "file"
    ids = args.get("cell_ids")
    if ids:
        by_id = {c.get("id"): (i, c) for i, c in enumerate(cells)}
        missing = [cid for cid in ids if cid not in by_id]
        if missing:
            return error_result(f"no cell with id {', '.join(map(repr, missing))} in {path}", kind="not_found")
        chosen = [by_id[cid] for cid in ids]
    else:
        chosen = list(enumerate(cells))
    include_outputs = args.get("include_outputs", True)
    budget = svc.config.output_budget
    parts = [f"notebook: {path} ({len(cells)} cells; via {via}; read only)"]
    rows: list[dict[str, Any]] = []
    used = 0
    stopped = ""
    for i, c in chosen:
        count = f" [{c.get('execution_count')}]" if c.get("execution_count") is not None else ""
        block = f"--- cell {i} id={c.get('id')} {c.get('cell_type')}{count}\n{c.get('source', '')}"
        outputs = render_outputs(c.get("outputs") or [], budget, None) if include_outputs and c.get("outputs") else None
        if outputs:
            block += "\n--- outputs\n" + outputs
        if used + len(block) > READ_BUDGET and rows:
            stopped = f"… stopped before cell {i} (id={c.get('id')}): the answer reached {READ_BUDGET} characters; ask for cell_ids"
            parts.append(stopped)
            break
        parts.append(block)
        used += len(block)
        row = {
            "id": c.get("id"),
            "index": i,
            "type": c.get("cell_type"),
            "source": c.get("source", ""),
            "execution_count": c.get("execution_count"),
        }
        if outputs:
            row["outputs"] = outputs
        rows.append(row)
    structured: dict[str, Any] = {"path": path, "cell_count": len(cells), "via": via, "cells": rows}
    if stopped:
        structured["stopped"] = stopped
    return text_result("\n".join(parts), structured)


# -- create -------------------------------------------------------------------------------------------------
def _check_new(rules: FileRules, real: str, shown: str) -> None:
    if os.path.lexists(real):
        raise FileRefused("exists", f"{shown} exists already: notebooks are never overwritten; choose another name")
    parent = os.path.dirname(real)
    if not os.path.isdir(parent):
        raise FileRefused(
            "missing",
            f"the folder {_api_path(rules, parent) or '/'} does not exist; create the notebook in an existing folder",
            missing=True,
        )


def _unreserve(real: str) -> None:
    with contextlib.suppress(OSError):
        if os.path.getsize(real) == 0:
            os.unlink(real)  # only our own empty reservation


def _reserve(rules: FileRules, real: str, shown: str) -> None:
    """Take the name: create the file empty, exclusively (never replacing what is there, whatever raced), and
    check the created file's real path again."""
    rules.check(os.path.realpath(real), shown)
    try:
        fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise FileRefused(
            "exists", f"{shown} exists already: notebooks are never overwritten; choose another name"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefused(
                "symlink_race", f"{shown} became a symlink while it was created; nothing was written"
            ) from None
        raise FileRefused("unwritable", f"{shown} cannot be created: {exc.strerror}") from None
    try:
        with contextlib.suppress(OSError):
            rules.check(os.readlink(f"/proc/self/fd/{fd}"), shown)
    except FileRefused:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(real)
        raise
    os.close(fd)


async def create_notebook(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    import nbformat

    svc = _svc(ctx)
    rules = svc.file_rules()
    try:
        _, real, path = _notebook_path(rules, args["path"])
    except FileRefused as exc:
        return _refused(exc)
    try:
        await asyncio.to_thread(_check_new, rules, real, path)
    except FileRefused as exc:
        return _refused(exc)
    specs = args.get("cells") or []
    cells = []
    for spec in specs:
        kind = spec.get("cell_type", "code")
        maker = {
            "code": nbformat.v4.new_code_cell,
            "markdown": nbformat.v4.new_markdown_cell,
            "raw": nbformat.v4.new_raw_cell,
        }[kind]
        cell = maker(spec.get("source", ""))  # type: ignore[no-untyped-call]  # nbformat is untyped
        cell["id"] = new_cell_id()
        cells.append(cell)
    preview = f"A new notebook {path} with {len(cells)} cell(s)" + ("" if cells else " (empty)")
    for cell in cells[:20]:
        preview += f"\n- {cell.cell_type}: {first_line(cell.source, 80)!r}"
    if len(cells) > 20:
        preview += f"\n… and {len(cells) - 20} more"
    refusal = await gate(
        ctx, "client_create_notebook", title=f"Create the notebook {path}", kind="edit", arguments=args, preview=preview
    )
    if refusal is not None:
        return refusal
    nb = nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]  # nbformat is untyped
    kid = await ctx.kernel_id()
    name = svc.kernels.kernel_name(kid) if kid else None
    language = (await svc.kernels.language_async(kid) if kid else None) or "python"
    nb.metadata["kernelspec"] = {"name": name or "python3", "display_name": name or "Python 3", "language": language}
    nb.cells = cells
    try:
        await asyncio.to_thread(_reserve, rules, real, path)  # the folder may have changed while the user was asked
    except FileRefused as exc:
        return _refused(exc)
    try:
        await ensure_async(
            svc.serverapp.contents_manager.save({"type": "notebook", "format": "json", "content": nb}, path)
        )
    except Exception as exc:
        await asyncio.to_thread(_unreserve, real)
        return error_result(f"{path} could not be saved: {type(exc).__name__}: {exc}", kind="failed")
    ids = [c["id"] for c in cells]
    shown = ids[:IDS_SHOWN]
    more = f" and {len(ids) - len(shown)} more" if len(ids) > len(shown) else ""
    return text_result(
        f"created {path} with {len(ids)} cell(s)" + (f": {', '.join(shown)}{more}" if ids else ""),
        {"path": path, "cell_ids": shown, "cell_count": len(ids)},
    )


def notebook_file_tools() -> list[ToolDef]:
    path = {"type": "string", "minLength": 1, "maxLength": 4096}
    return [
        ToolDef(
            name="client_list_notebooks",
            title="List notebooks",
            description=(
                "The notebooks (.ipynb) and subfolders of a folder of the project: folder relative to the server root "
                "(default: this notebook's folder). Hidden files and Jupyter's own folders are not listed."
            ),
            input_schema={
                "type": "object",
                "properties": {"folder": {"type": "string", "maxLength": 4096}},
                "additionalProperties": False,
            },
            executor=list_notebooks,
        ),
        ToolDef(
            name="client_read_notebook",
            title="Read another notebook",
            description=(
                "Read another notebook of the project (read only): its cells' sources and outputs, all or by "
                "cell_ids. path is relative to the server root (or absolute inside it). To change this notebook "
                "use the cell tools; other notebooks are not edited."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "path": path,
                    "cell_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 200},
                    "include_outputs": {"type": "boolean"},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            executor=read_notebook,
        ),
        ToolDef(
            name="client_create_notebook",
            title="Create a notebook",
            description=(
                "Create a new notebook at path (relative to the server root, in an existing folder, ending in "
                ".ipynb), with optional cells [{source, cell_type}]. Never overwrites: an existing path is refused."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "path": path,
                    "cells": {
                        "type": "array",
                        "maxItems": 200,
                        "items": {
                            "type": "object",
                            "properties": {
                                "source": {"type": "string"},
                                "cell_type": {"type": "string", "enum": CELL_TYPES},
                            },
                            "required": ["source"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            executor=create_notebook,
            read_only=False,
            destructive=True,
            own_timeouts=True,
        ),
    ]
