"""The analyst's toolkit on a real server, the live document and real kernels (local, and behind a
gateway: every test that starts a kernel runs in both modes, see conftest): partial edits, clearing outputs,
scoped runs, the kernel's status / interrupt / restart, search, the other notebooks, and the run plan."""

from __future__ import annotations

import asyncio
import json
import time

import nbformat
import pytest

from .helpers import text, wait_until


def ids_of(tab) -> list[str]:
    return [c["id"] for c in tab.ycells]


def pending(acp, session) -> list[dict]:
    evs = acp.hub.events(session)
    return [
        e
        for e in evs
        if e["type"] == "permission_request"
        and not any(r["type"] == "permission_resolved" and r["request_id"] == e["request_id"] for r in evs)
    ]


async def test_replace_in_cell_changes_the_one_occurrence_and_says_how_often_otherwise(
    make_notebook, tool_ctx, call, browser
):
    source = "\n".join([f"row_{i} = {i}" for i in range(200)] + ["total = 0", "total = 0"])
    path = make_notebook("kit/replace.ipynb", [source, "y = 1"])
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        cid = ids_of(tab)[0]
        res = await call(ctx, "client_replace_in_cell", {"cell_id": cid, "old": "row_150 = 150", "new": "row_150 = -1"})
        assert not res["isError"], res
        assert "-row_150 = 150" in text(res) and "+row_150 = -1" in text(res) and "line 151" in text(res)
        assert res["structuredContent"]["line"] == 151
        await wait_until(lambda: "row_150 = -1\n" in str(tab.ycells[0]["source"]))

        res = await call(ctx, "client_replace_in_cell", {"cell_id": cid, "old": "total = 0", "new": "total = 1"})
        assert res["isError"] and res["structuredContent"]["occurrences"] == 2, res
        assert "occurs 2 times" in text(res) and "lines 201, 202" in text(res)
        res = await call(ctx, "client_replace_in_cell", {"cell_id": cid, "old": "row_150 = 150", "new": "x"})
        assert res["isError"] and res["structuredContent"]["occurrences"] == 0
        assert "occurs 0 times" in text(res) and "row_150 = -1" in text(res)  # the current source, to copy from
        assert str(tab.ycells[0]["source"]).count("total = 0") == 2  # nothing changed by either

        res = await call(ctx, "client_replace_in_cell", {"cell_id": "nope", "old": "a", "new": "b"})
        assert res["isError"] and res["structuredContent"]["error"] == "not_found"


async def test_clear_outputs_empties_the_named_cells_or_every_cell(
    make_notebook, start_kernel, tool_ctx, call, browser
):
    path = make_notebook("kit/clear.ipynb", ["print('one')", "print('two')", "3"])
    await start_kernel(path)
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = ids_of(tab)
        assert not (await call(ctx, "client_execute_cells", {"scope": "all"}))["isError"]
        await wait_until(lambda: all(len(c["outputs"]) == 1 for c in tab.ycells))
        res = await call(ctx, "client_clear_outputs", {"cell_ids": [ids[1]]})
        assert not res["isError"] and res["structuredContent"] == {"cleared": [ids[1]], "count": 1}, res
        await wait_until(lambda: len(tab.ycells[1]["outputs"]) == 0 and tab.ycells[1]["execution_count"] is None)
        assert len(tab.ycells[0]["outputs"]) == 1
        res = await call(ctx, "client_clear_outputs")
        assert res["structuredContent"]["cleared"] == [ids[0], ids[2]], res
        await wait_until(lambda: all(len(c["outputs"]) == 0 for c in tab.ycells))
        res = await call(ctx, "client_clear_outputs")
        assert not res["isError"] and "nothing to clear" in text(res)
        res = await call(ctx, "client_clear_outputs", {"cell_ids": [ids[0], "gone"]})
        assert res["isError"] and "nothing was cleared" in text(res)


async def test_execute_cells_runs_all_above_or_below_a_cell(make_notebook, start_kernel, tool_ctx, call, browser):
    path = make_notebook("kit/scope.ipynb", ["order = []", "order.append(1)", "order.append(2)", "print(order)"])
    await start_kernel(path)
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = ids_of(tab)
        res = await call(ctx, "client_execute_cells", {"scope": "above", "cell_id": ids[2]})
        assert [r["cell_id"] for r in res["structuredContent"]["results"]] == ids[:2], res
        res = await call(ctx, "client_execute_cells", {"scope": "below", "cell_id": ids[2]})
        assert [r["cell_id"] for r in res["structuredContent"]["results"]] == ids[2:], res
        assert "[1, 2]" in text(res)
        res = await call(ctx, "client_execute_cells", {"scope": "all"})
        assert [r["cell_id"] for r in res["structuredContent"]["results"]] == ids and "[1, 2]" in text(res)
        await wait_until(lambda: [str(o["text"]) for o in tab.ycells[3]["outputs"]] == ["[1, 2]\n"])
        for bad in ({"scope": "above"}, {"cell_ids": [ids[0]], "scope": "all"}, {}, {"cell_id": ids[0]}):
            res = await call(ctx, "client_execute_cells", bad)
            assert res["isError"] and res["structuredContent"]["error"] == "invalid_arguments", (bad, res)


