"""The kernel bridge: one server-side client per kernel, replies routed by ``parent_header.msg_id``.

Why this shape (see ``shared/reference/jupyter-internals.md`` §2):

* one reader task per channel (shell, control, iopub) routes every message to the future or the
  callback of the request that caused it, so concurrent requests (a variable listing while a cell
  runs) never steal each other's replies;
* variables come from the debugger protocol's ``inspectVariables`` on the **control** channel: it
  answers while a cell runs and touches neither the execution count, the history nor the busy
  indicator.  Summaries that need code (a DataFrame's dtypes) run our own read-only summariser in a
  kernel **subshell** (ipykernel >= 7, concurrent), and only as a last resort in a silent execute on
  the main shell (which queues behind a running cell);
* iopub's slow joiner: before an execution whose outputs we need, a ``kernel_info`` round trip
  must come back on iopub (``ensure_iopub``); outputs can overtake ``execute_reply``, so an
  execution ends on iopub ``status: idle`` for its own request.

Remote (gateway) kernels have no local client: every entry point answers ``KernelUnavailable``.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import re
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

IopubCallback = Callable[[dict[str, Any]], None]

#: pseudo entries the debugger groups functions, classes and specials under
PSEUDO_VARIABLES = {"special variables", "function variables", "class variables", "protected variables"}
#: names IPython puts in every namespace
HIDDEN_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class KernelUnavailable(Exception):
    """No kernel, a dead kernel, or a kernel the server cannot talk to locally."""


class KernelTimeout(Exception):
    pass


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text)


def clip(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    return text[:budget] + f"… [{len(text) - budget} more characters]"


# -- the summariser that runs inside the kernel (read-only: it never assigns into the namespace) --
SUMMARY_SRC = r'''
def _acp_main(ns, args):
    import json, reprlib, sys, types
    budget = int(args.get("budget", 2000))
    r = reprlib.Repr()
    r.maxstring = 160; r.maxother = 160; r.maxlist = 8; r.maxtuple = 8; r.maxdict = 8; r.maxset = 8
    r.maxlevel = 3
    def short(v, n=160):
        try:
            s = r.repr(v)
        except Exception as e:
            s = "<repr failed: %s>" % type(e).__name__
        return s if len(s) <= n else s[:n] + "…"
    def tname(v):
        t = type(v)
        m = t.__module__
        return t.__qualname__ if m in ("builtins", "__main__") else m.split(".")[0] + "." + t.__qualname__
    def summary(v):
        out = {"type": tname(v)}
        mod = type(v).__module__ or ""
        try:
            if mod.startswith("pandas") and type(v).__name__ == "DataFrame":
                out["kind"] = "dataframe"
                out["shape"] = list(v.shape)
                cols = list(v.columns[:50])
                out["dtypes"] = {str(c): str(v.dtypes[c]) for c in cols}
                if v.shape[1] > 50:
                    out["columns_omitted"] = int(v.shape[1] - 50)
                out["memory_bytes"] = int(v.memory_usage(index=True, deep=False).sum())
                import pandas as pd
                with pd.option_context("display.max_columns", 20, "display.width", 200, "display.max_colwidth", 40):
                    out["head"] = v.head(5).to_string()[:budget]
                    if args.get("describe", True) and v.shape[0] * max(v.shape[1], 1) <= 50_000_000:
                        try:
                            out["describe"] = v.describe().to_string()[:budget]
                        except Exception:
                            pass
                return out
            if mod.startswith("pandas") and type(v).__name__ == "Series":
                out["kind"] = "series"
                out["length"] = int(len(v)); out["dtype"] = str(v.dtype); out["name"] = short(v.name, 80)
                out["head"] = v.head(5).to_string()[:budget]
                return out
            if mod.startswith("numpy") and type(v).__name__ == "ndarray":
                out["kind"] = "ndarray"
                out["shape"] = list(v.shape); out["dtype"] = str(v.dtype); out["nbytes"] = int(v.nbytes)
                if v.size and v.dtype.kind in "biuf":
                    import numpy as np
                    out["min"] = float(np.nanmin(v)); out["max"] = float(np.nanmax(v)); out["mean"] = float(np.nanmean(v))
                out["preview"] = short(v.ravel()[:8].tolist(), 300)
                return out
        except Exception as e:
            out["summary_error"] = "%s: %s" % (type(e).__name__, str(e)[:200])
        if isinstance(v, str):
            out["kind"] = "str"; out["length"] = len(v); out["value"] = v[:budget]
        elif isinstance(v, (bytes, bytearray)):
            out["kind"] = "bytes"; out["length"] = len(v); out["value"] = short(bytes(v[:budget]), budget)
        elif isinstance(v, dict):
            out["kind"] = "mapping"; out["length"] = len(v)
            out["items"] = [[short(k, 80), short(x, 160)] for k, x in list(v.items())[:10]]
        elif isinstance(v, (list, tuple, set, frozenset)):
            out["kind"] = "sequence"; out["length"] = len(v)
            out["items"] = [short(x, 160) for x in list(v)[:10]]
        elif isinstance(v, (int, float, complex, bool)) or v is None:
            out["kind"] = "scalar"; out["value"] = short(v, budget)
        elif isinstance(v, types.ModuleType):
            out["kind"] = "module"; out["value"] = getattr(v, "__name__", "?")
        elif callable(v):
            out["kind"] = "callable"
            try:
                import inspect
                out["signature"] = str(inspect.signature(v))[:300]
            except Exception:
                pass
            doc = getattr(v, "__doc__", None)
            if isinstance(doc, str):
                out["doc"] = doc.strip()[:300]
        else:
            out["kind"] = "object"
        if "value" not in out and out.get("kind") not in ("dataframe", "series", "ndarray"):
            out["repr"] = short(v, min(budget, 500))
        return out
    hidden = {"In", "Out", "exit", "quit", "get_ipython", "open"}
    if args["op"] == "list":
        rows = []
        for k, v in list(ns.items()):
            if k.startswith("_") or k in hidden or isinstance(v, types.ModuleType):
                continue
            rows.append({"name": k, "type": tname(v), "value": short(v)})
        return {"variables": rows}
    path = args["name"].split(".")
    if path[0] not in ns:
        return {"error": "name %r is not defined in the kernel" % path[0]}
    v = ns[path[0]]
    for part in path[1:]:
        a = getattr(type(v), part, None)
        if isinstance(a, property):
            return {"error": "%s is a property; only plain attributes are read" % part}
        try:
            v = object.__getattribute__(v, part) if not isinstance(v, types.ModuleType) else getattr(v, part)
        except AttributeError:
            return {"error": "%r has no attribute %r" % (".".join(path[:path.index(part)]), part)}
    return {"name": args["name"], **summary(v)}
class _AcpR:
    def __init__(self, t): self.t = t
    def __repr__(self): return self.t
_acp_out = _AcpR(json.dumps(_acp_main(_acp_ns, _acp_args), default=str))
'''


def _summary_expression(args: dict[str, Any]) -> str:
    """One expression that runs the summariser in a throw-away namespace (nothing lands in user_ns)."""
    return (
        "(lambda _g: (exec(%r, _g), _g['_acp_out'])[1])"
        "({'_acp_ns': get_ipython().user_ns, '_acp_args': %r, 'json': __import__('json')})"
        % (SUMMARY_SRC, args)
    )


class KernelConnection:
    """A server-side client of one kernel with per-request routing."""

    def __init__(self, kernel_id: str, manager: Any) -> None:
        self.kernel_id = kernel_id
        self.manager = manager
        # Our own Session: clients made by ``manager.client()`` share the manager's session id, which
        # is also their ZMQ identity, so two of them in one process would steal each other's replies.
        from jupyter_client.session import Session

        session = Session(key=manager.session.key, signature_scheme=manager.session.signature_scheme)
        self.client = manager.client(session=session)
        self.client.start_channels()
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._iopub: dict[str, IopubCallback] = {}
        self._tasks = [
            asyncio.ensure_future(self._reader(self.client.shell_channel, self._route_reply)),
            asyncio.ensure_future(self._reader(self.client.control_channel, self._route_reply)),
            asyncio.ensure_future(self._reader(self.client.iopub_channel, self._route_iopub)),
        ]
        self._iopub_ready = False
        self._iopub_lock = asyncio.Lock()
        self.execute_lock = asyncio.Lock()  # executions into the notebook run one at a time
        self._info: dict[str, Any] | None = None
        self._subshell: str | None = None
        self._subshell_lock = asyncio.Lock()
        self._seq = 0
        self.closed = False

    async def _reader(self, channel: Any, route: Callable[[dict[str, Any]], None]) -> None:
        while True:
            try:
                msg = await channel.get_msg()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a closed socket, a bad frame
                if self.closed:
                    return
                log.debug("kernel %s channel read failed: %s", self.kernel_id, exc)
                await asyncio.sleep(0.05)
                continue
            try:
                route(msg)
            except Exception:
                log.exception("routing a kernel message failed")

    def _route_reply(self, msg: dict[str, Any]) -> None:
        parent = (msg.get("parent_header") or {}).get("msg_id")
        fut = self._replies.pop(parent, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _route_iopub(self, msg: dict[str, Any]) -> None:
        parent = (msg.get("parent_header") or {}).get("msg_id")
        cb = self._iopub.get(parent)
        if cb is not None:
            cb(msg)

    # -- requests ------------------------------------------------------------------------------
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
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[msg_id] = fut
        if on_iopub is not None:
            self._iopub[msg_id] = on_iopub
        getattr(self.client, f"{channel}_channel").send(msg)
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise KernelTimeout(f"the kernel did not answer {msg_type} within {timeout:g} s") from None
        finally:
            self._replies.pop(msg_id, None)
            if on_iopub is not None and fut.cancelled():
                self._iopub.pop(msg_id, None)

    def forget_iopub(self, msg_id: str) -> None:
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
                seen = asyncio.Event()
                msg = self.client.session.msg("kernel_info_request", {})
                mid = msg["header"]["msg_id"]
                self._iopub[mid] = lambda m, e=seen: e.set() if m.get("msg_type") == "status" else None
                self.client.control_channel.send(msg)  # answered even while a cell runs
                try:
                    await asyncio.wait_for(seen.wait(), 0.5)
                    self._iopub_ready = True
                    return
                except asyncio.TimeoutError:
                    continue
                finally:
                    self._iopub.pop(mid, None)
            raise KernelTimeout("the kernel's output channel did not answer")

    async def debug(self, command: str, arguments: dict[str, Any] | None = None, timeout: float = 10.0) -> dict[str, Any]:
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

    async def close(self) -> None:
        self.closed = True
        if self._subshell is not None:
            try:
                await self.request("control", "delete_subshell_request", {"subshell_id": self._subshell}, timeout=2)
            except Exception:
                pass
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            self.client.stop_channels()
        except Exception:
            pass


class KernelBridge:
    """Kernel connections by kernel id, made on first use and renewed when a kernel restarts."""

    def __init__(self, serverapp: Any) -> None:
        self.serverapp = serverapp
        self._conns: dict[str, KernelConnection] = {}
        self._languages: dict[str, str | None] = {}

    @property
    def km(self) -> Any:
        return self.serverapp.kernel_manager

    def language(self, kernel_id: str) -> str | None:
        """The kernel's language, from its kernel spec (no round trip; a kernel id keeps its spec)."""
        if kernel_id in self._languages:
            return self._languages[kernel_id]
        try:
            kernel = self.km.get_kernel(kernel_id)
            spec = self.serverapp.kernel_spec_manager.get_kernel_spec(kernel.kernel_name)
            language = (spec.language or "").lower() or None
        except Exception:
            return None
        if len(self._languages) > 1000:
            self._languages.clear()
        self._languages[kernel_id] = language
        return language

    def kernel_name(self, kernel_id: str) -> str | None:
        try:
            return self.km.get_kernel(kernel_id).kernel_name
        except Exception:
            return None

    def execution_state(self, kernel_id: str) -> str | None:
        try:
            return getattr(self.km.get_kernel(kernel_id), "execution_state", None)
        except Exception:
            return None

    async def connection(self, kernel_id: str) -> KernelConnection:
        try:
            kernel = self.km.get_kernel(kernel_id)
        except KeyError:
            raise KernelUnavailable(f"kernel {kernel_id} is gone (shut down or restarted under another id)") from None
        alive = kernel.is_alive()
        if asyncio.iscoroutine(alive):
            alive = await alive
        if not alive:
            raise KernelUnavailable("the notebook's kernel is dead; restart it (Kernel > Restart) and try again")
        if not hasattr(kernel, "client"):
            raise KernelUnavailable("this kernel is remote (gateway); the server has no local client for it")
        conn = self._conns.get(kernel_id)
        if conn is not None and conn.manager is not kernel:
            await self.drop(kernel_id)
            conn = None
        if conn is None:
            conn = KernelConnection(kernel_id, kernel)
            self._conns[kernel_id] = conn
        return conn

    async def drop(self, kernel_id: str) -> None:
        conn = self._conns.pop(kernel_id, None)
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        await asyncio.gather(*(self.drop(k) for k in list(self._conns)), return_exceptions=True)

    # -- variables -----------------------------------------------------------------------------
    async def list_variables(self, kernel_id: str, *, timeout: float = 15.0) -> tuple[list[dict[str, Any]], str]:
        """[{name, type, value}] and the method used: inspectVariables, else our summariser."""
        conn = await self.connection(kernel_id)
        if await conn.supports("debugger"):
            try:
                reply = await conn.debug("inspectVariables", timeout=timeout)
                if reply.get("success"):
                    rows = []
                    for v in reply.get("body", {}).get("variables", []):
                        name = v.get("name", "")
                        if name in PSEUDO_VARIABLES or name in HIDDEN_NAMES or name.startswith("_"):
                            continue
                        if v.get("type") == "module":
                            continue
                        rows.append({"name": name, "type": v.get("type", ""), "value": v.get("value", "")})
                    return rows, "inspectVariables"
            except KernelTimeout:
                raise
            except Exception as exc:
                log.debug("inspectVariables failed, falling back: %s", exc)
        data = await self._summarise(conn, {"op": "list"}, timeout)
        return data.get("variables", []), "subshell" if conn._subshell else "silent_execute"

    async def inspect_variable(self, kernel_id: str, name: str, *, budget: int = 2000, timeout: float = 30.0) -> dict[str, Any]:
        conn = await self.connection(kernel_id)
        return await self._summarise(conn, {"op": "inspect", "name": name, "budget": budget}, timeout)

    async def _summarise(self, conn: KernelConnection, args: dict[str, Any], timeout: float) -> dict[str, Any]:
        text = await conn.evaluate(_summary_expression(args), timeout=timeout)
        try:
            return json.loads(text)
        except ValueError:
            try:
                return json.loads(ast.literal_eval(text))
            except Exception:
                raise RuntimeError(f"unexpected answer from the kernel: {text[:200]}") from None

    # -- scratch execution ---------------------------------------------------------------------
    async def run_code(self, kernel_id: str, code: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Run code (not stored in history or the notebook); collect outputs until idle."""
        conn = await self.connection(kernel_id)
        await conn.ensure_iopub()
        outputs: list[dict[str, Any]] = []
        idle = asyncio.Event()

        def on_iopub(msg: dict[str, Any]) -> None:
            kind = msg.get("msg_type")
            if kind == "status" and msg["content"].get("execution_state") == "idle":
                idle.set()
            elif kind in ("stream", "display_data", "execute_result", "error"):
                outputs.append(output_from_msg(msg))
            elif kind == "clear_output":
                outputs.clear()

        content = {"code": code, "silent": False, "store_history": False, "allow_stdin": False, "stop_on_error": True}
        msg = conn.client.session.msg("execute_request", content)
        mid = msg["header"]["msg_id"]
        conn._iopub[mid] = on_iopub
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        conn._replies[mid] = fut
        async with conn.execute_lock:
            conn.client.shell_channel.send(msg)
            try:
                reply = await asyncio.wait_for(asyncio.shield(fut), timeout)
                await asyncio.wait_for(idle.wait(), 5)
            except asyncio.TimeoutError:
                await self.interrupt(kernel_id)
                try:  # the interrupt ends the run; wait for it so the next run starts clean
                    await asyncio.wait_for(asyncio.shield(fut), 5)
                    await asyncio.wait_for(idle.wait(), 2)
                except asyncio.TimeoutError:
                    pass
                return {"status": "timeout", "outputs": outputs, "timeout": timeout}
            finally:
                conn._replies.pop(mid, None)
                conn.forget_iopub(mid)
        return {"status": reply["content"].get("status"), "outputs": outputs}

    async def interrupt(self, kernel_id: str) -> None:
        try:
            res = self.km.interrupt_kernel(kernel_id)
            if asyncio.iscoroutine(res):
                await res
        except Exception:
            log.exception("interrupting kernel %s failed", kernel_id)


def output_from_msg(msg: dict[str, Any]) -> dict[str, Any]:
    """An nbformat output from an iopub message."""
    import nbformat

    out = nbformat.v4.output_from_msg(msg)
    return dict(out)
