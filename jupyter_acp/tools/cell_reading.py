"""Reading tools: the notebook's outline and its cells' sources and outputs, changing nothing.

Split from ``notebook_tools`` so the tools that only read (and are offered even on a read-only
notebook) sit apart from the ones that change it; each tool's definition is next to its executor.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, cast

from ..notebook import NotebookError
from .notebook_shared import ID_LIST, _svc
from .render import first_line, image_refs, output_summary, render_outputs
from .surface import ToolContext, ToolDef, error_result, text_result

# -- outline -----------------------------------------------------------------------------------------
#: notebook path -> (the cells list its pages were built from, {(start, limit): (rows, lines)}).  The live
#: backend hands out one shared list until the document changes (``live.LiveIndex``), so the
#: rows of an unchanged notebook are built once, not on every call; a change gives a new list and a rebuild.
#: The list is held (so an identity match can never be a recycled id), one per notebook and only for the
#: live backend (the others give a fresh list per read: nothing to keep); a few notebooks and pages.
_OUTLINE_ROWS: OrderedDict[str, tuple[Any, dict[tuple[int, int], tuple[list[dict[str, Any]], list[str]]]]] = (
    OrderedDict()
)
_OUTLINE_ROWS_KEPT = 64  # as many notebooks as NotebookAccess.cells_kept
_OUTLINE_PAGES_KEPT = 16


def _outline_rows(
    path: str, cells: list[dict[str, Any]], start: int, limit: int, keep: bool = True
) -> tuple[list[dict[str, Any]], list[str]]:
    """The outline's rows and their text lines, in one pass (kept while ``cells`` is the same list)."""
    entry = _OUTLINE_ROWS.get(path)
    if entry is not None and entry[0] is cells:
        hit = entry[1].get((start, limit))
        if hit is not None:
            _OUTLINE_ROWS.move_to_end(path)
            return hit
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    for i, c in enumerate(cells[start : start + limit], start):
        src = c.get("source") or ""
        cid = c.get("id")
        ctype = c.get("cell_type")
        count = c.get("execution_count")
        head = first_line(src)
        n_lines = src.count("\n") + 1 if src else 0
        outs = c.get("outputs")
        summary = output_summary(outs) if outs else ""
        rows.append(
            {
                "id": cid,
                "index": i,
                "type": ctype,
                "execution_count": count,
                "first_line": head,
                "line_count": n_lines,
                "outputs": summary,
            }
        )
        exec_part = f" [{count}]" if count is not None else ""
        out_part = f" -> {summary}" if summary else ""
        lines.append(f"{i:>3} {cid} {ctype}{exec_part} ({n_lines} lines) {head!r}{out_part}")
    if keep:
        if entry is None or entry[0] is not cells:
            entry = _OUTLINE_ROWS[path] = (cells, {})
        if len(entry[1]) >= _OUTLINE_PAGES_KEPT:
            entry[1].clear()
        entry[1][(start, limit)] = (rows, lines)
        _OUTLINE_ROWS.move_to_end(path)
        while len(_OUTLINE_ROWS) > _OUTLINE_ROWS_KEPT:
            _OUTLINE_ROWS.popitem(last=False)
    return rows, lines


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
    rows, lines = _outline_rows(ctx.notebook, cells, start, limit, keep=nb.kind == "live")
    end = start + len(rows)
    dirty = nb.dirty()
    header = [
        f"notebook: {ctx.notebook} ({len(cells)} cells, {'unsaved changes' if dirty else 'saved'}; via {nb.kind})",
        "kernel: "
        + (
            f"{kernel['name']} ({kernel['language']}, {kernel['state']})"
            if kernel
            else "none (no variable or execution tools)"
        ),
        f"cells {start}..{end - 1}:" if rows else "no cells in this range",
    ]
    more = [f"… {len(cells) - end} more cells: call again with start={end}"] if end < len(cells) else []
    structured = {
        "path": ctx.notebook,
        "kernel": kernel,
        "dirty": dirty,
        "cell_count": len(cells),
        "start": start,
        "next_start": end if end < len(cells) else None,
        "cells": list(rows),  # the rows are shared with the cache: the list is this answer's own
        "via": nb.kind,
    }
    return text_result("\n".join(header + lines + more), structured)


# -- read ----------------------------------------------------------------------------------------------
async def read_cells(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    nb = await svc.notebooks.open(ctx.notebook)
    cells = nb.cells()
    ids = args.get("cell_ids")
    if ids:
        chosen = []
        missing = []
        for cid in ids:  # one lookup each (constant time on the live document), not a map of every cell
            try:
                chosen.append(nb.cell(cid))
            except NotebookError:
                missing.append(cid)
        if missing:
            return error_result(
                f"no cell with id {', '.join(map(repr, missing))} in {ctx.notebook}; call client_notebook_outline for the current ids",
                kind="not_found",
            )
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


def reading_tools() -> list[ToolDef]:
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
                    "cell_ids": ID_LIST,
                    "start": {"type": "integer", "minimum": 0},
                    "end": {"type": "integer", "minimum": 0},
                    "include_outputs": {"type": "boolean", "description": "default true"},
                    "output_budget": {"type": "integer", "minimum": 100, "maximum": 100000},
                },
                "additionalProperties": False,
            },
            executor=read_cells,
        ),
    ]
