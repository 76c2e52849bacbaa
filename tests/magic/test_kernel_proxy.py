"""The kernel routes are not for requests that came through a proxy.

Kernels reach the server directly (the server's own URL, or ``JupyterACP.kernel_server_url`` for a gateway's
kernels), so a request to ``jupyter-acp/kernel/...`` that a proxy forwarded (JupyterHub's public URL, which marks it
``X-Forwarded-For``) is not a kernel's: it is refused before its token is looked at, naming the rule and the setting
``JupyterACP.kernel_routes_through_proxy`` that allows it where kernels do come through one.  A real server; the
token is a real kernel token (the one kernel id ``nope`` gets), so a refusal is the proxy rule's and nothing else.
"""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_acp.http.kernel_routes import kernel_token

#: what proxies add (JupyterHub's configurable-http-proxy and Traefik: X-Forwarded-*; RFC 7239; nginx set-ups)
PROXY_HEADERS = [
    {"X-Forwarded-For": "203.0.113.7"},
    {"X-Forwarded-Proto": "https"},
    {"X-Forwarded-Host": "hub.example.org"},
    {"Forwarded": "for=203.0.113.7;proto=https"},
    {"X-Real-IP": "203.0.113.7"},
]


def creds(app) -> dict[str, str]:
    # "Authorization": "" keeps pytest-jupyter's server token out: the kernel routes must not need it
    token = kernel_token(app._acp_kernel_secret, "nope")
    return {"X-Jupyter-ACP-Token": token, "X-Jupyter-ACP-Kernel": "nope", "Authorization": ""}


@pytest.mark.parametrize("proxied", PROXY_HEADERS, ids=lambda h: next(iter(h)))
async def test_kernel_routes_refuse_a_request_that_came_through_a_proxy(acp_server, jp_fetch, proxied):
    app = acp_server.web_app.settings["jupyter_acp"]
    direct = await jp_fetch("jupyter-acp", "kernel", "agents", headers=creds(app))
    assert direct.code == 200  # the same request, straight from a kernel
    for route in ("agents", "whoami"):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("jupyter-acp", "kernel", route, headers={**creds(app), **proxied})
        assert err.value.code == 403
        message = json.loads(err.value.response.body)["message"]
        assert next(iter(proxied)) in message and "rule:" in message
        assert "JupyterACP.kernel_routes_through_proxy" in message


class TestAllowed:
    """Where kernels reach the server through a proxy, the setting lets them."""

    @pytest.fixture
    def acp_config(self):
        return {"kernel_routes_through_proxy": True}

    async def test_a_proxied_kernel_request_is_served_when_the_setting_allows_it(self, acp_server, jp_fetch):
        app = acp_server.web_app.settings["jupyter_acp"]
        headers = {**creds(app), "X-Forwarded-For": "10.0.3.9", "X-Forwarded-Proto": "http"}
        resp = await jp_fetch("jupyter-acp", "kernel", "agents", headers=headers)
        assert resp.code == 200 and any(a["name"] == "echo" for a in json.loads(resp.body))
        with pytest.raises(HTTPClientError) as err:  # the kernel's token is still what opens the routes
            await jp_fetch("jupyter-acp", "kernel", "agents", headers={**headers, "X-Jupyter-ACP-Token": "wrong"})
        assert err.value.code == 403 and "wrong jupyter_acp kernel token" in err.value.response.body.decode()
