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
- when the pipe closes, every pending request fails at once with ``ConnectionClosed``;
- ``$/cancel_request`` (ACP, both ways) is handled here, as a JSON-RPC matter: a request of ours given up on (timed
  out, or its awaiter cancelled) is announced to the peer, whose late answer is then dropped quietly; a request the
  peer withdraws has its handler cancelled and is answered ``-32800`` (the spec: it must still be answered).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from typing import Any, Protocol, cast

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
REQUEST_CANCELLED = -32800

#: ACP's generic cancellation (stable since schema 1.17), a notification either way: ``{"requestId": id}``
CANCEL_REQUEST = "$/cancel_request"
#: requests of ours given up on whose answers may still come, kept to drop them quietly (bounded: the oldest go)
MAX_GIVEN_UP = 1024


class _Served:
    """One of the peer's requests as its handler's task sees it (``withdrawn_by_peer``)."""

    __slots__ = ("withdrawn",)

    def __init__(self) -> None:
        self.withdrawn = False


#: the request the current task serves (each request runs in a task of its own, with its own context)
_serving_now: contextvars.ContextVar[_Served | None] = contextvars.ContextVar("jsonrpc_serving", default=None)


def withdrawn_by_peer() -> bool:
    """Inside a request's handler, on ``CancelledError``: whether the peer withdrew the request
    (``$/cancel_request``), rather than the connection closing.  A card withdrawn says so; one whose agent exited
    is resolved by the exit's own path, with its own reason."""
    served = _serving_now.get()
    return served is not None and served.withdrawn


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


class WithdrawalAware(Protocol):
    """A handler that wants to know when the peer withdraws one of its requests (``$/cancel_request``), to say so
    where the user sees it; the handler's task is cancelled either way."""

    def request_withdrawn(self, method: str, params: Any) -> None: ...


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
        #: the peer's requests being served, by id (``$/cancel_request`` names them), with their method and params;
        #: those dispatched whose tasks have not run yet are only ``_queued``
        self._serving: dict[Any, tuple[asyncio.Task[Any], str, Any, _Served]] = {}
        self._queued: set[Any] = set()
        #: ids of the peer's requests it withdrew: their handlers were cancelled and they are answered -32800
        self._withdrawn: set[Any] = set()
        #: ids of our requests given up on (announced with ``$/cancel_request``): their answers are expected, not odd
        self._given_up: dict[Any, None] = {}
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
        fut.add_done_callback(lambda f: self._settled(req_id, f))  # answered, failed, cancelled or timed out
        return fut

    def _settled(self, req_id: Any, fut: asyncio.Future[Any]) -> None:
        """A request of ours is done; one given up on here (cancelled, timed out) is announced to the peer."""
        self._pending.pop(req_id, None)
        if fut.cancelled() and not self._closed.is_set():
            self._announce_cancel(req_id)

    def _announce_cancel(self, req_id: Any) -> None:
        self._given_up[req_id] = None
        while len(self._given_up) > MAX_GIVEN_UP:
            self._given_up.pop(next(iter(self._given_up)))
        try:
            self._send({"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": req_id}})
        except ConnectionClosed:
            pass

    def withdraw(self, fut: asyncio.Future[Any]) -> bool:
        """Ask the peer to stop one of our requests (``$/cancel_request``) and keep awaiting its answer, which the
        peer still owes (a result, or error -32800).  False when the request is no longer pending."""
        req_id = next((k for k, v in self._pending.items() if v is fut), None)
        if req_id is None or self._closed.is_set():
            return False
        try:
            self._send({"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": req_id}})
        except ConnectionClosed:
            return False
        return True

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
                req_id = msg["id"]
                if _hashable(req_id):
                    self._queued.add(req_id)  # a withdrawal may come before its task first runs
                task = asyncio.ensure_future(self._serve_request(req_id, method, params))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif method == CANCEL_REQUEST:
                self._peer_cancelled(params)
            else:
                try:
                    self._handler.handle_notification(method, params)
                except Exception:
                    log.exception("%s: notification handler failed for %s", self._name, method)
            return
        if "id" in msg and ("result" in msg or "error" in msg):
            fut = self._pending.get(msg["id"]) if _hashable(msg["id"]) else None
            if fut is None and _hashable(msg["id"]) and msg["id"] in self._given_up:
                del self._given_up[msg["id"]]  # the answer owed to a request we gave up on: expected, dropped
                return
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

    def _peer_cancelled(self, params: Any) -> None:
        """``$/cancel_request``: the peer no longer wants one of its requests; its handler is cancelled and the
        request answered -32800.  An id not being served (answered already, never sent) changes nothing."""
        req_id = params.get("requestId") if isinstance(params, dict) else None
        if _hashable(req_id) and req_id in self._queued:
            self._withdrawn.add(req_id)  # its task answers -32800 when it first runs, before any handler
            return
        if not _hashable(req_id) or req_id not in self._serving:
            log.debug("%s: $/cancel_request for %r, which is not being served", self._name, req_id)
            return
        task, method, request_params, served = self._serving[req_id]
        if task.done():
            return
        self._withdrawn.add(req_id)
        served.withdrawn = True
        task.cancel()
        withdrawn = getattr(self._handler, "request_withdrawn", None)
        if callable(withdrawn):
            try:
                withdrawn(method, request_params)
            except Exception:
                log.exception("%s: withdrawal handler failed for %s", self._name, method)

    async def _serve_request(self, req_id: Any, method: str, params: Any) -> None:
        keyed = _hashable(req_id)
        served = _Served()
        _serving_now.set(served)  # this task's own context: its handler reads it (``withdrawn_by_peer``)
        if keyed:
            self._queued.discard(req_id)
            self._serving[req_id] = (cast("asyncio.Task[Any]", asyncio.current_task()), method, params, served)
        try:
            try:
                if keyed and req_id in self._withdrawn:
                    raise asyncio.CancelledError  # withdrawn before it started: no handler runs
                result = await self._handler.handle_request(method, params)
            finally:
                if keyed:
                    self._serving.pop(req_id, None)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "result": result}
        except RpcError as exc:
            reply = {"jsonrpc": "2.0", "id": req_id, "error": exc.to_json()}
        except asyncio.CancelledError:
            if not _hashable(req_id) or req_id not in self._withdrawn or self._closed.is_set():
                return  # the connection is closing: nobody hears an answer
            self._withdrawn.discard(req_id)
            reply = {
                "jsonrpc": "2.0",
                "id": req_id,
                "error": {"code": REQUEST_CANCELLED, "message": f"{method} was cancelled ($/cancel_request)"},
            }
        except Exception as exc:
            log.exception("%s: handler for %s failed", self._name, method)
            reply = {"jsonrpc": "2.0", "id": req_id, "error": {"code": INTERNAL_ERROR, "message": str(exc)}}
        if _hashable(req_id):
            self._withdrawn.discard(req_id)  # a handler may finish despite the withdrawal: its answer goes
        if self._closed.is_set():
            return
        try:
            self._send(reply)
            await self._drain()
        except ConnectionClosed:
            pass


def _hashable(value: Any) -> bool:
    """A JSON-RPC id we can key on (a string or a number; anything else is not a valid id)."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


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

        def request_withdrawn(self, method: str, params: Any) -> None:
            withdrawn = getattr(real, "request_withdrawn", None)
            if callable(withdrawn):
                withdrawn(method, params)

    conn = JsonRpcConnection(reader, writer, _Deferred(), max_frame_bytes=max_frame_bytes, on_bad_frame=on_bad_frame)
    real = make_handler(conn)
    conn.start()
    return conn
