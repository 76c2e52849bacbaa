"""Streaming through the whole server path, against the same agent read directly over its pipe.

    python bench/stream.py [--chunks 10000] [--repeat 3]

Floor: the scripted ``stream`` agent driven over its stdio pipe by a bare JSON-RPC client in this
process.  Measured: the same agent configured in a real ``jupyter server`` subprocess, the prompt
POSTed over HTTP and every chunk read from the session's WebSocket.  Prints chunks/s, time to first
chunk, and the ratios (goal: >= 0.8x throughput at 10,000 chunks, < 10 ms first-chunk overhead).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

AGENT = [sys.executable, "-m", "jupyter_acp.testing.agents", "stream"]


class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.first: float | None = None
        self.done = asyncio.Event()
        self.target = 0

    async def handle_request(self, method, params):
        return None

    def handle_notification(self, method, params):
        if method == "session/update":
            if self.first is None:
                self.first = time.perf_counter()
            self.count += 1


async def direct(chunks: int) -> tuple[float, float]:
    """(seconds to the first chunk, seconds for all) straight over the agent's pipe."""
    proc = AgentProcess([*AGENT, "--chunks", str(chunks)], env=None, cwd=".")  # type: ignore[arg-type]
    reader, writer = await proc.start()
    counter = Counter()
    conn = JsonRpcConnection(reader, writer, counter)
    conn.start()
    await conn.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = (await conn.request("session/new", {"cwd": str(Path.cwd()), "mcpServers": []}))["sessionId"]
    await conn.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "warm"}]})
    counter.count, counter.first = 0, None
    t0 = time.perf_counter()
    await conn.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    total = time.perf_counter() - t0
    assert counter.count == chunks, counter.count
    conn.close()
    await proc.stop(grace=0.5)
    return counter.first - t0, total  # type: ignore[operator]


async def through_server(server: ServerProcess, sid: str, chunks: int) -> tuple[float, float]:
    """(seconds to the first chunk, seconds to turn_ended) from POST prompt to the WebSocket."""
    last = server.get("sessions", sid).json()["last_seq"]
    ws_url = f"ws://127.0.0.1:{server.port}/jupyter-acp/sessions/{sid}/stream?after={last}"
    ws = await websocket_connect(HTTPRequest(ws_url, headers=server.headers))
    async with httpx.AsyncClient(headers=server.headers) as client:
        await client.get(server.url("agents"))  # connection open before the clock starts
        t0 = time.perf_counter()
        resp = await client.post(server.url("sessions", sid, "prompt"), json={"text": "go"})
        resp.raise_for_status()
        first = None
        count = 0
        while True:
            msg = await ws.read_message()
            if msg is None:
                raise RuntimeError("stream closed")
            ended = False
            for event in json.loads(msg):
                if event["type"] == "session_update":
                    count += 1
                    if first is None:
                        first = time.perf_counter() - t0
                elif event["type"] == "turn_ended":
                    ended = True
            if ended:
                total = time.perf_counter() - t0
                break
    ws.close()
    assert count == chunks, count
    return first, total  # type: ignore[return-value]


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    (tmp / "root").mkdir()
    (tmp / "root" / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    agents = {"stream": {"command": AGENT[0], "args": [*AGENT[1:], "--chunks", str(args.chunks)]}}
    server = ServerProcess(tmp / "root", tmp / "data", agents=agents)
    server.start()
    try:
        sid = server.open_session("nb.ipynb", "stream")["id"]
        server.turn(sid, "warm up")
        d_first, d_total, s_first, s_total = [], [], [], []
        for _ in range(args.repeat):
            f, t = await direct(args.chunks)
            d_first.append(f)
            d_total.append(t)
            f, t = await through_server(server, sid, args.chunks)
            s_first.append(f)
            s_total.append(t)
    finally:
        server.stop()
    med = statistics.median
    d_rate, s_rate = args.chunks / med(d_total), args.chunks / med(s_total)
    overhead_ms = (med(s_first) - med(d_first)) * 1000
    print(f"chunks per turn            {args.chunks}")
    print(f"direct pipe (floor)        {d_rate:10.0f} chunks/s   first chunk {med(d_first) * 1000:7.2f} ms")
    print(f"server -> WebSocket        {s_rate:10.0f} chunks/s   first chunk {med(s_first) * 1000:7.2f} ms")
    print(f"throughput ratio           {s_rate / d_rate:10.2f}x  (goal >= 0.8x)")
    print(f"first-chunk overhead       {overhead_ms:10.2f} ms (goal < 10 ms)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--chunks", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
