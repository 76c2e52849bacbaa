"""The transport of one server-side kernel client: connecting (a local kernel's ZMQ client from
``manager.client()``, or a gateway kernel's WebSocket client from ``gateway``), one reader per
channel, replies routed by ``parent_header.msg_id``, and a dead kernel turned into an answer.

Split from ``client`` so that how messages travel sits apart from what is asked (``kernel_info``,
``execute``, ``evaluate``, ...), which ``client.KernelConnection`` builds on ``request`` here.

* one reader per channel (shell, control, iopub) routes every message to the future or the callback
  of the request that caused it, so concurrent requests (a variable listing while a cell runs) never
  steal each other's replies.  Local channels are read with ``await channel.get_msg()``; a gateway
  channel is a thread-safe queue the client's router thread fills, read by one small thread per
  channel that blocks on it (the client's own ``get_msg`` polls with ``sleep(0)`` and would spin a
  core) and hands each message to the event loop;
* a dead kernel is an answer, not a hang: a local kernel's process is checked while we wait, a
  gateway's ``restarting`` / ``dead`` status (its restarter found the kernel dead) or a closed
  WebSocket fails every pending request at once with the reason (``KernelUnavailable``), and the
  bridge makes a new client on the next call.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable
from queue import Empty
from typing import Any, Self

from jupyter_client.session import Session

from .gateway import gateway_client, is_gateway_manager
from .messages import KernelTimeout, KernelUnavailable, describe

log = logging.getLogger(__name__)

IopubCallback = Callable[[dict[str, Any]], None]
CHANNELS = ("shell", "control", "iopub")


def generation(manager: Any) -> Any:
    """What changes when a local kernel is restarted under the same id (its process)."""
    provisioner = getattr(manager, "provisioner", None)
    return getattr(provisioner, "process", None) if provisioner is not None else None


class KernelChannels:
    """The channels of one kernel client with per-request routing (``request``); no request kinds."""

    def __init__(self, kernel_id: str, manager: Any) -> None:
        self.kernel_id = kernel_id
        self.manager = manager
        self.remote = is_gateway_manager(manager)
        self.generation = None if self.remote else generation(manager)
        # Our own Session: clients made by ``manager.client()`` share the manager's session id, which
        # is also their ZMQ identity, so two of them in one process would steal each other's replies.
        session = Session(key=manager.session.key, signature_scheme=manager.session.signature_scheme)
        self.client = gateway_client(manager, session) if self.remote else manager.client(session=session)
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._iopub: dict[str, IopubCallback] = {}
        self._tasks: list[asyncio.Future[Any]] = []
        self._threads: list[threading.Thread] = []
        # what the requests cache about the kernel's process (``client``): a restart voids them here
        self._info: dict[str, Any] | None = None
        self._subshell: str | None = None
        self.closed = False
        #: why this client cannot be used any more (the kernel died, the WebSocket closed), or None
        self.lost: str | None = None

    @classmethod
    async def open(cls, kernel_id: str, manager: Any) -> Self:
        conn = cls(kernel_id, manager)
        await conn._start()
        return conn

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.remote:
            # GatewayKernelClient.start_channels opens its WebSocket with a blocking call (up to the
            # gateway's launch timeout): do that off the event loop.  Every channel is started: the
            # client's router stops at a message for a channel that has no queue.
            await asyncio.to_thread(lambda: asyncio.run(self.client.start_channels()))
            for name in CHANNELS:
                queue = getattr(self.client, f"{name}_channel")
                t = threading.Thread(
                    target=self._pump, args=(loop, name, queue), name=f"acp-gw-{name}-{self.kernel_id[:8]}", daemon=True
                )
                t.start()
                self._threads.append(t)
        else:
            started = self.client.start_channels()
            if inspect.isawaitable(started):
                await started
            for name in CHANNELS:
                self._tasks.append(asyncio.ensure_future(self._reader(name, getattr(self.client, f"{name}_channel"))))

    # -- reading -----------------------------------------------------------------------------------
    async def _reader(self, name: str, channel: Any) -> None:
        while not self.closed:
            try:
                msg = await channel.get_msg()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a closed socket, a bad frame
                if self.closed:
                    return
                log.debug("kernel %s %s read failed: %s", self.kernel_id, name, exc)
                await asyncio.sleep(0.05)
                continue
            self._route(name, msg)

    def _pump(self, loop: asyncio.AbstractEventLoop, name: str, queue: Any) -> None:
        """Thread: blocks on one gateway channel queue, hands each message to the event loop."""
        while not self.closed:
            try:
                msg = queue.get(timeout=0.5)
            except Empty:
                if getattr(queue, "response_router_finished", False):
                    if not self.closed:
                        reason = "the gateway closed this kernel's WebSocket (kernel shut down, culled, or the gateway stopped)"
                        loop.call_soon_threadsafe(self._lose, reason)
                    return
                continue
            except Exception:  # the queue was torn down
                return
            try:
                loop.call_soon_threadsafe(self._route, name, msg)
            except RuntimeError:  # the loop is closed: the server is stopping
                return

    def _route(self, channel: str, msg: dict[str, Any]) -> None:
        try:
            parent: Any = (msg.get("parent_header") or {}).get("msg_id")
            if channel == "iopub":
                if msg.get("msg_type") == "status":
                    state = (msg.get("content") or {}).get("execution_state")
                    if (msg.get("parent_header") or {}).get("msg_type") == "shutdown_request":
                        # someone (Kernel > Restart, a shutdown, the gateway) asked the kernel to stop:
                        # what is pending will not be answered by this process
                        self._lose(
                            "the kernel was restarted or shut down; its variables are gone. Run the cells it needs again"
                        )
                    elif state in ("restarting", "dead") and self.remote:
                        # the gateway's restarter found the kernel dead (jupyter_server's WebSocket says so)
                        what = (
                            "is being restarted by the gateway" if state == "restarting" else "could not be restarted"
                        )
                        self._lose(f"the kernel died and {what}; its variables are gone. Run the cells it needs again")
                    elif state == "starting":  # a fresh process: caches of the old one are void
                        self._info = None
                        self._subshell = None
                cb = self._iopub.get(parent)
                if cb is not None:
                    cb(msg)
                return
            fut = self._replies.pop(parent, None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        except Exception:
            log.exception("routing a kernel message failed")

    def _lose(self, reason: str) -> None:
        """The kernel behind this client is gone: every pending request fails now with the reason."""
        if self.lost is None:
            self.lost = reason
            log.info("kernel %s: %s", self.kernel_id, reason)
        for fut in list(self._replies.values()):
            if not fut.done():
                fut.set_exception(KernelUnavailable(reason))
        self._replies.clear()

    async def check_alive(self) -> str | None:
        """Why the kernel cannot answer (None while it can)."""
        if self.lost is not None:
            return self.lost
        if self.remote:
            return None  # the gateway tells us (status, closed WebSocket)
        try:
            alive = self.manager.is_alive()
            if inspect.isawaitable(alive):
                alive = await alive
        except Exception as exc:
            log.debug("is_alive failed: %s", exc)
            return None
        if not alive:
            return "the notebook's kernel died; restart it (Kernel > Restart) and try again"
        if generation(self.manager) is not self.generation:
            return "the notebook's kernel was restarted; its variables are gone"
        return None

    # -- requests ----------------------------------------------------------------------------------
    def _send(self, channel: str, msg: dict[str, Any]) -> None:
        if not self.remote:
            getattr(self.client, f"{channel}_channel").send(msg)
            return
        msg["channel"] = channel  # one WebSocket carries every channel; without it the gateway assumes shell
        try:
            getattr(self.client, f"{channel}_channel").send(msg)
        except Exception as exc:
            self._lose(f"the WebSocket to the gateway is closed ({describe(exc)}); is the gateway still running?")
            raise KernelUnavailable(self.lost or "the WebSocket to the gateway is closed") from exc

    def _expect(self, msg_id: str) -> asyncio.Future[dict[str, Any]]:
        if self.lost is not None:
            raise KernelUnavailable(self.lost)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[msg_id] = fut
        return fut

    async def _wait(self, fut: asyncio.Future[dict[str, Any]], timeout: float, what: str) -> dict[str, Any]:
        """The reply, checking every second that the kernel is still there."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise KernelTimeout(f"the kernel did not answer {what} within {timeout:g} s")
            try:
                return await asyncio.wait_for(asyncio.shield(fut), min(remaining, 1.0))
            except TimeoutError:
                reason = await self.check_alive()
                if reason is not None:
                    self._lose(reason)
                    raise KernelUnavailable(reason) from None

    async def request(
        self,
        channel: str,
        msg_type: str,
        content: dict[str, Any],
        *,
        timeout: float = 10.0,
        subshell_id: str | None = None,
        on_iopub: IopubCallback | None = None,
    ) -> dict[str, Any]:
        msg = self.client.session.msg(msg_type, content)
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id
        msg_id = msg["header"]["msg_id"]
        fut = self._expect(msg_id)
        if on_iopub is not None:
            self._iopub[msg_id] = on_iopub
        try:
            self._send(channel, msg)
            return await self._wait(fut, timeout, msg_type)
        finally:
            self._replies.pop(msg_id, None)
            if on_iopub is not None:
                self._iopub.pop(msg_id, None)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            if self.remote:
                await asyncio.to_thread(self.client.stop_channels)  # joins the router thread
            else:
                self.client.stop_channels()
        except Exception:
            pass
        for thread in self._threads:
            thread.join(timeout=1)
