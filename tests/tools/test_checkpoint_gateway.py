"""Kernel checkpoints through the server's kernel bridge, for a local kernel and one behind a real Jupyter
Gateway (``tests/tools/conftest.py`` runs each test in both modes): the snapshot lives with the kernel, so a
gateway kernel on another machine checkpoints and restores like a local one."""

from __future__ import annotations

import json

from jupyter_acp.kernels.checkpoint import checkpoint, discard, restore


async def test_a_checkpoint_and_restore_round_trip_through_the_bridge(make_notebook, start_kernel, acp, kernel_mode):
    path = make_notebook("ck/nb.ipynb", ["x = 1"])
    kid = await start_kernel(path)
    bridge = acp.tools.services.kernels
    assert bridge.is_remote(kid) == (kernel_mode == "gateway")

    async def run(code: str) -> str:
        out = await bridge.run_code(kid, code)
        assert out["status"] == "ok", out
        return "".join(o.get("text", "") for o in out["outputs"])

    await run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nnotes = ['kept']")
    ck = await checkpoint(bridge, kid)
    assert ck.saved == ["df", "notes"] and ck.bytes > 0, ck
    await run("df['a'] *= 10\nnotes.clear()\nagent_made = 1")
    res = await restore(bridge, kid, checkpoint_id=ck.id)
    assert set(res.restored) >= {"df", "notes", "pd"} and res.removed == ["agent_made"], res
    state = json.loads(await run("print(__import__('json').dumps([df['a'].tolist(), notes, 'agent_made' in dir()]))"))
    assert state == [[1, 2, 3], ["kept"], False]
    undone = await restore(bridge, kid, checkpoint_id=res.undo.id)
    assert "agent_made" in undone.restored
    state = json.loads(await run("print(__import__('json').dumps([df['a'].tolist(), notes, agent_made]))"))
    assert state == [[10, 20, 30], [], 1]
    assert sorted(await discard(bridge, kid, checkpoint_ids=[ck.id, res.undo.id, undone.undo.id])) == sorted(
        [ck.id, res.undo.id, undone.undo.id]
    )
