"""Searching the notebook's cells: their sources, their outputs, or both, with line numbers.

A pattern is literal text unless ``regex`` is true. A regular expression is the agent's, and a pathological one
(``(a+)+$`` on a long line) backtracks for ever: Python's ``re`` can neither be stopped nor bounded, and it
holds the GIL while it matches. So patterns are compiled and matched with the ``regex`` module, whose
matching loop checks a timeout (``SEARCH_SECONDS`` for the whole search) and, with ``concurrent=True``, lets
go of the GIL; the search runs in a worker thread, so the server's event loop never waits on it. A search
that hits the bound answers what it found so far and says where it stopped.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from typing import Any

import regex

from ..kernels import strip_ansi
from .notebook_shared import _svc
from .surface import ToolContext, ToolDef, error_result, text_result

#: seconds one search may match for, in all
SEARCH_SECONDS = 1.0
#: matching lines answered in all, and per cell and place
MAX_LINES = 200
MAX_LINES_PER_CELL = 20
#: characters of a matching line shown
LINE_CHARS = 200
PLACES = ("source", "outputs", "both")


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return "" if value is None else str(value)


def output_text(outputs: list[dict[str, Any]]) -> str:
    """The searchable text of a cell's outputs: streams, plain and markdown results, errors with their traceback."""
    parts = []
    for o in outputs or []:
        kind = o.get("output_type")
        if kind == "stream":
            parts.append(_text(o.get("text")))
        elif kind == "error":
            parts.append(f"{_text(o.get('ename'))}: {_text(o.get('evalue'))}")
            parts.append("\n".join(_text(t) for t in o.get("traceback") or []))
        elif kind in ("display_data", "execute_result"):
            data = o.get("data") or {}
            for mime in ("text/plain", "text/markdown", "text/latex"):
                if mime in data:
                    parts.append(_text(data[mime]))
    return strip_ansi("\n".join(p.rstrip("\n") for p in parts))


def _search(
    compiled: Any, cells: list[dict[str, Any]], where: str, deadline: float
) -> tuple[list[dict[str, Any]], str]:
    """(matches, why it stopped early or ""), in a worker thread.

    Each place (the sources, the outputs) is searched as one text, the cells joined by newlines: one call into
    the matcher per matching line instead of one (and its timeout's set-up) per cell, so a search of 10,000 cells
    costs what its matches cost. After a match the search goes on at the next line (a line is answered once), or
    at the next cell once a cell has given ``MAX_LINES_PER_CELL``. A match is the cell's where it starts."""
    found: dict[tuple[int, str], list[int]] = {}
    more: dict[tuple[int, str], int] = {}
    total = 0
    stopped = ""
    for place in ["source", "outputs"] if where == "both" else [where]:
        if place == "source":
            texts = [c.get("source") or "" for c in cells]
        else:
            texts = [output_text(c["outputs"]) if c.get("outputs") else "" for c in cells]
        starts: list[int] = []
        offset = 0
        for t in texts:
            starts.append(offset)
            offset += len(t) + 1
        big = "\n".join(texts)
        pos = 0
        while pos <= len(big) and total < MAX_LINES:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                m = compiled.search(big, pos, concurrent=True, timeout=left)
            except TimeoutError:
                stopped = (
                    f"stopped after {SEARCH_SECONDS:g} s of matching (a pattern that backtracks a lot; make it "
                    "simpler): the matches found until then are above"
                )
                break
            if m is None:
                break
            k = bisect.bisect_right(starts, m.start()) - 1
            key = (k, place)
            lines = found.setdefault(key, [])
            line = big.count("\n", starts[k], m.start()) + 1
            if len(lines) < MAX_LINES_PER_CELL:
                lines.append(line)
                total += 1
            else:
                more[key] = more.get(key, 0) + 1
            end_of_line = big.find("\n", m.start())
            pos = len(big) + 1 if end_of_line == -1 else end_of_line + 1
        if stopped or total >= MAX_LINES:
            if total >= MAX_LINES and not stopped:
                stopped = f"stopped at {MAX_LINES} matching lines: narrow the pattern"
            break
    matches = []
    order = {"source": 0, "outputs": 1}
    for (k, place), lines in sorted(found.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])):
        cell = cells[k]
        text = (cell.get("source") or "") if place == "source" else output_text(cell.get("outputs") or [])
        rows = text.split("\n")
        matches.append(
            {
                "cell_id": cell.get("id"),
                "index": k,
                "type": cell.get("cell_type"),
                "in": place,
                "lines": [{"line": n, "text": rows[n - 1][:LINE_CHARS] if n <= len(rows) else ""} for n in lines],
                "more_lines": more.get((k, place), 0),
            }
        )
    return matches, stopped


async def search_cells(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    pattern = args["pattern"]
    where = args.get("in", "source")
    flags = regex.MULTILINE | regex.V0 | (regex.IGNORECASE if args.get("ignore_case") else 0)
    try:
        compiled = regex.compile(pattern if args.get("regex") else regex.escape(pattern), flags)
    except regex.error as exc:
        return error_result(f"the pattern is not a valid regular expression: {exc}", kind="invalid_arguments")
    nb = await _svc(ctx).notebooks.open(ctx.notebook)
    cells = nb.cells()
    deadline = time.monotonic() + SEARCH_SECONDS
    matches, stopped = await asyncio.to_thread(_search, compiled, cells, where, deadline)
    what = f"{'regex' if args.get('regex') else 'text'} {pattern!r} in {'sources and outputs' if where == 'both' else where}"
    lines = [f"{len(matches)} cell(s) match {what} (of {len(cells)} cells)"]
    for m in matches:
        lines.append(f"--- cell {m['index']} id={m['cell_id']} {m['type']} ({m['in']})")
        prefix = "output line" if m["in"] == "outputs" else "line"
        lines += [f"  {prefix} {row['line']}: {row['text']}" for row in m["lines"]]
        if m["more_lines"]:
            lines.append(f"  … {m['more_lines']} more matching line(s) in this cell")
    if stopped:
        lines.append(stopped)
    structured: dict[str, Any] = {"matches": matches, "cell_count": len(cells)}
    if stopped:
        structured["stopped"] = stopped
    return text_result("\n".join(lines), structured)


def search_tools() -> list[ToolDef]:
    return [
        ToolDef(
            name="client_search_cells",
            title="Search cells",
            description=(
                "Find the cells whose source (in: 'source', the default), outputs ('outputs') or both contain a "
                "pattern: literal text, or a regular expression with regex: true (Python syntax; ^ and $ match at "
                "line ends). Answers each matching cell's id and index with the matching lines and their numbers."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "maxLength": 1000},
                    "regex": {"type": "boolean"},
                    "in": {"type": "string", "enum": list(PLACES)},
                    "ignore_case": {"type": "boolean"},
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
            executor=search_cells,
        ),
    ]
