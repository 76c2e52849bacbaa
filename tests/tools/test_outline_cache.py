"""The outline's rows are built once per document state: never stale after a change."""

from __future__ import annotations

import asyncio

from jupyter_acp.tools import cell_reading
from jupyter_acp.tools.cell_reading import _outline_rows


def test_rows_kept_for_the_same_list_rebuilt_for_a_new_one():
    cells = [{"id": "a", "cell_type": "code", "source": "x = 1\ny = 2", "execution_count": 3, "outputs": []}]
    rows, lines = _outline_rows("t/nb.ipynb", cells, 0, 100)
    assert rows[0]["first_line"] == "x = 1" and rows[0]["line_count"] == 2
    assert _outline_rows("t/nb.ipynb", cells, 0, 100)[0] is rows  # same document state: not rebuilt
    assert _outline_rows("t/nb.ipynb", cells, 1, 100)[0] == []  # another page, kept beside the first
    assert _outline_rows("t/nb.ipynb", cells, 0, 100)[0] is rows
    changed = [{**cells[0], "source": "z = 3"}]
    rows2, lines2 = _outline_rows("t/nb.ipynb", changed, 0, 100)
    assert rows2[0]["first_line"] == "z = 3" and "'z = 3'" in lines2[0]
    assert cell_reading._OUTLINE_ROWS["t/nb.ipynb"][0] is changed  # one list held per notebook: the newest
    # a backend that reads afresh every time (file, tab): nothing kept
    assert _outline_rows("t/file.ipynb", cells, 0, 100, keep=False)[0] == rows
    assert "t/file.ipynb" not in cell_reading._OUTLINE_ROWS
    for i in range(cell_reading._OUTLINE_ROWS_KEPT + 5):  # bounded
        _outline_rows(f"t/{i}.ipynb", cells, 0, 100)
    assert len(cell_reading._OUTLINE_ROWS) == cell_reading._OUTLINE_ROWS_KEPT


async def test_outline_follows_the_live_document(make_notebook, tool_ctx, call, browser):
    path = make_notebook("oc/nb.ipynb", ["x = 1", "y = 2\nprint(y)"])
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        first = await call(ctx, "client_notebook_outline")
        again = await call(ctx, "client_notebook_outline")
        assert first == again and not first["isError"] and first["structuredContent"]["via"] == "live"
        # the live document's unchanged state: the rows were built once
        assert first["structuredContent"]["cells"][0] is again["structuredContent"]["cells"][0]
        # an answer is its own: changing it does not change the next one
        first["structuredContent"]["cells"].clear()
        assert len((await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"]) == 2

        src = tab.ycells[0]["source"]
        src.insert(0, "# typed by the user\n")  # the user types in the browser

        for _ in range(200):  # the edit reaches the server's copy of the document
            res = await call(ctx, "client_notebook_outline")
            if res["structuredContent"]["cells"][0]["first_line"] == "# typed by the user":
                break
            await asyncio.sleep(0.05)
        res = await call(ctx, "client_notebook_outline")
        assert res["structuredContent"]["cells"][0]["line_count"] == 2
        assert "'# typed by the user'" in res["content"][0]["text"]
        paged = (await call(ctx, "client_notebook_outline", {"start": 1}))["structuredContent"]
        assert [c["first_line"] for c in paged["cells"]] == ["y = 2"]
