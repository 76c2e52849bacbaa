"""Per-cell undo of the agent's edits: one cell's agent edits reverted alone, the user's later
edits of it and the agent's other edits kept; an inserted cell the user typed in is not deleted; "accept" stops
offering it; the revert notice carries turn_id and edits (no ids in its text)."""

from __future__ import annotations

import json

import pytest

from .helpers import wait_until
from .test_notebook_tools import sources, user_types


async def reverted(api, sid: str, n: int) -> dict:
    """The n-th revert notice of the session (waits for it)."""
    evs = await api.wait_for(sid, lambda es: len([e for e in es if e.get("phase") == "reverted"]) >= n)
    return [e for e in evs if e["type"] == "notice" and e.get("phase") == "reverted"][n - 1]


async def test_revert_one_cell_keeps_the_rest(make_notebook, tool_ctx, call, browser, api, acp):
    path = make_notebook("cells.ipynb", ["a = 1", "b = 2"])
    ctx = await tool_ctx(path)
    sid = ctx.session.id
    async with browser(path) as tab:
        ids = [c["id"] for c in tab.ycells]
        for cid, old, new in ((ids[0], "a = 1", "a = 100"), (ids[1], "b = 2", "b = 200")):
            res = await call(ctx, "client_edit_cell", {"cell_id": cid, "old_string": old, "new_string": new})
            assert not res["isError"], res
        res = await call(ctx, "client_insert_cell", {"source": "agent_cell()"})
        new_id = res["structuredContent"]["cell_id"]
        await wait_until(lambda: sources(tab) == ["a = 100", "b = 200", "agent_cell()"])
        user_types(tab, 0, "  # mine")
        nb = await ctx.services.notebooks.open(path)
        await wait_until(lambda: nb.cells()[0]["source"] == "a = 100  # mine")

        listed = await api.call("GET", "sessions", sid, "revert", params={"cells": "1"})
        assert set(listed["cells"]) == {ids[0], ids[1], new_id}

        res = await api.call("POST", "sessions", sid, "revert", body={"cell_id": ids[0]})
        assert res["edits"] == 1 and res["cell_id"] == ids[0]
        # only that cell: the user's words stay, the agent's other edits stay
        await wait_until(lambda: sources(tab) == ["a = 1  # mine", "b = 200", "agent_cell()"])
        notice = await reverted(api, sid, 1)
        assert notice["cell_id"] == ids[0] and notice["edits"] == 1 and "turn_id" in notice
        assert ids[0] not in notice["text"] and "one cell" in notice["text"]
        listed = await api.call("GET", "sessions", sid, "revert", params={"cells": "1"})
        assert set(listed["cells"]) == {ids[1], new_id}
        # a second undo of the same cell has nothing left: an answer that says so
        with pytest.raises(Exception) as info:
            await api.call("POST", "sessions", sid, "revert", body={"cell_id": ids[0]})
        assert "409" in str(info.value)

        # the inserted cell, typed in by the user: not deleted (their words would go)
        user_types(tab, 2, "  # kept")
        await wait_until(lambda: nb.cells()[2]["source"] == "agent_cell()  # kept")
        with pytest.raises(Exception) as info:
            await api.call("POST", "sessions", sid, "revert", body={"cell_id": new_id})
        assert "409" in str(info.value)
        assert len(tab.ycells) == 3
        # accepted: no per-cell undo offered any more
        res = await api.call("POST", "sessions", sid, "revert", body={"cell_id": new_id, "accept": True})
        assert res["accepted"] == 1
        listed = await api.call("GET", "sessions", sid, "revert", params={"cells": "1"})
        assert set(listed["cells"]) == {ids[1]}

        # the whole turn's revert still works on what is left, and does not undo cell 0 twice
        res = await api.call("POST", "sessions", sid, "revert", body={})
        await wait_until(lambda: sources(tab) == ["a = 1  # mine", "b = 2"])
        notice = await reverted(api, sid, 2)
        assert "cell_id" not in notice and notice["edits"] == res["edits"]


async def test_revert_an_inserted_cell_deletes_it(make_notebook, tool_ctx, call, browser, api, acp):
    path = make_notebook("ins.ipynb", ["a = 1"])
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        res = await call(ctx, "client_insert_cell", {"source": "new()"})
        new_id = res["structuredContent"]["cell_id"]
        res = await call(ctx, "client_edit_cell", {"cell_id": new_id, "old_string": "new()", "new_string": "new(2)"})
        assert not res["isError"], res
        await wait_until(lambda: sources(tab) == ["a = 1", "new(2)"])
        res = await api.call("POST", "sessions", ctx.session.id, "revert", body={"cell_id": new_id})
        assert res["edits"] == 2
        await wait_until(lambda: sources(tab) == ["a = 1"])
        # nothing of the turn is left: the turn is no longer offered
        assert (await api.call("GET", "sessions", ctx.session.id, "revert")) == {"turns": []}
        body = json.dumps({"cell_id": 5})
        with pytest.raises(Exception) as info:
            await api.call("POST", "sessions", ctx.session.id, "revert", body=json.loads(body))
        assert "400" in str(info.value)
