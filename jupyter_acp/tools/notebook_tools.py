"""Notebook tools: outline, read, insert, edit (stale-edit refusal), delete, move, execute cells.

Every tool is bound to the session's notebook; cells are addressed by id (an index is a
convenience).  Mutating calls are one change of the live document each, tagged with the agent's
origin (see ``notebook/document.py``), and answer the cell id with a short diff.
"""

from __future__ import annotations

from typing import Any, cast

from ..kernels import KernelUnavailable
from ..notebook import NotebookError, execute_cell, new_cell_id, origin_for
from .render import error_of, first_line, image_refs, output_summary, render_outputs, short_diff
from .services import ToolServices, gate
from .surface import ToolContext, ToolDef, error_result, text_result

CELL_TYPES = ["code", "markdown", "raw"]


def _svc(ctx: ToolContext) -> ToolServices:
    return ctx.services


def _origin(ctx: ToolContext) -> str:
    return origin_for(ctx.session.id, ctx.turn_id)


# -- availability ----------------------------------------------------------------------------------
async def has_kernel(ctx: ToolContext) -> bool:
    return await ctx.kernel_id() is not None


async def writable(ctx: ToolContext) -> bool:
    if "writable" not in ctx.cache:
        ctx.cache["writable"] = await _svc(ctx).notebooks.writable(ctx.notebook)
    return ctx.cache["writable"]


async def writable_with_kernel(ctx: ToolContext) -> bool:
    return await writable(ctx) and await has_kernel(ctx)


