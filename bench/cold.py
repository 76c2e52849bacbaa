"""The cold first answer of a notebook session on an MCP-channel agent, against the agent's own cold start.

    python bench/cold.py [--repeat 5]

Floor: the scripted agent driven directly over its pipe: spawn, ``initialize``, ``session/new``, ``session/prompt``
until its first answer chunk. Measured: a fresh ``jupyter server`` (not timed while it starts), then
``POST sessions`` + ``POST prompt`` until the first answer chunk reaches the session's WebSocket; the agent gets
its tools over MCP (the stdio shim), as most real agents do. Also the second notebook's session on the same
server (the agent already running: the floor is then ``session/new`` + prompt), and the server's own start with
and without the extension, interleaved (until ``/api/status`` answers, and until the extension's first route answers;
the server's CPU time until ``/api/status``, all threads and its main thread alone: on a loaded machine the wall
times spread over seconds, the CPU times much less).
Goals: first answer within 30 ms of the floor, first session and later ones (the user waits for the agent, not for
the server); start +50 ms at most (a server loads many extensions: this one must not be the one felt).
``--only start`` / ``--only answer``: one half.
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

import httpx
import nbformat
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from jupyter_acp.acp.process import AgentProcess
from jupyter_acp.protocol.jsonrpc import JsonRpcConnection
from jupyter_acp.testing.server import ServerProcess

AGENT = [sys.executable, "-m", "jupyter_acp.testing.agents", "stream", "--chunks", "1"]


class FirstChunk:
    def __init__(self) -> None:
        self.at: float | None = None

    async def handle_request(self, method, params):
        return None

    def handle_notification(self, method, params):
        if method == "session/update" and self.at is None:
            self.at = time.perf_counter()


async def direct() -> tuple[float, float]:
    """(cold: spawn to first chunk, warm agent: session/new to first chunk), seconds."""
    t0 = time.perf_counter()
    proc = AgentProcess(AGENT, env=None, cwd=".")  # type: ignore[arg-type]
    reader, writer = await proc.start()
    first = FirstChunk()
    conn = JsonRpcConnection(reader, writer, first)
    conn.start()
    await conn.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = (await conn.request("session/new", {"cwd": str(Path.cwd()), "mcpServers": []}))["sessionId"]
    await conn.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    cold = first.at - t0  # type: ignore[operator]
    first.at = None
    t1 = time.perf_counter()
    sid = (await conn.request("session/new", {"cwd": str(Path.cwd()), "mcpServers": []}))["sessionId"]
    await conn.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    warm = first.at - t1  # type: ignore[operator]
    conn.close()
    await proc.stop(grace=0.5)
    return cold, warm


async def first_answer(server: ServerProcess, notebook: str) -> float:
    """Seconds from opening the notebook's session to the first answer chunk on its WebSocket."""
    async with httpx.AsyncClient(headers=server.headers) as client:
        await client.get(server.url("agents"))  # the connection is open before the clock starts
        t0 = time.perf_counter()
        resp = await client.post(server.url("sessions"), json={"notebook": notebook, "agent": "mcp"})
        resp.raise_for_status()
        sid = resp.json()["id"]
        ws_url = f"ws://127.0.0.1:{server.port}/jupyter-acp/sessions/{sid}/stream?after=0"
        ws = await websocket_connect(HTTPRequest(ws_url, headers=server.headers))
        (await client.post(server.url("sessions", sid, "prompt"), json={"text": "go"})).raise_for_status()
        while True:
            msg = await ws.read_message()
            if msg is None:
                raise RuntimeError("stream closed")
            if any(e["type"] == "session_update" for e in json.loads(msg)):
                ws.close()
                return time.perf_counter() - t0


