"""A hostile agent floods the server with file reads: server memory against the read budget.

    python bench/flood.py [--counts 60,150] [--size-mib 8] [--lifted 60]

A real ``jupyter server`` subprocess; the hostile scripted agent (``jupyter_acp.testing.hostile``) sends N
``fs/read_text_file`` of one ``--size-mib`` MiB file at once, in one turn, while the server's RSS is sampled every
2 ms. Before these bounds 60 such reads took a server from 127 MB to 1,553 MB and 150 to
3,226 MB. The bounds: ``JupyterACP.max_agent_requests`` (requests under way at once), ``max_read_bytes`` (one
read) and ``max_read_bytes_per_turn`` (a turn's reads, reserved before a byte is read).

Floors measured in the same run, on the same server: the growth of one read of the file alone, and the per-turn
budget itself. Prints, per flood, RSS before / peak / after, what the agent got (answered, refused by rule) and the
peak growth against the budget (goal: within a few budgets). ``--lifted N`` also floods a second server whose
bounds are lifted out of the way (the code before, as far as memory goes) with N reads, for comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import nbformat

from jupyter_acp.testing.events import message_text
from jupyter_acp.testing.server import ServerProcess

MiB = 1024 * 1024
#: the defaults of ``JupyterACP.max_read_bytes_per_turn``, ``max_read_bytes`` and ``max_agent_requests``
BUDGET = 32 * MiB
CAP = 8 * MiB
REQUESTS = 32
GOAL = 8  # peak growth at most this many per-turn budgets
LIFTED = [
    "--JupyterACP.max_agent_requests=100000",
    f"--JupyterACP.max_read_bytes={64 * MiB}",
    f"--JupyterACP.max_read_bytes_per_turn={1 << 40}",
]


def rss(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Peak:
    """The server's peak RSS while a turn runs (sampled in a thread every 2 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = rss(pid)
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss(self.pid))
            time.sleep(0.002)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def flood(server: ServerProcess, sid: str, path: str, n: int) -> dict[str, Any]:
    """One turn of N reads at once: RSS before / peak / after (1 s later), what the agent got, and the time."""
    # the agent answers a tally, not the reads (N times the file through the transcript would be another figure)
    actions = [{"do": "concurrent", "n": n, "action": {"do": "fs_read", "path": path}}]
    pid = server.proc.pid  # type: ignore[union-attr]
    t0 = time.perf_counter()
    with Peak(pid) as peak:
        turn, events = server.turn(sid, json.dumps(actions), timeout=600)
    took = time.perf_counter() - t0
    time.sleep(1.0)
    (result,) = json.loads(message_text(events, turn))
    if "ok" not in result:
        raise RuntimeError(f"the flood failed: {result}")
    got = result["ok"]
    return {
        "n": n,
        "before": peak.before,
        "peak": peak.peak,
        "after": rss(pid),
        "ok": got["ok"],
        "refused": got["refused"],
        "seconds": took,
    }


def serve(tmp: Path, name: str, size: int, extra: list[str]) -> tuple[ServerProcess, str, str]:
    root = tmp / name / "root"
    root.mkdir(parents=True)
    (root / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    big = root / "big.txt"
    line = "x" * 1023 + "\n"
    big.write_text(line * (size // len(line)))
    agent = {"command": sys.executable, "args": ["-m", "jupyter_acp.testing.hostile"]}
    server = ServerProcess(root, tmp / name / "data", agents={"hostile": agent}, extra_args=extra)
    server.start()
    sid = server.open_session("nb.ipynb", "hostile")["id"]
    server.turn(sid, "[]", timeout=60)  # the agent started and its session open: not part of any figure
    return server, sid, str(big)


def line_of(label: str, r: dict[str, Any], floor: int) -> str:
    growth = r["peak"] - r["before"]
    refused = ", ".join(f"{count} {rule}" for rule, count in sorted(r["refused"].items())) or "none"
    return (
        f"{label:24s} {r['n']:4d} reads: RSS {r['before'] / MiB:6.0f} -> peak {r['peak'] / MiB:6.0f} -> after "
        f"{r['after'] / MiB:6.0f} MiB (+{growth / MiB:.0f} MiB, {growth / BUDGET:.1f} budgets, "
        f"{growth / max(floor, 1):.1f}x one read); answered {r['ok']}, refused {refused}; {r['seconds']:.1f} s"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--counts", default="60,150", help="reads at once, one turn each")
    p.add_argument("--size-mib", type=float, default=8.0)
    p.add_argument("--lifted", type=int, default=0, help="also flood a server with the bounds lifted (N reads)")
    args = p.parse_args()
    size = int(args.size_mib * MiB)
    counts = [int(c) for c in args.counts.split(",") if c]
    tmp = Path(tempfile.mkdtemp(prefix="bench-flood-"))
    worst = 0.0
    print(
        f"bounds                   JupyterACP.max_read_bytes_per_turn {BUDGET / MiB:.0f} MiB, max_read_bytes "
        f"{CAP / MiB:.0f} MiB, max_agent_requests {REQUESTS}; the file {size / MiB:.1f} MiB; a fresh server per flood"
    )
    runs = [(n, [], "flood") for n in counts] + ([(args.lifted, LIFTED, "flood, bounds lifted")] if args.lifted else [])
    for i, (n, extra, label) in enumerate(runs):
        server, sid, path = serve(tmp, f"server{i}", size, extra)
        try:
            one = flood(server, sid, path, 1)  # the floor: one read of the file alone, on this server
            floor = one["peak"] - one["before"]
            print(line_of("one read (floor)", one, floor))
            r = flood(server, sid, path, n)
        finally:
            server.stop()
        if not extra:
            worst = max(worst, (r["peak"] - r["before"]) / BUDGET)
        print(line_of(label, r, floor))
    print(
        f"read flood memory        peak RSS growth {worst * BUDGET / MiB:.0f} MiB against the per-turn budget "
        f"{BUDGET / MiB:.0f} MiB: {worst:.1f}x (goal <= {GOAL}x; measured before the bounds: 60 reads of "
        "8 MiB growing the server by 1,426 MB and 150 by 3,099 MB)"
    )


if __name__ == "__main__":
    main()
