"""Small changes of cells: replace one piece of a cell's source, clear outputs.

``client_replace_in_cell`` exists so a model changes one line of a 200-line cell without sending the cell
back: the old text must occur exactly once (else nothing changes and the answer says how often, and where),
and the card the user approves shows the diff. ``client_clear_outputs`` empties outputs and execution
counts (what the notebook's own "Clear Outputs" does). Both are one change of the document, tagged with
the agent's origin (revertable with the turn), and ask the one gate first.

Their own module, beside ``cell_editing`` (insert, edit, delete, move), so each job reads on its own.
"""

from __future__ import annotations

from typing import Any

from ..notebook import NotebookError
from .notebook_shared import ID_LIST, _origin, _svc, writable
from .render import output_summary, short_diff
from .services import gate
from .surface import ToolContext, ToolDef, error_result, text_result

#: cell ids named in an answer's text (and its structuredContent alike); the count is always given
IDS_SHOWN = 50


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _occurrences(text: str, needle: str) -> list[int]:
    """Line numbers (1-based) where each occurrence of ``needle`` starts (overlapping ones too)."""
    lines, start = [], text.find(needle)
    while start != -1:
        lines.append(_line_of(text, start))
        start = text.find(needle, start + 1)
    return lines


# -- replace ---------------------------------------------------------------------------------------------------
async def replace_in_cell(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    cid, old, new = args["cell_id"], args["old"], args["new"]
    if old == new:
        return error_result("old and new are the same text: nothing to change", kind="invalid_arguments")
    nb = await svc.notebooks.open(ctx.notebook)
    try:
        _, cell = nb.cell(cid)
    except NotebookError as exc:
        return error_result(str(exc), kind="not_found")
    current = cell.get("source", "")
    where = _occurrences(current, old)
    if len(where) != 1:
        if not where:
            svc.saw(ctx.session.id, cid, current)
            return error_result(
                f"nothing was changed: the old text occurs 0 times in cell {cid}. Its current source is below; "
                f"copy the old text from it exactly.\n--- current source of {cid}\n{current}",
                kind="not_found",
                structured={"cell_id": cid, "occurrences": 0, "current_source": current},
            )
        lines = ", ".join(map(str, where[:20]))
        return error_result(
            f"nothing was changed: the old text occurs {len(where)} times in cell {cid} (starting on lines {lines}); "
            "include more of the surrounding text so it occurs exactly once",
            kind="ambiguous",
            structured={"cell_id": cid, "occurrences": len(where), "lines": where[:20]},
        )
    updated = current.replace(old, new, 1)
    diff = short_diff(current, updated)
    refusal = await gate(
        ctx, "client_replace_in_cell", title=f"Edit cell {cid}", kind="edit", arguments=args, preview=diff
    )
    if refusal is not None:
        return refusal
    nb = await svc.notebooks.open(ctx.notebook)  # the user may have typed while we asked
    try:
        _, cell = nb.cell(cid)
    except NotebookError as exc:
        return error_result(str(exc), kind="not_found")
    now = cell.get("source", "")
    if now != current:
        svc.saw(ctx.session.id, cid, now)
        return error_result(
            f"edit of cell {cid} refused: the user changed it while the permission was asked; nothing was changed. "
            f"Current source:\n{now}",
            kind="stale",
            structured={"cell_id": cid, "current_source": now},
        )
    await nb.set_source(cid, updated, _origin(ctx), ctx.provenance)
    svc.saw(ctx.session.id, cid, updated)
    return text_result(
        f"edited cell {cid}: replaced the text on line {where[0]}\n{diff}",
        {"cell_id": cid, "line": where[0], "diff": diff},
    )


# -- clear outputs ---------------------------------------------------------------------------------------------
async def clear_outputs(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    nb = await svc.notebooks.open(ctx.notebook)
    asked: list[str] | None = list(dict.fromkeys(args["cell_ids"])) if args.get("cell_ids") else None
    if asked is not None:
        chosen = []
        missing = []
        for cid in asked:
            try:
                chosen.append(nb.cell(cid)[1])
            except NotebookError:
                missing.append(cid)
        if missing:
            return error_result(
                f"nothing was cleared: no cell with id {', '.join(map(repr, missing))}; call client_notebook_outline "
                "for the current ids",
                kind="not_found",
            )
    else:
        chosen = nb.cells()
    targets = [
        c for c in chosen if c.get("cell_type") == "code" and (c.get("outputs") or c.get("execution_count") is not None)
    ]
    ids = [str(c.get("id")) for c in targets]
    if not ids:
        which = "these cells have" if asked is not None else "no code cell of the notebook has"
        return text_result(f"nothing to clear: {which} no outputs or execution counts", {"cleared": [], "count": 0})
    shown = ids[:IDS_SHOWN]
    preview = "\n".join(
        f"- {c.get('id')}: {output_summary(c.get('outputs') or []) or 'an execution count'}" for c in targets[:20]
    )
    if len(targets) > 20:
        preview += f"\n… and {len(targets) - 20} more cells"
    preview += "\nOutputs come back only by running the cells again (or by reverting this turn)."
    refusal = await gate(
        ctx,
        "client_clear_outputs",
        title=f"Clear the outputs of {len(ids)} cell(s)",
        kind="delete",
        arguments=args,
        preview=preview,
    )
    if refusal is not None:
        return refusal
    nb = await svc.notebooks.open(ctx.notebook)
    try:
        await nb.clear_outputs(ids, _origin(ctx))
    except NotebookError as exc:
        return error_result(f"nothing was cleared: {exc}", kind="not_found")
    more = f" and {len(ids) - len(shown)} more" if len(ids) > len(shown) else ""
    return text_result(
        f"cleared the outputs of {len(ids)} cell(s): {', '.join(shown)}{more}",
        {"cleared": shown, "count": len(ids)},
    )


def patching_tools() -> list[ToolDef]:
    return [
        ToolDef(
            name="client_replace_in_cell",
            title="Replace text in a cell",
            description=(
                "Change part of a cell's source: `old` (exact text, which must occur exactly once in the cell) "
                "becomes `new`. For a small change of a long cell, instead of sending its whole source. When `old` "
                "occurs 0 or several times nothing changes, and the answer says how often (and on which lines). "
                "Answers a short diff."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "cell_id": {"type": "string"},
                    "old": {"type": "string", "minLength": 1},
                    "new": {"type": "string"},
                },
                "required": ["cell_id", "old", "new"],
                "additionalProperties": False,
            },
            executor=replace_in_cell,
            read_only=False,
            destructive=True,
            available=writable,
            own_timeouts=True,
        ),
        ToolDef(
            name="client_clear_outputs",
            title="Clear outputs",
            description=(
                "Empty the outputs and execution counts of code cells: the ones in cell_ids, or every code cell of "
                "the notebook when cell_ids is left out. Running the cells again brings outputs back."
            ),
            input_schema={
                "type": "object",
                "properties": {"cell_ids": ID_LIST},
                "additionalProperties": False,
            },
            executor=clear_outputs,
            read_only=False,
            destructive=True,
            available=writable,
            own_timeouts=True,
        ),
    ]
