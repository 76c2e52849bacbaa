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


def main() -> None:
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
    args = p.parse_args()
    if args.agent:
        asyncio.run(BenchAgent().main())
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


if __name__ == "__main__":
    main()
