"""Client-tool round trips through the whole path, against floors measured in the same run.

    python bench/tools.py [--rounds 200] [--cells 200] [--rows 1000000] [--names 1000]

A real ``jupyter server`` subprocess (jupyter_acp + RTC) runs this very file as its ACP agent
(``--agent``).  On a prompt the agent times, over its stdio pipe to the server:

1. ``client_notebook_outline`` on a notebook of ``--cells`` cells (agent -> client -> answer), against a
   floor that carries the same payload: the outline's own answer sent the other way as the params of an
   unknown ``_bench/echo`` method the client decodes and answers with -32601 (the pipe, dispatch and one
   encode + decode of the same JSON, no work).  Goal: within 2x.  The payload-less echo is printed too.
2. ``client_list_variables`` on a kernel holding a ``--rows``-row DataFrame and ``--names`` other names,
   against a bare ``inspectVariables`` debug request sent by this process straight to the kernel.
   Goal: within 1.5x, and the server's memory flat across the rounds.
3. Kernels behind a Jupyter Gateway (a ``jupyter kernelgateway`` on 127.0.0.1, the server started with
   ``--GatewayClient.url``): ``client_execute_cells`` (one small cell, outputs written into the live
   document) and ``client_list_variables``, against a bare execute round trip (``execute_request`` to
   its ``status: idle``) sent by this process straight to the gateway's kernel WebSocket in the same
   run.  Goal: within 1.5x.  Twice: a stock gateway (whose kernel WebSockets leave Nagle on, so every
   round trip waits ~40 ms for a delayed ACK), and the same gateway with TCP_NODELAY (what our own
   layer costs shows there).  ``--no-gateway`` skips it; ``--gateway-only`` runs only it.

4. Every tool at ``--sizes`` cells (100, 1,000, 4,000 and 10,000 by default; ``--scale-only`` runs only this
   part): each tool on the same notebook shape (the last cell, its neighbour, the middle), rounds until
   ``--scale-budget`` seconds (3 at least), against the payload-matched floor of the same run (the tool's own
   last answer carried back by ``_bench/echo``), with each tool's growth exponent (the slope of log time on log
   size: 0 flat, 1 linear) and its time at 4,000 and 10,000 cells against its time at 100. Goal: within 2x,
   for every tool whose own work does not grow with the notebook (search, the run plan and the whole outline
   read every cell: measured, no goal). The document's autosave is put off (``--save-delay``) so that a
   mutating tool is not timed against the save of the previous round's change. Every size is open at once;
   the sizes run in order and then in reverse (``--scale-passes``), their rounds pooled, so that the drift of
   a shared machine's load does not read as growth; the last column divides each time by the echo floor
   measured beside it.

The server and agents import this checkout's ``jupyter_acp`` (its root goes first on ``PYTHONPATH``).
Needs pandas for the DataFrame (``pip install pandas``) and ``jupyter_kernel_gateway`` for part 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# -- the agent side (run by the server as a subprocess) ------------------------------------------


class BenchAgent:
    def __init__(self) -> None:
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.out = sys.stdout.buffer

    def send(self, msg: dict[str, Any]) -> None:
        self.out.write(json.dumps(msg).encode() + b"\n")
        self.out.flush()

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        rid = self.next_id
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return await fut

    async def timed(self, rounds: int, method: str, params: dict[str, Any]) -> list[float]:
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            try:
                res = await self.request(method, params)
                if isinstance(res, dict) and res.get("isError"):
                    raise RuntimeError(json.dumps(res)[:500])
            except LookupError:
                pass  # the bare method's -32601 is the expected answer
            times.append(time.perf_counter() - t0)
        return times

    async def run_bench(self, sid: str, spec: dict[str, Any]) -> dict[str, Any]:
        meta = {"_meta": {"org.mini-me": {"sessionId": sid}}}
        rounds = spec["rounds"]
        out: dict[str, Any] = {}
        for what in spec["what"]:
            if what == "outline":
                outline_args = {**meta, **spec.get("outline_args", {})}
                answer = await self.request("_jupyter-acp/notebook_outline", outline_args)
                # the payload-matched floor: the same answer sent the other way (the server decodes it and
                # answers -32601), so both sides pay one encode and one decode of the same JSON
                loaded = {**meta, "payload": answer}
                await self.timed(20, "_bench/echo", meta)
                await self.timed(20, "_bench/echo", loaded)
                await self.timed(20, "_jupyter-acp/notebook_outline", outline_args)
                floor = await self.timed(rounds, "_bench/echo", meta)
                matched = await self.timed(rounds, "_bench/echo", loaded)
                tool = await self.timed(rounds, "_jupyter-acp/notebook_outline", outline_args)
                out["outline"] = {
                    "floor": floor,
                    "matched": matched,
                    "tool": tool,
                    "payload_bytes": len(json.dumps(answer)),
                }
            elif what == "variables":
                await self.timed(5, "_jupyter-acp/list_variables", meta)
                out["variables"] = {"tool": await self.timed(rounds, "_jupyter-acp/list_variables", meta)}
            elif what == "execute":
                args = {**meta, "cell_ids": spec["cell_ids"]}
                await self.timed(5, "_jupyter-acp/execute_cells", args)
                out["execute"] = {"tool": await self.timed(rounds, "_jupyter-acp/execute_cells", args)}
            elif what == "execute_code":
                args = {**meta, "code": spec["code"]}
                await self.timed(5, "_jupyter-acp/execute_code", args)
                out["execute_code"] = {"tool": await self.timed(rounds, "_jupyter-acp/execute_code", args)}
            elif what == "scale":
                out["scale"] = {step["label"]: await self.scale_step(meta, step, spec) for step in spec["steps"]}
        return out

    async def call_tool(self, method: str, params: dict[str, Any]) -> Any:
        res = await self.request(method, params)
        if isinstance(res, dict) and res.get("isError"):
            raise RuntimeError(json.dumps(res)[:500])
        return res

    async def scale_step(self, meta: dict[str, Any], step: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        """One tool on one notebook size: rounds until ``budget`` seconds (at least ``min_rounds``, at most
        ``max_rounds``), each round's arguments taken in turn from ``params`` (``$round`` replaced by the round's
        number), then the payload-matched floor: the last answer carried back by the unknown ``_bench/echo``."""
        method = "_jupyter-acp/" + step["tool"][len("client_") :]
        variants = step["params"]

        def args_for(n: int) -> dict[str, Any]:
            raw = json.dumps(variants[n % len(variants)]).replace("$round", str(n))
            return {**meta, **json.loads(raw)}

        times: list[float] = []
        undo: list[float] = []
        answer: Any = None
        n = 0
        try:
            answer = await self.call_tool(method, args_for(n))  # warm-up (opens the document, fills caches)
            if step.get("then_delete"):
                cid = answer["structuredContent"]["cell_id"]
                await self.call_tool("_jupyter-acp/delete_cells", {**meta, "cell_ids": [cid]})
            n += 1
            deadline = time.perf_counter() + spec["budget"]
            while n <= spec["max_rounds"] and (n <= spec["min_rounds"] or time.perf_counter() < deadline):
                t0 = time.perf_counter()
                answer = await self.call_tool(method, args_for(n))
                times.append(time.perf_counter() - t0)
                if step.get("then_delete"):  # insert, then delete what it inserted: the notebook keeps its size
                    cid = answer["structuredContent"]["cell_id"]
                    t0 = time.perf_counter()
                    await self.call_tool("_jupyter-acp/delete_cells", {**meta, "cell_ids": [cid]})
                    undo.append(time.perf_counter() - t0)
                n += 1
        except LookupError as exc:  # the method is not there: a tool this build does not have
            return {"missing": True, "error": str(exc)[:300]}
        except RuntimeError as exc:
            text = str(exc)
            return {"missing": "unknown tool" in text or "invalid arguments" in text, "error": text[:300]}
        loaded = {**meta, "payload": answer}
        floor = await self.timed(min(max(len(times), 5), 50), "_bench/echo", loaded)
        out = {"tool": times, "floor": floor, "payload_bytes": len(json.dumps(answer))}
        if undo:
            out["delete"] = undo
        return out

    async def handle(self, msg: dict[str, Any]) -> None:
        if "method" not in msg:
            fut = self.pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                if "error" in msg:
                    fut.set_exception(LookupError(msg["error"].get("message")))
                else:
                    fut.set_result(msg.get("result"))
            return
        method, params, rid = msg["method"], msg.get("params") or {}, msg.get("id")
        result: Any = None
        if method == "initialize":
            result = {
                "protocolVersion": 1,
                "agentCapabilities": {"_meta": {"org.mini-me": {"clientTools": {"discovery": ["meta", "request"]}}}},
                "authMethods": [],
                "agentInfo": {"name": "bench-tools", "version": "1"},
            }
        elif method == "session/new":
            result = {"sessionId": "bench-" + os.urandom(4).hex()}
        elif method == "session/prompt":
            sid = params["sessionId"]
            spec = json.loads(params["prompt"][0]["text"])
            try:
                data = await self.run_bench(sid, spec)
            except Exception as exc:  # report, never hang the turn
                data = {"error": repr(exc)}
            self.send(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": sid,
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": json.dumps(data)},
                        },
                    },
                }
            )
            result = {"stopReason": "end_turn"}
        elif rid is not None:
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
            return
        if rid is not None:
            self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while True:
            line = await reader.readline()
            if not line:
                return
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            asyncio.ensure_future(self.handle(msg))


# -- the driver ------------------------------------------------------------------------------------


def ms(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1000:.3f} ms, p90 {sorted(values)[int(len(values) * 0.9)] * 1000:.3f} ms"
    )


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def bare_inspect(connection_file: Path, rounds: int) -> list[float]:
    from jupyter_client.asynchronous.client import AsyncKernelClient

    kc = AsyncKernelClient(connection_file=str(connection_file))
    kc.load_connection_file()
    kc.start_channels()
    times = []
    try:
        for i in range(rounds + 5):
            msg = kc.session.msg(
                "debug_request", {"type": "request", "seq": i + 1, "command": "inspectVariables", "arguments": {}}
            )
            t0 = time.perf_counter()
            kc.control_channel.send(msg)
            while True:
                reply = await kc.control_channel.get_msg(timeout=30)
                if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                    break
            if i >= 5:
                times.append(time.perf_counter() - t0)
        return times
    finally:
        kc.stop_channels()


def run_setup_code(connection_file: Path, code: str) -> None:
    from jupyter_client.blocking.client import BlockingKernelClient

    kc = BlockingKernelClient(connection_file=str(connection_file))
    kc.load_connection_file()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        reply = kc.execute_interactive(code, timeout=300, output_hook=lambda m: None)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"setup failed: {reply['content']}")
    finally:
        kc.stop_channels()


class BareGatewayKernel:
    """This process's own WebSocket to a gateway kernel: the floor of a round trip through the gateway."""

    def __init__(self, gateway_url: str, kernel_id: str) -> None:
        import uuid

        import websocket

        self.ws = websocket.create_connection(
            gateway_url.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels", timeout=60
        )
        self.session = uuid.uuid4().hex
        self.n = 0

    def request(self, channel: str, msg_type: str, content: dict[str, Any], until_idle: bool) -> dict[str, Any]:
        import uuid

        self.n += 1
        mid = uuid.uuid4().hex
        self.ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": mid,
                        "msg_type": msg_type,
                        "session": self.session,
                        "username": "bench",
                        "version": "5.3",
                        "date": "",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "content": content,
                    "channel": channel,
                    "buffers": [],
                }
            )
        )
        reply, idle = None, not until_idle
        while reply is None or not idle:
            msg = json.loads(self.ws.recv())
            if (msg.get("parent_header") or {}).get("msg_id") != mid:
                continue
            if msg["channel"] == channel:
                reply = msg
            elif msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
        return reply

    def execute(self, code: str) -> dict[str, Any]:
        return self.request(
            "shell",
            "execute_request",
            {"code": code, "silent": False, "store_history": True, "allow_stdin": False, "stop_on_error": True},
            True,
        )

    def timed(self, rounds: int, fn) -> list[float]:
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return times

    def close(self) -> None:
        self.ws.close()


