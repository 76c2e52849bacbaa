"""Server-side execution of a cell, its outputs written into the live document as they arrive.

The open tab shows them (the ``[*]`` prompt, streamed text, the final count).  The execution ends on
iopub ``status: idle`` for our request (outputs can overtake ``execute_reply``); a timeout interrupts
the kernel and says so.  Executions on one kernel run one at a time.  No stdin (``input()`` raises).
The kernel is reached through ``kernels.KernelBridge`` (local or behind a Jupyter Gateway alike).
"""

from __future__ import annotations

import logging
from typing import Any

import pycrdt

from ..kernels import KernelBridge, KernelTimeout, KernelUnavailable, output_from_msg
from .document import Notebook, NotebookError
from .file import FileNotebook
from .live import LiveNotebook
from .provenance import add_to_ycell
from .stamping import Stamp
from .tab import TabNotebook

log = logging.getLogger(__name__)

EXEC_ORIGIN = "jupyter_acp:execute"


class _LiveSink:
    """Writes outputs into one cell of the live document, merging consecutive streams."""

    def __init__(self, nb: LiveNotebook, cell_id: str, stamp: Stamp | None = None) -> None:
        self.doc = nb.doc
        _, self.ycell = nb.ycell(cell_id)
        self.stamp = stamp

    def txn(self) -> Any:
        return self.doc.ydoc.transaction(origin=EXEC_ORIGIN)

    def start(self) -> None:
        with self.txn():
            self.ycell["outputs"].clear()
            self.ycell["execution_count"] = None
            self.ycell["execution_state"] = "running"
            if self.stamp is not None:  # who ran it, in the run's first transaction
                add_to_ycell(self.ycell, self.stamp("ran"), origin=EXEC_ORIGIN)

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
    bridge: KernelBridge,
    kernel_id: str,
    nb: Notebook,
    cell_id: str,
    *,
    timeout: float = 60.0,
    stamp: Stamp | None = None,
) -> dict[str, Any]:
    """Run one code cell; answer {cell_id, status, execution_count, outputs[, timeout]}.

    Any kernel failure (dead, restarted, unreachable gateway, no answer) is raised as
    ``KernelUnavailable`` with its reason; the cell's running state is ended either way.  ``stamp``: who runs it
    (an agent's turn), recorded in the cell's metadata when the run starts (``provenance.py``)."""
    index = nb.find(cell_id)
    cell = nb.cells()[index]
    if cell.get("cell_type") != "code":
        return {"cell_id": cell_id, "status": "skipped", "reason": f"a {cell.get('cell_type')} cell is not executed"}
    code = cell.get("source", "")
    sink = _LiveSink(nb, cell_id, stamp) if isinstance(nb, LiveNotebook) else None
    outputs: list[dict[str, Any]] = []
    state: dict[str, Any] = {"count": None, "started": False}

    def on_iopub(msg: dict[str, Any]) -> None:
        kind = msg.get("msg_type")
        content = msg.get("content") or {}
        try:
            if kind == "execute_input":
                state["count"] = content.get("execution_count")
                if sink:
                    sink.count(state["count"])
            elif kind in ("stream", "display_data", "execute_result", "error"):
                out = output_from_msg(msg)
                if (
                    out.get("output_type") == "stream"
                    and outputs
                    and outputs[-1].get("output_type") == "stream"
                    and outputs[-1].get("name") == out.get("name")
                ):
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

    def on_start() -> None:
        state["started"] = True
        if sink:
            sink.start()

    res: dict[str, Any] = {}
    try:
        res = await bridge.execute(kernel_id, code, on_iopub=on_iopub, on_start=on_start, timeout=timeout)
    except KernelTimeout as exc:  # the kernel never got the cell (its output channel did not answer)
        raise KernelUnavailable(f"the cell was not run: {exc}") from exc
    finally:
        if res.get("execution_count") is not None:
            state["count"] = res["execution_count"]
        if sink and state["started"]:
            sink.end(state["count"])
    status = res["status"]
    timed_out = status == "timeout"
    if isinstance(nb, FileNotebook):
        await nb.set_outputs(cell_id, outputs, state["count"], stamp if state["started"] else None)
    elif isinstance(nb, TabNotebook):
        try:
            await nb.frontend.request(
                "applyEdit",
                {
                    "path": nb.path,
                    "op": "setOutputs",
                    "cellId": cell_id,
                    "outputs": outputs,
                    "executionCount": state["count"],
                },
                path=nb.path,
            )
        except Exception as exc:
            raise NotebookError(f"the cell ran, but its outputs could not be shown in the open tab: {exc}") from exc
    out: dict[str, Any] = {"cell_id": cell_id, "status": status, "execution_count": state["count"], "outputs": outputs}
    if timed_out:
        out["timeout"] = timeout
    return out
