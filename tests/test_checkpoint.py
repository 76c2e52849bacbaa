"""Kernel namespace checkpoints (``kernels/checkpoint.py`` and the kernel-side ``kernels/snapshot.py``).

Each kernel test starts a real IPython kernel with jupyter_client and talks to it through the project's own
client (``KernelConnection``), as the server does; a kernel behind a gateway is covered in
``tests/tools/test_checkpoint_gateway.py``.  The last tests run the kernel-side module in this process, on a
namespace of their own, for what a kernel test cannot reach (the folder checks, the picklers used).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jupyter_acp.kernels import snapshot
from jupyter_acp.kernels.checkpoint import (
    CheckpointError,
    checkpoint,
    discard,
    list_checkpoints,
    restore,
    snapshot_expression,
)
from jupyter_acp.kernels.client import KernelConnection


class Kernel:
    """A real kernel and the project's client of it."""

    def __init__(self, conn: KernelConnection) -> None:
        self.conn = conn

    async def run(self, code: str) -> None:
        errors: list[dict[str, Any]] = []

        def on_iopub(msg: dict[str, Any]) -> None:
            if msg.get("msg_type") == "error":
                errors.append(msg["content"])

        async def no_interrupt() -> None:
            return None

        res = await self.conn.execute(code, on_iopub=on_iopub, interrupt=no_interrupt, timeout=60)
        assert res["status"] == "ok" and not errors, (code, errors)

    async def value(self, expression: str) -> Any:
        """The value of a JSON-able expression in the kernel."""
        text = await self.conn.evaluate(f"__import__('json').dumps({expression})", prefer_subshell=False)
        return json.loads(ast.literal_eval(text))


@contextlib.asynccontextmanager
async def python_kernel() -> AsyncIterator[Kernel]:
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel()
    conn = await KernelConnection.open("checkpoint-test", km)
    try:
        yield Kernel(conn)
    finally:
        with contextlib.suppress(Exception):
            await discard(conn, checkpoint_ids=[c.id for c in await list_checkpoints(conn)])
        await conn.close()
        await km.shutdown_kernel(now=True)


async def test_a_dataframe_mutated_in_place_is_restored_and_references_to_it_follow():
    async with python_kernel() as k:
        await k.run(
            "import pandas as pd\n"
            "df = pd.DataFrame({'a': range(1000), 'b': [float(i) for i in range(1000)]})\n"
            "frames = {'main': df}\n"
            "same = df\n"
        )
        ck = await checkpoint(k.conn)
        assert {"df", "frames", "same"} <= set(ck.saved), ck
        assert any(s.name == "pd" and "module" in s.reason for s in ck.skipped), ck.skipped
        await k.run("df.iloc[0, 0] = -1\ndf['c'] = 1\ndf.drop(index=[1, 2], inplace=True)")
        assert await k.value("[int(df.iloc[0, 0]), list(df.columns), len(df)]") == [-1, ["a", "b", "c"], 998]
        res = await restore(k.conn, checkpoint_id=ck.id)
        assert {"df", "frames", "same", "pd"} <= set(res.restored), res
        assert await k.value("[int(df.iloc[0, 0]), list(df.columns), len(df)]") == [0, ["a", "b"], 1000]
        # the references between variables are what they were: one DataFrame, three names
        assert await k.value("[frames['main'] is df, same is df]") == [True, True]


async def test_a_deleted_variable_comes_back_and_a_name_created_since_is_removed():
    async with python_kernel() as k:
        await k.run("kept = [1, 2, 3]\ngone = {'x': 1}")
        ck = await checkpoint(k.conn)
        await k.run("del gone\nkept.append(4)\nnewcomer = 'made by the agent'\nimport fractions")
        res = await restore(k.conn, checkpoint_id=ck.id)
        assert "gone" in res.restored and "kept" in res.restored
        assert sorted(res.removed) == ["fractions", "newcomer"], res.removed
        assert await k.value("[gone, kept, 'newcomer' in globals(), 'fractions' in globals()]") == [
            {"x": 1},
            [1, 2, 3],
            False,
            False,
        ]


async def test_modules_and_what_does_not_pickle_are_skipped_with_their_reasons():
    async with python_kernel() as k:
        await k.run(
            "import json as js\nimport socket\n"
            "gen = (i for i in range(3))\n"
            "sock = socket.socket()\n"
            "fine = 42\n"
            "_private = 1\n"
        )
        ck = await checkpoint(k.conn)
        reasons = {s.name: s.reason for s in ck.skipped}
        assert "module" in reasons["js"] and "module" in reasons["socket"], reasons
        assert "generator" in reasons["gen"] and "cannot be pickled" in reasons["gen"], reasons
        assert "socket" in reasons["sock"] and "cannot be pickled" in reasons["sock"], reasons
        assert "private" in reasons["_private"], reasons
        # IPython's own names are neither saved nor listed
        assert not {"In", "Out", "get_ipython", "exit", "quit", "_", "_i1", "_ih"} & (set(ck.saved) | set(reasons))
        assert ck.saved == ["fine"], ck.saved
        await k.run("del js\nfine = 0")
        res = await restore(k.conn, checkpoint_id=ck.id)
        assert "js" in res.restored and "fine" in res.restored, res
        not_restored = {s.name: s.reason for s in res.not_restored}
        assert "generator" in not_restored["gen"] and "left as it is now" in not_restored["gen"], not_restored
        assert await k.value("[js.__name__, fine, type(gen).__name__]") == ["json", 42, "generator"]
        await k.run("sock.close()")