def gateway_bench(args: argparse.Namespace, *, nodelay: bool = False) -> None:
    import httpx
    import nbformat

    from jupyter_acp.testing.server import ServerProcess

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.tools.helpers import KernelGateway

    gateway = KernelGateway(nodelay=nodelay)
    gateway.start()
    with tempfile.TemporaryDirectory() as tmp:
        root, data = Path(tmp) / "root", Path(tmp) / "data"
        root.mkdir()
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        cell = nbformat.v4.new_code_cell("x = 6 * 7\nprint(x)")
        cell.id = "benchcell"
        nb.cells.append(cell)
        (root / "gw.ipynb").write_text(nbformat.writes(nb))
        agents = {
            "bench": {
                "command": sys.executable,
                "args": [os.path.abspath(__file__), "--agent"],
                "tool_channel": "client-tools",
                "client_tools_discovery": "request",
            }
        }
        server = ServerProcess(
            root,
            data,
            agents=agents,
            extra_args=[
                f"--SQLiteYStore.db_path={data / 'ystore.db'}",
                f"--BaseFileIdManager.db_path={data / 'fileid.db'}",
                "--JupyterACPTools.permission_policy=auto",
                f"--GatewayClient.url={gateway.url}",
            ],
        )
        bare = None
        try:
            server.start()  # inside the try: a server that fails to come up is stopped too
            resp = httpx.post(
                f"{server.base}/api/sessions",
                headers=server.headers,
                timeout=60,
                json={"path": "gw.ipynb", "name": "gw.ipynb", "type": "notebook", "kernel": {"name": "python3"}},
            )
            resp.raise_for_status()
            kernel_id = resp.json()["kernel"]["id"]
            sid = server.open_session("gw.ipynb", "bench")["id"]
            bare = BareGatewayKernel(gateway.url, kernel_id)
            bare.execute(
                "\n".join(
                    [
                        "import numpy as np, pandas as pd",
                        f"df = pd.DataFrame({{'a': np.arange({args.gateway_rows}), 'b': np.random.rand({args.gateway_rows})}})",
                        f"for _i in range({args.names}): globals()[f'name_{{_i}}'] = _i",
                    ]
                )
            )

            def turn(spec: dict[str, Any]) -> dict[str, Any]:
                _, events = server.turn(sid, json.dumps(spec), timeout=600)
                texts = [
                    e["update"]["content"]["text"]
                    for e in events
                    if e["type"] == "session_update" and e["update"].get("sessionUpdate") == "agent_message_chunk"
                ]
                result = json.loads(texts[-1])
                if "error" in result:
                    raise RuntimeError(result["error"])
                return result

            rounds = args.gateway_rounds
            how = "with TCP_NODELAY on its WebSockets" if nodelay else "stock"
            print(
                f"\n# kernels behind a Jupyter Gateway ({how}, {gateway.url}), {rounds} rounds; "
                f"the kernel holds a {args.gateway_rows}-row DataFrame and {args.names} other names"
            )
            bare.timed(10, lambda: bare.execute("x = 6 * 7\nprint(x)"))
            floor_exec = bare.timed(rounds, lambda: bare.execute("x = 6 * 7\nprint(x)"))
            res = turn({"rounds": rounds, "what": ["execute"], "cell_ids": ["benchcell"]})["execute"]["tool"]
            floor_exec += bare.timed(rounds, lambda: bare.execute("x = 6 * 7\nprint(x)"))
            scratch = turn({"rounds": rounds, "what": ["execute_code"], "code": "x = 6 * 7\nprint(x)"})["execute_code"][
                "tool"
            ]
            inspect = {"type": "request", "seq": 1, "command": "inspectVariables", "arguments": {}}
            floor_vars = bare.timed(rounds, lambda: bare.request("control", "debug_request", inspect, False))
            var = turn({"rounds": rounds, "what": ["variables"]})["variables"]["tool"]
            f_exec = statistics.median(floor_exec)
            print(f"bare execute round trip over the gateway WebSocket (to idle): {ms(floor_exec)}")
            print(f"bare inspectVariables over the gateway WebSocket: {ms(floor_vars)}")
            print(f"client_execute_cells (one cell, outputs into the live document): {ms(res)}")
            print(f"client_execute_code (the same code, nothing written into the document): {ms(scratch)}")
            print(f"client_list_variables: {ms(var)}")
            print(
                f"client_execute_cells vs bare gateway execute: {statistics.median(res) / f_exec:.2f}x (goal <= 1.5x)"
            )
            print(
                f"client_list_variables vs bare gateway execute: {statistics.median(var) / f_exec:.2f}x (goal <= 1.5x); "
                f"vs bare gateway inspectVariables: {statistics.median(var) / statistics.median(floor_vars):.2f}x"
            )
        finally:
            if bare is not None:
                bare.close()
            server.stop()
            gateway.stop()


