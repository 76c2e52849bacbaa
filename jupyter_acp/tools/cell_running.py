"""Running tools: execute notebook cells in the notebook's kernel, outputs written into the notebook.

Split from ``notebook_tools`` because running is its own job (timeouts, interrupts, stopping at the
first error, outputs rendered for the model) apart from reading and editing the document.
"""

from __future__ import annotations

from typing import Any

from ..kernels import KernelUnavailable
from ..notebook import NotebookError, execute_cell
from .notebook_shared import ID_LIST, _svc, writable_with_kernel
from .render import error_of, image_refs, render_outputs
from .services import ToolServices, gate
from .surface import ToolContext, ToolDef, error_result, text_result


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


def running_tools() -> list[ToolDef]:
    return [
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
                    "cell_ids": {**ID_LIST, "maxItems": 50},
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
