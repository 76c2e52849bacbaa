"""The kernel's way in (``%acp``): server URL and a per-kernel secret handed to kernels.

How a kernel reaches the session hub (see ``docs`` and ``../shared/reference/jupyter-internals.md`` §7):

* At start (the port is final) the extension draws a random 256-bit server secret that lives only in
  this process's memory: never in ``os.environ``, on disk, or any child's environment.
* Each kernel gets its **own** secret, ``HMAC-SHA256(server secret, kernel id)``: the extension wraps
  the kernel manager's ``start_kernel`` (:func:`hook_kernel_manager`) to choose the kernel id up front and
  pass ``env`` = a full copy of the environment the kernel would have had, plus ``JUPYTER_ACP_URL`` and
  ``JUPYTER_ACP_TOKEN`` (jupyter_client's provisioner uses a given ``env`` *instead of* ``os.environ``,
  hence the full copy).  It works for both ``api/sessions`` (which passes its own env) and
  ``api/kernels`` (which passes none).  jupyter_client keeps the launch arguments for restarts, and a
  restarted kernel keeps its id, so it keeps its token.
* A kernel behind a Jupyter Gateway (``GatewayClient.url``) gets its environment only through the gateway:
  jupyter_server's ``GatewayKernelManager`` sends the start request's ``KERNEL_*`` variables (and
  ``GatewayClient.allowed_envs``) in the request body, and Kernel Gateway / Enterprise Gateway pass on
  ``KERNEL_*`` names only.  So it gets the pair as ``KERNEL_JUPYTER_ACP_URL`` / ``KERNEL_JUPYTER_ACP_TOKEN``
  (:func:`hook_gateway_manager`).  Its id is the gateway's to choose and known only from the start answer,
  so its token cannot be an HMAC of it: a random 256-bit token is drawn for that one start request and
  registered for the kernel id the gateway answers (in this process's memory, dropped with the server
  secret; :func:`kernel_token` answers it for that id).  It travels only in that kernel's start request
  (to the gateway the admin configured), never in ``os.environ``, so no other kernel's start request
  carries it; a kernel started on the gateway by anyone else gets nothing.  The URL is
  ``c.JupyterACP.kernel_server_url`` when set (the address the kernel hosts can reach), else the server's own.
* A kernel names itself (``X-Jupyter-ACP-Kernel``, its id from its connection file name) and shows its
  token; the server recomputes the HMAC for that id and compares in constant time.  Every route then
  acts only for that kernel: ``whoami``/``session``/``prompt`` for the notebook(s) whose Jupyter session
  names the kernel (asked at call time, so renames and kernel switches follow), and the session routes
  (events, cancel, permission answers) only on sessions of those notebooks.  A kernel that names another
  kernel's id, or another notebook's session, is refused (403) with the rule that refused it.
* The runtime file ``<runtime dir>/jupyter_acp-<server pid>.json`` (mode 0600) holds **no secret**: the
  URL, pid, base URL and root dir only.  Any process of the user can read that file (every kernel can),
  so whatever secret it held would be a secret for every kernel, which is what this design removes.  It
  tells the magic that a jupyter_acp server is its parent, so a kernel that lacks its token (started
  before the extension, or by a provisioner that drops the environment) can say "restart the kernel
  from Jupyter" instead of "no server found".  The magic still accepts a token in that file, which only
  older servers wrote.
* What this does and does not promise: a kernel's token opens its own notebook's session and nothing
  else, so a kernel that is told, or guesses, another kernel's id gets nowhere.  It is not a wall
  between processes of the same OS user (the threat model trusts the server's owner; code in a kernel
  runs as that owner and can read ``/proc/<pid>/environ`` of that owner's other processes).
* The secret is **not** the server token: it opens only the routes below, and agent subprocesses never
  see it (``acp/process.py`` drops ``JUPYTER_ACP_*`` secrets).
* The routes are ``@allow_unauthenticated`` for jupyter_server's login machinery and check the secret
  themselves with ``hmac.compare_digest``; XSRF does not apply (no cookies are involved).
* Streaming is a long poll of the session's events (``events?after=SEQ&wait=S``): each request answers
  as soon as one event is there.  A blocking ``urllib`` call from the kernel's main thread is all the magic
  needs, a dropped connection loses nothing (the next poll resumes from the last seq), and no WebSocket
  client has to live inside the kernel.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from typing import Any

from jupyter_core.utils import ensure_async

from ..protocol.kernel_link import ENV_TOKEN, ENV_URL, GATEWAY_ENV_TOKEN, GATEWAY_ENV_URL, RUNTIME_PREFIX

#: the extension app (``JupyterACP``), typed loosely: the routes never import the app
JupyterACP = Any


def runtime_file(app: JupyterACP) -> str:
    runtime_dir = getattr(app.serverapp, "runtime_dir", None)
    if not runtime_dir:
        from jupyter_core.paths import jupyter_runtime_dir

        runtime_dir = jupyter_runtime_dir()
    return os.path.join(runtime_dir, f"{RUNTIME_PREFIX}{os.getpid()}.json")


#: tokens of the gateway kernels this server started, by server secret, then kernel id (see the module's doc)
_gateway_tokens: dict[bytes, dict[str, str]] = {}


def kernel_token(secret: bytes, kernel_id: str) -> str:
    """The kernel's own secret: the token drawn for it if it is a gateway kernel this server started, else
    HMAC-SHA256 of its id under the server secret (hex)."""
    drawn = _gateway_tokens.get(secret, {}).get(kernel_id)
    if drawn is not None:
        return drawn
    return hmac.new(secret, kernel_id.encode(), hashlib.sha256).hexdigest()


def kernel_url(app: JupyterACP) -> str:
    """The server's URL as its kernels reach it: ``c.JupyterACP.kernel_server_url``, else its own."""
    url = (getattr(app, "kernel_server_url", "") or "").strip() or app.serverapp.connection_url
    return url if url.endswith("/") else url + "/"