async def test_the_kernel_tool_says_its_status_interrupts_and_restarts(make_notebook, start_kernel, tool_ctx, call):
    path = make_notebook("kit/kernel.ipynb", ["keep_me = 41", "import time\ntime.sleep(30)"])
    await start_kernel(path)
    ctx = await tool_ctx(path)
    ids = [c["id"] for c in (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"]]
    status = await call(ctx, "client_kernel", {"action": "status"})
    assert not status["isError"] and status["structuredContent"]["language"] == "python", status
    assert not (await call(ctx, "client_execute_cells", {"cell_ids": [ids[0]]}))["isError"]

    running = asyncio.ensure_future(call(ctx, "client_execute_cells", {"cell_ids": [ids[1]], "timeout": 60}))
    await asyncio.sleep(1.5)
    t0 = time.monotonic()
    res = await call(ctx, "client_kernel", {"action": "interrupt"})
    assert not res["isError"], res
    ran = await asyncio.wait_for(running, 20)
    assert "KeyboardInterrupt" in text(ran) and time.monotonic() - t0 < 15, ran
    assert "41" in text(await call(ctx, "client_execute_code", {"code": "print(keep_me)"}))  # variables stay

    res = await call(ctx, "client_kernel", {"action": "restart"})
    assert not res["isError"], res
    assert "keep_me" in text(res) and res["structuredContent"]["lost_variables"] == ["keep_me"], res
    res = await call(ctx, "client_execute_code", {"code": "print(keep_me)"})
    assert "NameError" in text(res), res  # a fresh kernel
    assert "7" in text(await call(ctx, "client_execute_code", {"code": "print(3 + 4)"}))


async def test_search_finds_lines_in_sources_and_outputs_and_a_pathological_pattern_stops_in_time(
    make_notebook, start_kernel, tool_ctx, call, browser
):
    path = make_notebook(
        "kit/search.ipynb",
        ["import math\nradius = 2\narea = math.pi * radius ** 2", "print('area is', area)", "a" * 60 + "b"],
    )
    await start_kernel(path)
    ctx = await tool_ctx(path)
    ids = [c["id"] for c in (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"]]
    await call(ctx, "client_execute_cells", {"cell_ids": ids[:2]})
    res = await call(ctx, "client_search_cells", {"pattern": "radius"})
    assert [(m["cell_id"], [r["line"] for r in m["lines"]]) for m in res["structuredContent"]["matches"]] == [
        (ids[0], [2, 3])
    ], res
    assert "line 2: radius = 2" in text(res)
    res = await call(ctx, "client_search_cells", {"pattern": r"area is \d+\.\d", "regex": True, "in": "outputs"})
    assert [(m["cell_id"], m["in"]) for m in res["structuredContent"]["matches"]] == [(ids[1], "outputs")], res
    res = await call(ctx, "client_search_cells", {"pattern": "AREA", "ignore_case": True, "in": "both"})
    assert {(m["cell_id"], m["in"]) for m in res["structuredContent"]["matches"]} == {
        (ids[0], "source"),
        (ids[1], "source"),
        (ids[1], "outputs"),
    }
    res = await call(ctx, "client_search_cells", {"pattern": "(unclosed", "regex": True})
    assert res["isError"] and res["structuredContent"]["error"] == "invalid_arguments"

    # a pattern that backtracks for ever: stopped by its time bound, and the server answers others meanwhile
    t0 = time.monotonic()
    slow = asyncio.ensure_future(call(ctx, "client_search_cells", {"pattern": "(a|aa)+$", "regex": True}))
    await asyncio.sleep(0.2)
    quick = await asyncio.wait_for(call(ctx, "client_notebook_outline"), 2)
    assert not quick["isError"] and not slow.done(), "the outline waited for the search"
    res = await asyncio.wait_for(slow, 15)
    assert time.monotonic() - t0 < 10 and "backtracks a lot" in text(res), res
    assert "backtracks a lot" in res["structuredContent"]["stopped"]


async def test_other_notebooks_are_listed_read_and_created_never_overwritten(
    make_notebook, tool_ctx, call, jp_root_dir, browser
):
    path = make_notebook("proj/main.ipynb", ["x = 1"])
    other = make_notebook("proj/other.ipynb", ["other_value = 7", "print(other_value)"])
    make_notebook("proj/.hidden.ipynb", ["secret = 1"])
    (jp_root_dir / "proj" / "data").mkdir()
    (jp_root_dir / "proj" / "notes.txt").write_text("not a notebook")
    ctx = await tool_ctx(path)
    res = await call(ctx, "client_list_notebooks")
    sc = res["structuredContent"]
    assert [n["path"] for n in sc["notebooks"]] == ["proj/main.ipynb", "proj/other.ipynb"], res
    assert sc["folders"] == ["proj/data"] and sc["notebooks"][0]["this_notebook"] is True
    assert ".hidden" not in text(res)

    res = await call(ctx, "client_read_notebook", {"path": other})
    assert res["structuredContent"]["via"] == "file" and "other_value = 7" in text(res), res
    assert [c["source"] for c in res["structuredContent"]["cells"]] == ["other_value = 7", "print(other_value)"]
    async with browser(other) as tab:  # open in a tab: the live document, with the user's unsaved typing
        tab.ycells[0]["source"].insert(0, "# typed\n")
        for _ in range(100):
            res = await call(ctx, "client_read_notebook", {"path": other, "cell_ids": [tab.ycells[0]["id"]]})
            if "# typed" in text(res):
                break
            await asyncio.sleep(0.05)
        assert res["structuredContent"]["via"] == "live" and "# typed" in text(res), res

    res = await call(
        ctx,
        "client_create_notebook",
        {"path": "proj/new.ipynb", "cells": [{"source": "# Title", "cell_type": "markdown"}, {"source": "z = 3"}]},
    )
    assert not res["isError"], res
    made = nbformat.read(jp_root_dir / "proj" / "new.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in made.cells] == [("markdown", "# Title"), ("code", "z = 3")]
    assert [c.id for c in made.cells] == res["structuredContent"]["cell_ids"]
    before = (jp_root_dir / other).read_text()
    for target in ("proj/new.ipynb", other, "proj/OTHER.ipynb/../other.ipynb"):
        res = await call(ctx, "client_create_notebook", {"path": target, "cells": [{"source": "overwritten"}]})
        assert res["isError"] and res["structuredContent"]["rule"] == "exists", (target, res)
    assert (jp_root_dir / other).read_text() == before
    res = await call(ctx, "client_create_notebook", {"path": "proj/missing/dir.ipynb"})
    assert res["isError"] and "does not exist" in text(res)
    res = await call(ctx, "client_create_notebook", {"path": "proj/notes.txt"})
    assert res["isError"] and res["structuredContent"]["rule"] == "not_a_notebook"


async def test_the_run_plan_follows_an_edit_and_runs_once_approved(
    make_notebook, start_kernel, tool_ctx, call, browser, acp
):
    path = make_notebook(
        "kit/plan.ipynb",
        [
            "base = 10",
            "df = [base, base + 1]",
            "total = sum(df)",
            "unrelated = 'x'",
            "print(total * 2)",
            "def f():\n    return df[0]",
        ],
    )
    await start_kernel(path)
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = ids_of(tab)
        assert not (await call(ctx, "client_execute_cells", {"scope": "all"}))["isError"]
        res = await call(ctx, "client_stale_cells")
        assert res["structuredContent"]["plan"] == [] and "Nothing is stale" in text(res), res

        # the user edits the first cell in the browser (not run): what depends on `base`, then on `df`, is stale
        src = tab.ycells[0]["source"]
        src.insert(len(src), "0")
        nb = await ctx.services.notebooks.open(path)
        await wait_until(lambda: nb.cells()[0]["source"] == "base = 100")
        res = await call(ctx, "client_stale_cells")
        plan = res["structuredContent"]["plan"]
        assert [(s["cell_id"], s["why"]) for s in plan] == [
            (ids[0], "edited"),
            (ids[1], "uses"),
            (ids[2], "uses"),
            (ids[4], "uses"),
            (ids[5], "uses"),
        ], res
        assert plan[2]["names"] == ["df"] and plan[3]["names"] == ["total"]
        assert text(res).startswith(f"Run 5 cells: {ids[0]} edited; {ids[1]} uses `base`; {ids[2]}, {ids[5]} use `df`")

        ctx.services.config.permission_policy = "ask"
        acp.hub.gate.settings.permission_policy = "ask"
        try:
            task = asyncio.ensure_future(call(ctx, "client_execute_cells", {"stale": True}))
            req = (await wait_until(lambda: pending(acp, ctx.session)))[0]
            card = req["tool_call"]
            assert card["title"].startswith(f"Run 5 cells: {ids[0]} edited"), card
            assert "uses `df`" in json.dumps(card)
            acp.hub.answer_permission(ctx.session, req["request_id"], "allow_once")
            res = await task
        finally:
            acp.hub.gate.settings.permission_policy = "auto"
        assert [r["cell_id"] for r in res["structuredContent"]["results"]] == [s["cell_id"] for s in plan], res
        assert "402" in text(res) and len(pending(acp, ctx.session)) == 0  # one question for the whole plan
        res = await call(ctx, "client_stale_cells")
        assert res["structuredContent"]["plan"] == [], res


async def test_the_run_plan_says_when_magics_make_it_uncertain(
    make_notebook, start_kernel, tool_ctx, call, jp_root_dir
):
    (jp_root_dir / "kit").mkdir(exist_ok=True)
    (jp_root_dir / "kit" / "helper.py").write_text("helped = 1\n")
    helper = jp_root_dir / "kit" / "helper.py"
    path = make_notebook(
        "kit/magic.ipynb", ["%load_ext autoreload\nstart = 1", f"%run {helper}", "print(helped + start)"]
    )
    await start_kernel(path)
    ctx = await tool_ctx(path)
    ids = [c["id"] for c in (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"]]
    ran = await call(ctx, "client_execute_cells", {"scope": "all"})
    assert [r["status"] for r in ran["structuredContent"]["results"]] == ["ok"] * 3, ran
    await call(ctx, "client_replace_in_cell", {"cell_id": ids[0], "old": "start = 1", "new": "start = 2"})
    res = await call(ctx, "client_stale_cells")
    sc = res["structuredContent"]
    assert [s["cell_id"] for s in sc["plan"]] == ids, res
    assert any(u.startswith(ids[1]) and "%run" in u for u in sc["uncertain"]), res
    assert "may use any name" in sc["summary"] and "Uncertain" in text(res)


class TestRestartAsks:
    @pytest.fixture
    def tools_config(self):
        return {"permission_policy": "ask"}

    async def test_a_restart_asks_and_its_card_says_what_the_kernel_loses(
        self, make_notebook, start_kernel, tool_ctx, call, acp
    ):
        path = make_notebook("kit/ask.ipynb", [])
        await start_kernel(path)
        ctx = await tool_ctx(path)
        acp.hub.gate.allow_always(ctx.session, "client_execute_code")
        await call(ctx, "client_execute_code", {"code": "import json\nmodel_weights = [1, 2]\ndata_frame = {}"})
        status = await call(ctx, "client_kernel", {"action": "status"})  # status changes nothing: not asked
        assert not status["isError"] and not pending(acp, ctx.session)
        task = asyncio.ensure_future(call(ctx, "client_kernel", {"action": "restart"}))
        req = (await wait_until(lambda: pending(acp, ctx.session)))[0]
        card = json.dumps(req["tool_call"])
        assert req["tool_call"]["title"] == "Restart the kernel" and "data_frame" in card and "model_weights" in card
        assert "imported module" in card
        acp.hub.answer_permission(ctx.session, req["request_id"], "reject_once")
        res = await task
        assert res["isError"] and res["structuredContent"]["error"] == "rejected"
        assert "[1, 2]" in text(await call(ctx, "client_execute_code", {"code": "print(model_weights)"}))


class TestWithoutRTC:
    @pytest.fixture
    def rtc_enabled(self):
        return False

    async def test_replace_and_clear_go_to_the_file(self, make_notebook, tool_ctx, call, jp_root_dir):
        path = make_notebook("kit/plain.ipynb", ["a = 1\nb = 2", "print(a)"])
        nb = nbformat.read(jp_root_dir / path, as_version=4)
        nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
        nb.cells[1].execution_count = 3
        nbformat.write(nb, jp_root_dir / path)
        ctx = await tool_ctx(path)
        ids = [c.id for c in nb.cells]
        res = await call(ctx, "client_replace_in_cell", {"cell_id": ids[0], "old": "b = 2", "new": "b = 20"})
        assert not res["isError"] and res["structuredContent"]["line"] == 2, res
        res = await call(ctx, "client_clear_outputs")
        assert res["structuredContent"]["cleared"] == [ids[1]], res
        saved = nbformat.read(jp_root_dir / path, as_version=4)
        assert saved.cells[0].source == "a = 1\nb = 20"
        assert saved.cells[1].outputs == [] and saved.cells[1].execution_count is None
