"""Streaming through the whole server path, against the same agent read directly over its pipe.

    python bench/stream.py [--chunks 10000] [--repeat 3] [--via socket|http] [--warm 30] [--profile FILE]

Floor: the scripted ``stream`` agent driven over its stdio pipe by a bare JSON-RPC client in this
process.  Measured: the same agent configured in a real ``jupyter server`` subprocess, the prompt
POSTed over HTTP and every chunk read from the session's WebSocket.  Prints chunks/s, time to first
chunk, and the ratios (goal: >= 0.8x throughput at 10,000 chunks, < 5 ms first-chunk overhead).

Warm turns (``--warm N``, 0 to skip): a one-chunk agent, N prompts back to back, each until ``turn_ended`` on the
session's WebSocket, the prompt sent three ways: ``POST .../prompt`` (the HTTP route) from a keep-alive HTTP/1.1
client that costs little of its own (the standard library's ``http.client``, as a script uses it), the same route
from httpx (whose own work, 1.5-3 ms of CPU per request on a busy 2-core machine, is most of what a script pays
there: printed apart, so the route is not blamed for its client), and a ``prompt`` op frame on the already-open
socket; the floor is the same agent driven directly over its pipe. "Of which" is a ``cancel`` op
with no turn running on the same socket: the WebSocket round trip itself (client, server, auth, parse, answer);
"a store flush" is a one-chunk turn's three events stored in a transcript store of its own (decision 6: stored
before sent). Their sum with the floor is what a turn through any server that stores before it sends costs at least.

``--profile FILE``: py-spy samples the server while it streams and runs the warm turns (collapsed stacks,
``--format raw``, into FILE).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import signal
import statistics
import subprocess
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
#: server CPU seconds per warm prompt, by how it was sent
WARM_CPU: dict[str, list[float]] = {"http": [], "httpx": [], "socket": []}
#: CPU seconds per streamed turn: "direct" this process reading the pipe, "server" the server process
CPU: dict[str, list[float]] = {"direct": [], "server": []}


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of a process (this one when None): steadier than wall time on a busy machine."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    await conn.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    total = time.perf_counter() - t0
    CPU["direct"].append(cpu_seconds() - c0)
    assert counter.count == chunks, counter.count
    conn.close()
    await proc.stop(grace=0.5)
    return counter.first - t0, total  # type: ignore[operator]


async def direct_warm(n: int) -> list[float]:
    """Seconds per prompt, ``n`` back to back, a one-chunk agent driven over its pipe (the floor)."""
    proc = AgentProcess([*AGENT, "--chunks", "1"], env=None, cwd=".")  # type: ignore[arg-type]
    reader, writer = await proc.start()
    conn = JsonRpcConnection(reader, writer, Counter())
    conn.start()
    await conn.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = (await conn.request("session/new", {"cwd": str(Path.cwd()), "mcpServers": []}))["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    await conn.request("session/prompt", prompt)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await conn.request("session/prompt", prompt)
        out.append(time.perf_counter() - t0)
    conn.close()
    await proc.stop(grace=0.5)
    return out


async def warm_through_server(server: ServerProcess, sid: str, n: int, via: str) -> list[float]:
    """Seconds per prompt until ``turn_ended`` on the WebSocket; ``via`` "http" (the route, from ``http.client``),
    "httpx" (the route, from httpx) or "socket" (an op)."""
    last = server.get("sessions", sid).json()["last_seq"]
    ws_url = f"ws://127.0.0.1:{server.port}/jupyter-acp/sessions/{sid}/stream?after={last}"
    ws = await websocket_connect(HTTPRequest(ws_url, headers=server.headers))
    out = []
    pid = server.proc.pid  # type: ignore[union-attr]
    lean = http.client.HTTPConnection("127.0.0.1", server.port)
    path = f"/jupyter-acp/sessions/{sid}/prompt"
    headers = {**server.headers, "Content-Type": "application/json"}
    async with httpx.AsyncClient(headers=server.headers) as client:
        await client.get(server.url("agents"))  # connections open before the clock starts
        lean.request("GET", "/jupyter-acp/agents", headers=server.headers)
        lean.getresponse().read()
        for i in range(n + 1):
            if i == 1:
                c0 = cpu_seconds(pid)  # the first one warms this path up, untimed
            t0 = time.perf_counter()
            if via == "httpx":
                (await client.post(server.url("sessions", sid, "prompt"), json={"text": "hi"})).raise_for_status()
            elif via == "http":
                # blocking the loop meanwhile is fine: the events wait in the socket until it reads them
                lean.request("POST", path, body=b'{"text": "hi"}', headers=headers)
                answer = lean.getresponse()
                answer.read()
                if answer.status != 202:
                    raise RuntimeError(f"prompt answered {answer.status}")
            else:
                await ws.write_message(json.dumps({"op": "prompt", "ref": i, "text": "hi"}))
            while True:
                msg = await ws.read_message()
                if msg is None:
                    raise RuntimeError("stream closed")
                data = json.loads(msg)
                if isinstance(data, dict):  # the op's answer
                    if not data.get("ok"):
                        raise RuntimeError(data)
                    continue
                if any(e["type"] == "turn_ended" for e in data):
                    break
            if i:
                out.append(time.perf_counter() - t0)
    WARM_CPU[via].append((cpu_seconds(pid) - c0) / n)
    ws.close()
    lean.close()
    return out


async def bare_ops(server: ServerProcess, sid: str, n: int) -> list[float]:
    """Seconds per ``cancel`` op with no turn running, on the session's open WebSocket: the socket's own round trip
    (client, server, auth, parse, answer) with no agent behind it."""
    last = server.get("sessions", sid).json()["last_seq"]
    ws_url = f"ws://127.0.0.1:{server.port}/jupyter-acp/sessions/{sid}/stream?after={last}"
    ws = await websocket_connect(HTTPRequest(ws_url, headers=server.headers))
    out = []
    for i in range(n + 1):
        t0 = time.perf_counter()
        await ws.write_message(json.dumps({"op": "cancel", "ref": i}))
        data = json.loads(await ws.read_message())  # type: ignore[arg-type]
        if not (isinstance(data, dict) and data.get("ok")):
            raise RuntimeError(data)
        if i:
            out.append(time.perf_counter() - t0)
    ws.close()
    return out


def store_flushes(n: int) -> list[float]:
    """Seconds per flush of a one-chunk turn's three events (``turn_started``, the chunk, ``turn_ended``) into the
    real transcript store, encoding included: what storing every event before it is sent (decision 6) costs a
    warm turn at least, measured apart from the server."""
    from jupyter_acp.sessions.state import encode
    from jupyter_acp.sessions.store import TranscriptStore

    folder = tempfile.mkdtemp(prefix="bench-store-")
    store = TranscriptStore(os.path.join(folder, "t.sqlite"))
    store.open()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    out, seq = [], 0
    try:
        for i in range(n + 1):
            events = []
            for type_, data in (
                ("turn_started", {"turn_id": "t", "prompt": [{"type": "text", "text": "hi"}]}),
                ("session_update", {"update": chunk}),
                ("turn_ended", {"turn_id": "t", "stop_reason": "end_turn", "tool_calls_served": 0}),
            ):
                seq += 1
                events.append({"seq": seq, "type": type_, "ts": time.time(), **data})
            t0 = time.perf_counter()
            store.append_many("bench", events, [encode(e) for e in events])
            store.commit()
            if i:
                out.append(time.perf_counter() - t0)
    finally:
        store.close()
    return out


async def through_server(server: ServerProcess, sid: str, chunks: int, via: str = "socket") -> tuple[float, float]:
    """(seconds to the first chunk, seconds to turn_ended) from the prompt (``via`` "http": POSTed; "socket": an
    op on the session's WebSocket, as the panel sends it) to the events on the WebSocket."""
    last = server.get("sessions", sid).json()["last_seq"]
    ws_url = f"ws://127.0.0.1:{server.port}/jupyter-acp/sessions/{sid}/stream?after={last}"
    ws = await websocket_connect(HTTPRequest(ws_url, headers=server.headers))
    async with httpx.AsyncClient(headers=server.headers) as client:
        await client.get(server.url("agents"))  # connection open before the clock starts
        pid = server.proc.pid  # type: ignore[union-attr]
        c0 = cpu_seconds(pid)
        t0 = time.perf_counter()
        if via == "http":
            (await client.post(server.url("sessions", sid, "prompt"), json={"text": "go"})).raise_for_status()
        else:
            await ws.write_message(json.dumps({"op": "prompt", "ref": 1, "text": "go"}))
        first = None
        count = 0
        while True:
            msg = await ws.read_message()
            if msg is None:
                raise RuntimeError("stream closed")
            ended = False
            data = json.loads(msg)
            if isinstance(data, dict):  # the op's answer
                if not data.get("ok"):
                    raise RuntimeError(data)
                continue
            for event in data:
                if event["type"] == "session_update":
                    # the server joins a tick's chunks into one event: count the agent's chunks ("0 1 2 ...")
                    count += len(event["update"]["content"]["text"].split())
                    if first is None:
                        first = time.perf_counter() - t0
                elif event["type"] == "turn_ended":
                    ended = True
            if ended:
                total = time.perf_counter() - t0
                CPU["server"].append(cpu_seconds(pid) - c0)
                break
    ws.close()
    assert count == chunks, count
    return first, total  # type: ignore[return-value]


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    (tmp / "root").mkdir()
    (tmp / "root" / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    (tmp / "root" / "warm.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    agents = {
        "stream": {"command": AGENT[0], "args": [*AGENT[1:], "--chunks", str(args.chunks)]},
        "one": {"command": AGENT[0], "args": [*AGENT[1:], "--chunks", "1"]},
    }
    server = ServerProcess(tmp / "root", tmp / "data", agents=agents, extra_args=args.server_arg)
    server.start()
    warm: dict[str, list[float]] = {"direct": [], "http": [], "httpx": [], "socket": [], "bare": [], "store": []}
    try:
        sid = server.open_session("nb.ipynb", "stream")["id"]
        await through_server(server, sid, args.chunks)  # warm-up (server.turn reads one page: not to the end)
        d_first, d_total, s_first, s_total = [], [], [], []
        spy = None
        if args.profile:
            pid = str(server.proc.pid)  # type: ignore[union-attr]
            argv = ["py-spy", "record", "--pid", pid, "--format", "raw", "--rate", "250", "-o", args.profile]
            spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(1)
        for _ in range(args.repeat):
            f, t = await direct(args.chunks)
            d_first.append(f)
            d_total.append(t)
            f, t = await through_server(server, sid, args.chunks, args.via)
            s_first.append(f)
            s_total.append(t)
        if args.warm:
            wid = server.open_session("warm.ipynb", "one")["id"]
            await warm_through_server(server, wid, 1, "http")  # warm-up
            for _ in range(args.repeat):  # interleaved, so a busy moment hits every path
                warm["direct"] += await direct_warm(args.warm)
                warm["http"] += await warm_through_server(server, wid, args.warm, "http")
                warm["httpx"] += await warm_through_server(server, wid, args.warm, "httpx")
                warm["socket"] += await warm_through_server(server, wid, args.warm, "socket")
                warm["bare"] += await bare_ops(server, wid, args.warm)
                warm["store"] += store_flushes(args.warm)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
    finally:
        server.stop()
    med = statistics.median
    d_rate, s_rate = args.chunks / med(d_total), args.chunks / med(s_total)
    overhead_ms = (med(s_first) - med(d_first)) * 1000
    rates = sorted(args.chunks / t / d_rate for t in s_total)
    print(f"chunks per turn            {args.chunks}")
    print(f"direct pipe (floor)        {d_rate:10.0f} chunks/s   first chunk {med(d_first) * 1000:7.2f} ms")
    print(f"server -> WebSocket ({args.via:6}) {s_rate:8.0f} chunks/s   first chunk {med(s_first) * 1000:7.2f} ms")
    print(f"throughput ratio           {s_rate / d_rate:10.2f}x  (goal >= 0.8x; runs {rates[0]:.2f}-{rates[-1]:.2f}x)")
    print(f"first-chunk overhead       {overhead_ms:10.2f} ms (goal < 5 ms)")
    d_cpu, s_cpu = med(CPU["direct"]) / args.chunks * 1e6, med(CPU["server"]) / args.chunks * 1e6
    interval = 1e6 / d_rate  # how often the pipe brings a chunk when read directly
    print(
        f"CPU per chunk              server {s_cpu:.1f} us (runs {min(CPU['server']) / args.chunks * 1e6:.1f}-"
        f"{max(CPU['server']) / args.chunks * 1e6:.1f}), direct reader {d_cpu:.1f} us; the pipe brings one every "
        f"{interval:.1f} us: with a core of its own the server keeps up while its CPU per chunk stays under that"
    )
    if args.warm:
        floor = med(warm["direct"])
        for name, label in (
            ("direct", "warm turn, direct (floor)"),
            ("http", "warm turn, HTTP prompt"),
            ("httpx", "  the same from httpx"),
            ("socket", "warm turn, socket op"),
            ("bare", "of which: a bare op (cancel)"),
            ("store", "and a store flush"),
        ):
            q = statistics.quantiles(warm[name], n=4)
            cpu = f", server CPU {med(WARM_CPU[name]) * 1000:.2f} ms/prompt" if name in WARM_CPU else ""
            print(
                f"{label:26} {med(warm[name]) * 1000:10.2f} ms  ({med(warm[name]) / floor:5.1f}x the floor; "
                f"quartiles {q[0] * 1000:.2f}-{q[2] * 1000:.2f} ms, {len(warm[name])} prompts{cpu})"
            )
        # what no server can skip: the agent's round trip, the socket's and the store's flush (stored before sent)
        least = floor + med(warm["bare"]) + med(warm["store"])
        print(
            f"{'floor + bare op + flush':26} {least * 1000:10.2f} ms  ({least / floor:5.1f}x the floor): "
            f"the socket op is {med(warm['socket']) / least:.2f}x this, the HTTP prompt {med(warm['http']) / least:.2f}x "
            f"(from httpx {med(warm['httpx']) / least:.2f}x)"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--chunks", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--via", choices=("socket", "http"), default="socket", help="how the streamed prompt is sent")
    p.add_argument("--warm", type=int, default=30, help="warm prompts per path and repeat (0: skip)")
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="an extra server option (A/B runs), e.g. --JupyterACP.freeze_gc=False",
    )
    p.add_argument("--profile", default="", help="py-spy the server while it streams; collapsed stacks to this file")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