#: tools whose own work grows with the notebook (they read every cell): measured, no goal
GROWS = {
    "client_search_cells": "searches every cell",
    "client_stale_cells": "analyses every cell",
    "client_notebook_outline (all cells)": "answers every cell",
}


def scale_steps(n: int) -> list[dict[str, Any]]:
    """Every tool once per notebook size, on the same cells (``c0``..): the last cell, its neighbour, the middle."""
    last, prev, mid = f"c{n - 1}", f"c{n - 2}", f"c{n // 2}"
    edit = [
        {"cell_id": last, "old_string": "* 2", "new_string": "* 3"},
        {"cell_id": last, "old_string": "* 3", "new_string": "* 2"},
    ]
    return [
        {"label": "client_notebook_outline (page of 100)", "tool": "client_notebook_outline", "params": [{}]},
        {
            "label": "client_notebook_outline (last page)",
            "tool": "client_notebook_outline",
            "params": [{"start": max(n - 100, 0)}],
        },
        {"label": "client_read_cells (the last cell)", "tool": "client_read_cells", "params": [{"cell_ids": [last]}]},
        {
            "label": "client_insert_cell (at the end; then deleted)",
            "tool": "client_insert_cell",
            "params": [{"source": "inserted = 1"}],
            "then_delete": True,
        },
        {
            "label": "client_insert_cell (after the middle cell; then deleted)",
            "tool": "client_insert_cell",
            "params": [{"source": "inserted = 1", "after_cell_id": mid}],
            "then_delete": True,
        },
        {"label": "client_edit_cell (the last cell)", "tool": "client_edit_cell", "params": edit},
        {
            "label": "client_replace_in_cell (the last cell)",
            "tool": "client_replace_in_cell",
            # its own text (client_edit_cell may leave "* 3" after an odd number of rounds)
            "params": [
                {"cell_id": last, "old": f"print(value_{n - 1})", "new": f"print (value_{n - 1})"},
                {"cell_id": last, "old": f"print (value_{n - 1})", "new": f"print(value_{n - 1})"},
            ],
        },
        {
            "label": "client_move_cell (the last cell, one up and back)",
            "tool": "client_move_cell",
            "params": [{"cell_id": last, "to_index": n - 2}, {"cell_id": last, "to_index": n - 1}],
        },
        {
            "label": "client_execute_cells (the last cell)",
            "tool": "client_execute_cells",
            "params": [{"cell_ids": [last]}],
        },
        {
            "label": "client_execute_cells (scope below the next-to-last: 2 cells)",
            "tool": "client_execute_cells",
            "params": [{"scope": "below", "cell_id": prev}],
        },
        {
            "label": "client_clear_outputs (the last cell)",
            "tool": "client_clear_outputs",
            "params": [{"cell_ids": [last]}],
        },
        {"label": "client_kernel (status)", "tool": "client_kernel", "params": [{"action": "status"}]},
        {"label": "client_list_variables", "tool": "client_list_variables", "params": [{"limit": 10}]},
        {"label": "client_inspect_variable", "tool": "client_inspect_variable", "params": [{"name": f"value_{n - 2}"}]},
        {"label": "client_execute_code", "tool": "client_execute_code", "params": [{"code": "1 + 1"}]},
        {"label": "client_list_notebooks", "tool": "client_list_notebooks", "params": [{"folder": "other"}]},
        {
            "label": "client_read_notebook (another, small)",
            "tool": "client_read_notebook",
            "params": [{"path": "other/small.ipynb"}],
        },
        {
            "label": "client_create_notebook (a new one each round)",
            "tool": "client_create_notebook",
            "params": [{"path": f"made/n{n}-$round.ipynb", "cells": [{"source": "x = 1"}]}],
        },
        {"label": "client_search_cells", "tool": "client_search_cells", "params": [{"pattern": f"value_{n - 1} ="}]},
        {"label": "client_stale_cells", "tool": "client_stale_cells", "params": [{}]},
        {
            "label": "client_notebook_outline (all cells)",
            "tool": "client_notebook_outline",
            "params": [{"start": 0, "limit": 500}] if n <= 500 else [{"start": n - 500, "limit": 500}],
        },
    ]


