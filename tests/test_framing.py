"""The JSON-RPC reader frames lines the same whatever the pipe's block boundaries (it splits blocks in C)."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from jupyter_acp.protocol.jsonrpc import JsonRpcConnection

LIMIT = 800


class _Handler:
    def __init__(self) -> None:
        self.got: list[int] = []

    async def handle_request(self, method: str, params: Any) -> Any:
        return None

    def handle_notification(self, method: str, params: Any) -> None:
        self.got.append(params["i"])


class _Writer:
    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


@pytest.mark.parametrize("seed", range(40))
async def test_any_block_boundaries_give_the_same_messages(seed):
    rnd = random.Random(seed)
    lines, expected, oversized = [], [], 0
    for i in range(300):
        roll = rnd.random()
        if roll < 0.05:  # over the frame limit: skipped and reported, the next line still read
            lines.append(b'{"x":"' + b"a" * rnd.randint(LIMIT, 2 * LIMIT) + b'"}')
            oversized += 1
        elif roll < 0.1:
            lines.append(b"   ")  # blank: ignored
        else:
            message = {"jsonrpc": "2.0", "method": "n", "params": {"i": i, "pad": "p" * rnd.randint(0, 50)}}
            lines.append(json.dumps(message).encode())
            expected.append(i)
    data = b"\n".join(lines) + b"\n"
    reader = asyncio.StreamReader()
    handler, bad = _Handler(), []
    conn = JsonRpcConnection(reader, _Writer(), handler, max_frame_bytes=LIMIT, on_bad_frame=bad.append)  # type: ignore[arg-type]
    conn.start()
    pos = 0
    while pos < len(data):  # blocks of 1 to 400 bytes, each read alone: lines split anywhere, several per block
        size = rnd.randint(1, 400)
        reader.feed_data(data[pos : pos + size])
        pos += size
        for _ in range(3):
            await asyncio.sleep(0)
    reader.feed_eof()
    await asyncio.wait_for(conn.wait_closed(), 10)
    assert handler.got == expected
    assert sum("over the 800-byte frame limit" in b for b in bad) == oversized, bad
