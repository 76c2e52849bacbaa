"""MCP tool calls through the loopback tool host, against a bare POST to the same listener.

    python bench/mcp.py [--cells 200] [--calls 200] [--sessions 50]

A real server; a scripted agent process is the MCP client (it holds the session's bearer, as a real
agent would) and times, on one keep-alive connection, ``tools/call client_notebook_outline`` on a
notebook of ``--cells`` cells and a bare ``ping`` (the floor: same listener, same auth, no tool).
Then ``--sessions`` sessions (their notebooks opened once beforehand) call at once and the p95 is
compared with the idle p95.
Goals: call within 1.5x of the floor plus the tool's own time; p95 under load within 3x of idle.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

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


def bench_turn(server: ServerProcess, sid: str, calls: int) -> dict[str, list[float]]:
    turn, events = server.turn(sid, f"bench {calls} client_notebook_outline", timeout=300)
    return json.loads(message_text(events, turn))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cells", type=int, default=200)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--sessions", type=int, default=50)
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
        agents={"bench": AGENT},
        extra_args=["--JupyterACP.max_concurrent_turns=128", "--JupyterACP.turn_idle_timeout=600"],
    )
    server.start()
    try:
        sids = [server.open_session(f"nb{i:02d}.ipynb", "bench")["id"] for i in range(args.sessions)]
        cold = []
        for sid in sids:  # the first call of a notebook opens its live document (a one-time cost)
            cold.append(bench_turn(server, sid, 1)["call"][0])
        idle = bench_turn(server, sids[0], args.calls)
        loaded: list[dict[str, list[float]]] = []
        lock = threading.Lock()

        def one(sid: str) -> None:
            result = bench_turn(server, sid, max(10, args.calls // 10))
            with lock:
                loaded.append(result)

        threads = [threading.Thread(target=one, args=(sid,)) for sid in sids]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
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
    print(f"idle p95                     {pct(idle['call'], 0.95):7.2f} ms")
    print(
        f"{len(loaded)} sessions at once p95    {pct(under, 0.95):7.2f} ms  "
        f"({pct(under, 0.95) / pct(idle['call'], 0.95):.1f}x idle p95; goal <= 3x)  [{len(under)} calls in {wall:.1f} s]"
    )


if __name__ == "__main__":
    main()
