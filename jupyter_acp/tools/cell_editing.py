"""Editing tools: insert, edit (with the stale-edit refusal), delete and move cells.

Each is one change of the live document, tagged with the agent's origin (see ``notebook/document.py``),
and answers the cell id with a short diff; each asks the gate first (under the default ``ask`` the user sees the
change before it is made). Split from ``notebook_tools`` so the tools that change the notebook, with their
definitions, read as one job.
"""

from __future__ import annotations

from typing import Any

from ..notebook import NotebookError, new_cell_id
from .notebook_shared import CELL_TYPES, ID_LIST, _origin, _svc, writable
from .render import first_line, short_diff
from .services import gate
from .surface import ToolContext, ToolDef, error_result, text_result

#: characters of an inserted cell its card shows (the cut is marked)
PREVIEW_CHARS = 20_000


# -- insert --------------------------------------------------------------------------------------------
def _position(cells: list[dict[str, Any]], args: dict[str, Any], nb: Any = None) -> int:
    if "after_cell_id" in args or "before_cell_id" in args:
        key = "after_cell_id" if "after_cell_id" in args else "before_cell_id"
        if nb is not None:  # the notebook's own lookup (constant time on the live document), not a scan
            i = int(nb.find(args[key]))
            return i + 1 if key == "after_cell_id" else i
        for i, c in enumerate(cells):
            if c.get("id") == args[key]:
                return i + 1 if key == "after_cell_id" else i
        raise NotebookError(f"no cell with id {args[key]!r}; call client_notebook_outline for the current ids")
    if "index" in args:
        index = int(args["index"])
        if index < 0:
            index = len(cells) + 1 + index
        if not 0 <= index <= len(cells):
            raise NotebookError(f"index {args['index']} is outside 0..{len(cells)}")
        return index
    return len(cells)


def _where(args: dict[str, Any], index: int) -> str:
    if "after_cell_id" in args:
        return f"after cell {args['after_cell_id']}"
    if "before_cell_id" in args:
        return f"before cell {args['before_cell_id']}"
    return f"at index {index}" if "index" in args else "at the end"


