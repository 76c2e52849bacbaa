"""The extension's start off the event loop: built in a thread at load, finished on the loop, awaited by requests.

``Background`` runs ``prepare`` (the heavy imports and the blocking I/O: pydantic, the store's SQLite file, ...) in a
thread started when the extension loads, then ``finish`` on the server's event loop (the objects that belong to the
loop: the hub, the tool surface). The thread waits until the loop runs: the server's own start (the other extensions,
the HTTP server) does not share the GIL with it, only the loop does (which is idle but for the first requests). A request that needs them awaits ``ready()``: an asyncio future set from the loop,
so the loop keeps serving everything else meanwhile. ``gated`` wraps every route's handler class so that it waits
(after authentication) and, if the start failed, answers 503 with the reason and a Retry-After.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

from tornado import web

_UNSET: Any = object()


class StartupError(RuntimeError):
    """The extension is not (or not yet) started; ``retry_after``: seconds a client should wait before it retries."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class Background:
    """``prepare()`` in a thread, then ``finish(prepared)`` on the loop; ``ready()`` awaits both."""

    def __init__(
        self,
        log: Any,
        io_loop: Any,
        prepare: Callable[[], Any],
        finish: Callable[[Any], Any],
        wait: Callable[[], float],
        discard: Callable[[Any], None] = lambda prepared: None,
    ) -> None:
        self.log = log
        self.io_loop = io_loop
        self._prepare = prepare
        self._finish = finish
        self._wait = wait
        self._discard = discard
        self._finishing = False
        #: set once the loop runs (or when someone needs the result now): the thread starts its work then
        self._go = threading.Event()
        self.prepared: Any = _UNSET
        self.value: Any = _UNSET
        #: why the start failed (the exception's type and words), or None
        self.error: str | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._thread = threading.Thread(target=self._run, name="jupyter_acp-start", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self.io_loop.add_callback(self._go.set)  # runs once the server's loop does

    @property
    def done(self) -> bool:
        return self.value is not _UNSET or self.error is not None

    def _run(self) -> None:
        self._go.wait()
        try:
            prepared = self._prepare()
        except BaseException as exc:  # reported (with its traceback) by finish, on the loop
            prepared = _Failed(exc)
        self.prepared = prepared
        try:
            self.io_loop.add_callback(self.finish)  # thread-safe: runs on the server's loop
        except RuntimeError:  # the loop is closed (the server stopped meanwhile): nobody will use it
            if not isinstance(prepared, _Failed):
                self._discard(prepared)

    def finish(self) -> None:
        """On the loop (or in ``require``): build what belongs to the loop, then wake every waiting request."""
        if self.done or self.prepared is _UNSET:
            return
        if self._finishing:  # asked for by the very code that builds it
            raise StartupError("the jupyter_acp extension is being built; retry in a moment", retry_after=1)
        self._finishing = True
        try:
            if isinstance(self.prepared, _Failed):
                raise self.prepared.exc
            self.value = self._finish(self.prepared)
        except BaseException as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.log.error(
                "jupyter_acp could not start (its routes answer 503 until the server restarts): %s",
                self.error,
                exc_info=(type(exc), exc, exc.__traceback__),
            )
        self.prepared = None  # nothing kept alive twice
        self._finishing = False
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def failure(self) -> StartupError:
        return StartupError(
            f"the jupyter_acp extension could not start ({self.error}); the server log has the details. "
            "Fix the cause (the message says what failed) and restart the Jupyter server.",
            retry_after=60,
        )

    def require(self) -> Any:
        """The built value now, blocking until the thread is done if it is not yet (code outside the routes)."""
        if not self.done:
            self._go.set()  # the loop may be the caller: do not wait for it to turn
            self._thread.join()
            self.finish()
        if self.error is not None:
            raise self.failure()
        return self.value

    async def ready(self) -> Any:
        """The built value, awaited without blocking the loop (``StartupError`` if it failed or takes too long)."""
        if not self.done:
            if self.prepared is not _UNSET:  # the thread is done and its callback not yet run
                self.finish()
            else:
                fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(fut)
                wait = self._wait()
                try:
                    await asyncio.wait_for(asyncio.shield(fut), wait)
                except TimeoutError:
                    raise StartupError(
                        f"the jupyter_acp extension is still starting after {wait:g} s "
                        "(JupyterACP.startup_wait); retry in a few seconds",
                        retry_after=5,
                    ) from None
        if self.error is not None:
            raise self.failure()
        return self.value


def _may_see_reason(handler: Any) -> bool:
    """The failure's words go to a logged-in user or a kernel with its own token, not to anyone who asks."""
    if handler.current_user:
        return True
    check = getattr(handler, "check_secret", None)
    if check is None:
        return False
    try:
        check()
    except web.HTTPError:
        return False
    return True


def gated(handler_class: type, background: Callable[[Any], Background]) -> type:
    """``handler_class`` whose requests wait for ``background(handler)`` after authentication (503 if it failed)."""

    class Gated(handler_class):  # type: ignore[valid-type,misc]
        async def prepare(self, *args: Any, **kwargs: Any) -> None:
            res = super().prepare(*args, **kwargs)
            if res is not None:
                await res
            if self._finished:
                return
            try:
                await background(self).ready()
            except StartupError as exc:
                message = (
                    str(exc)
                    if _may_see_reason(self)
                    else (
                        "the jupyter_acp extension is not available (the server log says why); log in to see the reason"
                    )
                )
                self.clear()
                self.set_status(503)
                self.set_header("Retry-After", str(exc.retry_after))
                self.set_header("Content-Type", "application/json")
                self.finish(json.dumps({"message": message, "reason": "Service Unavailable"}))

    Gated.__name__ = handler_class.__name__
    Gated.__qualname__ = handler_class.__qualname__
    Gated.__module__ = handler_class.__module__
    Gated.__doc__ = handler_class.__doc__
    return Gated
