"""Kernel namespace checkpoints against a bare pickle of the same objects, in the same kernel, in the same run.

    python bench/checkpoint.py [--array-mb 1000] [--frame-mb 100] [--small 1000] [--sizes 10,100,1000]
                               [--storage memory,disk]

One real IPython kernel (jupyter_client), reached through the project's own client as the server reaches it.
Its namespace: a ``--frame-mb`` DataFrame, a ``--array-mb`` float64 array and ``--small`` small objects
(dicts, lists, strings).  Timed, for each ``--storage``:

1. the floor, inside the kernel: ``pickle.dumps(obj, protocol=5)`` then ``pickle.loads`` of each object in
   turn (in memory, nothing written), summed;
2. ``checkpoint``: the first one (everything written), then a second one of the unchanged namespace (every
   entry hashed, nothing written again);
3. ``restore`` after every object was changed in place (the undo checkpoint writes everything, then everything
   is loaded), and a restore when nothing changed since (hashing only, nothing loaded).

Ratios are to the floor (checkpoint / dumps, restore / loads); goal: within 1.5x.  A restore of a changed
namespace first checkpoints the present (so that it can be undone), so it is also set against dumps + loads, the
floor of an undoable restore; its loading part alone is set against loads.  Each figure is the kernel's
own time (``seconds`` of the manifest) and, in brackets, the round trip the server sees.  Then how the cost
grows with one array of each of ``--sizes`` MB.  The checkpoints are discarded as it goes: at most three
copies of the namespace exist at once (about 5 GB with the defaults).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jupyter_acp.kernels.checkpoint import KernelCheckpoint, checkpoint, discard, list_checkpoints, restore
from jupyter_acp.kernels.client import KernelConnection

MB = 1 << 20


class Kernel:
    def __init__(self, conn: KernelConnection) -> None:
        self.conn = conn

    async def run(self, code: str) -> str:
        out: list[str] = []
        errors: list[str] = []

        def on_iopub(msg: dict[str, Any]) -> None:
            if msg.get("msg_type") == "stream":
                out.append(msg["content"]["text"])
            elif msg.get("msg_type") == "error":
                errors.append(msg["content"]["evalue"])

        async def no_interrupt() -> None:
            return None

        res = await self.conn.execute(code, on_iopub=on_iopub, interrupt=no_interrupt, timeout=900)
        if res["status"] != "ok" or errors:
            raise RuntimeError(f"kernel code failed: {errors}")
        return "".join(out)

    async def value(self, expression: str) -> Any:
        text = await self.conn.evaluate(f"__import__('json').dumps({expression})", prefer_subshell=False)
        return json.loads(ast.literal_eval(text))


@contextlib.asynccontextmanager
async def python_kernel() -> AsyncIterator[Kernel]:
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel()
    conn = await KernelConnection.open("bench-checkpoint", km)
    try:
        yield Kernel(conn)
    finally:
        with contextlib.suppress(Exception):
            await discard(conn, checkpoint_ids=[c.id for c in await list_checkpoints(conn)])
        await conn.close()
        await km.shutdown_kernel(now=True)


FLOOR = """
import pickle, time, gc, json
_names = [n for n in {names!r}]
_t = {{'dumps': 0.0, 'loads': 0.0, 'bytes': 0}}
for _n in _names:
    _o = globals()[_n]
    _a = time.perf_counter(); _p = pickle.dumps(_o, protocol=5); _b = time.perf_counter()
    _c = pickle.loads(_p); _d = time.perf_counter()
    _t['dumps'] += _b - _a
    _t['loads'] += _d - _b
    _t['bytes'] += len(_p)
    del _p, _c
gc.collect()
print(json.dumps(_t))
del _names, _t, _n, _o, _a, _b, _d
"""

MAKE = """
import numpy as np, pandas as pd
arr = np.arange({array_n}, dtype=np.float64)
df = pd.DataFrame({{'x': np.arange({frame_n}, dtype=np.float64), 'y': np.arange({frame_n}, dtype=np.int64)}})
small = {{}}
for i in range({small}):
    globals()['s%d' % i] = {{'i': i, 'name': 'item %d' % i, 'tags': ['a', 'b', str(i)], 'ratio': i / 7}}
"""

CHANGE = """
arr += 1.0
df['x'] += 1.0
for i in range({small}):
    globals()['s%d' % i]['i'] += 1