async def test_the_budget_is_respected_and_what_does_not_fit_is_skipped_with_the_reason():
    async with python_kernel() as k:
        await k.run("import numpy as np\nbig = np.ones(2_000_000)\nlarge_list = list(range(500_000))\nsmall = [1, 2]")
        ck = await checkpoint(k.conn, budget=1 << 20)
        reasons = {s.name: s.reason for s in ck.skipped}
        assert "budget" in reasons["big"] and "checkpoint_bytes" in reasons["big"], reasons
        assert "budget" in reasons["large_list"], reasons
        assert ck.saved == ["small"] and 0 < ck.bytes <= 1 << 20, ck


async def test_a_restore_is_itself_undone_by_restoring_its_undo_checkpoint():
    async with python_kernel() as k:
        await k.run("import numpy as np\nx = np.arange(1_000_000)\nlabel = 'before'")
        before = await checkpoint(k.conn)
        await k.run("x *= 2\nlabel = 'after'\nextra = 1")
        rewind = await restore(k.conn, checkpoint_id=before.id)
        assert rewind.undo.id and {"x", "label", "extra"} <= set(rewind.undo.saved), rewind.undo
        assert await k.value("[int(x[1]), label, 'extra' in globals()]") == [1, "before", False]
        undo = await restore(k.conn, checkpoint_id=rewind.undo.id)
        assert await k.value("[int(x[1]), label, extra]") == [2, "after", 1]
        assert "extra" in undo.restored and undo.removed == []


async def test_an_object_mutated_in_place_is_saved_again_and_an_unchanged_one_is_shared():
    async with python_kernel() as k:
        await k.run("import numpy as np\nstill = np.zeros(1_000_000)\nmoved = np.ones(1_000_000)")
        first = await checkpoint(k.conn)
        assert first.written >= 16_000_000, first
        await k.run("moved[123456] = 7.0")  # same id, shape, dtype: only the content tells
        second = await checkpoint(k.conn)
        # the unchanged array is shared with the first checkpoint, the mutated one written again
        assert 8_000_000 <= second.written < 9_000_000, second
        await k.run("moved[123456] = 9.0\nstill[0] = 1.0")
        res = await restore(k.conn, checkpoint_id=second.id)
        assert {"still", "moved"} <= set(res.restored)
        assert await k.value("[float(moved[123456]), float(still[0])]") == [7.0, 0.0]
        res = await restore(k.conn, checkpoint_id=first.id)
        assert await k.value("float(moved[123456])") == 1.0


async def test_variables_that_refer_to_each_other_in_a_cycle_are_restored_together():
    async with python_kernel() as k:
        await k.run("parent = {'name': 'p'}\nchild = {'parent': parent}\nparent['child'] = child\nalias = child")
        ck = await checkpoint(k.conn)
        await k.run("parent['name'] = 'changed'\ndel child")
        await restore(k.conn, checkpoint_id=ck.id)
        assert await k.value(
            "[parent['name'], parent['child'] is child, child['parent'] is parent, alias is child]"
        ) == ["p", True, True, True]


async def test_functions_defined_in_the_notebook_come_back_as_they_were_and_see_the_live_namespace():
    async with python_kernel() as k:
        await k.run(
            "factor = 2\n"
            "def scale(v):\n    return v * factor\n"
            "square = lambda v: v * v\n"
            "def make(n):\n    def add(v):\n        return v + n\n    return add\n"
            "add3 = make(3)\n"
            "class Local:\n    pass\n"
        )
        ck = await checkpoint(k.conn)
        assert {"scale", "square", "add3", "make"} <= set(ck.saved), ck
        assert any(s.name == "Local" and "class defined in the notebook" in s.reason for s in ck.skipped)
        await k.run("def scale(v):\n    return -v\nsquare = None\ndel add3")
        await restore(k.conn, checkpoint_id=ck.id)
        await k.run("factor = 10")
        # the restored function reads the namespace as it is now, not a copy taken at the checkpoint
        assert await k.value("[scale(1), square(3), add3(1), scale.__globals__ is globals()]") == [10, 9, 4, True]


