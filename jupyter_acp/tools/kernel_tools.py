"""Kernel tools: variables (no side effects, answer while a cell runs), scratch code, selection, and the kernel
itself (status, interrupt, restart: the two that change it ask first, and a restart's card says what it loses)."""

from __future__ import annotations

import json
import re
from typing import Any, cast

from ..frontend import NoTab, TabError
from ..kernels import KernelTimeout, KernelUnavailable, clip
from .notebook_shared import has_kernel
from .render import error_of, image_refs, render_outputs
from .services import ToolServices, gate
from .surface import ToolContext, ToolDef, error_result, text_result

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
VALUE_BUDGET = 200


def _svc(ctx: ToolContext) -> ToolServices:
    """The context's services, by their type (the surface holds them untyped: services.py builds on surface.py)."""
    return cast(ToolServices, ctx.services)


async def _language(ctx: ToolContext) -> str | None:
    if "language" not in ctx.cache:
        kid = await ctx.kernel_id()
        ctx.cache["language"] = await _svc(ctx).kernels.language_async(kid) if kid else None
    language: str | None = ctx.cache["language"]
    return language


async def python_kernel(ctx: ToolContext) -> bool:
    return await has_kernel(ctx) and await _language(ctx) == "python"


def _kernel_error(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, KernelTimeout):
        return error_result(f"{exc}; the kernel may be stuck. Try again later or ask the user.", kind="timeout")
    return error_result(str(exc), kind="kernel")