"""


REPEAT = 2


async def floor(k: Kernel, names: list[str]) -> dict[str, float]:
    """The bare pickle of the same objects, the best of ``REPEAT`` runs (the machine is shared: its noise
    only ever adds time)."""
    runs = [json.loads((await k.run(FLOOR.format(names=names))).strip().splitlines()[-1]) for _ in range(REPEAT)]
    return {key: min(r[key] for r in runs) for key in runs[0]}


async def timed_checkpoint(k: Kernel, storage: str, *, fresh: bool) -> tuple[KernelCheckpoint, float]:
    """The best of ``REPEAT`` checkpoints (``fresh``: each with no earlier checkpoint to share with)."""
    best: tuple[KernelCheckpoint, float] | None = None
    for _ in range(REPEAT):
        if fresh:
            await discard(k.conn, checkpoint_ids=[c.id for c in await list_checkpoints(k.conn)])
        t0 = time.perf_counter()
        ck = await checkpoint(k.conn, budget=8 << 30, storage=storage, timeout=900)  # type: ignore[arg-type]
        wall = time.perf_counter() - t0
        if best is None or ck.seconds < best[0].seconds:
            if best is not None and best[0].id != ck.id:
                await discard(k.conn, checkpoint_ids=[best[0].id])
            best = (ck, wall)
        else:
            await discard(k.conn, checkpoint_ids=[ck.id])
    assert best is not None
    return best


async def rss_mb(k: Kernel) -> float:
    return float(await k.value("__import__('resource').getrusage(__import__('resource').RUSAGE_SELF).ru_maxrss / 1024"))


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


async def main_case(k: Kernel, args: argparse.Namespace, storage: str) -> None:
    names = ["arr", "df"] + [f"s{i}" for i in range(args.small)]
    fl = await floor(k, names)
    print(
        f"\n[{storage}] floor in the kernel: pickle.dumps {fl['dumps']:.3f} s, pickle.loads {fl['loads']:.3f} s "
        f"({fl['bytes'] / MB:.0f} MB)"
    )
    first, wall1 = await timed_checkpoint(k, storage, fresh=True)
    print(
        f"  checkpoint (first)      {first.seconds:7.3f} s [{wall1:.3f}]  {ratio(first.seconds, fl['dumps'])} of dumps"
        f"   saved {len(first.saved)} names, {first.bytes / MB:.0f} MB, written {first.written / MB:.0f} MB"
    )
    second, wall2 = await timed_checkpoint(k, storage, fresh=False)
    print(
        f"  checkpoint (unchanged)  {second.seconds:7.3f} s [{wall2:.3f}]  {ratio(second.seconds, fl['dumps'])} of dumps"
        f"   written {second.written / MB:.1f} MB (the rest shared)"
    )
    await discard(k.conn, checkpoint_ids=[second.id])
    res, wall = None, 0.0
    for _ in range(REPEAT):  # the best of REPEAT restores, each after every object changed
        await k.run(CHANGE.format(small=args.small))
        t0 = time.perf_counter()
        r = await restore(k.conn, checkpoint_id=first.id, budget=8 << 30, storage=storage, timeout=900)  # type: ignore[arg-type]
        w = time.perf_counter() - t0
        await discard(k.conn, checkpoint_ids=[r.undo.id])
        if res is None or r.seconds < res.seconds:
            res, wall = r, w
    assert res is not None
    load_part = res.seconds - res.undo.seconds
    print(
        f"  restore (all changed)   {res.seconds:7.3f} s [{wall:.3f}]  {ratio(res.seconds, fl['loads'])} of loads,"
        f" {ratio(res.seconds, fl['dumps'] + fl['loads'])} of dumps+loads"
        f"   (undo checkpoint {res.undo.seconds:.3f} s + loading {load_part:.3f} s = {ratio(load_part, fl['loads'])} of loads)"
        f"   restored {len(res.restored)}, not restored {len(res.not_restored)}"
    )
    ok = await k.value("[float(arr[5]), float(df['x'][5]), s3['i']]")
    assert ok == [5.0, 5.0, 3], ok
    t0 = time.perf_counter()
    res2 = await restore(k.conn, checkpoint_id=first.id, budget=8 << 30, storage=storage, timeout=900)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    print(
        f"  restore (unchanged)     {res2.seconds:7.3f} s [{wall:.3f}]  {ratio(res2.seconds, fl['loads'])} of loads"
        f"   undo written {res2.undo.written / MB:.1f} MB"
    )
    await discard(k.conn, checkpoint_ids=[first.id, res2.undo.id])
    print(f"  kernel peak RSS so far: {await rss_mb(k):.0f} MB")


async def scaling(k: Kernel, sizes: list[int], storage: str) -> None:
    print(f"\n[{storage}] one float64 array of each size: checkpoint vs dumps, restore (changed) vs loads")
    print("      MB   dumps s  ckpt s   ratio   loads s  restore s  ratio  (restore / dumps+loads)")
    for size in sizes:
        await k.run(
            "import gc\nfor _n in [n for n in globals() if n[:1] == 's' and n[1:].isdigit()] + ['arr', 'df']:\n"
            "    globals().pop(_n, None)\ngc.collect()\n"
            f"import numpy as np\nv = np.arange({size * MB // 8}, dtype=np.float64)"
        )
        fl = await floor(k, ["v"])
        ck = (await checkpoint(k.conn, budget=8 << 30, storage=storage, timeout=900)).seconds  # type: ignore[arg-type]
        ckpt = await list_checkpoints(k.conn)
        await k.run("v += 1.0")
        res = await restore(k.conn, checkpoint_id=ckpt[-1].id, budget=8 << 30, storage=storage, timeout=900)  # type: ignore[arg-type]
        print(
            f"  {size:6d}   {fl['dumps']:7.3f}  {ck:6.3f}  {ratio(ck, fl['dumps']):>6}   {fl['loads']:7.3f}  "
            f"{res.seconds:9.3f}  {ratio(res.seconds, fl['loads']):>6}  ({ratio(res.seconds, fl['dumps'] + fl['loads'])})"
        )
        await discard(k.conn, checkpoint_ids=[c.id for c in await list_checkpoints(k.conn)])


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--array-mb", type=int, default=1000)
    ap.add_argument("--frame-mb", type=int, default=100)
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--storage", default="memory,disk")
    ap.add_argument("--repeat", type=int, default=2, help="each figure is the best of this many runs")
    args = ap.parse_args()
    global REPEAT
    REPEAT = max(1, args.repeat)
    storages = [s for s in args.storage.split(",") if s]
    async with python_kernel() as k:
        await k.run(MAKE.format(array_n=args.array_mb * MB // 8, frame_n=args.frame_mb * MB // 16, small=args.small))
        version = await k.value("__import__('sys').version.split()[0]")
        print(
            f"kernel Python {version}; namespace: {args.array_mb} MB array, {args.frame_mb} MB DataFrame, {args.small} small objects"
        )
        for storage in storages:
            await main_case(k, args, storage)
        for storage in storages:
            await scaling(k, [int(s) for s in args.sizes.split(",") if s], storage)


if __name__ == "__main__":
    asyncio.run(main())
