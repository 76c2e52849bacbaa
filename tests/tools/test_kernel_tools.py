"""Kernel tools against real kernels: execution into the live document, variables while busy,
scratch code, a dead kernel, and which tools each notebook gets."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

from .helpers import text, wait_until


async def test_execute_cells_writes_outputs_into_the_document(make_notebook, start_kernel, tool_ctx, call, browser):
    path = make_notebook("ex/nb.ipynb", ["x = 21\nprint('hello')\nprint('world')", "x * 2", "1/0", "never = 1"])
    await start_kernel(path)
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = [c["id"] for c in tab.ycells]
        res = await call(ctx, "client_execute_cells", {"cell_ids": ids[:2]})
        assert not res["isError"], res
        body = text(res)
        assert "hello\nworld" in body and "42" in body
        # outputs and counts land in the live document (the tab sees them); streams merged
        await wait_until(lambda: len(tab.ycells[1]["outputs"]) == 1 and tab.ycells[1]["execution_count"] == 2)
        first = tab.ycells[0]["outputs"].to_py()
        assert len(first) == 1 and first[0]["name"] == "stdout" and first[0]["text"] == "hello\nworld\n"
        assert tab.ycells[1]["outputs"].to_py()[0]["data"]["text/plain"] == "42"
        assert tab.ycells[0]["execution_state"] == "idle"

        # an error stops the run; later cells are not run
        res = await call(ctx, "client_execute_cells", {"cell_ids": ids[2:]})
        assert "ZeroDivisionError" in text(res) and "not run" in text(res)
        await wait_until(lambda: len(tab.ycells[2]["outputs"]) == 1)
        assert tab.ycells[2]["outputs"].to_py()[0]["output_type"] == "error"
        assert len(tab.ycells[3]["outputs"]) == 0

        # read_cells shows the error with its traceback, without ANSI codes
        res = await call(ctx, "client_read_cells", {"cell_ids": [ids[2]]})
        assert "[error] ZeroDivisionError" in text(res) and "\x1b[" not in text(res)

        # a timeout interrupts the kernel and says so
        cid = (await call(ctx, "client_insert_cell", {"source": "import time\ntime.sleep(30)"}))["structuredContent"][
            "cell_id"
        ]
        t0 = time.monotonic()
        res = await call(ctx, "client_execute_cells", {"cell_ids": [cid], "timeout": 1})
        assert res["isError"] and "interrupted" in text(res)
        assert time.monotonic() - t0 < 15
        # the kernel is usable again
        res = await call(ctx, "client_execute_code", {"code": "print(x + 1)"})
        assert "22" in text(res), res


async def test_variables_answer_while_a_cell_runs_and_change_nothing(
    make_notebook, start_kernel, tool_ctx, call, browser
):
    path = make_notebook(
        "vars.ipynb",
        [
            "import numpy as np\narr = np.arange(10.0)\nbig = 'x' * 50000\nitems = list(range(1000))\nconf = {'a': 1, 'b': [1, 2]}\ndef helper(a, b=2):\n    'Adds.'\n    return a + b",
            "import time\ntime.sleep(5)",
            "count_probe = 1",
        ],
    )
    await start_kernel(path)
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = [c["id"] for c in tab.ycells]
        await call(ctx, "client_execute_cells", {"cell_ids": [ids[0]]})
        res = await call(ctx, "client_list_variables")
        assert not res["isError"], res
        sc = res["structuredContent"]
        names = {v["name"]: v for v in sc["variables"]}
        assert sc["method"] == "inspectVariables"
        assert {"arr", "big", "items", "conf"} <= set(names) and "np" not in names and "In" not in names
        assert len(names["big"]["value"]) < 400  # bounded
        assert len(text(res)) < 5000

        res = await call(ctx, "client_inspect_variable", {"name": "arr"})
        sc = res["structuredContent"]
        assert sc["shape"] == [10] and sc["dtype"] == "float64" and sc["max"] == 9.0 and sc["mean"] == 4.5
        res = await call(ctx, "client_inspect_variable", {"name": "items"})
        assert res["structuredContent"]["length"] == 1000 and len(res["structuredContent"]["items"]) == 10
        res = await call(ctx, "client_inspect_variable", {"name": "helper"})
        assert res["structuredContent"]["signature"] == "(a, b=2)"
        res = await call(ctx, "client_inspect_variable", {"name": "missing"})
        assert res["isError"] and "not defined" in text(res)
        res = await call(ctx, "client_inspect_variable", {"name": "__import__('os').system('true')"})
        assert res["isError"] and res["structuredContent"]["error"] == "invalid_arguments"

        # a cell runs for 4 s: listing and inspecting still answer at once
        running = asyncio.ensure_future(call(ctx, "client_execute_cells", {"cell_ids": [ids[1]]}))
        await wait_until(lambda: tab.ycells[1]["execution_state"] == "running")
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        res = await call(ctx, "client_list_variables", {"filter": "arr"})
        assert [v["name"] for v in res["structuredContent"]["variables"]] == ["arr"]
        res2 = await call(ctx, "client_inspect_variable", {"name": "conf"})
        assert time.monotonic() - t0 < 3.0, "variables waited for the running cell"
        assert res2["structuredContent"]["length"] == 2
        assert not running.done()
        await running

        # none of this touched the execution count: the next cell is [3]
        await call(ctx, "client_execute_cells", {"cell_ids": [ids[2]]})
        await wait_until(lambda: tab.ycells[2]["execution_count"] == 3)
        # and nothing leaked into the user's namespace
        res = await call(ctx, "client_list_variables", {"filter": "acp"})
        assert res["structuredContent"]["total"] == 0


async def test_execute_code_saves_nothing_into_the_notebook(make_notebook, start_kernel, tool_ctx, call, browser):
    path = make_notebook("scratch.ipynb", ["a = 5"])
    await start_kernel(path)
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        res = await call(ctx, "client_execute_code", {"code": "print('out', 6 * 7)\n6 * 7"})
        assert not res["isError"], res
        assert "out 42" in text(res) and "[result]\n42" in text(res)
        assert len(tab.ycells) == 1 and len(tab.ycells[0]["outputs"]) == 0
        res = await call(ctx, "client_execute_code", {"code": "raise ValueError('bad')"})
        assert "ValueError: bad" in text(res)


async def test_dead_kernel_is_an_answer(make_notebook, start_kernel, tool_ctx, call, jp_serverapp):
    path = make_notebook("dead.ipynb", ["a = 1"])
    kid = await start_kernel(path)
    ctx = await tool_ctx(path)
    kernel = jp_serverapp.kernel_manager.get_kernel(kid)
    pid = kernel.provisioner.process.pid
    os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: kernel.provisioner.process.poll() is not None, timeout=10)
    for name, args in [
        ("client_list_variables", {}),
        ("client_execute_code", {"code": "1"}),
        ("client_inspect_variable", {"name": "a"}),
    ]:
        res = await call(ctx, name, args)
        assert res["isError"] and "dead" in text(res), (name, res)


async def test_tool_lists_follow_each_notebook(
    make_notebook, start_kernel, tool_ctx, acp, jp_root_dir, jp_data_dir, jp_serverapp
):
    # a non-Python kernel spec (it runs ipykernel, but says it is another language)
    spec_dir = jp_data_dir / "kernels" / "otherlang"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Other",
                "language": "otherlang",
            }
        )
    )
    py = make_notebook("a/py.ipynb", ["1"])
    none = make_notebook("a/none.ipynb", ["1"])
    other = make_notebook("b/other.ipynb", ["1"])
    ro = make_notebook("b/ro.ipynb", ["1"])
    await start_kernel(py)
    await start_kernel(other, "otherlang")
    await start_kernel(ro)
    os.chmod(jp_root_dir / ro, 0o444)
    if os.geteuid() == 0:  # root may write anyway; make the contents manager say what it says for others
        cm = jp_serverapp.contents_manager
        real_get = cm.get

        def get(path, *args, **kwargs):
            model = real_get(path, *args, **kwargs)
            if path == ro:
                model = {**model, "writable": False}
            return model

        cm.get = get
    ctxs = await asyncio.gather(*(tool_ctx(p) for p in (py, none, other, ro)))
    lists = await asyncio.gather(*(acp.tools.list_tools(c) for c in ctxs))
    names = [{t.name for t in tools} for tools in lists]
    everything = {t.name for t in acp.tools.all()}
    mutating = {
        "client_insert_cell",
        "client_edit_cell",
        "client_delete_cells",
        "client_move_cell",
        "client_execute_cells",
        "client_replace_in_cell",
        "client_clear_outputs",
    }
    python_only = {"client_list_variables", "client_inspect_variable", "client_stale_cells"}
    kernel_only = python_only | {"client_execute_code", "client_execute_cells", "client_kernel"}
    assert names[0] == everything
    assert names[1] == everything - kernel_only
    assert names[2] == everything - python_only
    assert names[3] == everything - mutating
    assert ctxs[0].cwd.endswith("/a") and ctxs[2].cwd.endswith("/b")
