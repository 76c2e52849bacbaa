"""A kernel a script started is up: the first prompts do not wait for it.

Jupyter calls a kernel started through ``POST api/sessions`` ``starting`` until some client sends it a request, and
with no JupyterLab page nobody does. The project asks the kernel itself (one ``kernel_info``), so neither prompt
waits ``kernel_start_wait`` nor says "waiting for the notebook's kernel to start".
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest


@pytest.fixture
def acp_config():
    # long enough that one wait would show plainly in the turn's time
    return {"kernel_start_wait": 8.0}


async def test_a_kernel_started_by_a_script_is_not_waited_for_by_either_prompt(jp_fetch, api, make_notebook):
    path = make_notebook("scripted.ipynb", ["x = 1"])
    resp = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps({"path": path, "type": "notebook", "name": path, "kernel": {"name": "python3"}}),
    )
    kernel = json.loads(resp.body)["kernel"]
    # the kernel is up once its first status message (``starting``) has reached the server, which moves
    # ``last_activity``; and Jupyter still calls the idle kernel "starting" (nobody has asked it anything)
    deadline = time.monotonic() + 20
    while True:
        model = json.loads((await jp_fetch("api", "kernels", kernel["id"])).body)
        if model["last_activity"] != kernel["last_activity"] or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert model["last_activity"] != kernel["last_activity"], "the kernel never said it started"
    assert model["execution_state"] == "starting", model

    sid = (await api.open(path))["id"]
    for n in range(2):
        started = time.monotonic()
        turn = await api.prompt(sid, f"hello {n}")
        events = await api.wait_turn_end(sid, turn, timeout=30)
        took = time.monotonic() - started
        notices = [e.get("phase") for e in events if e["type"] == "notice"]
        assert "kernel_starting" not in notices, notices
        assert took < 4.0, f"prompt {n} took {took:.1f} s"
        ended = next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn)
        assert not ended.get("error"), ended
