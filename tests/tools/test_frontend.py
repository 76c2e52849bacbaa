"""The frontend bridge: a WebSocket client plays the labextension's tab."""

from __future__ import annotations

import asyncio
import json

import pytest

from .helpers import text


async def test_get_selection_through_the_tab(make_notebook, tool_ctx, call, jp_ws_fetch):
    path = make_notebook("sel/nb.ipynb", ["y = x + 41", "z = 1"])
    other = make_notebook("sel/other.ipynb", ["q = 1"])
    ctx = await tool_ctx(path)

    # no tab: a plain answer, not a crash
    res = await call(ctx, "client_get_selection")
    assert res["isError"] and "not open in a browser tab" in text(res)

    ws = await jp_ws_fetch("jupyter-acp", "frontend", "ws", params={"clientId": "tab-1"})
    ws2 = await jp_ws_fetch("jupyter-acp", "frontend", "ws", params={"clientId": "tab-2"})
    try:
        await ws.write_message(json.dumps({"method": "focus", "params": {"path": path}}))
        await ws2.write_message(json.dumps({"method": "focus", "params": {"path": other}}))
        await asyncio.sleep(0.1)

        async def answer(sock, result):
            req = json.loads(await sock.read_message())
            assert req["method"] == "getSelection" and req["params"]["path"] == path
            await sock.write_message(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}))

        selection = {
            "path": path,
            "activeCellIndex": 0,
            "activeCellId": "c0",
            "mode": "edit",
            "selectedCells": [0],
            "selectedText": "y = x + 41",
            "cursor": {"line": 0, "column": 10},
            "selection": {"start": {"line": 0, "column": 0}, "end": {"line": 0, "column": 10}},
        }
        # the request goes to the tab focused on this notebook (tab-1), even though tab-2 focused later
        task = asyncio.ensure_future(call(ctx, "client_get_selection"))
        await answer(ws, selection)
        res = await task
        assert not res["isError"], res
        assert "y = x + 41" in text(res) and "c0" in text(res)
        assert res["structuredContent"]["selectedCells"] == [0]

        # a tab that answers with an error
        task = asyncio.ensure_future(call(ctx, "client_get_selection"))
        req = json.loads(await ws.read_message())
        await ws.write_message(json.dumps({"id": req["id"], "error": {"message": "no notebook panel"}}))
        res = await task
        assert res["isError"] and "no notebook panel" in text(res)
    finally:
        ws.close()
        ws2.close()
    await asyncio.sleep(0.2)
    res = await call(ctx, "client_get_selection")
    assert res["isError"] and "not open" in text(res)


class TestSelectionTimeout:
    @pytest.fixture
    def tools_config(self):
        return {"permission_policy": "auto", "selection_timeout": 0.5}

    async def test_silent_tab_times_out(self, make_notebook, tool_ctx, call, jp_ws_fetch):
        path = make_notebook("t.ipynb", ["1"])
        ctx = await tool_ctx(path)
        ws = await jp_ws_fetch("jupyter-acp", "frontend", "ws", params={"clientId": "slow"})
        try:
            await ws.write_message(json.dumps({"method": "focus", "params": {"path": path}}))
            await asyncio.sleep(0.1)
            res = await call(ctx, "client_get_selection")
            assert res["isError"] and "did not answer" in text(res)
        finally:
            ws.close()


class TestEditsThroughTheTabWithoutRTC:
    @pytest.fixture
    def rtc_enabled(self):
        return False

    async def test_reads_and_edits_go_to_the_open_tab(self, make_notebook, tool_ctx, call, jp_ws_fetch, jp_root_dir):
        path = make_notebook("tab.ipynb", ["on disk"])
        ctx = await tool_ctx(path)
        ws = await jp_ws_fetch("jupyter-acp", "frontend", "ws", params={"clientId": "lab"})
        tab_cells = [
            {"id": "c1", "cell_type": "code", "source": "unsaved in the tab", "outputs": [], "execution_count": None}
        ]
        edits = []

        async def serve():
            while True:
                msg = await ws.read_message()
                if msg is None:
                    return
                req = json.loads(msg)
                if req["method"] == "getCells":
                    result = {"cells": tab_cells, "dirty": True}
                else:
                    edits.append(req["params"])
                    result = {}
                await ws.write_message(json.dumps({"id": req["id"], "result": result}))

        server = asyncio.ensure_future(serve())
        try:
            await ws.write_message(json.dumps({"method": "focus", "params": {"path": path}}))
            await asyncio.sleep(0.1)
            res = await call(ctx, "client_notebook_outline")
            assert "unsaved in the tab" in text(res) and res["structuredContent"]["dirty"] is True
            res = await call(
                ctx, "client_edit_cell", {"cell_id": "c1", "old_string": "unsaved", "new_string": "edited"}
            )
            assert not res["isError"], res
            assert edits == [{"path": path, "op": "setSource", "cellId": "c1", "source": "edited in the tab"}]
            # the file was not touched: the tab owns the notebook
            assert "on disk" in (jp_root_dir / path).read_text()
        finally:
            ws.close()
            server.cancel()