def start(app: JupyterACP) -> None:
    """Called once the server's URL is final: a fresh server secret, kernels hooked, the runtime file."""
    secret = secrets.token_bytes(32)
    url = kernel_url(app)
    app._acp_kernel_secret = secret
    app._acp_kernel_url = url
    # a token (or URL) inherited from elsewhere (this server started from another server's kernel)
    # is no business of our kernels: each gets its own below
    # (the KERNEL_* spelling too: a gateway start request copies every KERNEL_* variable of os.environ)
    for name in (ENV_TOKEN, ENV_URL, GATEWAY_ENV_TOKEN, GATEWAY_ENV_URL):
        os.environ.pop(name, None)
    hook_kernel_manager(app)
    info = {
        "url": url,
        "pid": os.getpid(),
        "base_url": app.serverapp.base_url,
        "root_dir": app.serverapp.root_dir,
        "kernel_token": f"each kernel's own, in its environment ({ENV_TOKEN}); restart a kernel that lacks it",
    }
    path = runtime_file(app)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            os.fchmod(fh.fileno(), 0o600)
            json.dump(info, fh)
        app._acp_runtime_file = path
    except OSError as exc:
        app.log.warning("jupyter_acp: could not write %s (%s); kernels rely on their environment", path, exc)
    app.log.info("jupyter_acp: kernels reach the agent sessions at %s (%%load_ext jupyter_acp)", url)


