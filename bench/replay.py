"""Replaying a big history: server memory per replay, against the floor of one page.

    python bench/replay.py [--updates 50] [--size-mib 3.8] [--rounds 3]

A real ``jupyter server`` subprocess; a scripted agent (``big_frame``) sends ``--updates`` agent updates of
``--size-mib`` MiB each, one per turn, through the whole path (pipe, hub, store).  Then a client replays the
history three ways while the server's RSS is sampled every 2 ms and ``/api/status`` is timed:

* ``stream?after=0`` (what a sidebar does on load): the latest page, in frames;
* ``GET events?after=0`` (what a script does): one page;
* every page back to the start with ``events?before=``: the whole history, one page in memory at a time.

Floor: ``c.JupyterACP.replay_page_bytes`` (one page, 1 MiB): what the server must hold at least to send a
page.  Prints each replay's peak RSS growth, bytes sent, largest frame, the worst ``/api/status`` time,
and the RSS ratio against the floor (goal <= 16x; on the code before paging this script measured +971 MiB,
971x, and /api/status stalled 2.1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import nbformat
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from jupyter_acp.testing.server import ServerProcess

MiB = 1024 * 1024
PAGE = 1 * MiB  # c.JupyterACP.replay_page_bytes default
GOAL = 16


def rss(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Watch:
    """Peak RSS of the server and the slowest /api/status while a replay runs (in a thread)."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.base = rss(server.proc.pid)  # type: ignore[union-attr]
        self.peak = self.base
        self.status_max = 0.0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._rss), threading.Thread(target=self._status)]

    def _rss(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss(self.server.proc.pid))  # type: ignore[union-attr]
            time.sleep(0.002)

    def _status(self) -> None:
        with httpx.Client(headers=self.server.headers, timeout=30) as c:
            while True:  # at least one request, however short the replay
                t0 = time.perf_counter()
                c.get(f"{self.server.base}/api/status")
                self.status_max = max(self.status_max, time.perf_counter() - t0)
                if self._stop.wait(0.01):
                    break

    def __enter__(self) -> Watch:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    @property
    def growth(self) -> int:
        return self.peak - self.base


def fill(server: ServerProcess, sid: str, updates: int) -> None:
    for i in range(updates):
        resp = server.post("sessions", sid, "prompt", body={"text": f"big {i}"})
        resp.raise_for_status()
        turn = resp.json()["turn_id"]
        deadline = time.monotonic() + 120
        while server.get("sessions", sid).json().get("turn_id") == turn:  # the small session state, not events
            if time.monotonic() > deadline:
                raise RuntimeError(f"turn {i} did not end")
            time.sleep(0.02)


async def ws_replay(server: ServerProcess, sid: str, last: int) -> tuple[int, int, int, int]:
    """(events, bytes, frames, largest frame) of ``stream?after=0`` up to ``last``."""
    url = f"ws://127.0.0.1:{server.port}/jupyter-acp/sessions/{sid}/stream?after=0"
    ws = await websocket_connect(HTTPRequest(url, headers=server.headers), max_message_size=512 * MiB)
    n = size = frames = biggest = 0
    seq = 0
    while seq < last:
        msg = await asyncio.wait_for(ws.read_message(), 120)
        if msg is None:
            raise RuntimeError("stream closed")
        frames += 1
        biggest = max(biggest, len(msg))
        size += len(msg)
        batch = json.loads(msg)
        n += len(batch)
        seq = batch[-1]["seq"]
    ws.close()
    return n, size, frames, biggest


def get_pages(server: ServerProcess, sid: str, last: int, all_pages: bool) -> tuple[int, int, int, int]:
    """(events, bytes, requests, largest answer): one page after 0, or every page back with before=."""
    n = size = requests = biggest = 0
    with httpx.Client(headers=server.headers, timeout=120) as c:
        if not all_pages:
            resp = c.get(server.url("sessions", sid, "events"), params={"after": 0})
            return len(resp.json()), len(resp.content), 1, len(resp.content)
        before = last + 1
        while before > 1:
            resp = c.get(server.url("sessions", sid, "events"), params={"before": before})
            page = resp.json()
            requests += 1
            biggest = max(biggest, len(resp.content))
            size += len(resp.content)
            if not page:
                break
            n += len(page)
            before = page[0]["seq"]
    return n, size, requests, biggest


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    (tmp / "root").mkdir()
    (tmp / "root" / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    size = int(args.size_mib * MiB)
    agent = {
        "command": sys.executable,
        "args": ["-m", "jupyter_acp.testing.agents", "big_frame", "--size", str(size), "--chunks", "1"],
    }
    server = ServerProcess(tmp / "root", tmp / "data", agents={"big": agent})
    server.start()
    try:
        sid = server.open_session("nb.ipynb", "big")["id"]
        t0 = time.perf_counter()
        fill(server, sid, args.updates)
        fill_s = time.perf_counter() - t0
        last = server.get("sessions", sid).json()["last_seq"]
        store = sum(f.stat().st_size for f in (tmp / "data").glob("store.sqlite*"))
        print(
            f"history                    {args.updates} updates of {args.size_mib} MiB through the agent in "
            f"{fill_s:.1f} s; {last} events; store files {store / MiB:.1f} MiB"
        )
        results: dict[str, list[tuple[int, tuple[int, int, int, int], float, str]]] = {}
        for _ in range(args.rounds):
            for name in ("stream?after=0", "GET events?after=0", "GET every page (before=)"):
                note = ""
                with Watch(server) as w:
                    try:
                        if name.startswith("stream"):
                            out = await ws_replay(server, sid, last)
                        else:
                            out = await asyncio.to_thread(get_pages, server, sid, last, name.startswith("GET every"))
                    except Exception as exc:  # e.g. one frame past the client's 100 MiB read buffer
                        out, note = (0, 0, 0, 0), f"FAILED: {exc!r}"[:120]
                results.setdefault(name, []).append((w.growth, out, w.status_max, note))
    finally:
        server.stop()
    worst_ratio = 0.0
    for name, runs in results.items():
        growth = max(r[0] for r in runs)
        n, sent, count, biggest = runs[-1][1]
        status = max(r[2] for r in runs)
        ratio = growth / PAGE
        worst_ratio = max(worst_ratio, ratio)
        print(
            f"{name:26s} {n:5d} events, {sent / MiB:6.2f} MiB in {count} frames/answers (largest "
            f"{biggest / 1024:.0f} KiB); RSS +{growth / MiB:.1f} MiB (median +"
            f"{statistics.median(r[0] for r in runs) / MiB:.1f}); /api/status worst {status * 1000:.0f} ms"
            + "".join(f"; {r[3]}" for r in runs if r[3])
        )
    print(
        f"replay memory              peak RSS growth {worst_ratio * PAGE / MiB:.1f} MiB against one page "
        f"{PAGE / MiB:.0f} MiB: {worst_ratio:.1f}x (goal <= {GOAL}x; the code before paging: +971 MiB, 971x, /api/status 2.1 s)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--updates", type=int, default=50)
    p.add_argument("--size-mib", type=float, default=3.8)
    p.add_argument("--rounds", type=int, default=3)
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
