"""The session's WebSocket: its events live (replayed from ``after`` first, in pages) and the operations a client
sends on it (prompt, cancel, permission answers), so a warm turn costs no extra HTTP request.

Apart from ``user_routes.py`` (the REST routes) because a socket has its own life: a replay, a live fan-out, frame
bounds and ordered operations; it answers with the same validation and hub calls as the routes.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web, websocket

from ..acp.v1 import trace_meta
from ..protocol import codec
from ..protocol.kernel_link import AUTH_RESOURCE
from ..sessions.state import HubError, encode
from ..sessions.store_cap import cap_event
from .base import (
    REQUEST_ID_CHARS,
    PermissionBody,
    PromptBody,
    acting,
    allowed,
    current_only,
    http_error,
    request_trace,
    username,
)
from .socket_rights import RecheckedRights

if TYPE_CHECKING:  # the hub (and pydantic, the store, the tools) stays off the server's start
    from ..sessions.hub import NotebookSession, SessionHub

log = logging.getLogger(__name__)

#: largest WebSocket frame of events (one event bigger than this, up to max_event_bytes, goes alone)
FRAME_BYTES = 256 * 1024


class StreamHandler(RecheckedRights, ExtensionHandlerMixin, JupyterHandler, websocket.WebSocketHandler):
    """The same events live, replayed from ``after`` first: a reconnecting client loses nothing.

    Each message from the server is a JSON array of one or more events, in ``seq`` order, or a JSON object: the
    answer to an operation the client sent on this socket (a warm turn costs no extra HTTP request), or, first,
    ``{"history_moved": true, "after": A, "seq": S, "text": ...}`` when the client's ``after`` is past the server's
    last seq S (the store it saw them from is not this one): the client drops what it holds and the replay that
    follows is the server's history from the start.

    - ``{"op": "prompt", "ref": R, "text": ...}`` (or ``"prompt": [blocks]``): as ``POST .../prompt`` (its own
      ``traceparent`` / ``tracestate`` keys, else the socket request's headers, go to the agent as ``_meta``);
    - ``{"op": "cancel", "ref": R}``: as ``POST .../cancel``;
    - ``{"op": "permission", "ref": R, "request_id": ..., "option_id": ...}``: as ``POST .../permissions/{id}``.

    Same validation, same hub calls as the routes, and the Authorizer asked for ``write`` at each operation (the
    socket itself needs only ``read``, asked again every ``JupyterACP.socket_recheck_interval`` seconds: a user who
    lost it is closed out, 1008, ``socket_rights.py``). The answer is ``{"ref": R, "ok": true, ...what the route answers}`` or
    ``{"ref": R, "ok": false, "status": N, "error": "which rule refused, and how to change it"}``; a bad frame is
    answered so and the socket goes on serving. Operations run one after the other, in the order sent.
    """

    if TYPE_CHECKING:  # pragma: no cover
        # the app (JupyterACP), typed loosely: http/ never imports the app, not even for types
        @property
        def extensionapp(self) -> Any: ...

    auth_resource = AUTH_RESOURCE
    _unsubscribe: Any = None
    _current = False

    @property
    def hub(self) -> SessionHub:
        hub: SessionHub = self.extensionapp.hub
        return hub

    async def pre_get(self) -> None:
        authorized_ = await ensure_async(self.authorizer.is_authorized(self, self.current_user, "read", AUTH_RESOURCE))
        if not authorized_:
            raise web.HTTPError(403)

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        try:
            self._session = self.hub.get(kwargs["session_id"])
        except HubError as exc:
            raise http_error(exc) from None
        try:
            self._after = int(self.get_query_argument("after", "0"))
        except ValueError:
            raise web.HTTPError(400, "after is an integer") from None
        self._current = current_only(self)
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: Any, **kwargs: Any) -> None:
        self.set_nodelay(True)  # small frames must not wait for delayed ACKs
        after = self._after
        moved = self.hub.history_moved(self._session, after)
        if moved is not None:
            # the client holds events this server's store never had: it drops them and takes the server's history
            # from the start (what follows is that replay, then live)
            self._send(codec.dumps({"history_moved": True, **moved}))
            after = 0
        replay, self._unsubscribe = self.hub.subscribe(
            self._session,
            after,
            self._deliver,
            current=self._current,
            page_bytes=self.extensionapp.stream_replay_bytes,
        )
        pinned = [e for e in replay if e.get("pinned")]
        if pinned:  # older than the page but still mattering: a frame of their own, first
            self._send_frames(pinned, [encode(e) for e in pinned])
            replay = replay[len(pinned) :]
        if replay:
            # one frame (the page's events and their commas): a second frame of the last few events made the panel
            # draw twice and show the last answer a frame later (bench/panel_history.py)
            page = max(FRAME_BYTES, self.extensionapp.stream_replay_bytes) + len(replay) + 2
            self._send_frames(replay, [encode(e) for e in replay], page)
        self.start_rechecks("read")

    def rights_lost(self) -> None:
        self._drop()  # nothing more is delivered to a user who lost read

    def _deliver(self, events: list[dict[str, Any]], encoded: list[str]) -> None:
        """One frame per batch: a burst of 10,000 chunks costs a handful of frames, not 10,000."""
        self._send_frames(events, encoded)

    def _send_frames(self, events: list[dict[str, Any]], encoded: list[str], most: int = FRAME_BYTES) -> None:
        """Events in frames of at most ``most`` characters (or one event), each event capped as the store keeps
        it."""
        cap = self.extensionapp.max_event_bytes
        frame: list[str] = []
        size = 0
        for event, text in zip(events, encoded, strict=True):
            if cap > 0 and len(text) > cap // 4:
                text = cap_event(event, text, cap)[1]
            if frame and size + len(text) > most:
                self._send("[" + ",".join(frame) + "]")
                frame, size = [], 0
            frame.append(text)
            size += len(text) + 1
        if frame:
            self._send("[" + ",".join(frame) + "]")

    def _send(self, frame: str) -> None:
        try:
            self.write_message(frame)
        except websocket.WebSocketClosedError:
            self._drop()

    def _drop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    @property
    def max_message_size(self) -> int:
        """Tornado closes the socket (1009) past this; below it, ``on_message`` answers an oversized op 413."""
        return 4 * self._op_bytes() + 65536

    def _op_bytes(self) -> int:
        """The largest operation frame answered (as the prompt route bounds its body)."""
        most: int = self.extensionapp.max_prompt_bytes
        return most * 2 + 4096

    async def on_message(self, message: str | bytes) -> None:
        """An operation (prompt, cancel, permission): answered with a frame carrying the request's ``ref``."""
        ref: Any = None
        try:
            if len(message) > self._op_bytes():
                raise web.HTTPError(
                    413, f"operation frame larger than {self._op_bytes()} bytes (JupyterACP.max_prompt_bytes)"
                )
            try:
                frame = codec.loads(message)
            except ValueError:
                raise web.HTTPError(400, 'the frame is not JSON; send an object such as {"op": "cancel"}') from None
            if not isinstance(frame, dict):
                raise web.HTTPError(400, "an operation frame is a JSON object with 'op' (prompt, cancel, permission)")
            ref = frame.pop("ref", None)
            if not (ref is None or (isinstance(ref, str) and len(ref) <= 64) or type(ref) is int):
                ref = None
                raise web.HTTPError(400, "ref is a string of at most 64 characters or an integer")
            op = frame.pop("op", None)
            run = self._ops.get(op) if isinstance(op, str) else None
            if run is None:
                raise web.HTTPError(400, f"unknown op {str(op)[:40]!r}: send one of {', '.join(self._ops)}")
            if not await allowed(self, "write"):
                raise web.HTTPError(
                    403,
                    f"{op} needs write access to jupyter_acp and the Authorizer gives this user read only; "
                    "ask the server's owner for write access (this socket still streams the events)",
                )
            try:
                session = self.hub.get(self._session.id)
                answer = await run(self, session, frame)
            except HubError as exc:
                raise http_error(exc) from None
        except web.HTTPError as exc:
            self._send_answer({"ref": ref, "ok": False, "status": exc.status_code, "error": exc.log_message or ""})
            return
        except Exception as exc:  # an op must never kill the stream
            log.exception("websocket op failed")
            self._send_answer({"ref": ref, "ok": False, "status": 500, "error": f"the server failed: {exc}"})
            return
        self._send_answer({"ref": ref, "ok": True, **answer})

    def _send_answer(self, answer: dict[str, Any]) -> None:
        self._send(codec.dumps(answer))

    async def _op_prompt(self, session: NotebookSession, frame: dict[str, Any]) -> dict[str, Any]:
        # the op's own trace context (``traceparent`` / ``tracestate`` keys, as the headers say them), else the
        # socket's: one socket carries many prompts, each may be a trace of its own
        parent, state = frame.pop("traceparent", None), frame.pop("tracestate", None)
        trace = trace_meta(parent, state) if parent is not None else request_trace(self.request)
        body: PromptBody = _validated(PromptBody, frame)
        try:
            blocks = body.blocks()
        except ValueError as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.extensionapp.check_prompt(blocks)
        turn_id = await self.hub.prompt(session, blocks, user=username(self), trace=trace, actor=acting(self))
        self.hub.store_now()  # an accepted prompt is a stored turn_started
        return {"turn_id": turn_id}

    async def _op_cancel(self, session: NotebookSession, frame: dict[str, Any]) -> dict[str, Any]:
        if frame:
            raise web.HTTPError(400, f"cancel takes no fields besides op and ref (got {', '.join(sorted(frame))})")
        return {"cancelled": await self.hub.cancel(session)}

    async def _op_permission(self, session: NotebookSession, frame: dict[str, Any]) -> dict[str, Any]:
        request_id = frame.pop("request_id", None)
        if not isinstance(request_id, str) or not re.fullmatch(REQUEST_ID_CHARS, request_id):
            raise web.HTTPError(400, "request_id: the permission request's id (letters, digits, _ and -, up to 64)")
        body: PermissionBody = _validated(PermissionBody, frame)
        self.hub.answer_permission(session, request_id, body.option_id, acting(self))
        return {"request_id": request_id, "option_id": body.option_id}

    _ops: dict[str, Any] = {"prompt": _op_prompt, "cancel": _op_cancel, "permission": _op_permission}

    def on_close(self) -> None:
        self.stop_rechecks()
        self._drop()


def _validated(model: Any, data: dict[str, Any]) -> Any:
    """An op's fields as ``model`` (as ``parse_body`` does for a route), or a 400 saying which field and why."""
    from pydantic import ValidationError  # off the server's start (the background build imported it already)

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise web.HTTPError(400, errors) from None
