"""Load: many notebooks prompting at once, on the echo agent and on the built-in agent with the fake model.

    python bench/load.py [--notebooks 50] [--duration 60]

Each notebook has a session on each agent; every session loops: open the WebSocket from the last seq it
saw, POST a prompt, read until ``turn_ended``. At the end each session's events as received are compared
with the stored transcript. Prints lost and duplicated events (goal 0), failed turns (goal 0),
time-to-first-chunk p50/p95 per agent, against the floor of one bare HTTP round trip to the same server,
and the server's memory per session.
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

from jupyter_acp.testing.fake_model import FakeModel
from jupyter_acp.testing.server import ServerProcess


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Worker:
    def __init__(self, server: ServerProcess, client: httpx.AsyncClient, sid: str, agent: str) -> None:
        self.server, self.client, self.sid, self.agent = server, client, sid, agent
        self.received: list[int] = []
        self.ttfc: list[float] = []
        self.turns = 0
        self.failed: list[str] = []
        self.last = 0  # the last seq seen: each reconnect replays from here

    async def run(self, until: float) -> None:
        while time.monotonic() < until:
            last = self.last
            ws = await websocket_connect(
                HTTPRequest(
                    f"ws://127.0.0.1:{self.server.port}/jupyter-acp/sessions/{self.sid}/stream?after={last}",
                    headers=self.server.headers,
                )
            )
            t0 = time.perf_counter()
            resp = await self.client.post(
                self.server.url("sessions", self.sid, "prompt"),
                json={"text": f"load test turn {self.turns} with a few words"},
            )
            if resp.status_code != 202:
                self.failed.append(f"prompt answered {resp.status_code}: {resp.text[:200]}")
                ws.close()
                await asyncio.sleep(0.5)
                continue
            turn = resp.json()["turn_id"]
            first = None
            while True:
                msg = await asyncio.wait_for(ws.read_message(), 120)
                if msg is None:
                    self.failed.append("stream closed")
                    break
                batch = json.loads(msg)
                done = False
                for event in batch:
                    self.received.append(event["seq"])
                    self.last = max(self.last, event["seq"])
                    if (
                        event["type"] == "session_update"
                        and first is None
                        and event["update"].get("sessionUpdate") == "agent_message_chunk"
                    ):
                        first = time.perf_counter() - t0
                    if event["type"] == "turn_ended" and event["turn_id"] == turn:
                        done = True
                        if "error" in event or event.get("stop_reason") != "end_turn":
                            self.failed.append(event.get("error") or event.get("stop_reason"))
                if done:
                    break
            ws.close()
            self.turns += 1
            if first is not None:
                self.ttfc.append(first)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    root = tmp / "root"
    root.mkdir()
    names = [f"nb{i:02d}.ipynb" for i in range(args.notebooks)]
    for name in names:
        (root / name).write_text(nbformat.writes(nbformat.v4.new_notebook()))
    with FakeModel([{"text": "A short answer from the fake model, streamed word by word."}]) as model:
        py = sys.executable
        agents = {
            "echo": {
                "command": py,
                "args": ["-m", "jupyter_acp.agent", "--echo", "--max-concurrent", "256"],
                "tool_channel": "client-tools",
            },
            "builtin": {
                "command": py,
                "args": ["-m", "jupyter_acp.agent", "--max-concurrent", "256"],
                "tool_channel": "client-tools",
                "env": {
                    "JUPYTER_ACP_MODEL": "openai/fake",
                    "JUPYTER_ACP_API_BASE": model.url,
                    "OPENAI_API_KEY": "sk-fake",
                    "JUPYTER_ACP_AGENT_MODE": "auto",
                },
            },
        }
        server = ServerProcess(
            root,
            tmp / "data",
            agents=agents,
            extra_args=["--JupyterACP.max_concurrent_turns=256", "--JupyterACP.max_sessions_per_agent=256"],
        )
        server.start()
        try:
            async with httpx.AsyncClient(
                headers=server.headers, timeout=120, limits=httpx.Limits(max_connections=400)
            ) as client:
                floor = []
                for _ in range(50):
                    t0 = time.perf_counter()
                    await client.get(server.url("agents"))
                    floor.append(time.perf_counter() - t0)
                rss0 = rss_mib(server.proc.pid)
                workers = []
                for name in names:
                    for agent in ("echo", "builtin"):
                        resp = await client.post(server.url("sessions"), json={"notebook": name, "agent": agent})
                        workers.append(Worker(server, client, resp.json()["id"], agent))
                # one warm-up turn each: agents started, litellm imported
                await asyncio.gather(*(w.run(time.monotonic() + 1) for w in workers))
                for w in workers:
                    w.ttfc.clear()
                start = time.monotonic()
                await asyncio.gather(*(w.run(start + args.duration) for w in workers))
                elapsed = time.monotonic() - start
                rss1 = rss_mib(server.proc.pid)
                lost = dup = 0
                for w in workers:
                    stored = [e["seq"] for e in (await client.get(server.url("sessions", w.sid, "events"))).json()]
                    got = w.received
                    dup += len(got) - len(set(got))
                    lost += len(set(stored) - set(got))
        finally:
            server.stop()
    med_floor = statistics.median(floor) * 1000
    print(f"sessions                 {len(workers)} ({args.notebooks} notebooks x 2 agents), {elapsed:.0f} s of load")
    print(f"turns completed          {sum(w.turns for w in workers)}")
    print(f"failed turns             {sum(len(w.failed) for w in workers)} (goal 0)")
    print(f"lost / duplicated events {lost} / {dup} (goal 0 / 0)")
    print(f"floor: bare HTTP GET     {med_floor:.2f} ms median")
    for agent in ("echo", "builtin"):
        ttfc = [t * 1000 for w in workers if w.agent == agent for t in w.ttfc]
        print(
            f"{agent:8s} first chunk     p50 {pct(ttfc, 0.5):7.1f} ms   p95 {pct(ttfc, 0.95):7.1f} ms"
            f"   (p95 = {pct(ttfc, 0.95) / med_floor:.0f}x the floor)"
        )
    print(
        f"server memory            {rss0:.0f} MiB -> {rss1:.0f} MiB: {(rss1 - rss0) * 1024 / len(workers):.0f} KiB per session"
    )
    failures = [f for w in workers for f in w.failed][:5]
    if failures:
        print("first failures:", *failures, sep="\n  ")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--notebooks", type=int, default=50)
    p.add_argument("--duration", type=float, default=60)
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
