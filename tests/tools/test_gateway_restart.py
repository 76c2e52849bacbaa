"""A gateway kernel restarted or interrupted from Jupyter while a tool waits on it is answered when
Jupyter has done it, not at the tool's timeout.

The kernel is made unresponsive the way a stuck kernel is (SIGSTOP: it answers neither the restart's
``shutdown_request`` nor SIGINT), so it never says it is going: the gateway kills it after its shutdown wait
and starts a new one, and nothing of that reaches the old kernel's client.  Before the fix the tool waited
for its timeout and then answered "timeout ... the kernel was interrupted".  The interrupt test also runs
against a local kernel: one stuck in C code ignores SIGINT just the same.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from .helpers import text

GATEWAY = pytest.mark.parametrize("kernel_mode", ["gateway"], indirect=True)
#: the tool's own timeout: the answer must come long before it
TOOL_TIMEOUT = 90


async def stuck_cell(make_notebook, start_kernel, tool_ctx, call, kernel_gateway, name: str, jp_serverapp=None):
    """A running client_execute_cells on a kernel that then stops answering (SIGSTOP); the kernel is a
    gateway's unless ``jp_serverapp`` (whose local kernel it is) is given."""
    path = make_notebook(f"gw/{name}.ipynb", ["b = 2", "import time\ntime.sleep(100)"])
    kid = await start_kernel(path)
    ctx = await tool_ctx(path)
    ids = [c["id"] for c in (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"]]
    assert not (await call(ctx, "client_execute_cells", {"cell_ids": [ids[0]]}))["isError"]
    running = asyncio.ensure_future(call(ctx, "client_execute_cells", {"cell_ids": [ids[1]], "timeout": TOOL_TIMEOUT}))
    await asyncio.sleep(1.0)
    if jp_serverapp is not None:
        pid = jp_serverapp.kernel_manager.get_kernel(kid).provisioner.process.pid
    else:
        pid = kernel_gateway.kernel_pid(kid)
    assert pid, "the kernel's process was not found"
    os.kill(pid, signal.SIGSTOP)
    return kid, ctx, pid, running


@GATEWAY
async def test_a_restart_of_a_stuck_gateway_kernel_is_answered(
    make_notebook, start_kernel, tool_ctx, call, jp_fetch, kernel_gateway
):
    kid, ctx, pid, running = await stuck_cell(make_notebook, start_kernel, tool_ctx, call, kernel_gateway, "restart")
    t0 = time.monotonic()
    await jp_fetch("api", "kernels", kid, "restart", method="POST", body="{}")
    restarted = time.monotonic() - t0
    res = await asyncio.wait_for(running, TOOL_TIMEOUT + 30)
    answered = time.monotonic() - t0
    assert res["isError"] and "restarted" in text(res) and "gateway" in text(res), res
    assert answered < restarted + 3, (
        f"answered {answered:.1f} s after the restart began (the restart took {restarted:.1f} s)"
    )

    # the tools then work on the new kernel, whose variables are gone
    async def fresh():
        res = await call(ctx, "client_execute_code", {"code": "print('back')", "timeout": 10})
        return "back" in text(res)

    deadline = time.monotonic() + 30
    while not await fresh():
        assert time.monotonic() < deadline, "the tools never reached the restarted kernel"
        await asyncio.sleep(0.5)
    res = await call(ctx, "client_inspect_variable", {"name": "b"})
    assert res["isError"] and "not defined" in text(res), res


async def test_an_interrupt_the_kernel_does_not_obey_is_answered(
    make_notebook, start_kernel, tool_ctx, call, jp_fetch, request, kernel_mode, jp_serverapp
):
    """Local and gateway alike (a local kernel stuck in C code ignores SIGINT just the same)."""
    from jupyter_acp.kernels.bridge import INTERRUPT_GRACE

    gw = request.getfixturevalue("kernel_gateway") if kernel_mode == "gateway" else None
    local = jp_serverapp if kernel_mode == "local" else None
    kid, ctx, pid, running = await stuck_cell(
        make_notebook, start_kernel, tool_ctx, call, gw, f"interrupt-{kernel_mode}", local
    )
    try:
        t0 = time.monotonic()
        await jp_fetch("api", "kernels", kid, "interrupt", method="POST", body="{}")
        res = await asyncio.wait_for(running, TOOL_TIMEOUT + 30)
        answered = time.monotonic() - t0
        body = text(res)
        assert res["isError"] and "interrupted" in body and "Kernel > Restart" in body, res
        assert ("gateway" in body) == (kernel_mode == "gateway"), res
        assert "not run" not in body, res  # it did run, and is stuck
        assert answered < INTERRUPT_GRACE + 5, f"answered only after {answered:.1f} s"
    finally:
        os.kill(pid, signal.SIGCONT)
    # the kernel, itself again, obeys the next interrupt (the one it got while stopped went nowhere), and the
    # tools then run on it: the cell that was ended early left the connection usable
    await jp_fetch("api", "kernels", kid, "interrupt", method="POST", body="{}")
    deadline = time.monotonic() + 30
    while True:  # the first may be aborted (the interrupted cell's error stops what was queued behind it)
        res = await call(ctx, "client_execute_code", {"code": "print(b * 21)", "timeout": 20})
        if "42" in text(res) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert "42" in text(res), res


@GATEWAY
async def test_an_interrupt_ends_only_what_the_kernel_was_running(
    make_notebook, start_kernel, tool_ctx, call, jp_fetch
):
    """The execution that waited its turn behind the interrupted cell then runs as long as it needs."""
    from jupyter_acp.kernels.bridge import INTERRUPT_GRACE

    long = INTERRUPT_GRACE + 4
    path = make_notebook("gw/queued.ipynb", ["import time\ntime.sleep(100)", f"time.sleep({long:g})\nprint('done')"])
    kid = await start_kernel(path)
    ctx = await tool_ctx(path)
    ids = [c["id"] for c in (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"]]
    first = asyncio.ensure_future(call(ctx, "client_execute_cells", {"cell_ids": [ids[0]], "timeout": TOOL_TIMEOUT}))
    await asyncio.sleep(1.5)
    second = asyncio.ensure_future(call(ctx, "client_execute_cells", {"cell_ids": [ids[1]], "timeout": TOOL_TIMEOUT}))
    await asyncio.sleep(0.5)
    await jp_fetch("api", "kernels", kid, "interrupt", method="POST", body="{}")
    res = await asyncio.wait_for(first, 20)
    assert "KeyboardInterrupt" in text(res), res
    res = await asyncio.wait_for(second, TOOL_TIMEOUT)
    assert not res["isError"] and "done" in text(res), res