async def list_variables(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    kid = await ctx.kernel_id()
    if kid is None:
        return error_result("the notebook has no kernel", kind="no_kernel")
    try:
        rows, how = await svc.kernels.list_variables(kid, timeout=svc.config.variable_timeout)
    except (KernelUnavailable, KernelTimeout) as exc:
        return _kernel_error(exc)
    needle = (args.get("filter") or "").lower()
    if needle:
        rows = [r for r in rows if needle in r["name"].lower() or needle in str(r.get("type", "")).lower()]
    offset = int(args.get("offset", 0))
    limit = int(args.get("limit", 200))
    page = rows[offset : offset + limit]
    lines = []
    out = []
    for r in page:
        value = clip(" ".join(str(r.get("value", "")).split()), VALUE_BUDGET)
        lines.append(f"{r['name']}: {r.get('type', '')} = {value}")
        out.append({"name": r["name"], "type": r.get("type", ""), "value": value})
    more = len(rows) - offset - len(page)
    if more > 0:
        lines.append(f"… {more} more: call again with offset={offset + len(page)}")
    if not rows:
        lines.append("no user variables in the kernel" + (f" matching {needle!r}" if needle else ""))
    lines.append("(functions and classes are not listed; client_inspect_variable reads any name)")
    structured = {"variables": out, "total": len(rows), "offset": offset, "method": how}
    return text_result("\n".join(lines), structured)


async def inspect_variable(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    name = args["name"].strip()
    if not NAME_RE.match(name):
        return error_result(
            "name must be a variable name, optionally with plain attributes (df, model.coef_); no calls or indexing",
            kind="invalid_arguments",
        )
    kid = await ctx.kernel_id()
    if kid is None:
        return error_result("the notebook has no kernel", kind="no_kernel")
    try:
        data = await svc.kernels.inspect_variable(
            kid, name, budget=int(args.get("budget", 2000)), timeout=svc.config.variable_timeout
        )
    except (KernelUnavailable, KernelTimeout) as exc:
        return _kernel_error(exc)
    except RuntimeError as exc:
        return error_result(f"inspecting {name} failed: {exc}", kind="failed")
    if "error" in data:
        return error_result(data["error"], kind="not_found")
    lines = [f"{name}: {data.get('type')}"]
    for key, value in data.items():
        if key in ("name", "type"):
            continue
        if isinstance(value, str) and "\n" in value:
            lines.append(f"{key}:\n{value}")
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}")
    return text_result("\n".join(lines), data)


async def execute_code(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    kid = await ctx.kernel_id()
    if kid is None:
        return error_result("the notebook has no kernel", kind="no_kernel")
    code = args["code"]
    refusal = await gate(
        ctx,
        "client_execute_code",
        title="Run code in the notebook's kernel",
        kind="execute",
        arguments=args,
        preview=code[:2000],
    )
    if refusal is not None:
        return refusal
    timeout = max(1.0, min(float(args.get("timeout", svc.config.execute_timeout)), svc.config.max_execute_timeout))
    try:
        res = await svc.kernels.run_code(kid, code, timeout=timeout)
    except (KernelUnavailable, KernelTimeout) as exc:
        return _kernel_error(exc)
    images: list[dict[str, Any]] = []
    body = render_outputs(res["outputs"], svc.config.output_budget, images)
    status = res["status"]
    head = f"status: {status}"
    if status == "timeout":
        head += f" (still running after {timeout:g} s: the kernel was interrupted)"
    # the model of an agent that shows it only structuredContent (claude, codex) must see the output too
    structured: dict[str, Any] = {"status": status, "outputs": body}
    if status == "timeout":
        structured["timeout"] = timeout
    if images:
        structured["images"] = image_refs(images, 0)
    err = error_of(res["outputs"])
    if err is not None:
        structured["error"] = err
    result = text_result(head + ("\n" + body if body else "\n(no output)"), structured)
    result["content"].extend(images)
    if status == "timeout":
        result["isError"] = True
    return result


async def get_selection(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    try:
        sel = await svc.frontend.request(
            "getSelection", {"path": ctx.notebook}, path=ctx.notebook, timeout=svc.config.selection_timeout
        )
    except NoTab:
        return error_result(
            f"{ctx.notebook} is not open in a browser tab, so there is no selection; ask the user which cells they mean",
            kind="no_tab",
        )
    except TabError as exc:
        return error_result(f"the browser tab could not give the selection: {exc}", kind="no_tab")
    if not isinstance(sel, dict):
        return error_result("the browser tab answered without a selection", kind="no_tab")
    if sel.get("path") not in (None, ctx.notebook):
        return error_result(
            f"{ctx.notebook} is not the notebook in the focused browser tab (it shows {sel.get('path')}); "
            "ask the user to click into the notebook, or which cells they mean",
            kind="no_tab",
        )
    lines = [
        f"active cell: index {sel.get('activeCellIndex')} id={sel.get('activeCellId')} (mode: {sel.get('mode', '?')})"
    ]
    if sel.get("selectedCells") is not None:
        lines.append(f"selected cells: {sel.get('selectedCells')}")
    if sel.get("selectedCellIds") is not None:
        lines.append(f"selected cell ids: {sel.get('selectedCellIds')}")
    text = sel.get("selectedText") or ""
    if text:
        lines.append(f"selected text ({sel.get('selection')}):\n{clip(text, 8000)}")
    else:
        lines.append(f"no text selected; cursor at {sel.get('cursor')}")
    return text_result("\n".join(lines), sel)


#: variable names a restart card lists before "and N more"
LOST_NAMES_SHOWN = 12


async def _kernel_facts(ctx: ToolContext, kid: str) -> dict[str, Any]:
    svc = _svc(ctx)
    return {
        "kernel_id": kid,
        "name": svc.kernels.kernel_name(kid),
        "language": await _language(ctx),
        "state": svc.kernels.execution_state(kid),
        "where": svc.kernels.where(kid),
    }


async def _what_a_restart_loses(ctx: ToolContext, kid: str, state: str | None) -> tuple[str, list[str], int | None]:
    """The card's words: the variables (listed when the kernel answers in a few seconds), modules, a running cell."""
    svc = _svc(ctx)
    names: list[str] = []
    total: int | None = None
    try:
        rows, _ = await svc.kernels.list_variables(kid, timeout=min(svc.config.variable_timeout, 5.0))
        names = [r["name"] for r in rows]
        total = len(names)
    except (KernelUnavailable, KernelTimeout):
        pass
    if total is None:
        lost = "every variable (the kernel did not list them in time)"
    elif total:
        shown = ", ".join(names[:LOST_NAMES_SHOWN]) + (
            f" and {total - LOST_NAMES_SHOWN} more" if total > LOST_NAMES_SHOWN else ""
        )
        lost = f"its {total} variable(s) ({shown})"
    else:
        lost = "no user variables (none are defined)"
    running = " The code it is running now is stopped." if state == "busy" else ""
    text = (
        f"Restarting the kernel loses {lost}, every imported module, open file and connection, and its history."
        f"{running} The notebook's cells and outputs stay; cells must run again to get their results back "
        "(client_stale_cells says which)."
    )
    return text, names[:LOST_NAMES_SHOWN], total


async def kernel_control(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    svc = _svc(ctx)
    action = args["action"]
    kid = await ctx.kernel_id()
    if kid is None:
        return error_result("the notebook has no kernel; ask the user to start one", kind="no_kernel")
    facts = await _kernel_facts(ctx, kid)
    if action == "status":
        lines = [
            f"kernel: {facts['name']} ({facts['language']}), {facts['state'] or 'state unknown'}",
            f"id: {kid}; {facts['where']}",
        ]
        return text_result("\n".join(lines), facts)
    if action == "interrupt":
        preview = "Stops the code the kernel is running now (a KeyboardInterrupt); its variables stay."
        if facts["state"] != "busy":
            preview += f" The kernel is {facts['state'] or 'in an unknown state'}: there may be nothing to stop."
        refusal = await gate(
            ctx, "client_kernel", title="Interrupt the kernel", kind="execute", arguments=args, preview=preview
        )
        if refusal is not None:
            return refusal
        await svc.kernels.interrupt(kid)
        return text_result(
            f"interrupted the kernel (it was {facts['state'] or 'in an unknown state'}); its variables stay",
            {**facts, "action": "interrupt"},
        )
    loses, names, total = await _what_a_restart_loses(ctx, kid, facts["state"])
    refusal = await gate(
        ctx, "client_kernel", title="Restart the kernel", kind="execute", arguments=args, preview=loses
    )
    if refusal is not None:
        return refusal
    try:
        await svc.kernels.restart(kid)
    except (KernelUnavailable, KernelTimeout) as exc:
        return _kernel_error(exc)
    ctx.cache.pop("kernel_id", None)
    after = await ctx.kernel_id()
    state = svc.kernels.execution_state(after) if after else None
    return text_result(
        f"restarted the kernel (now {state or 'starting'}). {loses}",
        {**facts, "action": "restart", "state": state, "lost": loses, "lost_variables": names, "lost_count": total},
    )


def kernel_tools() -> list[ToolDef]:
    return [
        ToolDef(
            name="client_list_variables",
            title="List kernel variables",
            description=(
                "Names, types and short values of the variables in the notebook's live kernel. Runs no code in the "
                "user's session, changes nothing, and answers while a cell is running. Paged (offset/limit); filter by "
                "name or type substring. Use client_inspect_variable for one variable in depth."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "filter": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                },
                "additionalProperties": False,
            },
            executor=list_variables,
            available=python_kernel,
        ),
        ToolDef(
            name="client_inspect_variable",
            title="Inspect a kernel variable",
            description=(
                "A bounded summary of one live variable (or attribute path like model.coef_): DataFrame shape, dtypes, "
                "head, describe and memory; array shape, dtype, min/max/mean; container length and first items; a "
                "bounded repr otherwise. Never copies the value whole, never changes the kernel's state."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 200},
                    "budget": {"type": "integer", "minimum": 100, "maximum": 20000},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            executor=inspect_variable,
            available=python_kernel,
        ),
        ToolDef(
            name="client_execute_code",
            title="Run scratch code",
            description=(
                "Run code in the notebook's kernel and return its output, without adding a cell or saving anything "
                "into the notebook (its variables do stay in the kernel). For quick checks. Interrupted after timeout "
                "seconds (default 60)."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "code": {"type": "string", "minLength": 1},
                    "timeout": {"type": "number", "minimum": 1, "maximum": 3600},
                },
                "required": ["code"],
                "additionalProperties": False,
            },
            executor=execute_code,
            read_only=False,
            destructive=True,
            available=has_kernel,
            own_timeouts=True,
        ),
        ToolDef(
            name="client_kernel",
            title="The notebook's kernel",
            description=(
                "The notebook's kernel: action 'status' (name, language, idle or busy, local or behind a gateway), "
                "'interrupt' (stop the running code; variables stay) or 'restart' (a fresh kernel: every variable and "
                "import is lost; the user is asked, with what it loses). Cells must run again after a restart."
            ),
            input_schema={
                "type": "object",
                "properties": {"action": {"type": "string", "enum": ["status", "interrupt", "restart"]}},
                "required": ["action"],
                "additionalProperties": False,
            },
            executor=kernel_control,
            read_only=False,
            destructive=True,
            available=has_kernel,
            own_timeouts=True,
        ),
        ToolDef(
            name="client_get_selection",
            title="The user's selection",
            description=(
                "What the user has selected in the browser tab showing this notebook: the active cell (id, index), the "
                "selected cells, the selected text and its range. Errors when the notebook is not open in a tab."
            ),
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            executor=get_selection,
        ),
    ]
