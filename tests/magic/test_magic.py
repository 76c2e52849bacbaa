"""%acp / %%acp in real kernels started by the real server, against real agent subprocesses."""

from __future__ import annotations

import json
import os

import pytest

from ..conftest import message_text
from .conftest import wait_until

pytestmark = pytest.mark.timeout(120)


async def test_streams_into_the_output(start_kernel, make_notebook, api):
    nb = make_notebook("work/nb.ipynb")
    k = await start_kernel(nb)
    words = " ".join(f"w{i}" for i in range(40))
    res = await k.run(f"%%acp echo\n{words}")
    assert res.status == "ok", res.text()
    shown = res.displays()
    assert shown[0]["msg_type"] == "display_data"
    updates = [m for m in shown if m["msg_type"] == "update_display_data"]
    assert updates, "the answer is updated in place as it streams"
    final = res.final()
    assert final["data"]["text/markdown"].rstrip().endswith(words)
    meta = final["metadata"]["jupyter_acp"]
    assert meta["agent"] == "echo" and meta["notebook"] == "work/nb.ipynb" and meta["format"] == "markdown"
    # the same session the HTTP API sees for this notebook
    sessions = await api.call("GET", "sessions", params={"notebook": nb})
    assert [s["id"] for s in sessions] == [meta["session_id"]]
