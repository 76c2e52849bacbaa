"""Running tools: execute notebook cells in the notebook's kernel, outputs written into the notebook; the run plan.

Split from ``notebook_tools`` because running is its own job (timeouts, interrupts, stopping at the
first error, outputs rendered for the model) apart from reading and editing the document.

``client_execute_cells`` runs cells named by id, a scope (all, above or below a cell, as the notebook's own
Run menu), or the run plan of ``run_plan`` (``stale: true``): the card then shows the plan, so the user
approves the plan once, not each cell; the plan is made again after the approval and the run refused if it
changed meanwhile. ``client_stale_cells`` answers the plan without running anything.
"""

from __future__ import annotations

from typing import Any

from ..kernels import KernelTimeout, KernelUnavailable
from ..notebook import Notebook, NotebookError, execute_cell
from .kernel_tools import python_kernel
from .notebook_shared import ID_LIST, _svc, writable_with_kernel
from .render import error_of, first_line, image_refs, render_outputs
from .run_plan import Plan, plan
from .services import ToolServices, gate
from .surface import ToolContext, ToolDef, error_result, text_result

#: most cells one scope run takes (the notebook's own Run All has no bound; a model's call does)
MAX_SCOPE_CELLS = 1000
#: characters of outputs one run answers in all; later cells say where their outputs are instead
ANSWER_BUDGET = 40_000
SCOPES = ("all", "above", "below")


# -- execute -------------------------------------------------------------------------------------------------
def _timeout(svc: ToolServices, args: dict[str, Any]) -> float:
    t = float(args.get("timeout", svc.config.execute_timeout))
    return max(1.0, min(t, svc.config.max_execute_timeout))


async def run_plan_of(ctx: ToolContext, nb: Notebook, kid: str | None) -> Plan:
    """The notebook's run plan, with the kernel's history when it can be read."""
    svc = _svc(ctx)
    history: dict[int, str] | None = None
    note = ""
    if kid is not None:
        try:
            history = await svc.kernels.history(kid, timeout=svc.config.variable_timeout)
        except (KernelUnavailable, KernelTimeout, RuntimeError) as exc:
            note = (
                f"the kernel's history could not be read ({exc}): a cell is taken to be unchanged since it last "
                "ran, so edits made since are not seen"
            )
    else:
        note = "the notebook has no kernel: nothing ran in one, so the plan only follows the cells' sources"
    return plan(nb.cells(), history, history_note=note)


def _scope_ids(nb: Notebook, scope: str, cell_id: str | None) -> list[str]:
    cells = nb.cells()
    if scope == "all":
        chosen = cells
    else:
        if not cell_id:
            raise NotebookError(f"scope {scope!r} needs cell_id (the cell it is {scope})")
        pos = nb.find(cell_id)
        chosen = cells[:pos] if scope == "above" else cells[pos:]
    return [str(c.get("id")) for c in chosen if c.get("cell_type") == "code"]


def _describe_scope(scope: str, cell_id: str | None) -> str:
    return {
        "all": "every code cell",
        "above": f"the code cells above {cell_id}",
        "below": f"{cell_id} and the code cells below it",
    }[scope]


