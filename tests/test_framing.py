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


class _Recorder(_Writer):
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.sent.extend(json.loads(line) for line in data.splitlines())


async def test_a_request_is_on_the_pipe_when_started_and_forgotten_however_it_ends():
    """``start_request`` writes at once (a turn's prompt reaches the agent before the server answers its client);
    the pending entry goes whether the answer comes, the wait times out or the caller gives up; a request given
    up on is announced to the peer (``$/cancel_request``), whose late answer is then expected and dropped quietly;
    an answer to a request never sent is reported."""
    reader, writer, bad = asyncio.StreamReader(), _Recorder(), []
    conn = JsonRpcConnection(reader, writer, _Handler(), on_bad_frame=bad.append)  # type: ignore[arg-type]
    conn.start()

    def answer(req_id: int, result: Any) -> None:
        reader.feed_data(json.dumps({"jsonrpc": "2.0", "id": req_id, "result": result}).encode() + b"\n")

    fut = conn.start_request("session/prompt", {"n": 1})
    assert writer.sent[-1]["method"] == "session/prompt"  # written before any await
    answer(writer.sent[-1]["id"], {"stopReason": "end_turn"})
    assert await fut == {"stopReason": "end_turn"}

    with pytest.raises(TimeoutError):
        await conn.request("slow", None, timeout=0.01)
    late = writer.sent[-2]["id"]
    assert writer.sent[-1] == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": late}}
    given_up = asyncio.ensure_future(conn.request("abandoned"))
    await asyncio.sleep(0)
    abandoned = writer.sent[-1]["id"]
    given_up.cancel()
    await asyncio.sleep(0)
    assert writer.sent[-1] == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": abandoned}}
    assert conn._pending == {}  # answered, timed out and cancelled: none kept
    answer(late, None)
    answer(abandoned, None)
    answer(late, None)  # a second answer to the same id is odd again
    answer(99, None)
    for _ in range(3):
        await asyncio.sleep(0)
    assert bad == [
        f"ignored a response to request id {late}, which was no longer awaited (it timed out or was given up)",
        "ignored a response to request id 99, which was never sent",
    ]
    conn.close()


class _Slow:
    """A peer whose handler waits until cancelled, and says so."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.withdrawn: list[str] = []

    async def handle_request(self, method: str, params: Any) -> Any:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled.append(method)
            raise
        return "finished"

    def handle_notification(self, method: str, params: Any) -> None:
        raise AssertionError(f"$/cancel_request reached the handler as a notification: {method}")

    def request_withdrawn(self, method: str, params: Any) -> None:
        self.withdrawn.append(method)


async def test_a_withdrawn_request_has_its_handler_cancelled_and_is_answered_request_cancelled():
    """``$/cancel_request`` from the peer: the handler serving it is cancelled, the handler is told (to withdraw a
    card), and the request is still answered, with -32800 (ACP: the receiver must answer it). A withdrawal that
    comes before the request's task first ran answers it without running the handler; one for an id not served
    changes nothing."""
    reader, writer, bad = asyncio.StreamReader(), _Recorder(), []
    handler = _Slow()
    conn = JsonRpcConnection(reader, writer, handler, on_bad_frame=bad.append)  # type: ignore[arg-type]
    conn.start()

    def feed(message: dict[str, Any]) -> None:
        reader.feed_data(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    feed({"id": "p1", "method": "session/request_permission", "params": {"sessionId": "s"}})
    for _ in range(5):
        await asyncio.sleep(0)
    feed({"method": "$/cancel_request", "params": {"requestId": "p1"}})
    feed({"method": "$/cancel_request", "params": {"requestId": "never"}})
    # sent and withdrawn in one block: the second request's task has not run when its withdrawal is read
    feed({"id": 7, "method": "fs/read_text_file", "params": {}})
    feed({"method": "$/cancel_request", "params": {"requestId": 7}})
    for _ in range(20):
        await asyncio.sleep(0)
    answers = {m["id"]: m for m in writer.sent if "id" in m}
    assert answers["p1"]["error"]["code"] == -32800
    assert "session/request_permission was cancelled" in answers["p1"]["error"]["message"]
    assert answers[7]["error"]["code"] == -32800
    assert handler.cancelled == ["session/request_permission"]  # the second never ran
    assert handler.withdrawn == ["session/request_permission"]
    assert bad == [] and conn._serving == {} and conn._withdrawn == set()
    conn.close()