def cpu_seconds(pid: int, main_thread: bool = False) -> float:
    """CPU time (user + system) a process (or only its main thread) has used so far (Linux /proc; 10 ms ticks)."""
    stat = f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat"
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_time(tmp: Path, with_extension: bool) -> tuple[float, float, float, float]:
    """(until /api/status answers, until jupyter-acp/agents answers, the server's CPU time until /api/status, the
    same for its main thread only: the event loop's, what a start in a background thread leaves out) for a fresh
    server, seconds. The CPU times move less than the wall times on a loaded machine."""
    server = ServerProcess(tmp / "root", tmp / f"data-{time.monotonic_ns()}", extension=with_extension)
    t0 = time.perf_counter()
    server.start_process()
    status = route = cpu = main_cpu = None
    while route is None:
        if time.perf_counter() - t0 > 60 or (server.proc is not None and server.proc.poll() is not None):
            server.stop()
            raise RuntimeError("server did not start: " + (server.data / "server.log").read_text()[-2000:])
        try:
            if (
                status is None
                and httpx.get(f"{server.base}/api/status", headers=server.headers, timeout=2).status_code == 200
            ):
                status = time.perf_counter() - t0
                cpu = cpu_seconds(server.proc.pid)  # type: ignore[union-attr]
                main_cpu = cpu_seconds(server.proc.pid, main_thread=True)  # type: ignore[union-attr]
                if not with_extension:
                    route = status
            if status is not None and with_extension and server.get("agents").status_code == 200:
                route = time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.005)
    server.stop()
    return status, route, cpu, main_cpu  # type: ignore[return-value]


def spread(values: list[float]) -> str:
    """min-max of a series, in ms"""
    return f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f} ms"


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    (tmp / "root").mkdir()
    for name in ("a.ipynb", "b.ipynb"):
        (tmp / "root" / name).write_text(nbformat.writes(nbformat.v4.new_notebook()))
    agents = {"mcp": {"command": AGENT[0], "args": AGENT[1:], "tool_channel": "mcp-stdio"}}
    floor_cold, floor_warm, first, later = [], [], [], []
    med = statistics.median
    ms = lambda v: v * 1000  # noqa: E731
    for i in range(args.repeat if args.only != "start" else 0):
        cold, warm = await direct()
        floor_cold.append(cold)
        floor_warm.append(warm)
        server = ServerProcess(tmp / "root", tmp / f"data{i}", agents=agents)
        server.start()
        try:
            first.append(await first_answer(server, "a.ipynb"))
            later.append(await first_answer(server, "b.ipynb"))
        finally:
            server.stop()
    if args.only != "answer":
        # interleaved, so that a load that comes and goes on a shared machine falls on both alike
        starts, bare = [], []
        for _ in range(args.repeat):
            starts.append(start_time(tmp, True))
            bare.append(start_time(tmp, False))
        s0, b0, r1 = [s[0] for s in starts], [b[0] for b in bare], [s[1] for s in starts]
        c0, cb = [s[2] for s in starts], [b[2] for b in bare]
        m0, mb = [s[3] for s in starts], [b[3] for b in bare]
        print(f"server start, no extension   {ms(med(b0)):8.1f} ms   until /api/status (spread {spread(b0)})")
        print(
            f"server start, with it        {ms(med(s0)):8.1f} ms   until /api/status: "
            f"{ms(med(s0) - med(b0)):+.1f} ms (goal <= 50 ms; spread {spread(s0)}); "
            f"first route {ms(med(r1)):.1f} ms (spread {spread(r1)})"
        )
        print(
            f"server CPU until /api/status {ms(med(cb)):8.1f} ms without, {ms(med(c0)):.1f} ms with it: "
            f"{ms(med(c0) - med(cb)):+.1f} ms (spread {spread(cb)} / {spread(c0)})"
        )
        print(
            f"  its main thread (the loop)  {ms(med(mb)):8.1f} ms without, {ms(med(m0)):.1f} ms with it: "
            f"{ms(med(m0) - med(mb)):+.1f} ms (spread {spread(mb)} / {spread(m0)})"
        )
    if args.only == "start":
        return
    print(f"agent cold start (floor)     {ms(med(floor_cold)):8.1f} ms   spawn, initialize, session/new, prompt")
    print(
        f"first session after start    {ms(med(first)):8.1f} ms   overhead {ms(med(first) - med(floor_cold)):7.1f} ms (goal <= 30 ms)"
    )
    print(f"agent warm session (floor)   {ms(med(floor_warm)):8.1f} ms   session/new, prompt")
    print(
        f"a later notebook's session   {ms(med(later)):8.1f} ms   overhead {ms(med(later) - med(floor_warm)):7.1f} ms (goal <= 30 ms)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--only", choices=("start", "answer"), help="only the server's start, or only the first answers (default: both)"
    )
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
