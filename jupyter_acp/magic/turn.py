"""One prompt: sent to the backend, then its events followed into the cell until the turn ends.

The loop is the same for both backends (``server.ServerBackend`` long-polls the server, ``local.LocalBackend``
waits on its own event list). ⏹ (SIGINT) cancels the turn; ``--timeout`` too; a server lost mid-answer keeps
what arrived on screen.
"""

from __future__ import annotations

import time
from typing import Any

from .errors import AcpError, ServerGone
from .interpolate import interpolate
from .options import FORMAT_INSTRUCTIONS, Options
from .view import TurnView, ask_permission


def _cell_id(magics: Any) -> str | None:
    kernel = getattr(magics.shell, "kernel", None)
    try:
        parent = kernel.get_parent("shell") if kernel is not None else None
    except Exception:
        parent = None
    return ((parent or {}).get("metadata") or {}).get("cellId")


def run_prompt(magics: Any, text: str, opts: Options, interpolate_: bool = True) -> None:
    if interpolate_:
        text = interpolate(text, magics.shell.user_ns)
    agent = magics.agent_for(opts.agent)
    extra: list[dict[str, Any]] = []
    instruction = FORMAT_INSTRUCTIONS.get(opts.format)
    if instruction:
        extra.append(
            {
                "type": "resource",
                "resource": {
                    "uri": f"jupyter-acp:instructions/format/{opts.format}",
                    "mimeType": "text/plain",
                    "text": instruction,
                },
            }
        )
    context = None
    if opts.context == "cells-above":
        context = {"kind": "cells-above", "cell_id": _cell_id(magics)}
    elif opts.context == "selection":
        raise AcpError("--context selection is not available from the magic yet; use cells-above or none")
    res = magics.backend_call(magics.backend.prompt, agent, opts.new, text, extra, context)
    session, turn_id, after = res["session"], res["turn_id"], res["after"]
    meta = {
        "jupyter_acp": {
            "agent": session["agent"],
            "session_id": session["id"],
            "turn_id": turn_id,
            "notebook": session.get("notebook"),
            "format": opts.format,
        }
    }
    view = TurnView(magics.shell, opts.format, meta)
    _follow(magics, session["id"], turn_id, after, view, opts.timeout)


def _follow(magics: Any, sid: str, turn_id: str, after: int, view: TurnView, timeout: float | None) -> None:
    backend = magics.backend
    started = time.monotonic()
    cancelling: float | None = None
    footer: str | None = None
    asked: set[str] = set()
    seen = [after]  # the last seq shown, advanced event by event (an interrupt mid-batch repeats nothing)
    while True:
        now = time.monotonic()
        wait = magics.poll_wait
        if timeout is not None and cancelling is None:
            left = timeout - (now - started)
            if left <= 0:
                cancelling = now
                footer = f"timed out after {timeout:g} s (--timeout); the turn was cancelled"
                _safe_cancel(backend, sid)
                continue
            wait = min(wait, max(left, 0.05))
        if cancelling is not None:
            if now - cancelling > 15:
                view.finish(footer or "cancelled; the agent did not confirm")
                return
            wait = 1.0
        # ⏹ (SIGINT) may land while we wait for events or while we show them: either way it cancels
        try:
            try:
                res = backend.events(sid, seen[0], wait)
            except ServerGone as exc:
                view.finish(f"the Jupyter server went away mid-answer; what arrived is shown above ({exc})")
                raise ServerGone(f"the Jupyter server went away mid-answer: {exc}") from None
            moved = res.get("history_moved")
            if moved:  # the server's history is not the one this turn's events were in (its store was replaced)
                view.finish(
                    f"the server's history of this conversation moved ({moved.get('text') or 'its store changed'}); "
                    "this turn is not in it any more. What arrived is shown above; %acp history shows the server's."
                )
                return
            if _show_events(magics, backend, sid, turn_id, res["events"], view, asked, cancelling, footer, seen):
                return
        except KeyboardInterrupt:
            if cancelling is not None:
                view.finish("stopped waiting; the turn may still be running (%acp cancel)")
                return
            cancelling = time.monotonic()
            footer = "cancelled"
            _safe_cancel(backend, sid)


def _show_events(
    magics: Any,
    backend: Any,
    sid: str,
    turn_id: str,
    events: list[dict[str, Any]],
    view: TurnView,
    asked: set[str],
    cancelling: float | None,
    footer: str | None,
    seen: list[int],
) -> bool:
    """Feed one batch of events to the view; True once the turn has ended (and the view finished)."""
    for event in events:
        seen[0] = max(seen[0], event["seq"])
        if event.get("type") == "turn_started" and event.get("turn_id") != turn_id:
            continue
        view.feed(event)
        if event.get("type") == "permission_request" and event.get("turn_id") == turn_id:
            pending = event["request_id"]
            if pending not in asked:
                asked.add(pending)
                ask_permission(magics.shell, backend, sid, event, view)
        if event.get("type") == "turn_ended" and event.get("turn_id") == turn_id:
            view.render(force=True)
            if event.get("error") and not (cancelling and event.get("stop_reason") == "cancelled"):
                msg = event["error"]
                view.finish(f"error: {msg}")
                kind = event.get("error_kind")
                prefix = "the agent needs a login" if kind == "needs_login" else "the turn failed"
                raise AcpError(f"{prefix}: {msg}")
            stop = event.get("stop_reason")
            if cancelling is not None or stop == "cancelled":
                view.finish(footer or "cancelled")
            elif stop not in (None, "end_turn"):
                view.finish(f"the agent stopped: {stop}")
            else:
                view.finish()
            return True
    view.render()
    return False


def _safe_cancel(backend: Any, sid: str) -> None:
    try:
        backend.cancel(sid)
    except AcpError:
        pass
