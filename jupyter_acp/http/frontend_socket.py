"""``/jupyter-acp/frontend/ws``: the labextension's end of the tab bridge (``frontend/bridge.py``).

``write`` on resource ``jupyter_acp``, not ``read``: a tab's answers are what the agent reads and believes
(a forged tab must not answer for the notebook). Each socket is bound to its user, and keeps only the rights that user still has: ``write`` is
asked again at each message the tab sends and every ``JupyterACP.socket_recheck_interval`` seconds; a tab whose user
lost it is no longer asked, and its socket is closed (1008, naming the rule; ``socket_rights.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web, websocket

from ..frontend import FrontendBridge, TabClient
from ..protocol.kernel_link import AUTH_RESOURCE
from .socket_rights import RecheckedRights


class FrontendWebSocket(RecheckedRights, ExtensionHandlerMixin, JupyterHandler, websocket.WebSocketHandler):
    """``/jupyter-acp/frontend/ws?clientId=<uuid>``: one per JupyterLab tab."""

    if TYPE_CHECKING:  # pragma: no cover
        # the app (JupyterACP), typed loosely: http/ never imports the app, not even for types
        @property
        def extensionapp(self) -> Any: ...

    auth_resource = AUTH_RESOURCE
    _client: TabClient | None = None

    @property
    def bridge(self) -> FrontendBridge:
        bridge: FrontendBridge = self.extensionapp.tools.services.frontend
        return bridge

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        # write, not read: a tab's answers are what the agent reads and believes
        ok = await ensure_async(self.authorizer.is_authorized(self, self.current_user, "write", AUTH_RESOURCE))
        if not ok:
            raise web.HTTPError(
                403,
                f"the frontend bridge needs 'write' on resource {AUTH_RESOURCE!r}, which the server's Authorizer "
                f"does not give user {getattr(self.current_user, 'username', '?')!r}; ask the server's owner to grant it",
            )
        self._username = str(getattr(self.current_user, "username", "") or "")
        self._client_id = self.get_query_argument("clientId", "") or f"anon-{id(self):x}"
        if len(self._client_id) > 128:
            raise web.HTTPError(400, "clientId is too long")
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: Any, **kwargs: Any) -> None:
        self.set_nodelay(True)
        self._client = self.bridge.connect(self._client_id, self.write_message, self._username)
        self.start_rechecks("write")

    async def on_message(self, message: str | bytes) -> None:
        """A tab's message (focus, an answer), taken only while its user still has ``write``."""
        if self._client is not None and await self.still_allowed("write"):
            self.bridge.on_message(self._client, message)

    def rights_lost(self) -> None:
        if self._client is not None:  # the agent no longer asks this tab
            self.bridge.disconnect(self._client)
            self._client = None

    def on_close(self) -> None:
        self.stop_rechecks()
        if self._client is not None:
            self.bridge.disconnect(self._client)
            self._client = None