# -- outline -----------------------------------------------------------------------------------------
async def notebook_outline(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    nb = await svc.notebooks.open(ctx.notebook)
    cells = nb.cells()
    start = max(int(args.get("start", 0)), 0)
    limit = int(args.get("limit", 100))
    kernel: dict[str, Any] | None = None
    kid = await ctx.kernel_id()
    if kid is not None:
        kernel = {
            "id": kid,
            "name": svc.kernels.kernel_name(kid),
            "language": await svc.kernels.language_async(kid),
            "state": svc.kernels.execution_state(kid),
        }
    rows = []
    lines = []
    for i, c in enumerate(cells[start : start + limit], start):
        src = c.get("source", "")
        outs = c.get("outputs") or []
        row = {
            "id": c.get("id"),
            "index": i,
            "type": c.get("cell_type"),
            "execution_count": c.get("execution_count"),
            "first_line": first_line(src),
            "line_count": src.count("\n") + 1 if src else 0,
            "outputs": output_summary(outs),
        }
        rows.append(row)
        exec_part = f" [{row['execution_count']}]" if row["execution_count"] is not None else ""
        out_part = f" -> {row['outputs']}" if row["outputs"] else ""
        lines.append(
            f"{i:>3} {row['id']} {row['type']}{exec_part} ({row['line_count']} lines) {row['first_line']!r}{out_part}"
        )
    end = start + len(rows)
    header = [
        f"notebook: {ctx.notebook} ({len(cells)} cells, {'unsaved changes' if nb.dirty() else 'saved'}; via {nb.kind})",
        "kernel: "
        + (
            f"{kernel['name']} ({kernel['language']}, {kernel['state']})"
            if kernel
            else "none (no variable or execution tools)"
        ),
        f"cells {start}..{end - 1}:" if rows else "no cells in this range",
    ]
    if end < len(cells):
        lines.append(f"… {len(cells) - end} more cells: call again with start={end}")
    structured = {
        "path": ctx.notebook,
        "kernel": kernel,
        "dirty": nb.dirty(),
        "cell_count": len(cells),
        "start": start,
        "next_start": end if end < len(cells) else None,
        "cells": rows,
        "via": nb.kind,
    }
    return text_result("\n".join(header + lines), structured)


# -- read ----------------------------------------------------------------------------------------------
async def read_cells(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    nb = await svc.notebooks.open(ctx.notebook)
    cells = nb.cells()
    ids = args.get("cell_ids")
    if ids:
        by_id = {c.get("id"): (i, c) for i, c in enumerate(cells)}
        missing = [cid for cid in ids if cid not in by_id]
        if missing:
            return error_result(
                f"no cell with id {', '.join(map(repr, missing))} in {ctx.notebook}; call client_notebook_outline for the current ids",
                kind="not_found",
            )
        chosen = [by_id[cid] for cid in ids]
    else:
        start = max(int(args.get("start", 0)), 0)
        end = int(args.get("end", start + 10))
        chosen = [(i, cells[i]) for i in range(start, min(end, len(cells)))]
        if not chosen:
            return error_result(
                f"no cells in index range {start}..{end} (the notebook has {len(cells)})", kind="not_found"
            )
    budget = int(args.get("output_budget", svc.config.output_budget))
    total_budget = int(args.get("max_chars", 40_000))
    include_outputs = args.get("include_outputs", True)
    images: list[dict[str, Any]] = []
    parts: list[str] = []
    structured_cells = []
    stopped = ""
    used = 0
    for i, c in chosen:
        src = c.get("source", "")
        cid = c.get("id")
        exec_part = f" [{c.get('execution_count')}]" if c.get("execution_count") is not None else ""
        block = f"--- cell {i} id={cid} {c.get('cell_type')}{exec_part}\n{src}"
        outputs_text = None
        first_image = len(images)
        if include_outputs and c.get("outputs"):
            outputs_text = render_outputs(c["outputs"], budget, images)
            block += "\n--- outputs\n" + outputs_text
        if used + len(block) > total_budget and parts:
            note = f"… stopped before cell {i} (id={cid}): the answer reached {total_budget} characters; read it alone"
            parts.append(note)
            stopped = note
            del images[first_image:]
            break
        parts.append(block)
        used += len(block)
        svc.saw(ctx.session.id, cast(str, cid), src)
        entry = {
            "id": cid,
            "index": i,
            "type": c.get("cell_type"),
            "source": src,
            "execution_count": c.get("execution_count"),
        }
        if outputs_text is not None:
            # some agents (codex, claude) show the model only structuredContent: outputs must be there too
            entry["outputs"] = outputs_text
            refs = image_refs(images, first_image)
            if refs:
                entry["images"] = refs
        structured_cells.append(entry)
    structured: dict[str, Any] = {"cells": structured_cells}
    if stopped:
        structured["stopped"] = stopped
    result = text_result("\n".join(parts), structured)
    result["content"].extend(images)
    return result


# -- insert --------------------------------------------------------------------------------------------
def _position(cells: list[dict[str, Any]], args: dict[str, Any]) -> int:
    if "after_cell_id" in args or "before_cell_id" in args:
        key = "after_cell_id" if "after_cell_id" in args else "before_cell_id"
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


async def insert_cell(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    nb = await svc.notebooks.open(ctx.notebook)
    try:
        index = _position(nb.cells(), args)
    except NotebookError as exc:
        return error_result(str(exc), kind="not_found")
    cell_type = args.get("cell_type", "code")
    source = args["source"]
    cid = new_cell_id()
    cell: dict[str, Any] = {"id": cid, "cell_type": cell_type, "source": source, "metadata": {}}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    await nb.insert(index, cell, _origin(ctx))
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
    await nb.set_source(cid, new, _origin(ctx))
    svc.saw(ctx.session.id, cid, new)
    return text_result(f"edited cell {cid}\n{diff}", {"cell_id": cid, "diff": diff})


# -- delete ------------------------------------------------------------------------------------------------
async def delete_cells(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    ids: list[str] = list(dict.fromkeys(args["cell_ids"]))
    nb = await svc.notebooks.open(ctx.notebook)
    by_id = {c.get("id"): c for c in nb.cells()}
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
    present = {c.get("id") for c in nb.cells()}
    gone = [cid for cid in ids if cid not in present]
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
    await nb.move(cid, to_index, _origin(ctx))
    return text_result(
        f"moved cell {cid} from index {src_index} to {to_index}", {"cell_id": cid, "from": src_index, "to": to_index}
    )


# -- execute -------------------------------------------------------------------------------------------------
def _timeout(svc: ToolServices, args: dict[str, Any]) -> float:
    t = float(args.get("timeout", svc.config.execute_timeout))
    return max(1.0, min(t, svc.config.max_execute_timeout))


async def execute_cells(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    ids: list[str] = args["cell_ids"]
    kid = await ctx.kernel_id()
    if kid is None:
        return error_result("the notebook has no kernel; ask the user to start one", kind="no_kernel")
    nb = await svc.notebooks.open(ctx.notebook)
    by_id = {c.get("id"): c for c in nb.cells()}
    missing = [cid for cid in ids if cid not in by_id]
    if missing:
        return error_result(f"nothing was run: no cell with id {', '.join(map(repr, missing))}", kind="not_found")
    preview = "\n\n".join(f"# cell {cid}\n{by_id[cid].get('source', '')}" for cid in ids)[:2000]
    refusal = await gate(
        ctx,
        "client_execute_cells",
        title=f"Run {len(ids)} cell(s) in the kernel",
        kind="execute",
        arguments=args,
        preview=preview,
    )
    if refusal is not None:
        return refusal
    timeout = _timeout(svc, args)
    budget = svc.config.output_budget
    images: list[dict[str, Any]] = []
    parts: list[str] = []
    results: list[dict[str, Any]] = []
    not_run: list[str] = []
    failed = False
    for n, cid in enumerate(ids):
        try:
            nb = await svc.notebooks.open(ctx.notebook)
            res = await execute_cell(svc.kernels, kid, nb, cid, timeout=timeout)
        except (KernelUnavailable, NotebookError) as exc:
            if not n:
                return error_result(str(exc), kind="kernel")
            # what the cells that did run printed is part of the answer, in both forms
            failed_result = error_result(
                f"{exc} (ran {n} of {len(ids)} cells first)\n" + "\n".join(parts),
                kind="kernel",
                structured={"results": results},
            )
            failed_result["content"].extend(images)
            return failed_result
        outs = res.get("outputs", [])
        head = f"--- cell {cid}: {res['status']}" + (
            f" [{res['execution_count']}]" if res.get("execution_count") else ""
        )
        if res["status"] == "timeout":
            head += f" (still running after {timeout:g} s: the kernel was interrupted)"
        if res.get("reason"):
            head += f" ({res['reason']})"
        first_image = len(images)
        body = render_outputs(outs, budget, images)
        parts.append(head + ("\n" + body if body else ""))
        # the model of an agent that shows it only structuredContent (claude, codex) must see the same
        entry = {k: v for k, v in res.items() if k != "outputs"}
        if res["status"] != "skipped":
            entry["outputs"] = body
        refs = image_refs(images, first_image)
        if refs:
            entry["images"] = refs
        err = error_of(outs)
        if err is not None:
            entry["error"] = err
        results.append(entry)
        if res["status"] in ("error", "timeout", "aborted"):
            failed = True
            rest = ids[n + 1 :]
            if rest:
                parts.append(f"stopped: {len(rest)} later cell(s) not run ({', '.join(rest)})")
                not_run = rest
            break
    structured: dict[str, Any] = {"results": results}
    if not_run:
        structured["not_run"] = not_run
    result = text_result("\n".join(parts), structured)
    result["content"].extend(images)
    if failed:
        result["isError"] = any(r["status"] == "timeout" for r in results)
    return result


TOOLS_DOC = "Cells are addressed by id (see client_notebook_outline)."


def notebook_tools() -> list[ToolDef]:
    id_list = {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 200}
    return [
        ToolDef(
            name="client_notebook_outline",
            title="Notebook outline",
            description=(
                "Outline of the notebook this conversation is bound to: its path, kernel (name, language, state), "
                "whether it has unsaved changes, and per cell its id, index, type, execution count, first line, line "
                "count and a summary of its outputs (kinds, error names). Paged: pass start/limit for big notebooks. "
                "Start here; then read cells by id with client_read_cells."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "start": {"type": "integer", "minimum": 0, "description": "first cell index (default 0)"},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 500,
                        "description": "cells per page (default 100)",
                    },
                },
                "additionalProperties": False,
            },
            executor=notebook_outline,
        ),
        ToolDef(
            name="client_read_cells",
            title="Read cells",
            description=(
                "Full source and outputs of cells, by id (cell_ids) or by index range (start, end exclusive). Text "
                "outputs are trimmed to output_budget characters each with a note of what was cut; images come as "
                "image blocks; errors with their traceback. Read a cell before replacing its whole source."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "cell_ids": id_list,
                    "start": {"type": "integer", "minimum": 0},
                    "end": {"type": "integer", "minimum": 0},
                    "include_outputs": {"type": "boolean", "description": "default true"},
                    "output_budget": {"type": "integer", "minimum": 100, "maximum": 100000},
                },
                "additionalProperties": False,
            },
            executor=read_cells,
        ),
        ToolDef(
            name="client_insert_cell",
            title="Insert a cell",
            description=(
                "Insert a new cell (code by default) into the notebook, at the end or at index / after_cell_id / "
                "before_cell_id. The user sees it at once. Answers the new cell's id. Does not run it: use "
                "client_execute_cells for that."
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
                "properties": {"cell_ids": id_list},
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
        ToolDef(
            name="client_execute_cells",
            title="Run cells",
            description=(
                "Run code cells by id, in order, in the notebook's kernel. Outputs and execution counts are written "
                "into the notebook (the user sees them) and returned. Stops at the first error. A run longer than "
                "timeout seconds (default 60) is interrupted. No stdin: input() fails."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "cell_ids": {**id_list, "maxItems": 50},
                    "timeout": {"type": "number", "minimum": 1, "maximum": 3600},
                },
                "required": ["cell_ids"],
                "additionalProperties": False,
            },
            executor=execute_cells,
            read_only=False,
            destructive=True,
            available=writable_with_kernel,
            own_timeouts=True,
        ),
    ]
