"""MCP tool calls through the loopback tool host, against a bare POST to the same listener.

    python bench/mcp.py [--cells 200] [--calls 200] [--sessions 50]

A real server; a scripted agent process is the MCP client (it holds the session's bearer, as a real
agent would) and times, on one keep-alive connection, ``tools/call client_notebook_outline`` on a
notebook of ``--cells`` cells and a bare ``ping`` (the floor: same listener, same auth, no tool).
Then ``--sessions`` sessions (their notebooks opened once beforehand) call at once and the p95 is
compared with the idle p95.
Goals: call within 1.5x of the floor plus the tool's own time; p95 under load within 5x of idle (a
tool call the model waits for must not queue behind other notebooks' work).

What "at once" means here: each session's turn runs its calls back to back (a closed loop, no think
time) in the scripted agent's ``asyncio.to_thread``, whose default pool has ``min(32, cores + 4)``
workers: on 2 cores 6 sessions call at any moment, the others wait for a worker (not timed).  With
one server event loop serving closed-loop clients, a call under load waits behind the requests of
the others ahead of it, so the p95 ratio is bounded below by about that concurrency whatever the
server's per-call cost; a faster server shows as a lower load p95 and a shorter wall time.
``--workers 50`` makes all 50 call at the same instant: then the p95 is about 50 times the server's
time per call (no goal; it shows the cost per call that queueing multiplies).  The bench's own side
is one asyncio loop with one WebSocket per session (``Client``), so it takes little CPU from the
server it measures; on a shared machine compare runs interleaved and read medians over several.
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
from typing import Any

import nbformat
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from jupyter_acp.testing.events import message_text
from jupyter_acp.testing.server import ServerProcess

AGENT = {
    "command": sys.executable,
    "args": ["-m", "jupyter_acp.testing.agents", "mcp_bench"],
    "tool_channel": "mcp-http",
}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


class Client:
    """The bench's side: one asyncio loop and one WebSocket per session, prompts sent as ops on it (as the panel does).

    It used to be a thread per session, each polling through ``httpx.get`` (a new client, so a new SSL
    context, per request): in a py-spy profile of a run on 2 cores, 53% of all samples (server, agent
    and bench) were the bench's own process and 33% were it building SSL contexts. Then one keep-alive
    ``httpx.AsyncClient`` polling each session's end: the bench still took 1.1 s of CPU in a 1.8 s load
    phase (the server 1.5 s). Now a turn costs one frame out and a few frames in, and no request at all.
    """

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.sockets: dict[str, Any] = {}
        self.ref = 0

    async def _socket(self, sid: str) -> Any:
        ws = self.sockets.get(sid)
        if ws is None:
            last = self.server.get("sessions", sid).json()["last_seq"]
            url = f"ws://127.0.0.1:{self.server.port}/jupyter-acp/sessions/{sid}/stream?after={last}"
            ws = self.sockets[sid] = await websocket_connect(HTTPRequest(url, headers=self.server.headers))
        return ws

    async def turn(self, sid: str, text: str, timeout: float = 300) -> dict[str, list[float]]:
        ws = await self._socket(sid)
        self.ref += 1
        ref = self.ref
        await ws.write_message(json.dumps({"op": "prompt", "ref": ref, "text": text}))
        turn: str | None = None
        events: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while turn is None or not any(e["type"] == "turn_ended" and e.get("turn_id") == turn for e in events):
                msg = await ws.read_message()
                if msg is None:
                    raise AssertionError(f"the stream of {sid} closed")
                data = json.loads(msg)
                if isinstance(data, dict):  # an op's answer
                    if data.get("ref") == ref:
                        if not data.get("ok"):
                            raise AssertionError(f"prompt refused: {data}")
                        turn = data["turn_id"]
                    continue
                events.extend(data)
        return json.loads(message_text(events, turn))

    async def close(self) -> None:
        for ws in self.sockets.values():
            ws.close()


async def run(server: ServerProcess, sids: list[str], calls: int) -> tuple[list[float], dict, list[dict], float]:
    client = Client(server)
    try:
        cold = []
        for sid in sids:  # the first call of a notebook opens its live document (a one-time cost)
            cold.append((await client.turn(sid, "bench 1 client_notebook_outline"))["call"][0])
        idle = await client.turn(sids[0], f"bench {calls} client_notebook_outline")
        per = max(10, calls // 10)
        t0 = time.perf_counter()
        loaded = await asyncio.gather(*(client.turn(sid, f"bench {per} client_notebook_outline") for sid in sids))
        wall = time.perf_counter() - t0
    finally:
        await client.close()
    return cold, idle, list(loaded), wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cells", type=int, default=200)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument(
        "--workers", type=int, default=0, help="the agent's threads calling at once (0: asyncio's default pool)"
    )
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    root = tmp / "root"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(f"x{i} = {i}\nprint(x{i})") for i in range(args.cells)]
    for i in range(args.sessions):
        nbformat.write(nb, root / f"nb{i:02d}.ipynb")
    server = ServerProcess(
        root,
        tmp / "data",
        agents={"bench": {**AGENT, "args": [*AGENT["args"], "--workers", str(args.workers)]}},
        extra_args=["--JupyterACP.max_concurrent_turns=128", "--JupyterACP.turn_idle_timeout=600"],
    )
    try:
        server.start()  # inside the try: a server that fails to come up is stopped too
        sids = [server.open_session(f"nb{i:02d}.ipynb", "bench")["id"] for i in range(args.sessions)]
        cold, idle, loaded, wall = asyncio.run(run(server, sids, args.calls))
    finally:
        server.stop()
    call, ping = statistics.median(idle["call"]), statistics.median(idle["ping"])
    under = [v for r in loaded for v in r["call"]]
    print(f"notebook                     {args.cells} cells; {args.calls} idle calls; {len(loaded)} sessions at once")
    print(f"floor: bare POST (ping)      {ping:7.2f} ms median")
    print(
        f"tools/call outline           {call:7.2f} ms median  ({call / ping:.1f}x the bare POST; goal <= 1.5x plus the tool's own time)"
    )
    print(f"first call of a notebook     {statistics.median(cold):7.2f} ms median (opens the live document)")
    print(f"idle p50 / p95               {pct(idle['call'], 0.5):7.2f} / {pct(idle['call'], 0.95):.2f} ms")
    print(
        f"{len(loaded)} sessions at once p50      {pct(under, 0.5):7.2f} ms  "
        f"({pct(under, 0.5) / pct(idle['call'], 0.5):.1f}x idle p50)"
    )
    print(
        f"{len(loaded)} sessions at once p95    {pct(under, 0.95):7.2f} ms  "
        f"({pct(under, 0.95) / pct(idle['call'], 0.95):.1f}x idle p95; goal <= 5x)  [{len(under)} calls in {wall:.1f} s]"
    )


if __name__ == "__main__":
    main()
