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

Who may answer.  A tab's answers become what the agent reads ("the cells are ...",
"your insert succeeded"), so the bridge trusts only its own:

* Opening the socket needs ``write`` on resource ``jupyter_acp`` (the Authorizer's word, as for
  prompting): a user who may only ``read`` never becomes a tab, so never answers for anybody.
* Tabs are scoped to their user: each tab records ``current_user.username`` at connect, tabs are keyed
  by (user, clientId) so another user reusing a clientId gets a tab of their own and cannot evict or
  replace the owner's, and :meth:`FrontendBridge.request` takes the user to prefer (``user=``: that
  user's tabs are asked first).  We cannot know a session's "owner" in general (the hub does not record
  who prompted), so the rule is: only users who passed ``write`` at connect time can be picked, the
  given user's tabs first.  In a single-user server that is the server's own user.
* Each pending request is bound to the socket it was sent to: an answer from any other socket is
  ignored (and does not consume the request), and request ids are 128-bit random strings, so answering
  ids blindly gets nowhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class NoTab(Exception):
    """No browser tab can answer for this notebook."""


class TabError(Exception):
    """The tab answered with an error, or not in time."""


@dataclass(eq=False)
class TabClient:
    client_id: str
    send: Any  # callable(str)
    username: str = ""
    focus: str | None = None
    focused_at: float = 0.0
    opened: set[str] = field(default_factory=set)
    connected_at: float = field(default_factory=time.monotonic)

    @property
    def key(self) -> tuple[str, str]:
        return (self.username, self.client_id)


class FrontendBridge:
    def __init__(self) -> None:
        #: tabs by (username, clientId): a clientId is only ever matched within its own user
        self.clients: dict[tuple[str, str], TabClient] = {}
        #: request id (unguessable) -> (the tab it was sent to, its future)
        self._pending: dict[str, tuple[TabClient, asyncio.Future[Any]]] = {}

    # -- connections ---------------------------------------------------------------------------
    def connect(self, client_id: str, send: Any, username: str = "") -> TabClient:
        client = TabClient(client_id, send, username)
        old = self.clients.get(client.key)
        if old is not None:
            self._fail_pending(old, "the tab reconnected")
        self.clients[client.key] = client
        return client

    def disconnect(self, client: TabClient) -> None:
        if self.clients.get(client.key) is client:
            del self.clients[client.key]
        self._fail_pending(client, "the tab closed")

    def _fail_pending(self, client: TabClient, reason: str) -> None:
        for rid, (sent_to, fut) in list(self._pending.items()):
            if sent_to is client:
                self._pending.pop(rid, None)
                if not fut.done():
                    fut.set_exception(TabError(reason))

    def on_message(self, client: TabClient, raw: str | bytes) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            log.debug("frontend %s sent a non-JSON frame", client.client_id)
            return
        if not isinstance(msg, dict):
            return
        method = msg.get("method")
        params: Any = msg.get("params") if isinstance(msg.get("params"), dict) else {}
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
        rid: Any = msg.get("id")
        entry = self._pending.get(rid) if isinstance(rid, str) else None
        if entry is None or entry[0] is not client:
            # not a request of ours, or one sent to another socket: ignored, and the request stays pending
            log.debug(
                "frontend %s (user %r) answered id %r it was not asked: ignored", client.client_id, client.username, rid
            )
            return
        self._pending.pop(rid, None)
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

    def pick(self, path: str | None, user: str | None = None) -> TabClient:
        """The tab to ask: ``user``'s own tabs first (when given), then any tab (all passed ``write``)."""
        if not self.clients:
            raise NoTab("no JupyterLab tab is connected to the server (is the notebook open in a browser?)")
        clients = list(self.clients.values())
        own = [c for c in clients if user is not None and c.username == user]
        groups = [own, clients] if own else [clients]
        if path is not None:
            for group in groups:
                focused = [c for c in group if c.focus == path]
                if focused:
                    return max(focused, key=lambda c: c.focused_at)
                opened = [c for c in group if path in c.opened]
                if opened:
                    return max(opened, key=lambda c: c.focused_at)
        return max(groups[0], key=lambda c: (c.focused_at, c.connected_at))

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        path: str | None = None,
        timeout: float = 5.0,
        user: str | None = None,
    ) -> Any:
        client = self.pick(path, user)
        rid = secrets.token_urlsafe(16)  # 128 bits: an id cannot be guessed by another socket
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (client, fut)
        try:
            client.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        except Exception as exc:
            self._pending.pop(rid, None)
            self.disconnect(client)
            raise TabError(f"the tab could not be reached: {exc}") from None
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise TabError(f"the browser tab did not answer {method} within {timeout:g} s") from None
        finally:
            self._pending.pop(rid, None)
