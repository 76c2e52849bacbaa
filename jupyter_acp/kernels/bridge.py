"""The kernel bridge the tools use: one client per kernel (local or gateway), made on first use and
renewed when the kernel restarts or dies; variables, scratch code, interrupts.

Variables come from the debugger protocol's ``inspectVariables`` on the **control** channel where the
kernel offers it (answers while a cell runs; touches neither the execution count, the history nor the
busy indicator).  Otherwise, and for summaries that need code (a DataFrame's dtypes), our read-only
summariser (``summarise.py``, its source sent to the kernel) runs in a kernel **subshell** (ipykernel
>= 7, concurrent), and only as a last resort in a silent execute on the main shell (which queues
behind a running cell).  The answer says which method was used.

Every failure leaves here as ``KernelUnavailable`` or ``KernelTimeout`` with a reason naming what
failed (a gateway that cannot be reached, a kernel the gateway no longer has, ...): never empty.

Restarts and interrupts made in Jupyter (Kernel > Restart / Interrupt: jupyter_server's ``kernel_actions``
events) are answered at once, not at a tool's timeout.  A local kernel's restart shows in its process; a
gateway kernel's does not (no process here, no signals), and a kernel that cannot answer the restart's
``shutdown_request`` (stopped, stuck in C code) never says it is going: so a gateway kernel's restart or
shutdown fails what waits on it as soon as Jupyter reports it done.  An interrupt the kernel does not obey
within ``INTERRUPT_GRACE`` s (C code that ignores SIGINT, a gateway kernel whose signal went nowhere) ends
the waiting execution with an answer that says so, instead of waiting for the tool's timeout.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from jupyter_core.utils import ensure_async

from . import summarise as _summarise_module
from .channels import generation
from .client import KernelConnection
from .facts import KernelFacts
from .gateway import is_gateway_manager
from .messages import KernelTimeout, KernelUnavailable, describe, output_from_msg

log = logging.getLogger(__name__)

#: pseudo entries the debugger groups functions, classes and specials under
PSEUDO_VARIABLES = {"special variables", "function variables", "class variables", "protected variables"}
#: names IPython puts in every namespace; one list, held by the summariser (which also runs inside kernels)
HIDDEN_NAMES = _summarise_module.HIDDEN

_SOURCE: str | None = None

#: jupyter_server's events for kernel start, restart, interrupt and shutdown
KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
#: seconds an execution may run on after Kernel > Interrupt before the tool waiting on it is answered
INTERRUPT_GRACE = 10.0


def summariser_source() -> str:
    """The summariser module's own source text: what the kernel runs."""
    global _SOURCE
    if _SOURCE is None:
        _SOURCE = inspect.getsource(_summarise_module)
    return _SOURCE


def summary_expression(args: dict[str, Any]) -> str:
    """One expression that runs the summariser in a throw-away namespace (nothing lands in user_ns)."""
    return (
        "(lambda _g: (exec(%r, _g), _g['answer'](get_ipython().user_ns, %r))[1])({'__name__': '_jupyter_acp_summarise'})"
        % (summariser_source(), args)
    )


