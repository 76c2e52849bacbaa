"""One server-side client of one kernel, local or behind a Jupyter Gateway, replies routed by
``parent_header.msg_id``.

Built on jupyter_server's own clients: ``manager.client()`` gives a ZMQ ``AsyncKernelClient`` for a
local kernel; a gateway kernel gets jupyter_server's ``GatewayKernelClient`` (one WebSocket to the
gateway carrying every channel), opened with the gateway's auth headers (``gateway_client``).  Above that, everything is the same for both:

* one reader per channel (shell, control, iopub) routes every message to the future or the callback
  of the request that caused it, so concurrent requests (a variable listing while a cell runs) never
  steal each other's replies.  Local channels are read with ``await channel.get_msg()``; a gateway
  channel is a thread-safe queue the client's router thread fills, read by one small thread per
  channel that blocks on it (the client's own ``get_msg`` polls with ``sleep(0)`` and would spin a
  core) and hands each message to the event loop;
* iopub's slow joiner: before an execution whose outputs we need, a ``kernel_info`` round trip on
  control must come back on iopub (``ensure_iopub``); outputs can overtake ``execute_reply``, so an
  execution ends on iopub ``status: idle`` for its own request;
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
from collections.abc import Awaitable, Callable
from queue import Empty
from typing import Any

from .messages import KernelTimeout, KernelUnavailable

log = logging.getLogger(__name__)

IopubCallback = Callable[[dict[str, Any]], None]
CHANNELS = ("shell", "control", "iopub")


def is_gateway_manager(manager: Any) -> bool:
    """True for a kernel behind a Jupyter Gateway (jupyter_server's ``GatewayKernelManager``)."""
    try:
        from jupyter_server.gateway.managers import GatewayKernelManager
    except Exception:  # pragma: no cover - jupyter_server always has it
        return False
    return isinstance(manager, GatewayKernelManager)


def gateway_client(manager: Any, session: Any) -> Any:
    """jupyter_server's ``GatewayKernelClient`` for a gateway kernel, made as ``manager.client()`` makes
    it, whose WebSocket also carries the gateway's request headers (its ``Authorization`` token,
    cookies, ``GatewayClient.headers``) and TLS settings: the stock client opens the WebSocket
    without them, so a gateway with an auth token refuses it (401)."""
    import ssl

    import websocket
    from jupyter_server.gateway.gateway_client import GatewayClient
    from jupyter_server.gateway.managers import GatewayKernelClient
    from jupyter_server.utils import ensure_async, url_escape, url_path_join

    class AuthorizedGatewayKernelClient(GatewayKernelClient):
        async def start_channels(self, shell=True, iopub=True, stdin=True, hb=True, control=True):
            gw = GatewayClient.instance()
            ws_url = url_path_join(gw.ws_url or "", gw.kernels_endpoint, url_escape(self.kernel_id), "channels")
            headers = dict(gw.load_connection_args().get("headers") or {})
            if not gw.auth_token:
                headers.pop(gw.auth_header_key, None)  # not "token None"
            sslopt: dict[str, Any] = {"ca_certs": gw.ca_certs, "certfile": gw.client_cert, "keyfile": gw.client_key}
            if not gw.validate_cert:
                sslopt["cert_reqs"] = ssl.CERT_NONE
            self.channel_socket = websocket.create_connection(
                ws_url,
                timeout=GatewayClient.KERNEL_LAUNCH_TIMEOUT,
                enable_multithread=True,
                sslopt=sslopt,
                header=headers,
            )
            await ensure_async(
                super(GatewayKernelClient, self).start_channels(
                    shell=shell, iopub=iopub, stdin=stdin, hb=hb, control=control
                )
            )
            self.response_router = threading.Thread(target=self._route_responses, daemon=True)
            self.response_router.start()

    kw: dict[str, Any] = dict(manager.get_connection_info(session=True))
    kw.update(
        {
            "connection_file": manager.connection_file,
            "parent": manager,
            "kernel_id": manager.kernel_id,
            "session": session,
        }
    )
    return AuthorizedGatewayKernelClient(**kw)


def generation(manager: Any) -> Any:
    """What changes when a local kernel is restarted under the same id (its process)."""
    provisioner = getattr(manager, "provisioner", None)
    return getattr(provisioner, "process", None) if provisioner is not None else None


class KernelConnection:
    """A server-side client of one kernel with per-request routing."""

    def __init__(self, kernel_id: str, manager: Any) -> None:
        self.kernel_id = kernel_id
        self.manager = manager
        self.remote = is_gateway_manager(manager)
        self.generation = None if self.remote else generation(manager)
        # Our own Session: clients made by ``manager.client()`` share the manager's session id, which
        # is also their ZMQ identity, so two of them in one process would steal each other's replies.
        from jupyter_client.session import Session

        session = Session(key=manager.session.key, signature_scheme=manager.session.signature_scheme)
        self.client = gateway_client(manager, session) if self.remote else manager.client(session=session)
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._iopub: dict[str, IopubCallback] = {}
        self._tasks: list[asyncio.Future[Any]] = []
        self._threads: list[threading.Thread] = []
        self._iopub_ready = False
        self._iopub_lock = asyncio.Lock()
        self.execute_lock = asyncio.Lock()  # executions into the notebook run one at a time
        self._info: dict[str, Any] | None = None
        self._subshell: str | None = None
        self._subshell_lock = asyncio.Lock()
        self._seq = 0
        self.closed = False
        #: why this client cannot be used any more (the kernel died, the WebSocket closed), or None
        self.lost: str | None = None

    @classmethod
    async def open(cls, kernel_id: str, manager: Any) -> KernelConnection:
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
            from .messages import describe

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

    async def kernel_info(self, timeout: float = 10.0) -> dict[str, Any]:
        if self._info is None:
            # control, not shell: a running cell (a %%acp turn, say) must not block this
            reply = await self.request("control", "kernel_info_request", {}, timeout=timeout)
            self._info = reply["content"]
        return self._info

    async def supports(self, feature: str) -> bool:
        info = await self.kernel_info()
        return feature in (info.get("supported_features") or [])

    async def ensure_iopub(self, timeout: float = 10.0) -> None:
        """Repeat kernel_info until its iopub status comes back: the subscription is live."""
        if self._iopub_ready:
            return
        async with self._iopub_lock:
            if self._iopub_ready:
                return
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while loop.time() < deadline:
                if self.lost is not None:
                    raise KernelUnavailable(self.lost)
                seen = asyncio.Event()
                msg = self.client.session.msg("kernel_info_request", {})
                mid = msg["header"]["msg_id"]

                def on_status(m: dict[str, Any], e: asyncio.Event = seen) -> None:
                    if m.get("msg_type") == "status":
                        e.set()

                self._iopub[mid] = on_status
                try:
                    self._send("control", msg)  # answered even while a cell runs
                    await asyncio.wait_for(seen.wait(), 0.5)
                    self._iopub_ready = True
                    return
                except TimeoutError:
                    reason = await self.check_alive()
                    if reason is not None:
                        self._lose(reason)
                        raise KernelUnavailable(reason) from None
                    continue
                finally:
                    self._iopub.pop(mid, None)
            raise KernelTimeout(f"the kernel's output channel (iopub) did not answer within {timeout:g} s")

    async def debug(
        self, command: str, arguments: dict[str, Any] | None = None, timeout: float = 10.0
    ) -> dict[str, Any]:
        self._seq += 1
        content = {"type": "request", "seq": self._seq, "command": command, "arguments": arguments or {}}
        reply = await self.request("control", "debug_request", content, timeout=timeout)
        return reply["content"]

    async def subshell(self) -> str | None:
        """A subshell for read-only introspection, created once (ipykernel >= 7)."""
        if self._subshell is not None:
            return self._subshell
        async with self._subshell_lock:
            if self._subshell is None and await self.supports("kernel subshells"):
                reply = await self.request("control", "create_subshell_request", {}, timeout=10)
                self._subshell = reply["content"].get("subshell_id")
        return self._subshell

    @property
    def subshell_id(self) -> str | None:
        return self._subshell

    async def evaluate(self, expression: str, *, timeout: float = 30.0, prefer_subshell: bool = True) -> str:
        """Evaluate one expression silently (no count, no history); the text/plain of its value."""
        content = {
            "code": "",
            "silent": True,
            "store_history": False,
            "user_expressions": {"v": expression},
            "allow_stdin": False,
            "stop_on_error": False,
        }
        sub = await self.subshell() if prefer_subshell else None
        reply = await self.request("shell", "execute_request", content, timeout=timeout, subshell_id=sub)
        result = (reply["content"].get("user_expressions") or {}).get("v") or {}
        if result.get("status") != "ok":
            raise RuntimeError(f"{result.get('ename', 'error')}: {result.get('evalue', '')}")
        return result.get("data", {}).get("text/plain", "")

    async def execute(
        self,
        code: str,
        *,
        on_iopub: IopubCallback,
        interrupt: Callable[[], Awaitable[None]],
        timeout: float = 60.0,
        store_history: bool = True,
        on_start: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Run code on the main shell, one execution at a time; ``on_iopub`` sees its outputs as they
        come (``execute_input``, ``stream``, ``display_data``, ``execute_result``, ``error``,
        ``clear_output``).  Past ``timeout`` the kernel is interrupted.  Answers ``{status,
        execution_count[, timeout]}``; a dead kernel raises ``KernelUnavailable``."""
        await self.ensure_iopub()
        content = {
            "code": code,
            "silent": False,
            "store_history": store_history,
            "allow_stdin": False,
            "stop_on_error": True,
        }
        msg = self.client.session.msg("execute_request", content)
        mid = msg["header"]["msg_id"]
        idle = asyncio.Event()
        count: dict[str, Any] = {"n": None}

        def iopub(m: dict[str, Any]) -> None:
            kind = m.get("msg_type")
            if kind == "status":
                if (m.get("content") or {}).get("execution_state") == "idle":
                    idle.set()
                return
            if kind == "execute_input":
                count["n"] = (m.get("content") or {}).get("execution_count")
            on_iopub(m)

        async with self.execute_lock:
            fut = self._expect(mid)
            self._iopub[mid] = iopub
            try:
                if on_start is not None:
                    on_start()
                self._send("shell", msg)
                try:
                    reply = await self._wait(fut, timeout, "execute_request")
                except KernelTimeout:
                    await interrupt()
                    try:  # the interrupt ends the run; let its KeyboardInterrupt land, so the next run starts clean
                        await self._wait(fut, 5, "execute_request after an interrupt")
                        await asyncio.wait_for(idle.wait(), 2)
                    except (TimeoutError, KernelTimeout):
                        pass
                    return {"status": "timeout", "execution_count": count["n"], "timeout": timeout}
                try:
                    await asyncio.wait_for(idle.wait(), 10)
                except TimeoutError:
                    log.debug("kernel %s: no idle status after execute_reply", self.kernel_id)
                rc = reply.get("content") or {}
                n = rc.get("execution_count", count["n"])
                return {"status": rc.get("status", "ok"), "execution_count": n if store_history else count["n"]}
            finally:
                self._replies.pop(mid, None)
                self._iopub.pop(mid, None)

    async def close(self) -> None:
        if self.closed:
            return
        if self._subshell is not None and self.lost is None:
            try:
                await self.request("control", "delete_subshell_request", {"subshell_id": self._subshell}, timeout=2)
            except Exception:
                pass
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