async def test_an_unknown_checkpoint_is_an_error_that_says_why():
    async with python_kernel() as k:
        with pytest.raises(CheckpointError) as err:
            await restore(k.conn, checkpoint_id="nope")
        assert "no checkpoint 'nope'" in str(err.value) and "restarted" in str(err.value)
        with pytest.raises(CheckpointError) as err:
            await checkpoint(k.conn, checkpoint_id="../escape")
        assert "checkpoint id" in str(err.value)


async def test_checkpoints_are_listed_evicted_past_keep_and_discarded():
    async with python_kernel() as k:
        await k.run("v = 1")
        ids = [(await checkpoint(k.conn, keep=2)).id for _ in range(2)]
        third = await checkpoint(k.conn, keep=2)
        assert third.evicted == [ids[0]], third
        assert [c.id for c in await list_checkpoints(k.conn)] == [ids[1], third.id]
        assert await discard(k.conn, checkpoint_ids=[ids[1], "missing"]) == [ids[1]]
        assert [c.id for c in await list_checkpoints(k.conn)] == [third.id]


# -- the kernel-side module in this process --------------------------------------------------------
class Shell:
    def __init__(self, ns: dict[str, Any]) -> None:
        self.user_ns = ns
        self.user_ns_hidden: dict[str, Any] = {}


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """Checkpoints of this process go to the test's own temp folder (storage ``disk``)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield tmp_path


def test_a_checkpoint_folder_open_to_others_is_refused(own_tmp):
    shared = own_tmp / f"jupyter-acp-checkpoints-{os.getuid()}"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with pytest.raises(snapshot.Refused) as err:
        snapshot.run(Shell({"x": 1}), {"op": "checkpoint", "id": "c1", "storage": "disk"})
    assert "not a private folder" in str(err.value)
    shared.rmdir()
    shared.symlink_to(own_tmp)
    with pytest.raises(snapshot.Refused):
        snapshot.run(Shell({"x": 1}), {"op": "checkpoint", "id": "c1", "storage": "disk"})


def test_checkpoint_files_are_private_to_the_user(own_tmp):
    ns: dict[str, Any] = {"x": list(range(10)), "big": bytes(1 << 20)}
    m = snapshot.run(Shell(ns), {"op": "checkpoint", "id": "c1", "storage": "disk"})
    assert m["saved"] == ["x", "big"] and m["storage"] == "disk"
    base = own_tmp / f"jupyter-acp-checkpoints-{os.getuid()}"
    for root, dirs, files in os.walk(base):
        for d in dirs:
            assert os.stat(os.path.join(root, d)).st_mode & 0o777 == 0o700
        for f in files:
            assert os.stat(os.path.join(root, f)).st_mode & 0o777 == 0o600
    snapshot.run(Shell(ns), {"op": "discard", "ids": ["c1"]})


@pytest.mark.parametrize("second", ["cloudpickle", "dill"])
def test_a_class_made_inside_a_function_is_saved_by_cloudpickle_or_dill(own_tmp, second):
    pytest.importorskip(second)

    def make() -> Any:
        class Point:
            def __init__(self, x: int) -> None:
                self.x = x

        return Point(5)

    ns: dict[str, Any] = {"p": make()}
    only_stdlib = snapshot.run(Shell(ns), {"op": "checkpoint", "id": "a", "storage": "disk", "picklers": ["pickle"]})
    assert only_stdlib["saved"] == [] and "local object" in only_stdlib["skipped"][0]["reason"], only_stdlib
    m = snapshot.run(Shell(ns), {"op": "checkpoint", "id": "b", "storage": "disk", "picklers": ["pickle", second]})
    assert m["saved"] == ["p"], m
    ns["p"].x = 6
    res = snapshot.run(Shell(ns), {"op": "restore", "id": "b", "undo_id": "u", "storage": "disk"})
    assert res["restored"] == ["p"] and ns["p"].x == 5
    snapshot.run(Shell(ns), {"op": "discard", "ids": ["a", "b", "u"]})


def test_the_expression_sent_to_the_kernel_runs_the_module_in_a_throw_away_namespace(own_tmp):
    ns: dict[str, Any] = {"get_ipython": lambda: shell, "y": 3}
    shell = Shell(ns)
    expr = snapshot_expression({"op": "checkpoint", "id": "e1", "storage": "disk"})
    answer = json.loads(repr(eval(expr, ns)))
    assert answer["saved"] == ["y"] and set(ns) == {"get_ipython", "y", "__builtins__"}
    assert "_jupyter_acp_snapshot" not in sys.modules
    snapshot.run(shell, {"op": "discard", "ids": ["e1"]})


def test_strongly_connected_components_come_before_what_refers_to_them():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"a"}, "e": {"e"}}
    comps = snapshot.strongly_connected(graph)
    assert sorted(map(sorted, comps)) == [["a", "b"], ["c"], ["d"], ["e"]]
    at = {n: i for i, comp in enumerate(comps) for n in comp}
    assert at["c"] < at["a"] < at["d"]