def growth_exponent(sizes: list[int], times: list[float]) -> float:
    """The least-squares slope of log(time) on log(size): 0 flat, 1 linear."""
    import math

    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(t, 1e-9)) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def scale_bench(args: argparse.Namespace) -> None:
    """Every tool at each notebook size (``--sizes``), against the payload-matched floor of the same run."""
    import httpx
    import nbformat

    from jupyter_acp.testing.server import ServerProcess

    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root, data = Path(tmp) / "root", Path(tmp) / "data"
        (root / "other").mkdir(parents=True)
        (root / "made").mkdir()
        small = nbformat.v4.new_notebook()
        small.cells = [nbformat.v4.new_code_cell(f"s = {i}") for i in range(5)]
        (root / "other" / "small.ipynb").write_text(nbformat.writes(small))
        for n in sizes:
            nb = nbformat.v4.new_notebook()
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
            for i in range(n):
                cell = nbformat.v4.new_code_cell(f"value_{i} = {i} * 2\nprint(value_{i})")
                cell.id = f"c{i}"
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{i * 2}\n")]
                cell.execution_count = i + 1
                nb.cells.append(cell)
            (root / f"n{n}.ipynb").write_text(nbformat.writes(nb))
        agents = {
            "bench": {
                "command": sys.executable,
                "args": [os.path.abspath(__file__), "--agent"],
                "tool_channel": "client-tools",
                "client_tools_discovery": "request",
            }
        }
        server = ServerProcess(
            root,
            data,
            agents=agents,
            extra_args=[
                f"--SQLiteYStore.db_path={data / 'ystore.db'}",
                f"--BaseFileIdManager.db_path={data / 'fileid.db'}",
                "--JupyterACPTools.permission_policy=auto",
                # jupyter-server-ydoc saves a changed document a second after each change, and a save of 10,000
                # cells costs about a second of the server's CPU (YNotebook.get indexes the Y array cell by cell):
                # with the default the mutating tools would be timed against the previous round's save
                f"--YDocExtension.document_save_delay={args.save_delay}",
            ],
        )
        results: dict[int, dict[str, Any]] = {n: {} for n in sizes}
        try:
            server.start()
            sessions: dict[int, str] = {}
            kernels: list[str] = []
            for n in sizes:  # every size open at once (a kernel each)
                path = f"n{n}.ipynb"
                resp = httpx.post(
                    f"{server.base}/api/sessions",
                    headers=server.headers,
                    timeout=120,
                    json={"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}},
                )
                resp.raise_for_status()
                kernels.append(resp.json()["id"])
                sessions[n] = server.open_session(path, "bench")["id"]

            def turn(n: int, steps: list[dict[str, Any]]) -> dict[str, Any]:
                spec = {
                    "what": ["scale"],
                    "rounds": 0,
                    "steps": steps,
                    "budget": args.scale_budget,
                    "min_rounds": 3,
                    "max_rounds": args.scale_rounds,
                }
                _, events = server.turn(sessions[n], json.dumps(spec), timeout=1800)
                texts = [
                    e["update"]["content"]["text"]
                    for e in events
                    if e["type"] == "session_update" and e["update"].get("sessionUpdate") == "agent_message_chunk"
                ]
                got = json.loads(texts[-1])
                if "error" in got:
                    raise RuntimeError(got["error"])
                return got["scale"]

            # the load of a shared machine drifts over minutes: the sizes in order, then in reverse order (each pass
            # the whole tool list in one turn per size), the rounds of both passes pooled
            order = [*sizes, *reversed(sizes)] if args.scale_passes > 1 else list(sizes)
            for n in order:
                for label, got in turn(n, scale_steps(n)).items():
                    kept = results[n].setdefault(label, got)
                    if kept is not got:
                        for key in ("tool", "floor", "delete"):
                            if key in got and key in kept:
                                kept[key] = kept[key] + got[key]
                print(f"# {n} cells done", file=sys.stderr, flush=True)
            for kid in kernels:
                httpx.delete(f"{server.base}/api/kernels/{kid}", headers=server.headers, timeout=60)
        finally:
            server.stop()

    med = statistics.median
    print(f"\n# every tool at {', '.join(f'{n:,}' for n in sizes)} cells: median ms (payload-matched echo floor)")
    labels = [step["label"] for step in scale_steps(sizes[0])]
    labels.insert(labels.index("client_insert_cell (after the middle cell; then deleted)") + 1, "client_delete_cells")
    head = (
        "| tool | "
        + " | ".join(f"{n:,}" for n in sizes)
        + " | growth exponent | 4,000 / 100 | 10,000 / 100 | 10,000 / 100 over its floor |"
    )
    print(head)
    print("|---" * (len(sizes) + 5) + "|")
    goals: list[str] = []
    for label in labels:
        key = "client_insert_cell (at the end; then deleted)" if label == "client_delete_cells" else label
        row, tool_ms, floors = [], [], []
        for n in sizes:
            r = results[n].get(key) or {}
            if "tool" not in r:
                row.append("missing" if r.get("missing") else "failed")
                continue
            t = med(r["delete"] if label == "client_delete_cells" else r["tool"])
            tool_ms.append((n, t))
            floors.append(med(r["floor"]))
            row.append(f"{t * 1000:.2f} ({floors[-1] * 1000:.2f})")
        if len(tool_ms) == len(sizes):
            k = growth_exponent([n for n, _ in tool_ms], [t for _, t in tool_ms])
            by = dict(tool_ms)
            r4 = by.get(4000, tool_ms[-1][1]) / tool_ms[0][1]
            r10 = by.get(10000, tool_ms[-1][1]) / tool_ms[0][1]
            # the same ratio with each time taken over the echo floor measured beside it (the machine's drift out)
            over = (tool_ms[-1][1] / floors[-1]) / (tool_ms[0][1] / floors[0])
            row += [f"{k:.2f}", f"{r4:.2f}x", f"{r10:.2f}x", f"{over:.2f}x"]
            grows = next((why for key, why in GROWS.items() if label.startswith(key)), None)
            if grows:
                goals.append(f"{label}: growth exponent {k:.2f} ({grows}: no goal)")
            else:
                goals.append(
                    f"{label}: {r4:.2f}x at 4,000 and {r10:.2f}x at 10,000 cells of its time at {sizes[0]:,}; "
                    f"growth exponent {k:.2f} (goal <= 2x)"
                )
        else:
            row += ["-", "-", "-", "-"]
        print(f"| {label} | " + " | ".join(row) + " |")
    print()
    for line in goals:
        print(line)
    for n in sizes:
        for label, r in results[n].items():
            if "tool" not in r and not r.get("missing"):
                print(f"failed at {n:,} cells: {label}: {r.get('error')}")


def this_checkout_first() -> None:
    """The server and the agent subprocesses import the ``jupyter_acp`` of this checkout, not an installed one
    (``python bench/tools.py`` puts ``bench/`` on the path, not the root)."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


def main() -> None:
    this_checkout_first()
    p = argparse.ArgumentParser()
    p.add_argument("--agent", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--cells", type=int, default=200)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--names", type=int, default=1000)
    p.add_argument("--gateway-rounds", type=int, default=100)
    p.add_argument("--gateway-rows", type=int, default=100_000)
    p.add_argument("--no-gateway", action="store_true", help="skip the gateway part")
    p.add_argument("--gateway-only", action="store_true", help="run only the gateway part")
    p.add_argument("--sizes", default="100,1000,4000,10000", help="notebook sizes of the scale part")
    p.add_argument("--scale-rounds", type=int, default=30, help="most rounds per tool and size")
    p.add_argument("--scale-budget", type=float, default=1.5, help="seconds per tool and size (3 rounds at least)")
    p.add_argument(
        "--save-delay",
        type=float,
        default=3600,
        help="YDocExtension.document_save_delay of the scale part (1 s is jupyter-server-ydoc's default)",
    )
    p.add_argument(
        "--scale-passes", type=int, default=2, help="1: each size once; 2: the sizes in order, then in reverse"
    )
    p.add_argument("--no-scale", action="store_true", help="skip the scale part")
    p.add_argument("--scale-only", action="store_true", help="run only the scale part")
    args = p.parse_args()
    if args.agent:
        asyncio.run(BenchAgent().main())
        return
    if args.scale_only:
        scale_bench(args)
        return
    if args.gateway_only:
        gateway_bench(args)
        gateway_bench(args, nodelay=True)
        return

    import httpx
    import nbformat

    from jupyter_acp.testing.server import ServerProcess

    with tempfile.TemporaryDirectory() as tmp:
        root, data = Path(tmp) / "root", Path(tmp) / "data"
        root.mkdir()
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        for i in range(args.cells):
            cell = nbformat.v4.new_code_cell(f"value_{i} = {i} * 2\nprint(value_{i})")
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{i * 2}\n")]
            cell.execution_count = i + 1
            nb.cells.append(cell)
        (root / "big.ipynb").write_text(nbformat.writes(nb))
        agents = {
            "bench": {
                "command": sys.executable,
                "args": [os.path.abspath(__file__), "--agent"],
                "tool_channel": "client-tools",
                "client_tools_discovery": "request",
            }
        }
        server = ServerProcess(
            root,
            data,
            agents=agents,
            extra_args=[
                f"--SQLiteYStore.db_path={data / 'ystore.db'}",
                f"--BaseFileIdManager.db_path={data / 'fileid.db'}",
                "--JupyterACPTools.permission_policy=auto",
            ],
        )
        try:
            server.start()  # inside the try: a server that fails to come up is stopped too
            resp = httpx.post(
                f"{server.base}/api/sessions",
                headers=server.headers,
                timeout=60,
                json={"path": "big.ipynb", "name": "big.ipynb", "type": "notebook", "kernel": {"name": "python3"}},
            )
            resp.raise_for_status()
            kernel_id = resp.json()["kernel"]["id"]
            cf = data / "runtime" / f"kernel-{kernel_id}.json"
            sid = server.open_session("big.ipynb", "bench")["id"]

            def turn(spec: dict[str, Any]) -> dict[str, Any]:
                _, events = server.turn(sid, json.dumps(spec), timeout=600)
                texts = [
                    e["update"]["content"]["text"]
                    for e in events
                    if e["type"] == "session_update" and e["update"].get("sessionUpdate") == "agent_message_chunk"
                ]
                result = json.loads(texts[-1])
                if "error" in result:
                    raise RuntimeError(result["error"])
                return result

            print(f"# outline of a {args.cells}-cell notebook, {args.rounds} rounds")
            for label, outline_args in (
                ("default page (100 cells)", {}),
                (f"all {args.cells} cells", {"limit": args.cells}),
            ):
                res = turn({"rounds": args.rounds, "what": ["outline"], "outline_args": outline_args})["outline"]
                floor, tool = statistics.median(res["floor"]), statistics.median(res["tool"])
                matched = statistics.median(res["matched"])
                print(f"bare extension-method echo over the pipe: {ms(res['floor'])}")
                print(f"the same echo carrying the outline's {res['payload_bytes']:,} bytes: {ms(res['matched'])}")
                print(f"client_notebook_outline, {label}: {ms(res['tool'])}")
                print(f"client_notebook_outline ({label}) vs bare extension-method echo: {tool / floor:.2f}x")
                print(
                    f"client_notebook_outline ({label}) vs the payload-matched echo: {tool / matched:.2f}x (goal <= 2x)"
                )

            print(f"\n# variables: DataFrame of {args.rows} rows + {args.names} other names, {args.rounds} rounds")
            run_setup_code(
                cf,
                "\n".join(
                    [
                        "import numpy as np, pandas as pd",
                        f"df = pd.DataFrame({{'a': np.arange({args.rows}), 'b': np.random.rand({args.rows}), 'c': ['x'] * {args.rows}}})",
                        f"for _i in range({args.names}): globals()[f'name_{{_i}}'] = _i",
                    ]
                ),
            )
            floor_times = asyncio.run(bare_inspect(cf, args.rounds))
            rss0 = rss_kb(server.proc.pid)  # type: ignore[union-attr]
            res = turn({"rounds": args.rounds, "what": ["variables"]})["variables"]
            rss1 = rss_kb(server.proc.pid)  # type: ignore[union-attr]
            res2 = turn({"rounds": args.rounds, "what": ["variables"]})["variables"]
            rss2 = rss_kb(server.proc.pid)  # type: ignore[union-attr]
            floor, tool = statistics.median(floor_times), statistics.median(res["tool"] + res2["tool"])
            print(f"bare inspectVariables round trip (control channel): {ms(floor_times)}")
            print(f"client_list_variables (agent -> server -> kernel -> agent): {ms(res['tool'] + res2['tool'])}")
            print(f"client_list_variables vs bare inspectVariables: {tool / floor:.2f}x (goal <= 1.5x)")
            print(
                f"server RSS: {rss0 / 1024:.1f} MiB before, {rss1 / 1024:.1f} MiB after {args.rounds} calls, "
                f"{rss2 / 1024:.1f} MiB after {2 * args.rounds} (growth over the 2nd batch: {(rss2 - rss1) / 1024:+.1f} MiB)"
            )
        finally:
            server.stop()
    if not args.no_gateway:
        gateway_bench(args)
        gateway_bench(args, nodelay=True)
    if not args.no_scale:
        scale_bench(args)


if __name__ == "__main__":
    main()
