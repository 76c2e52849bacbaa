"""How the server reaches a kernel behind a Jupyter Gateway: recognising one, and the client whose
WebSocket carries the gateway's auth headers and TLS settings.

Its own module because it is the one place that knows jupyter_server's gateway classes; the channel
routing (``channels``) and the requests (``client``) are the same for local and gateway kernels.
"""

from __future__ import annotations

import threading
from typing import Any


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
