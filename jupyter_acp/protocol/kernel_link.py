"""How a kernel reaches the server that started it (the ``%acp`` magic's way in): names both ends share.

The server puts ``ENV_URL`` and the kernel's own token (``ENV_TOKEN``, an HMAC of its kernel id under a secret
the server keeps in memory) into each kernel's environment; the magic sends the token in ``HEADER`` and names its
kernel in ``KERNEL_HEADER``. ``<runtime dir>/RUNTIME_PREFIX<pid>.json`` (0600) tells a kernel a server is there,
and holds no secret.  A kernel behind a Jupyter Gateway gets the same pair as ``GATEWAY_ENV_URL`` /
``GATEWAY_ENV_TOKEN``: Kernel Gateway and Enterprise Gateway pass on only the ``KERNEL_*`` variables of a start
request.
"""

from __future__ import annotations

ENV_URL = "JUPYTER_ACP_URL"
ENV_TOKEN = "JUPYTER_ACP_TOKEN"
#: the same pair for a kernel behind a gateway (which forwards only ``KERNEL_*`` variables)
GATEWAY_ENV_URL = "KERNEL_" + ENV_URL
GATEWAY_ENV_TOKEN = "KERNEL_" + ENV_TOKEN
HEADER = "X-Jupyter-ACP-Token"
KERNEL_HEADER = "X-Jupyter-ACP-Kernel"
RUNTIME_PREFIX = "jupyter_acp-"
#: the Authorizer's resource for every route and socket of this extension
AUTH_RESOURCE = "jupyter_acp"
#: longest a kernel route's long poll holds a request (s)
MAX_WAIT = 30.0
