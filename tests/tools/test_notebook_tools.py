"""Notebook tools against the real live document, with a Y client playing the browser."""

from __future__ import annotations

import json

import pytest

from .helpers import text, wait_until


def user_types(tab, index: int, more: str) -> None:
    """The user types at the end of a cell in the browser tab."""
    t = tab.ycells[index]["source"]
    t.insert(len(t), more)


def sources(nb) -> list[str]:
    return [str(c["source"]) for c in nb.ycells]


async def test_outline_read_insert_edit_delete_move_seen_live(make_notebook, tool_ctx, call, browser):
    path = make_notebook("sub/nb.ipynb", ["x = 1", "y = x + 1\nprint(y)", "# notes"])
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = [c["id"] for c in tab.ycells]

        res = await call(ctx, "client_notebook_outline")
        assert not res["isError"], res
        sc = res["structuredContent"]
        assert sc["path"] == "sub/nb.ipynb" and sc["kernel"] is None and sc["cell_count"] == 3
        assert [c["id"] for c in sc["cells"]] == ids
        assert sc["cells"][1]["first_line"] == "y = x + 1" and sc["cells"][1]["line_count"] == 2
        paged = (await call(ctx, "client_notebook_outline", {"start": 1, "limit": 1}))["structuredContent"]
        assert [c["index"] for c in paged["cells"]] == [1] and paged["next_start"] == 2

        res = await call(ctx, "client_read_cells", {"cell_ids": [ids[1]]})
        assert "print(y)" in text(res) and res["structuredContent"]["cells"][0]["source"] == "y = x + 1\nprint(y)"

        # insert: the tab sees it
        res = await call(ctx, "client_insert_cell", {"source": "z = 3", "after_cell_id": ids[0]})
        assert not res["isError"], res
        new_id = res["structuredContent"]["cell_id"]
        await wait_until(lambda: sources(tab) == ["x = 1", "z = 3", "y = x + 1\nprint(y)", "# notes"])
        assert tab.ycells[1]["id"] == new_id

        # edit by old/new string; the tab sees the change
        res = await call(ctx, "client_edit_cell", {"cell_id": ids[1], "old_string": "x + 1", "new_string": "x + 2"})
        assert not res["isError"], res
        assert "-y = x + 1" in text(res) and "+y = x + 2" in text(res)
        await wait_until(lambda: str(tab.ycells[2]["source"]) == "y = x + 2\nprint(y)")

        # the user types into that cell: the agent's next edit is refused with the current source
        user_types(tab, 2, "\n# user note")
        nb = await ctx.services.notebooks.open(path)
        await wait_until(lambda: "user note" in nb.cells()[2]["source"])
        res = await call(ctx, "client_edit_cell", {"cell_id": ids[1], "source": "y = 0"})
        assert res["isError"] and res["structuredContent"]["error"] == "stale"
        assert "# user note" in text(res)
        assert "user note" in str(tab.ycells[2]["source"])
        # having been shown the current source, the retry goes through
        res = await call(ctx, "client_edit_cell", {"cell_id": ids[1], "source": "y = 0\n# user note"})
        assert not res["isError"], res
        await wait_until(lambda: str(tab.ycells[2]["source"]) == "y = 0\n# user note")

        # whole-source replacement of a cell never read is refused with its source
        res = await call(ctx, "client_edit_cell", {"cell_id": ids[2], "source": "overwrite"})
        assert res["isError"] and "# notes" in text(res)

        # ambiguous and missing old_string
        res = await call(ctx, "client_edit_cell", {"cell_id": ids[0], "old_string": "nope", "new_string": "a"})
        assert res["isError"] and "x = 1" in text(res)

        # delete: every id checked first
        res = await call(ctx, "client_delete_cells", {"cell_ids": [new_id, "missing"]})
        assert res["isError"] and "nothing was deleted" in text(res)
        assert len(tab.ycells) == 4
        res = await call(ctx, "client_delete_cells", {"cell_ids": [new_id]})
        assert not res["isError"], res
        await wait_until(lambda: len(tab.ycells) == 3)

        # move the notes cell to the top
        res = await call(ctx, "client_move_cell", {"cell_id": ids[2], "to_index": 0})
        assert not res["isError"], res
        await wait_until(lambda: [c["id"] for c in tab.ycells] == [ids[2], ids[0], ids[1]])
        res = await call(ctx, "client_move_cell", {"cell_id": ids[2], "after_cell_id": ids[1]})
        await wait_until(lambda: [c["id"] for c in tab.ycells] == [ids[0], ids[1], ids[2]])


