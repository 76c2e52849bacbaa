"""Run every benchmark and print one table: each figure with its ratio against its floor and its goal.

    python bench/run_all.py [--quick] [--markdown]

Every benchmark measures its own floor in the same run (a bare pipe echo, a bare HTTP request, a bare
kernel round trip), because these machines are shared and noisy; this script only collects the lines
that carry a goal. ``--quick`` uses smaller sizes (a smoke run); ``--markdown`` prints a table for the README.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHES: list[tuple[str, list[str], list[str]]] = [
    # (script, full arguments, quick arguments)
    ("stream.py", ["--chunks", "10000", "--repeat", "3"], ["--chunks", "2000", "--repeat", "1"]),
    ("agent.py", [], ["--runs", "1"]),
    ("tools.py", [], ["--rounds", "50"]),
    ("mcp.py", ["--calls", "200", "--sessions", "50"], ["--calls", "50", "--sessions", "10"]),
    ("load.py", ["--notebooks", "50", "--duration", "120"], ["--notebooks", "10", "--duration", "10"]),
    ("replay.py", ["--updates", "50", "--rounds", "3"], ["--updates", "10", "--rounds", "1"]),
    ("flood.py", ["--counts", "60,150", "--lifted", "60"], ["--counts", "60"]),
]


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    rows: list[tuple[str, str]] = []
    for script, full, quick in BENCHES:
        argv = [sys.executable, str(HERE / script), *(quick if args.quick else full)]
        print(f"== {script} {' '.join(argv[2:])}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
        sys.stderr.write(proc.stdout)
        if proc.returncode != 0:
            rows.append((script, f"FAILED (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"))
            continue
        found = [line.strip() for line in proc.stdout.splitlines() if re.search(r"goal", line) and "{" not in line]
        rows.extend((script, line) for line in found)
        print(f"   ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    print(f"machine: {machine()}")
    if args.markdown:
        print("\n| benchmark | figure (ratio against the floor measured in the same run; goal) |\n|---|---|")
        for script, line in rows:
            print(f"| `{script}` | {squeeze(line)} |")
    else:
        width = max(len(s) for s, _ in rows) if rows else 10
        for script, line in rows:
            print(f"{script:{width}s}  {squeeze(line)}")


def squeeze(line: str) -> str:
    return re.sub(r"\s+", " ", line)


if __name__ == "__main__":
    main()
