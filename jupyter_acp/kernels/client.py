"""One server-side client of one kernel, local or behind a Jupyter Gateway: the requests.

``KernelConnection`` asks the kernel things (``kernel_info``, ``supports``, ``debug``, a read-only
``subshell``, ``evaluate`` one expression, ``execute`` code with its outputs streamed) on top of
``channels.KernelChannels``, which connects, reads every channel and routes each reply to its
request; ``gateway`` builds the client of a gateway kernel.  Split that way so the requests read apart
from the transport.

* iopub's slow joiner: before an execution whose outputs we need, a ``kernel_info`` round trip on
  control must come back on iopub (``ensure_iopub``); outputs can overtake ``execute_reply``, so an
  execution ends on iopub ``status: idle`` for its own request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .channels import IopubCallback, KernelChannels
from .messages import KernelTimeout, KernelUnavailable

log = logging.getLogger(__name__)


class KernelConnection(KernelChannels):
    """A server-side client of one kernel with per-request routing."""

    def __init__(self, kernel_id: str, manager: Any) -> None:
        super().__init__(kernel_id, manager)
        self._iopub_ready = False
        self._iopub_lock = asyncio.Lock()
        self.execute_lock = asyncio.Lock()  # executions into the notebook run one at a time
        self._subshell_lock = asyncio.Lock()
        self._seq = 0

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
        await super().close()
