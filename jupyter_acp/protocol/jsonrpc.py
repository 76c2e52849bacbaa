"""JSON-RPC 2.0 over newline-delimited JSON: the ACP stdio wire, and nothing else.

Kept apart from ACP behaviour (``connection.py``) and from the schema.  Why our own and not the
SDK's connection: the client must see every frame raw (the transcript stores updates as the agent
sent them, unknown variants included), keep notification order without per-message tasks, bound
frame sizes, and survive garbage on the pipe with a clear report instead of a log line.

Rules:
- notifications are handled inline, in arrival order, by a synchronous callback;
- each incoming request runs in its own task (an agent asks for tools *while* we await its answer);
- a frame over ``max_frame_bytes`` is skipped up to the next newline and reported;
- a line that is not JSON-RPC is reported and skipped; the connection goes on;
- when the pipe closes, every pending request fails at once with ``ConnectionClosed``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from . import codec

log = logging.getLogger(__name__)

# JSON-RPC / ACP error codes used by this package.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002


class RpcError(Exception):
    """A JSON-RPC error, raised by a handler or received from the peer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"


class ConnectionClosed(ConnectionError):
    """The peer's pipe closed while a request was pending, or before it was sent."""


class Handler(Protocol):
    """What a connection dispatches incoming traffic to."""

    async def handle_request(self, method: str, params: Any) -> Any: ...

    def handle_notification(self, method: str, params: Any) -> None: ...