async def test_revert_agent_edits_keeps_user_edits(make_notebook, tool_ctx, call, browser, api, acp):
    path = make_notebook("nb.ipynb", ["a = 1", "b = 2"])
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = [c["id"] for c in tab.ycells]
        await call(ctx, "client_insert_cell", {"source": "agent_cell()"})
        await call(ctx, "client_edit_cell", {"cell_id": ids[0], "old_string": "a = 1", "new_string": "a = 100"})
        user_types(tab, 1, "  # user")
        await wait_until(lambda: len(tab.ycells) == 3 and str(tab.ycells[0]["source"]) == "a = 100")
        nb = await ctx.services.notebooks.open(path)
        await wait_until(lambda: nb.cells()[1]["source"] == "b = 2  # user")

        listed = await api.call("GET", "sessions", ctx.session.id, "revert")
        assert listed == {"turns": [None]}
        res = await api.call("POST", "sessions", ctx.session.id, "revert", body={})
        assert res["edits"] == 2
        await wait_until(lambda: sources(tab) == ["a = 1", "b = 2  # user"])
        # nothing left to revert
        with pytest.raises(Exception) as info:
            await api.call("POST", "sessions", ctx.session.id, "revert", body={})
        assert "409" in str(info.value)


async def test_schema_validation_and_unknown_tools(make_notebook, tool_ctx, call):
    path = make_notebook("v.ipynb", ["1"])
    ctx = await tool_ctx(path)
    res = await call(ctx, "client_read_cells", {"cell_ids": "notalist"})
    assert res["isError"] and res["structuredContent"]["error"] == "invalid_arguments"
    res = await call(ctx, "client_insert_cell", {"source": "x", "bogus": 1})
    assert res["isError"] and "bogus" in text(res)
    res = await call(ctx, "client_nope", {})
    assert res["isError"] and res["structuredContent"]["error"] == "unknown_tool"
    # no kernel: the execution tools are not available, and a call to one says so
    res = await call(ctx, "client_execute_code", {"code": "1"})
    assert res["isError"] and res["structuredContent"]["error"] == "unknown_tool"


@pytest.fixture
def tools_config_ask():
    return {"permission_policy": "ask"}


class TestPermissions:
    @pytest.fixture
    def tools_config(self):
        return {"permission_policy": "ask", "tool_policies": {"client_delete_cells": "deny"}}

    async def test_destructive_tools_ask_the_user(self, make_notebook, tool_ctx, call, acp, api):
        import asyncio

        path = make_notebook("p.ipynb", ["a = 1"])
        ctx = await tool_ctx(path)
        cid = (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"][0]["id"]

        def pending():
            evs = acp.hub.events(ctx.session)
            return [
                e
                for e in evs
                if e["type"] == "permission_request"
                and not any(r["type"] == "permission_resolved" and r["request_id"] == e["request_id"] for r in evs)
            ]

        # an inserted cell is a change of the user's notebook: asked, with the cell on the card
        task = asyncio.ensure_future(call(ctx, "client_insert_cell", {"source": "new"}))
        req = (await wait_until(pending))[0]
        assert req["tool_call"]["title"] == "Insert a code cell at the end" and "+new" in json.dumps(req["tool_call"])
        acp.hub.answer_permission(ctx.session, req["request_id"], "allow_once")
        assert not (await task)["isError"]

        task = asyncio.ensure_future(
            call(ctx, "client_edit_cell", {"cell_id": cid, "old_string": "1", "new_string": "2"})
        )
        req = (await wait_until(pending))[0]
        assert (
            req["source"] == "client"
            and req["tool_call"]["kind"] == "edit"
            and "+a = 2" in json.dumps(req["tool_call"])
        )
        acp.hub.answer_permission(ctx.session, req["request_id"], "reject_once")
        res = await task
        assert res["isError"] and res["structuredContent"]["error"] == "rejected"

        task = asyncio.ensure_future(
            call(ctx, "client_edit_cell", {"cell_id": cid, "old_string": "1", "new_string": "2"})
        )
        req = (await wait_until(pending))[0]
        acp.hub.answer_permission(ctx.session, req["request_id"], "allow_always")
        assert not (await task)["isError"]
        # always allowed now: no question
        res = await call(ctx, "client_edit_cell", {"cell_id": cid, "old_string": "2", "new_string": "3"})
        assert not res["isError"] and not pending()
        # deny by policy
        res = await call(ctx, "client_delete_cells", {"cell_ids": [cid]})
        assert res["isError"] and res["structuredContent"]["error"] == "denied"


class TestWithoutRTC:
    @pytest.fixture
    def rtc_enabled(self):
        return False

    async def test_edits_go_to_the_file_and_no_room_is_created(
        self, make_notebook, tool_ctx, call, jp_root_dir, jp_serverapp
    ):
        import nbformat

        path = make_notebook("plain.ipynb", ["a = 1"])
        ctx = await tool_ctx(path)
        assert "jupyter_server_ydoc" not in jp_serverapp.web_app.settings
        out = (await call(ctx, "client_notebook_outline"))["structuredContent"]
        cid = out["cells"][0]["id"]
        res = await call(ctx, "client_insert_cell", {"source": "b = 2"})
        assert not res["isError"], res
        res = await call(ctx, "client_edit_cell", {"cell_id": cid, "old_string": "a = 1", "new_string": "a = 5"})
        assert not res["isError"], res
        nb = nbformat.read(jp_root_dir / path, as_version=4)
        assert [c.source for c in nb.cells] == ["a = 5", "b = 2"]
