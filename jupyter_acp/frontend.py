"""The bridge to open JupyterLab tabs: a WebSocket the labextension opens, carrying JSON-RPC.

The selection lives in the browser, so the server asks for it (``getSelection``); without RTC, edits
to an open notebook go through its tab (``getCells``, ``applyEdit``) so they do not fight the tab's
own copy.  The tab tells us what it shows:

  tab -> server  {"method": "focus", "params": {"path": "sub/nb.ipynb"}}          (tab or cell focus)
  tab -> server  {"method": "opened"|"closed", "params": {"path": ...}}           (optional)
  server -> tab  {"jsonrpc": "2.0", "id": 7, "method": "getSelection", "params": {"path": ...}}
  tab -> server  {"jsonrpc": "2.0", "id": 7, "result": {...}}  or  {"id": 7, "error": {"message": ...}}

A request goes to the tab that most recently reported focus on that notebook; if none did, to the
tab that most recently reported any focus (focus paths go stale after renames), and the answer's own
``path`` is checked.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web, websocket

log = logging.getLogger(__name__)

AUTH_RESOURCE = "jupyter_acp"


class NoTab(Exception):
    """No browser tab can answer for this notebook."""


class TabError(Exception):
    """The tab answered with an error, or not in time."""


@dataclass
class TabClient:
    client_id: str
    send: Any  # callable(str)
    focus: str | None = None
    focused_at: float = 0.0
    opened: set[str] = field(default_factory=set)
    connected_at: float = field(default_factory=time.monotonic)


class FrontendBridge:
    def __init__(self) -> None:
        self.clients: dict[str, TabClient] = {}
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._ids = itertools.count(1)

    # -- connections ---------------------------------------------------------------------------
    def connect(self, client_id: str, send: Any) -> TabClient:
        old = self.clients.get(client_id)
        if old is not None:
            self._fail_pending(client_id, "the tab reconnected")
        client = TabClient(client_id, send)
        self.clients[client_id] = client
        return client

    def disconnect(self, client_id: str, client: TabClient | None = None) -> None:
        current = self.clients.get(client_id)
        if current is not None and (client is None or current is client):
            del self.clients[client_id]
            self._fail_pending(client_id, "the tab closed")

    def _fail_pending(self, client_id: str, reason: str) -> None:
        for rid, (cid, fut) in list(self._pending.items()):
            if cid == client_id and not fut.done():
                fut.set_exception(TabError(reason))
                self._pending.pop(rid, None)

    def on_message(self, client: TabClient, raw: str | bytes) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            log.debug("frontend %s sent a non-JSON frame", client.client_id)
            return
        if not isinstance(msg, dict):
            return
        method = msg.get("method")
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        if isinstance(method, str):
            path = params.get("path")
            if method == "focus" and isinstance(path, str):
                client.focus = path
                client.focused_at = time.monotonic()
                client.opened.add(path)
            elif method == "opened" and isinstance(path, str):
                client.opened.add(path)
            elif method == "closed" and isinstance(path, str):
                client.opened.discard(path)
                if client.focus == path:
                    client.focus = None
            return
        rid = msg.get("id")
        entry = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if entry is None:
            return
        _, fut = entry
        if fut.done():
            return
        if "error" in msg:
            err = msg["error"]
            fut.set_exception(TabError(err.get("message") if isinstance(err, dict) else str(err)))
        else:
            fut.set_result(msg.get("result"))

    # -- choosing a tab ------------------------------------------------------------------------
    def has_tab(self, path: str) -> bool:
        return any(c.focus == path or path in c.opened for c in self.clients.values())

    def pick(self, path: str | None) -> TabClient:
        if not self.clients:
            raise NoTab("no JupyterLab tab is connected to the server (is the notebook open in a browser?)")
        clients = list(self.clients.values())
        if path is not None:
            focused = [c for c in clients if c.focus == path]
            if focused:
                return max(focused, key=lambda c: c.focused_at)
            opened = [c for c in clients if path in c.opened]
            if opened:
                return max(opened, key=lambda c: c.focused_at)
        return max(clients, key=lambda c: (c.focused_at, c.connected_at))

    async def request(self, method: str, params: dict[str, Any], *, path: str | None = None, timeout: float = 5.0) -> Any:
        client = self.pick(path)
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (client.client_id, fut)
        try:
            client.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        except Exception as exc:
            self._pending.pop(rid, None)
            self.disconnect(client.client_id, client)
            raise TabError(f"the tab could not be reached: {exc}") from None
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise TabError(f"the browser tab did not answer {method} within {timeout:g} s") from None
        finally:
            self._pending.pop(rid, None)


class FrontendWebSocket(ExtensionHandlerMixin, JupyterHandler, websocket.WebSocketHandler):
    """``/jupyter-acp/frontend/ws?clientId=<uuid>``: one per JupyterLab tab."""

    auth_resource = AUTH_RESOURCE
    _client: TabClient | None = None

    @property
    def bridge(self) -> FrontendBridge:
        return self.extensionapp.tools.services.frontend

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        ok = await ensure_async(self.authorizer.is_authorized(self, self.current_user, "read", AUTH_RESOURCE))
        if not ok:
            raise web.HTTPError(403)
        self._client_id = self.get_query_argument("clientId", "") or f"anon-{id(self):x}"
        if len(self._client_id) > 128:
            raise web.HTTPError(400, "clientId is too long")
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.set_nodelay(True)
        self._client = self.bridge.connect(self._client_id, self.write_message)

    def on_message(self, message: str | bytes) -> None:
        if self._client is not None:
            self.bridge.on_message(self._client, message)

    def on_close(self) -> None:
        if self._client is not None:
            self.bridge.disconnect(self._client_id, self._client)
            self._client = None
