"""One rule for every tool: ``structuredContent`` says what the text says, and the reverse.

claude-agent-acp, codex-acp and others hand their model only a tool result's ``structuredContent``
when there is one (``/work/shared/reference/measured-facts.md``): whatever the model must see
(outputs, errors with their traceback, values, images) has to be there, and the text content (what
other agents show) must say the same.  Every tool of the registry is called with valid arguments on
a real notebook and a real kernel; the payload of each answer (the distinctive ``MARK…`` words the
notebook and the calls put in, cell ids, error names, image references) is compared both ways.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import nbformat

from .helpers import text

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
IMAGE = f"display({{'image/png': {PNG!r}, 'text/plain': '<MARKimgalt>'}}, raw=True)"

CELLS = [
    ("c0", "code", 'print("MARKout0")\nMARKvar = "MARKvalue"'),
    ("c1", "code", "'MARKresult'"),
    ("c2", "code", IMAGE),
    ("c3", "markdown", "# MARKheading"),
    ("c4", "code", 'def MARKfn():\n    raise ValueError("MARKerr")\nMARKfn()'),
    ("c5", "code", 'print("MARKnever")'),
]
MARK = re.compile(r"MARK\w+")
IDS = re.compile(r"\bc[0-9]\b")


def make(jp_root_dir, path: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for cid, kind, src in CELLS:
        cell = nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src)
        cell["id"] = cid
        nb.cells.append(cell)
    (jp_root_dir / path).parent.mkdir(parents=True, exist_ok=True)
    (jp_root_dir / path).write_text(nbformat.writes(nb))
    return path


def leaves(value: Any) -> list[str]:
    """Every string, number and key of a JSON value, as text."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [str(k), *leaves(v)]]
    if isinstance(value, list):
        return [s for v in value for s in leaves(v)]
    return [] if value is None else [str(value)]


def payload(s: str) -> set[str]:
    return set(MARK.findall(s)) | set(IDS.findall(s)) | set(re.findall(r"\b\w+Error\b", s))


def mismatches(name: str, res: dict[str, Any]) -> list[str]:
    """What one side of the answer says and the other does not."""
    sc = res.get("structuredContent")
    if sc is None:
        return [f"{name}: no structuredContent"]
    in_text, in_sc = payload(text(res)), payload("\n".join(leaves(sc)))
    out = []
    if in_text - in_sc:
        out.append(
            f"{name}: the text says {sorted(in_text - in_sc)}, structuredContent does not: {json.dumps(sc)[:600]}"
        )
    if in_sc - in_text:
        out.append(f"{name}: structuredContent says {sorted(in_sc - in_text)}, the text does not: {text(res)[:600]}")
    blocks = [b for b in res["content"] if b.get("type") == "image"]
    refs = [r for r in _dicts(sc) if r.get("type") == "image"]
    want = [{"type": "image", "mime": b["mimeType"], "index": n} for n, b in enumerate(blocks, 1)]
    if sorted(refs, key=lambda r: r.get("index", 0)) != want:
        out.append(f"{name}: image blocks {want} but structuredContent references {refs}")
    for n in range(1, len(blocks) + 1):
        if f"image #{n}" not in text(res):
            out.append(f"{name}: the text does not mention image #{n}")
    return out


def _dicts(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value, *(d for v in value.values() for d in _dicts(v))]
    if isinstance(value, list):
        return [d for v in value for d in _dicts(v)]
    return []


async def test_every_tool_says_the_same_in_text_and_structured_content(
    jp_root_dir, acp, tool_ctx, call, start_kernel, jp_ws_fetch
):
    path = make(jp_root_dir, "structured/nb.ipynb")
    await start_kernel(path)
    ctx = await tool_ctx(path)
    results: list[tuple[str, dict[str, Any]]] = []

    async def run(name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        res = await call(ctx, name, args or {})
        results.append((name, res))
        return res

    # c0..c2 run fine, c3 is markdown (skipped, says why), c4 raises: the run stops before c5
    res = await run("client_execute_cells", {"cell_ids": ["c0", "c1", "c2", "c3", "c4", "c5"]})
    assert "MARKout0" in text(res) and "MARKfn" in text(res) and "not run" in text(res), res
    await run("client_notebook_outline")
    await run("client_read_cells", {"start": 0, "end": 6})
    await run("client_read_cells", {"cell_ids": ["c2", "c4"]})
    await run("client_list_variables")
    await run("client_inspect_variable", {"name": "MARKvar"})
    res = await run("client_execute_code", {"code": f'print("MARKscratch")\n{IMAGE}\n"MARKscratchresult"'})
    assert "MARKscratch" in text(res), res
    await run(
        "client_execute_code", {"code": 'def MARKscratchfn():\n    raise KeyError("MARKscratcherr")\nMARKscratchfn()'}
    )
    res = await run("client_insert_cell", {"source": "MARKinserted = 1", "after_cell_id": "c5"})
    new_id = res["structuredContent"]["cell_id"]
    await run("client_edit_cell", {"cell_id": "c5", "old_string": "MARKnever", "new_string": "MARKedited"})
    await run("client_move_cell", {"cell_id": new_id, "to_index": 0})
    await run("client_delete_cells", {"cell_ids": [new_id]})
    await run("client_replace_in_cell", {"cell_id": "c5", "old": "MARKedited", "new": "MARKreplaced"})
    await run("client_search_cells", {"pattern": "MARK", "in": "both"})
    await run("client_execute_cells", {"scope": "above", "cell_id": "c2"})
    await run("client_stale_cells")
    await run("client_execute_cells", {"stale": True})
    await run("client_clear_outputs", {"cell_ids": ["c0", "c1"]})
    await run("client_list_notebooks")
    await run("client_read_notebook", {"path": path})
    await run("client_create_notebook", {"path": "structured/MARKnew.ipynb", "cells": [{"source": "MARKcreated = 1"}]})
    await run("client_kernel", {"action": "status"})
    await run("client_kernel", {"action": "interrupt"})
    await run("client_kernel", {"action": "restart"})

    ws = await jp_ws_fetch("jupyter-acp", "frontend", "ws", params={"clientId": "tab-structured"})
    try:
        await ws.write_message(json.dumps({"method": "focus", "params": {"path": path}}))
        await asyncio.sleep(0.1)
        task = asyncio.ensure_future(run("client_get_selection"))
        req = json.loads(await ws.read_message())
        selection = {
            "path": path,
            "activeCellIndex": 0,
            "activeCellId": "c0",
            "mode": "edit",
            "selectedCells": [0],
            "selectedText": "MARKselected",
            "cursor": {"line": 0, "column": 3},
            "selection": {"start": {"line": 0, "column": 0}, "end": {"line": 0, "column": 12}},
        }
        await ws.write_message(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": selection}))
        await task
    finally:
        ws.close()

    # the whole surface was called, each tool at least once and without a refusal
    assert {t.name for t in acp.tools.all()} == {name for name, _ in results}
    refused = [(name, text(res)) for name, res in results if res["isError"]]
    assert not refused, refused
    problems = [p for name, res in results for p in mismatches(name, res)]
    assert not problems, "\n".join(problems)


async def test_a_refusal_says_why_in_structured_content_too(jp_root_dir, tool_ctx, call):
    path = make(jp_root_dir, "structured/refused.ipynb")
    ctx = await tool_ctx(path)
    res = await call(ctx, "client_read_cells", {"cell_ids": ["c9"]})
    assert res["isError"] and "c9" in text(res)
    assert not mismatches("client_read_cells", res)