class KernelBridge(KernelFacts):
    """Kernel connections by kernel id, made on first use and renewed when a kernel restarts."""

    def __init__(self, serverapp: Any) -> None:
        self.serverapp = serverapp
        self._conns: dict[str, KernelConnection] = {}
        self._languages: dict[str, str | None] = {}
        self._spec_languages: dict[str, tuple[float, str | None]] = {}
        self._open_lock = asyncio.Lock()
        #: executions running through ``execute``, by kernel id; and why one was ended early (interrupt grace)
        self._executions: dict[str, set[asyncio.Task[dict[str, Any]]]] = {}
        self._ended: dict[asyncio.Task[dict[str, Any]], str] = {}
        self._began: dict[asyncio.Task[dict[str, Any]], dict[str, bool]] = {}
        self._grace: set[asyncio.Task[None]] = set()
        self._listening = False
        self._listen()

    def _listen(self) -> None:
        logger = getattr(self.serverapp, "event_logger", None)
        if logger is None:
            return
        try:
            logger.add_listener(schema_id=KERNEL_ACTIONS, listener=self._on_kernel_action)
            self._listening = True
        except Exception as exc:  # an older server without the schema: restarts are noticed at the timeout
            log.warning("jupyter_acp: kernel restarts and interrupts are not followed (%s)", exc)

    async def _on_kernel_action(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        """Kernel > Restart / Interrupt / Shut down, done by jupyter_server (any client of this server)."""
        kernel_id, action = data.get("kernel_id"), data.get("action")
        if not kernel_id or data.get("status") != "success":
            return
        conn = self._conns.get(kernel_id)
        if action in ("restart", "shutdown") and conn is not None and conn.remote:
            what = (
                "the kernel was restarted (Kernel > Restart); its variables are gone. Run the cells it needs again"
                if action == "restart"
                else "the kernel was shut down; start a kernel for the notebook"
            )
            conn._lose(f"{what} ({self._where(conn.manager)})")
            self._conns.pop(kernel_id, None)
            self._track(asyncio.ensure_future(conn.close()))
        elif action == "interrupt" and self._executions.get(kernel_id):
            self._track(asyncio.ensure_future(self._after_interrupt(kernel_id)))

    def _track(self, task: asyncio.Future[Any]) -> None:
        self._grace.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._grace.discard)

    async def _after_interrupt(self, kernel_id: str) -> None:
        """Executions the kernel was running when it was interrupted and still runs ``INTERRUPT_GRACE`` s later
        are answered, saying so (one still waiting its turn behind the interrupted cell is not concerned)."""
        running = {t for t in self._executions.get(kernel_id, ()) if self._began.get(t, {}).get("yes")}
        await asyncio.sleep(INTERRUPT_GRACE)
        for task in running:
            if not task.done():
                self._ended[task] = (
                    f"the kernel was interrupted (Kernel > Interrupt) but was still running the code "
                    f"{INTERRUPT_GRACE:g} s later ({self.where(kernel_id)}): it may be stuck in code that ignores "
                    "interrupts; restart it (Kernel > Restart) to stop it"
                )
                task.cancel()

    async def connection(self, kernel_id: str) -> KernelConnection:
        try:
            kernel = self._manager(kernel_id)
        except KeyError:
            raise KernelUnavailable(
                f"kernel {kernel_id} is gone (shut down or restarted under another id); start a kernel for the notebook"
            ) from None
        remote = is_gateway_manager(kernel)
        conn = self._conns.get(kernel_id)
        if conn is not None and (
            conn.manager is not kernel
            or conn.lost is not None
            or (not remote and conn.generation is not generation(kernel))
        ):
            await self.drop(kernel_id)
            conn = None
        if not remote:
            alive = await ensure_async(kernel.is_alive())
            if not alive:
                raise KernelUnavailable("the notebook's kernel is dead; restart it (Kernel > Restart) and try again")
        if conn is not None:
            return conn
        async with self._open_lock:
            conn = self._conns.get(kernel_id)
            if conn is not None:
                return conn
            if remote:
                await self._check_gateway_kernel(kernel, kernel_id)
            try:
                conn = await KernelConnection.open(kernel_id, kernel)
            except (KernelUnavailable, KernelTimeout):
                raise
            except Exception as exc:
                log.warning("connecting to kernel %s failed", kernel_id, exc_info=True)
                raise KernelUnavailable(f"cannot connect to {self._where(kernel)}: {describe(exc)}") from exc
            self._conns[kernel_id] = conn
            return conn

    async def _check_gateway_kernel(self, kernel: Any, kernel_id: str) -> None:
        """Ask the gateway about the kernel before opening a WebSocket to it."""
        try:
            model = await kernel.refresh_model()
        except Exception as exc:
            raise KernelUnavailable(f"the gateway did not answer about kernel {kernel_id}: {describe(exc)}") from exc
        if not model:
            raise KernelUnavailable(
                f"the gateway no longer has kernel {kernel_id} (shut down or culled there); start a new kernel for the notebook"
            )
        if model.get("execution_state") == "dead":
            raise KernelUnavailable(
                "the notebook's kernel is dead on the gateway; restart it (Kernel > Restart) and try again"
            )

    async def drop(self, kernel_id: str) -> None:
        conn = self._conns.pop(kernel_id, None)
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        if self._listening:
            with contextlib.suppress(Exception):
                self.serverapp.event_logger.remove_listener(schema_id=KERNEL_ACTIONS, listener=self._on_kernel_action)
            self._listening = False
        for task in list(self._grace):
            task.cancel()
        await asyncio.gather(*(self.drop(k) for k in list(self._conns)), return_exceptions=True)

    @contextlib.asynccontextmanager
    async def _answers(self, what: str, kernel_id: str, *, runtime_errors: bool = False) -> AsyncIterator[None]:
        """Kernel errors pass as they are, saying which kernel when it is a gateway's (and, with
        ``runtime_errors``, the summariser's own ``RuntimeError``); anything else becomes
        KernelUnavailable naming its type and reason.  The traceback goes to the server log."""
        try:
            yield
        except (KernelUnavailable, KernelTimeout) as exc:
            where = self.where(kernel_id)
            if "gateway" in where and "gateway" not in str(exc):
                raise type(exc)(f"{exc} ({where})") from exc
            raise
        except RuntimeError as exc:
            if runtime_errors and str(exc):
                raise
            log.warning("%s failed", what, exc_info=True)
            raise KernelUnavailable(f"{what} failed ({self.where(kernel_id)}): {describe(exc)}") from exc
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s failed", what, exc_info=True)
            raise KernelUnavailable(f"{what} failed ({self.where(kernel_id)}): {describe(exc)}") from exc

    async def kernel_info(self, kernel_id: str, *, timeout: float = 10.0) -> dict[str, Any]:
        """The kernel's ``kernel_info_reply`` content (language, implementation, supported features)."""
        async with self._answers("asking the kernel for its info", kernel_id):
            conn = await self.connection(kernel_id)
            return await conn.kernel_info(timeout=timeout)

    # -- variables ---------------------------------------------------------------------------------
    async def list_variables(self, kernel_id: str, *, timeout: float = 15.0) -> tuple[list[dict[str, Any]], str]:
        """[{name, type, value}] and the method used: inspectVariables, else our summariser."""
        async with self._answers("listing the kernel's variables", kernel_id):
            conn = await self.connection(kernel_id)
            if await conn.supports("debugger"):
                try:
                    reply = await conn.debug("inspectVariables", timeout=timeout)
                    if reply.get("success"):
                        return _debugger_rows(reply), "inspectVariables"
                    log.debug("inspectVariables refused: %s", reply.get("message"))
                except (KernelTimeout, KernelUnavailable):
                    raise
                except Exception as exc:
                    log.debug("inspectVariables failed, falling back: %s", exc)
            data = await self._summarise(conn, {"op": "list"}, timeout)
            return data.get("variables", []), "subshell" if conn.subshell_id else "silent_execute"

    async def inspect_variable(
        self, kernel_id: str, name: str, *, budget: int = 2000, timeout: float = 30.0
    ) -> dict[str, Any]:
        async with self._answers(f"inspecting {name}", kernel_id, runtime_errors=True):
            conn = await self.connection(kernel_id)
            return await self._summarise(conn, {"op": "inspect", "name": name, "budget": budget}, timeout)

    async def _summarise(self, conn: KernelConnection, args: dict[str, Any], timeout: float) -> dict[str, Any]:
        text = await conn.evaluate(summary_expression(args), timeout=timeout)
        try:
            return json.loads(text)
        except ValueError:
            try:
                return json.loads(ast.literal_eval(text))
            except Exception:
                raise RuntimeError(f"unexpected answer from the kernel: {text[:200]}") from None

    # -- execution ---------------------------------------------------------------------------------
    async def execute(
        self, kernel_id: str, code: str, *, on_iopub, timeout: float = 60.0, store_history: bool = True, on_start=None
    ) -> dict[str, Any]:
        """Run code on the kernel's main shell (see ``KernelConnection.execute``); interrupts on timeout."""
        async with self._answers("running code in the kernel", kernel_id):
            conn = await self.connection(kernel_id)
            began: dict[str, bool] = {}

            def watch(msg: dict[str, Any]) -> None:
                if msg.get("msg_type") == "execute_input":  # the kernel runs it (it no longer waits its turn)
                    began["yes"] = True
                on_iopub(msg)

            task = asyncio.ensure_future(
                conn.execute(
                    code,
                    on_iopub=watch,
                    interrupt=lambda: self.interrupt(kernel_id),
                    timeout=timeout,
                    store_history=store_history,
                    on_start=on_start,
                )
            )
            self._began[task] = began
            running = self._executions.setdefault(kernel_id, set())
            running.add(task)
            try:
                return await task
            except asyncio.CancelledError:
                why = self._ended.pop(task, None)
                if why is None:  # our caller was cancelled (awaiting the task cancelled it too)
                    raise
                # not KernelTimeout: callers read that as "the kernel never got the code"; it did, and is stuck
                raise KernelUnavailable(why) from None
            finally:
                running.discard(task)
                self._ended.pop(task, None)
                self._began.pop(task, None)
                if not running:
                    self._executions.pop(kernel_id, None)

    async def run_code(self, kernel_id: str, code: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Run code (not stored in history or the notebook); collect outputs until idle."""
        outputs: list[dict[str, Any]] = []

        def on_iopub(msg: dict[str, Any]) -> None:
            kind = msg.get("msg_type")
            if kind in ("stream", "display_data", "execute_result", "error"):
                outputs.append(output_from_msg(msg))
            elif kind == "clear_output":
                outputs.clear()

        res = await self.execute(kernel_id, code, on_iopub=on_iopub, timeout=timeout, store_history=False)
        out: dict[str, Any] = {"status": res["status"], "outputs": outputs}
        if res["status"] == "timeout":
            out["timeout"] = timeout
        return out

    async def interrupt(self, kernel_id: str) -> None:
        try:
            await ensure_async(self.km.interrupt_kernel(kernel_id))
        except Exception:
            log.exception("interrupting kernel %s failed", kernel_id)

    # -- history and restarts (the run plan, client_kernel) -----------------------------------------
    async def history(self, kernel_id: str, *, timeout: float = 10.0) -> dict[int, str]:
        """What this kernel session ran, by execution count (``history_request``, range of the current
        session, raw input): on a subshell when the kernel has them, so it answers while a cell runs."""
        async with self._answers("reading the kernel's history", kernel_id):
            conn = await self.connection(kernel_id)
            sub = await conn.subshell()
            content = {
                "output": False,
                "raw": True,
                "hist_access_type": "range",
                "session": 0,
                "start": 1,
                "stop": None,
            }
            reply = await conn.request("shell", "history_request", content, timeout=timeout, subshell_id=sub)
            body = reply.get("content") or {}
            if body.get("status", "ok") != "ok":
                raise RuntimeError(f"the kernel refused its history: {body.get('evalue') or body.get('status')}")
            out: dict[int, str] = {}
            for entry in body.get("history") or []:
                if isinstance(entry, (list, tuple)) and len(entry) >= 3 and isinstance(entry[1], int):
                    out[entry[1]] = str(entry[2])
            return out

    async def restart(self, kernel_id: str) -> None:
        """Restart the kernel through the server's kernel manager (a gateway's too); the connection made
        to the old process is dropped (the next call makes a new one)."""
        async with self._answers("restarting the kernel", kernel_id):
            conn = self._conns.get(kernel_id)
            if conn is not None:
                conn._lose("the kernel was restarted by the agent (client_kernel); its variables are gone")
            await ensure_async(self.km.restart_kernel(kernel_id))
            await self.drop(kernel_id)


def _debugger_rows(reply: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for v in reply.get("body", {}).get("variables", []):
        name = v.get("name", "")
        if name in PSEUDO_VARIABLES or name in HIDDEN_NAMES or name.startswith("_"):
            continue
        if v.get("type") == "module":
            continue
        rows.append({"name": name, "type": v.get("type", ""), "value": v.get("value", "")})
    return rows