def hook_kernel_manager(app: JupyterACP) -> None:
    """Give every kernel the server starts its own token, in the environment it is started with."""
    km = getattr(app.serverapp, "kernel_manager", None)
    if km is None or getattr(km, "_acp_hooked", False):
        return
    try:
        from jupyter_server.gateway.managers import GatewayMappingKernelManager
    except Exception:  # pragma: no cover - very old servers
        GatewayMappingKernelManager = ()  # type: ignore[assignment,misc]
    if isinstance(km, GatewayMappingKernelManager):
        hook_gateway_manager(app, km)
        return
    original = km.start_kernel

    async def start_kernel(*args: Any, kernel_id: str | None = None, path: str | None = None, **kwargs: Any) -> Any:
        secret = getattr(app, "_acp_kernel_secret", None)
        if secret and (kernel_id is None or kernel_id not in km):
            if kernel_id is None:
                kernel_id = km.new_kernel_id(**kwargs)
            base = kwargs.get("env")
            env = dict(base) if isinstance(base, dict) else dict(os.environ)
            env[ENV_URL] = app._acp_kernel_url
            env[ENV_TOKEN] = kernel_token(secret, kernel_id)
            kwargs["env"] = env
        return await ensure_async(original(*args, kernel_id=kernel_id, path=path, **kwargs))

    km.start_kernel = start_kernel
    km._acp_hooked = True
    app._acp_kernel_hook = (km, start_kernel)


class RedactKernelTokens(logging.Filter):
    """jupyter_server logs a gateway start request's arguments at INFO, ``env`` included: the kernel's token
    is cut out of such records (the value of any ``*JUPYTER_ACP_TOKEN`` name)."""

    PATTERN = re.compile(r"(JUPYTER_ACP_TOKEN['\"]?\s*[:=]\s*['\"]?)[0-9A-Za-z_\-]{16,}")

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:
            return True
        if "JUPYTER_ACP_TOKEN" in text:
            record.msg, record.args = self.PATTERN.sub(r"\1[redacted]", text), None
        return True


def hook_gateway_manager(app: JupyterACP, km: Any) -> None:
    """Give every kernel the server starts behind a gateway a token of its own, as ``KERNEL_*`` variables of its
    start request, registered for the id the gateway answers."""
    original = km.start_kernel

    async def start_kernel(*args: Any, kernel_id: str | None = None, path: str | None = None, **kwargs: Any) -> Any:
        secret = getattr(app, "_acp_kernel_secret", None)
        if not secret or kernel_id is not None:
            # an existing gateway kernel (the request names its id): it keeps what it was started with
            return await ensure_async(original(*args, kernel_id=kernel_id, path=path, **kwargs))
        token = secrets.token_hex(32)
        base = kwargs.get("env")
        env = dict(base) if isinstance(base, dict) else {}
        env[GATEWAY_ENV_URL] = app._acp_kernel_url
        env[GATEWAY_ENV_TOKEN] = token
        kwargs["env"] = env
        started = await ensure_async(original(*args, kernel_id=None, path=path, **kwargs))
        tokens = _gateway_tokens.setdefault(secret, {})
        for gone in [k for k in tokens if k not in km]:  # kernels shut down since
            del tokens[gone]
        tokens[str(started)] = token
        return started

    km.start_kernel = start_kernel
    km._acp_hooked = True
    app._acp_kernel_hook = (km, start_kernel)
    log = getattr(km, "log", None)
    if isinstance(log, logging.Logger) and not any(isinstance(f, RedactKernelTokens) for f in log.filters):
        log.addFilter(RedactKernelTokens())
    app.log.info(
        "jupyter_acp: gateway kernels get %s and their own token (%s); set c.JupyterACP.kernel_server_url "
        "to the address the gateway's kernels can reach",
        GATEWAY_ENV_URL,
        GATEWAY_ENV_TOKEN,
    )


def unhook_kernel_manager(app: JupyterACP) -> None:
    km, hook = getattr(app, "_acp_kernel_hook", (None, None))
    if km is not None and km.__dict__.get("start_kernel") is hook:
        del km.start_kernel
        km._acp_hooked = False
    app._acp_kernel_hook = (None, None)


def stop(app: JupyterACP) -> None:
    """Called at server stop: the secret dies with the server."""
    unhook_kernel_manager(app)
    path = getattr(app, "_acp_runtime_file", None)
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)
    secret = getattr(app, "_acp_kernel_secret", None)
    if secret:
        _gateway_tokens.pop(secret, None)
    app._acp_kernel_secret = None