class JsonRpcConnection:
    """One JSON-RPC peer over a pair of asyncio streams."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handler: Handler,
        *,
        max_frame_bytes: int = 16 * 1024 * 1024,
        on_bad_frame: Callable[[str], None] | None = None,
        on_traffic: Callable[[], None] | None = None,
        name: str = "peer",
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._handler = handler
        self._max_frame = max_frame_bytes
        self._on_bad_frame = on_bad_frame or (lambda text: log.warning("%s: %s", name, text))
        self._on_traffic = on_traffic
        self._name = name
        self._next_id = 0  # ids below it were sent: a response to one no longer awaited is late, not unknown
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reader_task: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()
        self.close_reason: str | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._reader_task = asyncio.ensure_future(self._read_loop())

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def close(self, reason: str = "closed by client") -> None:
        """Stop reading and fail everything pending; closing stdin tells the agent to exit."""
        if self._reader_task and not self._reader_task.done():
            self._reader_task.cancel()
        self._finish(reason)
        try:
            self._writer.close()
        except Exception:  # pragma: no cover - transport already gone
            pass

    def _finish(self, reason: str) -> None:
        if self._closed.is_set():
            return
        self.close_reason = reason
        self._closed.set()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionClosed(reason))
        self._pending.clear()
        for task in list(self._tasks):
            task.cancel()

    # -- outgoing --------------------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        if self._closed.is_set():
            raise ConnectionClosed(self.close_reason or "connection closed")
        self._writer.write(codec.dumps_line(message))

    def start_request(self, method: str, params: Any = None) -> asyncio.Future[Any]:
        """Write a request now and return the future of its answer (``request`` awaits it).

        For a caller with other work before the answer matters: a turn's prompt is on the agent's pipe before the
        server answers its own client. Not drained here: the writes are small and ``request`` drains.
        """
        req_id = self._next_id
        self._next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        fut.add_done_callback(lambda _: self._pending.pop(req_id, None))  # answered, failed, cancelled or timed out
        return fut

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and await its result; a JSON-RPC error raises ``RpcError``."""
        fut = self.start_request(method, params)
        await self._drain()
        if timeout is None:
            return await fut
        return await asyncio.wait_for(fut, timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        await self._drain()

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._finish(f"write failed: {exc}")
            raise ConnectionClosed(str(exc)) from exc

    # -- incoming --------------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        buf = bytearray()
        discarding = 0  # bytes of an oversized frame skipped so far (0: not discarding)
        handled = 0
        reason = "agent closed its output"
        try:
            while True:
                chunk = await self._reader.read(1 << 16)
                if not chunk:
                    break
                if self._on_traffic:
                    self._on_traffic()
                # complete lines split in C; the last piece is the start of the next line (or empty)
                pieces = chunk.split(b"\n")
                rest = pieces.pop()
                for index, piece in enumerate(pieces):
                    if index == 0 and (discarding or buf):
                        if discarding:
                            size = discarding + len(piece) + 1
                            discarding = 0
                            self._on_bad_frame(
                                f"skipped a message of {size} bytes: over the {self._max_frame}-byte frame limit"
                            )
                            continue
                        buf += piece
                        line = bytes(buf)
                        buf.clear()
                    else:
                        line = piece
                    if len(line) >= self._max_frame:
                        self._on_bad_frame(
                            f"skipped a message of {len(line) + 1} bytes: over the {self._max_frame}-byte frame limit"
                        )
                        continue
                    if line.strip():
                        self._dispatch_line(line)
                        handled += 1
                        if handled % 128 == 0:
                            await asyncio.sleep(0)  # let the first events out before the whole block
                if discarding:
                    discarding += len(rest)
                elif rest:
                    buf += rest
                    if len(buf) > self._max_frame:
                        discarding = len(buf)
                        buf.clear()
                # read() returns at once while the buffer holds data: yield, so what we just
                # dispatched reaches subscribers before the next block is parsed.
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            reason = "closed by client"
            raise
        except Exception as exc:  # pragma: no cover - defensive: never die silently
            reason = f"read failed: {exc!r}"
            log.exception("%s: reader failed", self._name)
        finally:
            self._finish(reason)

    def _dispatch_line(self, line: bytes) -> None:
        try:
            msg = codec.loads(line)
        except ValueError:
            preview = line[:120].decode("utf-8", "replace")
            self._on_bad_frame(f"ignored a line that is not JSON: {preview!r}")
            return
        if not isinstance(msg, dict):
            self._on_bad_frame("ignored a JSON value that is not a JSON-RPC object")
            return
        if "method" in msg:
            method = msg["method"]
            if not isinstance(method, str):
                self._on_bad_frame("ignored a message whose method is not a string")
                return
            params = msg.get("params")
            if "id" in msg and msg["id"] is not None:
                task = asyncio.ensure_future(self._serve_request(msg["id"], method, params))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                try:
                    self._handler.handle_notification(method, params)
                except Exception:
                    log.exception("%s: notification handler failed for %s", self._name, method)
            return
        if "id" in msg and ("result" in msg or "error" in msg):
            fut = self._pending.get(msg["id"])
            if fut is None:
                rid = msg["id"]
                late = type(rid) is int and 0 <= rid < self._next_id
                why = "no longer awaited (it timed out or was given up)" if late else "never sent"
                self._on_bad_frame(f"ignored a response to request id {rid!r}, which was {why}")
                return
            if fut.done():
                return
            err = msg.get("error")
            if err is not None:
                if isinstance(err, dict):
                    fut.set_exception(
                        RpcError(int(err.get("code", INTERNAL_ERROR)), str(err.get("message", "")), err.get("data"))
                    )
                else:
                    fut.set_exception(RpcError(INTERNAL_ERROR, str(err)))
            else:
                fut.set_result(msg.get("result"))
            return
        self._on_bad_frame("ignored a JSON object that is neither a request, a notification nor a response")

    async def _serve_request(self, req_id: Any, method: str, params: Any) -> None:
        try:
            result = await self._handler.handle_request(method, params)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "result": result}
        except RpcError as exc:
            reply = {"jsonrpc": "2.0", "id": req_id, "error": exc.to_json()}
        except asyncio.CancelledError:
            return
        except Exception as exc:
            log.exception("%s: handler for %s failed", self._name, method)
            reply = {"jsonrpc": "2.0", "id": req_id, "error": {"code": INTERNAL_ERROR, "message": str(exc)}}
        if self._closed.is_set():
            return
        try:
            self._send(reply)
            await self._drain()
        except ConnectionClosed:
            pass


async def serve_stdio(
    make_handler: Callable[[JsonRpcConnection], Handler],
    *,
    max_frame_bytes: int = 4 * 1024 * 1024,
    on_bad_frame: Callable[[str], None] | None = None,
) -> JsonRpcConnection:
    """Connect a handler to this process's stdin/stdout (the agent side of the wire)."""
    import sys

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    w_transport, w_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(w_transport, w_protocol, None, loop)

    class _Deferred:
        async def handle_request(self, method: str, params: Any) -> Any:
            return await real.handle_request(method, params)

        def handle_notification(self, method: str, params: Any) -> None:
            real.handle_notification(method, params)

    conn = JsonRpcConnection(reader, writer, _Deferred(), max_frame_bytes=max_frame_bytes, on_bad_frame=on_bad_frame)
    real = make_handler(conn)
    conn.start()
    return conn