async def insert_cell(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Insert a cell, asked under ``ask`` like any change of the notebook: an inserted cell is the agent's code in
    the user's notebook, which the user may run later without reading it again."""
    svc = _svc(ctx)
    nb = await svc.notebooks.open(ctx.notebook)
    try:
        index = _position(nb.cells(), args, nb)
    except NotebookError as exc:
        return error_result(str(exc), kind="not_found")
    cell_type = args.get("cell_type", "code")
    source = args["source"]
    refusal = await gate(
        ctx,
        "client_insert_cell",
        title=f"Insert a {cell_type} cell {_where(args, index)}",
        kind="edit",
        arguments=args,
        preview=short_diff("", source, PREVIEW_CHARS),
    )
    if refusal is not None:
        return refusal
    nb = await svc.notebooks.open(ctx.notebook)  # the user may have changed the notebook while we asked
    try:
        index = _position(nb.cells(), args)
    except NotebookError as exc:
        return error_result(f"nothing was inserted: {exc}", kind="not_found")
    cid = new_cell_id()
    cell: dict[str, Any] = {"id": cid, "cell_type": cell_type, "source": source, "metadata": {}}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    await nb.insert(index, cell, _origin(ctx), ctx.provenance)
    svc.saw(ctx.session.id, cid, source)
    diff = short_diff("", source)
    return text_result(
        f"inserted {cell_type} cell {cid} at index {index}\n{diff}",
        {"cell_id": cid, "index": index, "cell_type": cell_type, "diff": diff},
    )


# -- edit ------------------------------------------------------------------------------------------------
async def edit_cell(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    cid = args["cell_id"]
    nb = await svc.notebooks.open(ctx.notebook)
    try:
        current = nb.cells()[nb.find(cid)].get("source", "")
    except NotebookError as exc:
        return error_result(str(exc), kind="not_found")
    seen = svc.last_seen(ctx.session.id, cid)
    whole = "source" in args
    if whole == ("old_string" in args):
        return error_result(
            "give either 'source' (the whole new source) or 'old_string' and 'new_string'", kind="invalid_arguments"
        )
    if (seen is not None and seen != current) or (seen is None and whole):
        svc.saw(ctx.session.id, cid, current)
        why = (
            "the user changed this cell since you last read it"
            if seen is not None
            else "you have not read this cell yet, so replacing its whole source could overwrite work you have not seen"
        )
        return error_result(
            f"edit of cell {cid} refused: {why}. Its current source is below; base your edit on it and call again.\n"
            f"--- current source of {cid}\n{current}",
            kind="stale",
            structured={"cell_id": cid, "current_source": current},
        )
    if whole:
        new = args["source"]
    else:
        old_s, new_s = args["old_string"], args.get("new_string", "")
        count = current.count(old_s) if old_s else 0
        if count == 0:
            svc.saw(ctx.session.id, cid, current)
            return error_result(
                f"old_string was not found in cell {cid}. Its current source:\n{current}",
                kind="not_found",
                structured={"cell_id": cid, "current_source": current},
            )
        if count > 1 and not args.get("replace_all", False):
            return error_result(
                f"old_string occurs {count} times in cell {cid}; add context to make it unique or pass replace_all=true",
                kind="ambiguous",
            )
        new = current.replace(old_s, new_s) if args.get("replace_all", False) else current.replace(old_s, new_s, 1)
    diff = short_diff(current, new)
    refusal = await gate(ctx, "client_edit_cell", title=f"Edit cell {cid}", kind="edit", arguments=args, preview=diff)
    if refusal is not None:
        return refusal
    nb = await svc.notebooks.open(ctx.notebook)  # the user may have typed while we asked
    try:
        now = nb.cells()[nb.find(cid)].get("source", "")
    except NotebookError as exc:
        return error_result(str(exc), kind="not_found")
    if now != current:
        svc.saw(ctx.session.id, cid, now)
        return error_result(
            f"edit of cell {cid} refused: the user changed it while the permission was asked. Current source:\n{now}",
            kind="stale",
            structured={"cell_id": cid, "current_source": now},
        )
    await nb.set_source(cid, new, _origin(ctx), ctx.provenance)
    svc.saw(ctx.session.id, cid, new)
    return text_result(f"edited cell {cid}\n{diff}", {"cell_id": cid, "diff": diff})


# -- delete ------------------------------------------------------------------------------------------------
def _has(nb: Any, cell_id: str) -> bool:
    try:
        nb.cell(cell_id)  # one lookup (the live index, or the other backends' map of their cells)
    except NotebookError:
        return False
    return True


async def delete_cells(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    ids: list[str] = list(dict.fromkeys(args["cell_ids"]))
    nb = await svc.notebooks.open(ctx.notebook)
    by_id = {cid: nb.cell(cid)[1] for cid in ids if _has(nb, cid)}  # one lookup each, not a map of every cell
    missing = [cid for cid in ids if cid not in by_id]
    if missing:
        return error_result(
            f"nothing was deleted: no cell with id {', '.join(map(repr, missing))}; call client_notebook_outline for the current ids",
            kind="not_found",
        )
    preview = "\n".join(f"- {cid}: {first_line(by_id[cid].get('source', ''), 80)!r}" for cid in ids)
    refusal = await gate(
        ctx, "client_delete_cells", title=f"Delete {len(ids)} cell(s)", kind="delete", arguments=args, preview=preview
    )
    if refusal is not None:
        return refusal
    nb = await svc.notebooks.open(ctx.notebook)
    gone = [cid for cid in ids if not _has(nb, cid)]
    if gone:
        return error_result(f"nothing was deleted: cells {gone} disappeared meanwhile", kind="not_found")
    await nb.delete(ids, _origin(ctx))
    diff = "\n".join(f"--- deleted {cid}\n" + short_diff(by_id[cid].get("source", ""), "", 600) for cid in ids)
    return text_result(f"deleted {len(ids)} cell(s): {', '.join(ids)}\n{diff}", {"cell_ids": ids, "diff": diff})


# -- move ------------------------------------------------------------------------------------------------
async def move_cell(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    cid = args["cell_id"]
    nb = await svc.notebooks.open(ctx.notebook)
    cells = nb.cells()
    try:
        src_index = nb.find(cid)
        rest = [c for c in cells if c.get("id") != cid]
        if "after_cell_id" in args or "before_cell_id" in args:
            anchor = args.get("after_cell_id", args.get("before_cell_id"))
            if anchor == cid:
                return error_result("a cell cannot be moved relative to itself", kind="invalid_arguments")
            to_index = _position(rest, args)
        elif "to_index" in args:
            to_index = int(args["to_index"])
            if not 0 <= to_index < len(cells):
                return error_result(f"to_index {to_index} is outside 0..{len(cells) - 1}", kind="invalid_arguments")
        else:
            return error_result("give to_index, after_cell_id or before_cell_id", kind="invalid_arguments")
    except NotebookError as exc:
        return error_result(str(exc), kind="not_found")
    refusal = await gate(
        ctx, "client_move_cell", title=f"Move cell {cid} to index {to_index}", kind="move", arguments=args
    )
    if refusal is not None:
        return refusal
    nb = await svc.notebooks.open(ctx.notebook)
    await nb.move(cid, to_index, _origin(ctx), ctx.provenance)
    return text_result(
        f"moved cell {cid} from index {src_index} to {to_index}", {"cell_id": cid, "from": src_index, "to": to_index}
    )


def editing_tools() -> list[ToolDef]:
    return [
        ToolDef(
            name="client_insert_cell",
            title="Insert a cell",
            description=(
                "Insert a new cell (code by default) into the notebook, at the end or at index / after_cell_id / "
                "before_cell_id. The user may be asked first (it is a change of their notebook); once inserted they "
                "see it at once. Answers the new cell's id. Does not run it: use client_execute_cells for that."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "source": {"type": "string"},
                    "cell_type": {"type": "string", "enum": CELL_TYPES},
                    "index": {"type": "integer", "description": "position; negative counts from the end"},
                    "after_cell_id": {"type": "string"},
                    "before_cell_id": {"type": "string"},
                },
                "required": ["source"],
                "additionalProperties": False,
            },
            executor=insert_cell,
            read_only=False,
            available=writable,
            own_timeouts=True,
        ),
        ToolDef(
            name="client_edit_cell",
            title="Edit a cell",
            description=(
                "Change a cell's source: either the whole new `source`, or replace `old_string` by `new_string` "
                "(unique unless replace_all). Refused, with the current source, when the user changed the cell since "
                "you last read it: re-base your edit on that source. Answers a short diff."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "cell_id": {"type": "string"},
                    "source": {"type": "string"},
                    "old_string": {"type": "string", "minLength": 1},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean"},
                },
                "required": ["cell_id"],
                "additionalProperties": False,
            },
            executor=edit_cell,
            read_only=False,
            destructive=True,
            available=writable,
            own_timeouts=True,
        ),
        ToolDef(
            name="client_delete_cells",
            title="Delete cells",
            description="Delete cells by id. Every id is checked first: if one is unknown, nothing is deleted.",
            input_schema={
                "type": "object",
                "properties": {"cell_ids": ID_LIST},
                "required": ["cell_ids"],
                "additionalProperties": False,
            },
            executor=delete_cells,
            read_only=False,
            destructive=True,
            available=writable,
            own_timeouts=True,
        ),
        ToolDef(
            name="client_move_cell",
            title="Move a cell",
            description="Move a cell (by id) to to_index, or right after after_cell_id, or right before before_cell_id.",
            input_schema={
                "type": "object",
                "properties": {
                    "cell_id": {"type": "string"},
                    "to_index": {"type": "integer", "minimum": 0},
                    "after_cell_id": {"type": "string"},
                    "before_cell_id": {"type": "string"},
                },
                "required": ["cell_id"],
                "additionalProperties": False,
            },
            executor=move_cell,
            read_only=False,
            destructive=True,
            available=writable,
            own_timeouts=True,
        ),
    ]
