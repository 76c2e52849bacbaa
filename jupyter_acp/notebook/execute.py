"""Server-side execution of a cell, its outputs written into the live document as they arrive.

The open tab shows them (the ``[*]`` prompt, streamed text, the final count).  The execution ends on
iopub ``status: idle`` for our request (outputs can overtake ``execute_reply``); a timeout interrupts
the kernel and says so.  Executions on one kernel run one at a time.  No stdin (``input()`` raises).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pycrdt

from ..kernel import KernelBridge, output_from_msg
from .document import FileNotebook, LiveNotebook, Notebook, NotebookError, TabNotebook

log = logging.getLogger(__name__)

EXEC_ORIGIN = "jupyter_acp:execute"


class _LiveSink:
    """Writes outputs into one cell of the live document, merging consecutive streams."""

    def __init__(self, nb: LiveNotebook, cell_id: str) -> None:
        self.doc = nb.doc
        _, self.ycell = nb.ycell(cell_id)

    def txn(self) -> Any:
        return self.doc.ydoc.transaction(origin=EXEC_ORIGIN)

    def start(self) -> None:
        with self.txn():
            self.ycell["outputs"].clear()
            self.ycell["execution_count"] = None
            self.ycell["execution_state"] = "running"

    def output(self, out: dict[str, Any]) -> None:
        outputs = self.ycell["outputs"]
        with self.txn():
            if out.get("output_type") == "stream" and len(outputs):
                last = outputs[len(outputs) - 1]
                if last.get("output_type") == "stream" and last.get("name") == out.get("name"):
                    text = last["text"]
                    if isinstance(text, pycrdt.Text):
                        text += out.get("text", "")
                    else:
                        last["text"] = pycrdt.Text(str(text) + out.get("text", ""))
                    return
            if out.get("output_type") == "stream":
                out = {**out, "text": pycrdt.Text(out.get("text", ""))}
            outputs.append(pycrdt.Map(out))

    def clear(self) -> None:
        with self.txn():
            self.ycell["outputs"].clear()

    def count(self, n: int | None) -> None:
        with self.txn():
            self.ycell["execution_count"] = n

    def end(self, n: int | None) -> None:
        with self.txn():
            if n is not None:
                self.ycell["execution_count"] = n
            self.ycell["execution_state"] = "idle"


async def execute_cell(
    bridge: KernelBridge, kernel_id: str, nb: Notebook, cell_id: str, *, timeout: float = 60.0
) -> dict[str, Any]:
    """Run one code cell; answer {cell_id, status, execution_count, outputs[, timeout]}."""
    index = nb.find(cell_id)
    cell = nb.cells()[index]
    if cell.get("cell_type") != "code":
        return {"cell_id": cell_id, "status": "skipped", "reason": f"a {cell.get('cell_type')} cell is not executed"}
    code = cell.get("source", "")
    conn = await bridge.connection(kernel_id)
    await conn.ensure_iopub()
    sink = _LiveSink(nb, cell_id) if isinstance(nb, LiveNotebook) else None
    outputs: list[dict[str, Any]] = []
    state: dict[str, Any] = {"count": None}
    idle = asyncio.Event()

    def on_iopub(msg: dict[str, Any]) -> None:
        kind = msg.get("msg_type")
        content = msg.get("content") or {}
        try:
            if kind == "status":
                if content.get("execution_state") == "idle":
                    idle.set()
            elif kind == "execute_input":
                state["count"] = content.get("execution_count")
                if sink:
                    sink.count(state["count"])
            elif kind in ("stream", "display_data", "execute_result", "error"):
                out = output_from_msg(msg)
                if out.get("output_type") == "stream" and outputs and outputs[-1].get("output_type") == "stream" \
                        and outputs[-1].get("name") == out.get("name"):
                    outputs[-1]["text"] += out.get("text", "")
                else:
                    outputs.append(dict(out))
                if sink:
                    sink.output(dict(out))
            elif kind == "clear_output":
                outputs.clear()
                if sink:
                    sink.clear()
        except Exception:
            log.exception("writing an output into %s failed", nb.path)

    content = {"code": code, "silent": False, "store_history": True, "allow_stdin": False, "stop_on_error": True}
    msg = conn.client.session.msg("execute_request", content)
    mid = msg["header"]["msg_id"]
    fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    async with conn.execute_lock:
        conn._replies[mid] = fut
        conn._iopub[mid] = on_iopub
        if sink:
            sink.start()
        conn.client.shell_channel.send(msg)
        timed_out = False
        try:
            reply = await asyncio.wait_for(asyncio.shield(fut), timeout)
            await asyncio.wait_for(idle.wait(), 10)
            status = reply["content"].get("status", "ok")
            state["count"] = reply["content"].get("execution_count", state["count"])
        except asyncio.TimeoutError:
            timed_out = True
            status = "timeout"
            await bridge.interrupt(kernel_id)
            try:  # let the interrupt's KeyboardInterrupt land in the outputs
                await asyncio.wait_for(asyncio.shield(fut), 5)
                await asyncio.wait_for(idle.wait(), 2)
            except asyncio.TimeoutError:
                pass
        finally:
            conn._replies.pop(mid, None)
            conn.forget_iopub(mid)
            if sink:
                sink.end(state["count"])
    if isinstance(nb, FileNotebook):
        await nb.set_outputs(cell_id, outputs, state["count"])
    elif isinstance(nb, TabNotebook):
        try:
            await nb.frontend.request(
                "applyEdit",
                {"path": nb.path, "op": "setOutputs", "cellId": cell_id, "outputs": outputs, "executionCount": state["count"]},
                path=nb.path,
            )
        except Exception as exc:
            raise NotebookError(f"the cell ran, but its outputs could not be shown in the open tab: {exc}") from exc
    out: dict[str, Any] = {"cell_id": cell_id, "status": status, "execution_count": state["count"], "outputs": outputs}
    if timed_out:
        out["timeout"] = timeout
    return out