async def execute_cells(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    given = [k for k in ("cell_ids", "scope", "stale") if args.get(k)]
    if len(given) != 1:
        return error_result(
            "give exactly one of cell_ids, scope ('all', or 'above' / 'below' with cell_id) or stale: true",
            kind="invalid_arguments",
        )
    if "cell_id" in args and args.get("scope") not in ("above", "below"):
        return error_result("cell_id goes with scope 'above' or 'below'", kind="invalid_arguments")
    if args.get("scope") in ("above", "below") and not args.get("cell_id"):
        return error_result(
            f"scope {args['scope']!r} needs cell_id (the cell it is taken from)", kind="invalid_arguments"
        )
    kid = await ctx.kernel_id()
    if kid is None:
        return error_result("the notebook has no kernel; ask the user to start one", kind="no_kernel")
    nb = await svc.notebooks.open(ctx.notebook)
    the_plan: Plan | None = None
    if args.get("stale"):
        if not await python_kernel(ctx):
            return error_result(
                "the run plan reads Python cells; this kernel's language is not Python", kind="unsupported"
            )
        the_plan = await run_plan_of(ctx, nb, kid)
        ids = the_plan.cell_ids
        if not ids:
            return text_result(the_plan.text(), {"plan": the_plan.structured(), "results": []})
        title = the_plan.summary()
        preview = the_plan.text()[:2000]
    elif args.get("scope"):
        try:
            ids = _scope_ids(nb, args["scope"], args.get("cell_id"))
        except NotebookError as exc:
            return error_result(f"nothing was run: {exc}", kind="not_found")
        what = _describe_scope(args["scope"], args.get("cell_id"))
        if not ids:
            return text_result(f"nothing to run: {what} is no code cell", {"results": [], "scope": args["scope"]})
        if len(ids) > MAX_SCOPE_CELLS:
            return error_result(
                f"nothing was run: {what} is {len(ids)} cells, more than {MAX_SCOPE_CELLS} in one call; run a "
                "narrower scope (above / below a cell) or name the cells",
                kind="invalid_arguments",
            )
        title = f"Run {len(ids)} cell(s) in the kernel: {what}"
        rows = []
        for cid in ids[:40]:
            rows.append(f"- {cid}: {first_line(nb.cell(cid)[1].get('source', ''), 80)}")
        preview = "\n".join(rows) + (f"\n… and {len(ids) - 40} more" if len(ids) > 40 else "")
    else:
        ids = list(args["cell_ids"])
        sources: list[str] = []
        missing = []
        for cid in ids:
            try:
                sources.append(f"# cell {cid}\n{nb.cell(cid)[1].get('source', '')}")
            except NotebookError:
                missing.append(cid)
        if missing:
            return error_result(f"nothing was run: no cell with id {', '.join(map(repr, missing))}", kind="not_found")
        title = f"Run {len(ids)} cell(s) in the kernel"
        preview = "\n\n".join(sources)[:2000]
    refusal = await gate(ctx, "client_execute_cells", title=title, kind="execute", arguments=args, preview=preview)
    if refusal is not None:
        return refusal
    if the_plan is not None:
        nb = await svc.notebooks.open(ctx.notebook)
        again = await run_plan_of(ctx, nb, kid)
        if again.cell_ids != ids:
            return error_result(
                "nothing was run: the notebook changed while the permission was asked, and so did the plan. "
                f"The plan now:\n{again.text()}",
                kind="stale",
                structured={"plan": again.structured()},
            )
    result = await _run(ctx, kid, ids, _timeout(svc, args))
    if the_plan is not None:
        result["content"][0]["text"] = the_plan.text() + "\n" + result["content"][0]["text"]
        result["structuredContent"]["plan"] = the_plan.structured()
    return result


async def _run(ctx: ToolContext, kid: str, ids: list[str], timeout: float) -> dict[str, Any]:
    """Run the cells in order, stopping at the first error; the answer in text and structuredContent alike."""
    svc = _svc(ctx)
    budget = svc.config.output_budget
    images: list[dict[str, Any]] = []
    parts: list[str] = []
    results: list[dict[str, Any]] = []
    not_run: list[str] = []
    failed = False
    used = 0
    for n, cid in enumerate(ids):
        try:
            nb = await svc.notebooks.open(ctx.notebook)
            res = await execute_cell(svc.kernels, kid, nb, cid, timeout=timeout, stamp=ctx.provenance)
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
        if used > ANSWER_BUDGET and outs:
            # a long run: later cells' outputs are in the notebook, the answer stays bounded
            body = f"({len(outs)} output(s) not shown: the answer reached {ANSWER_BUDGET} characters; read the cell)"
        else:
            body = render_outputs(outs, budget, images)
        used += len(head) + len(body)
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


async def stale_cells(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    nb = await _svc(ctx).notebooks.open(ctx.notebook)
    the_plan = await run_plan_of(ctx, nb, await ctx.kernel_id())
    return text_result(the_plan.text(), the_plan.structured())


def running_tools() -> list[ToolDef]:
    return [
        ToolDef(
            name="client_execute_cells",
            title="Run cells",
            description=(
                "Run code cells in the notebook's kernel, in order: by id (cell_ids), a scope ('all'; 'above' a "
                "cell_id, without it; 'below': cell_id and the cells after it), or stale: true, the run plan of "
                "client_stale_cells (the cells an edit made stale, in the order to re-run them; the user approves "
                "the plan once). Outputs and execution counts are written into the notebook (the user sees them) "
                "and returned. Stops at the first error. A cell running longer than timeout seconds (default 60) is "
                "interrupted. No stdin: input() fails."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "cell_ids": {**ID_LIST, "maxItems": 50},
                    "scope": {"type": "string", "enum": list(SCOPES)},
                    "cell_id": {"type": "string", "description": "the cell a scope 'above' / 'below' is taken from"},
                    "stale": {"type": "boolean", "description": "run the run plan (see client_stale_cells)"},
                    "timeout": {"type": "number", "minimum": 1, "maximum": 3600},
                },
                "additionalProperties": False,
            },
            executor=execute_cells,
            read_only=False,
            destructive=True,
            available=writable_with_kernel,
            own_timeouts=True,
        ),
        ToolDef(
            name="client_stale_cells",
            title="Stale cells and the run plan",
            description=(
                "Which cells are stale (edited since they ran, using a name an edited cell defines, run before a "
                "name they use was redefined, run before a kernel restart) and the order to re-run them, from the "
                "cells' Python sources and the kernel's own history of what ran. Cells with %run, exec() or unknown "
                "magics make the analysis uncertain: the plan says so. Runs nothing; client_execute_cells with "
                "stale: true runs the plan."
            ),
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            executor=stale_cells,
            available=python_kernel,
        ),
    ]
