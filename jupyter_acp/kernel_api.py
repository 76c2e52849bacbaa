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
  restarted kernel keeps its id, so it keeps its token.  Gateway kernels are not hooked (the gateway
  chooses their ids; the magic then runs its agent locally and says so).
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

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import secrets
from typing import Any

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from .http.user_routes import REQUEST_ID, SESSION_ID
from .protocol.kernel_link import ENV_TOKEN, ENV_URL, HEADER, KERNEL_HEADER, MAX_WAIT, RUNTIME_PREFIX
from .sessions.hub import HubError, NotebookSession, SessionHub

#: the extension app (``JupyterACP``), typed loosely: the routes never import the app
JupyterACP = Any

#: characters of notebook context sent with ``--context cells-above``
CONTEXT_CHARS = 20_000


def runtime_file(app: JupyterACP) -> str:
    runtime_dir = getattr(app.serverapp, "runtime_dir", None)
    if not runtime_dir:
        from jupyter_core.paths import jupyter_runtime_dir

        runtime_dir = jupyter_runtime_dir()
    return os.path.join(runtime_dir, f"{RUNTIME_PREFIX}{os.getpid()}.json")


def kernel_token(secret: bytes, kernel_id: str) -> str:
    """The kernel's own secret: HMAC-SHA256 of its id under the server secret (hex)."""
    return hmac.new(secret, kernel_id.encode(), hashlib.sha256).hexdigest()


def start(app: JupyterACP) -> None:
    """Called once the server's URL is final: a fresh server secret, kernels hooked, the runtime file."""
    secret = secrets.token_bytes(32)
    url = app.serverapp.connection_url
    app._acp_kernel_secret = secret  # type: ignore[attr-defined]
    app._acp_kernel_url = url  # type: ignore[attr-defined]
    # a token (or URL) inherited from elsewhere (this server started from another server's kernel)
    # is no business of our kernels: each gets its own below
    os.environ.pop(ENV_TOKEN, None)
    os.environ.pop(ENV_URL, None)
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
        app._acp_runtime_file = path  # type: ignore[attr-defined]
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
        app.log.info("jupyter_acp: gateway kernels get no kernel token; %%acp runs its agent inside them")
        return
    original = km.start_kernel

    async def start_kernel(*args: Any, kernel_id: str | None = None, path: str | None = None, **kwargs: Any) -> Any:
        secret = getattr(app, "_acp_kernel_secret", None)
        if secret and (kernel_id is None or kernel_id not in km):
            if kernel_id is None:
                kernel_id = km.new_kernel_id(**kwargs)
            base = kwargs.get("env")
            env = dict(base) if isinstance(base, dict) else dict(os.environ)
            env[ENV_URL] = app._acp_kernel_url  # type: ignore[attr-defined]
            env[ENV_TOKEN] = kernel_token(secret, kernel_id)
            kwargs["env"] = env
        return await _maybe_await(original(*args, kernel_id=kernel_id, path=path, **kwargs))

    km.start_kernel = start_kernel
    km._acp_hooked = True
    app._acp_kernel_hook = (km, start_kernel)  # type: ignore[attr-defined]


def unhook_kernel_manager(app: JupyterACP) -> None:
    km, hook = getattr(app, "_acp_kernel_hook", (None, None))
    if km is not None and km.__dict__.get("start_kernel") is hook:
        del km.start_kernel
        km._acp_hooked = False
    app._acp_kernel_hook = (None, None)  # type: ignore[attr-defined]


def stop(app: JupyterACP) -> None:
    """Called at server stop: the secret dies with the server."""
    unhook_kernel_manager(app)
    path = getattr(app, "_acp_runtime_file", None)
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)
    app._acp_kernel_secret = None  # type: ignore[attr-defined]


# -- handlers -------------------------------------------------------------------------------------
class KernelHandler(ExtensionHandlerMixin, APIHandler):
    """Base of the kernel routes: the calling kernel's own token, never a login."""

    #: the calling kernel's id, set by :meth:`check_secret` once its token matched
    _caller: str = ""

    def check_xsrf_cookie(self) -> None:
        """No cookies are involved: the secret travels in a header a browser never sends by itself."""
        return

    @property
    def hub(self) -> SessionHub:
        return self.extensionapp.hub

    def check_secret(self) -> str:
        """The calling kernel's id, once its token is checked against that id (403 otherwise)."""
        secret = getattr(self.extensionapp, "_acp_kernel_secret", None)
        if not secret:  # not started: nobody can hold a token, so refuse like a wrong one
            raise web.HTTPError(403, "the jupyter_acp kernel API is not started: no kernel secret exists")
        given = self.request.headers.get(HEADER, "")
        auth = self.request.headers.get("Authorization", "")
        if not given and auth.lower().startswith("token "):
            given = auth[6:].strip()
        kernel_id = self.request.headers.get(KERNEL_HEADER, "") or self.get_query_argument("kernel_id", "")
        if not kernel_id and self.request.body:
            with contextlib.suppress(ValueError, AttributeError):
                kernel_id = json.loads(self.request.body).get("kernel_id") or ""
        if not given:
            raise web.HTTPError(
                403, f"missing jupyter_acp kernel token: send the kernel's {ENV_TOKEN} in the {HEADER} header"
            )
        if not isinstance(kernel_id, str) or not kernel_id or len(kernel_id) > 256:
            raise web.HTTPError(
                403,
                f"the kernel API needs the calling kernel's id (header {KERNEL_HEADER}) with that kernel's own token",
            )
        if not hmac.compare_digest(given.encode(), kernel_token(secret, kernel_id).encode()):
            raise web.HTTPError(
                403,
                f"wrong jupyter_acp kernel token for kernel {kernel_id}: each kernel's token ({ENV_TOKEN} in its "
                "environment) opens only that kernel's notebook; restart the kernel from Jupyter if it lacks one",
            )
        self._caller = kernel_id
        return kernel_id

    def same_kernel(self, named: Any) -> str:
        """The kernel a request names must be the caller: a token acts only for its own kernel."""
        caller = self._caller
        if named not in (None, "") and named != caller:
            raise web.HTTPError(
                403,
                f"this token is kernel {caller}'s; it cannot act for kernel {named} (a kernel acts only for itself)",
            )
        return caller

    def body(self) -> dict[str, Any]:
        try:
            data = json.loads(self.request.body or b"{}")
        except ValueError:
            raise web.HTTPError(400, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise web.HTTPError(400, "the body is a JSON object")
        return data

    def send(self, payload: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(payload, ensure_ascii=False))

    def session(self, session_id: str) -> NotebookSession:
        try:
            return self.hub.get(session_id)
        except HubError as exc:
            raise web.HTTPError(exc.status, str(exc)) from None

    async def own_session(self, session_id: str) -> NotebookSession:
        """A session of the calling kernel's own notebook; any other is refused (403)."""
        session = self.session(session_id)
        if session.notebook not in await self.notebooks_of(self._caller):
            raise web.HTTPError(
                403,
                f"session {session_id} is not a session of a notebook kernel {self._caller} is attached to: "
                "the kernel routes act only on the caller's own notebook (use the sidebar or the HTTP API for others)",
            )
        return session

    async def attachments(self, kernel_id: str) -> list[tuple[Any, Any]]:
        """(type, path) of the Jupyter sessions naming this kernel, asked now."""
        km = self.serverapp.kernel_manager
        if kernel_id not in km:
            raise web.HTTPError(404, f"kernel {kernel_id} is not a kernel of this server")
        sm = self.serverapp.session_manager
        return [
            (s.get("type"), s.get("path"))
            for s in await _maybe_await(sm.list_sessions())
            if (s.get("kernel") or {}).get("id") == kernel_id
        ]

    async def notebooks_of(self, kernel_id: str) -> set[str]:
        return {path for kind, path in await self.attachments(kernel_id) if kind in (None, "notebook") and path}

    async def notebook_of(self, kernel_id: Any) -> str:
        """The notebook this kernel serves, asked now (renames and kernel switches follow)."""
        kernel_id = self.same_kernel(kernel_id)
        paths = await self.attachments(kernel_id)
        for kind, path in paths:
            if kind in (None, "notebook") and path:
                return path
        if paths:
            raise web.HTTPError(
                409,
                f"this kernel serves a {paths[0][0]} ({paths[0][1]}), not a notebook: agent sessions belong to notebooks",
            )
        raise web.HTTPError(409, "this kernel is not attached to any notebook (no Jupyter session names it)")

    async def open_for(self, data: dict[str, Any]) -> NotebookSession:
        notebook = await self.notebook_of(data.get("kernel_id"))
        agent = data.get("agent") or None
        if agent is not None and not isinstance(agent, str):
            raise web.HTTPError(400, "agent is a string")
        try:
            session = await self.hub.open_session(notebook, agent)
            if data.get("new"):
                session = await self.hub.reset(session)
        except HubError as exc:
            raise web.HTTPError(exc.status, str(exc)) from None
        return session

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None))[1]
        message = exc.log_message if isinstance(exc, web.HTTPError) and exc.log_message else self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message, "status": status_code}))


class WhoamiHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self) -> None:
        kernel_id = self.check_secret()
        notebook = await self.notebook_of(self.get_query_argument("kernel_id", "") or kernel_id)
        sessions = [self.hub.describe(s) for s in self.hub.list(notebook)]
        self.send(
            {
                "kernel_id": kernel_id,
                "notebook": notebook,
                "default_agent": self.extensionapp.default_agent_name,
                "sessions": sessions,
            }
        )


class AgentsHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self) -> None:
        self.check_secret()
        self.send(self.extensionapp.describe_agents())


class OpenHandler(KernelHandler):
    @allow_unauthenticated
    async def post(self) -> None:
        """Open (``new``: replace) this notebook's session with an agent."""
        self.check_secret()
        session = await self.open_for(self.body())
        self.send(self.hub.describe(session))


class PromptHandler(KernelHandler):
    @allow_unauthenticated
    async def post(self) -> None:
        """Open the notebook's session and start a turn; answers where the turn's events start."""
        self.check_secret()
        data = self.body()
        text, prompt = data.get("text"), data.get("prompt")
        if (text is None) == (prompt is None):
            raise web.HTTPError(400, "give either 'text' or 'prompt' (a list of ACP content blocks)")
        if text is not None:
            if not isinstance(text, str):
                raise web.HTTPError(400, "text is a string")
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        else:
            if not isinstance(prompt, list) or not all(
                isinstance(b, dict) and isinstance(b.get("type"), str) for b in prompt
            ):
                raise web.HTTPError(400, "prompt is a list of content blocks, each with a 'type'")
            blocks = prompt
        session = await self.open_for(data)
        context = data.get("context")
        if isinstance(context, dict) and context.get("kind") == "cells-above":
            extra = await self.cells_above(session, context.get("cell_id"))
            if extra:
                blocks = [*blocks, self.context_block(session, extra)]
        self.extensionapp.check_prompt(blocks)
        after = session.seq
        try:
            turn_id = await self.hub.prompt(session, blocks)
        except HubError as exc:
            raise web.HTTPError(exc.status, str(exc)) from None
        self.send({"turn_id": turn_id, "after": after, "session": self.hub.describe(session)}, 202)

    async def cells_above(self, session: NotebookSession, cell_id: Any) -> str:
        """The notebook's cells above the running one (as saved), for agents without notebook tools."""
        cm = self.serverapp.contents_manager
        try:
            model = await _maybe_await(cm.get(session.notebook, content=True, type="notebook"))
        except Exception as exc:
            self.log.info("jupyter_acp: no context for %s: %s", session.notebook, exc)
            return ""
        cells = (model.get("content") or {}).get("cells") or []
        ids = [c.get("id") for c in cells]
        if isinstance(cell_id, str) and cell_id in ids:
            cells = cells[: ids.index(cell_id)]
        parts = []
        for i, cell in enumerate(cells):
            source = cell.get("source") or ""
            if isinstance(source, list):
                source = "".join(source)
            if not source.strip():
                continue
            fence = "```python" if cell.get("cell_type") == "code" else "```markdown"
            parts.append(f"Cell {i} ({cell.get('cell_type')}, id {cell.get('id')}):\n{fence}\n{source}\n```")
        text = "\n\n".join(parts)
        if len(text) > CONTEXT_CHARS:
            text = "…" + text[-CONTEXT_CHARS:]
        return text

    def context_block(self, session: NotebookSession, text: str) -> dict[str, Any]:
        conn = self.hub.connections.get(session.agent)
        caps = ((conn.init_result if conn else None) or {}).get("agentCapabilities") or {}
        header = f"Cells above the prompt in notebook {session.notebook}:\n\n"
        if (caps.get("promptCapabilities") or {}).get("embeddedContext"):
            uri = "file://" + os.path.join(self.serverapp.root_dir, session.notebook)
            return {"type": "resource", "resource": {"uri": uri, "mimeType": "text/markdown", "text": header + text}}
        return {"type": "text", "text": header + text}


class SessionHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self, session_id: str) -> None:
        self.check_secret()
        self.send(self.hub.describe(await self.own_session(session_id)))


class EventsHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self, session_id: str) -> None:
        """Events after ``after``; with ``wait``, held until at least one arrives (long poll).
        ``?before=SEQ``: the newest page before SEQ instead (``%acp history``), never held."""
        self.check_secret()
        session = await self.own_session(session_id)
        try:
            after = int(self.get_query_argument("after", "0"))
            wait = min(max(float(self.get_query_argument("wait", "0")), 0.0), MAX_WAIT)
            limit = int(self.get_query_argument("limit", "2000"))
            before_arg = self.get_query_argument("before", None)
            before = int(before_arg) if before_arg is not None else None
        except ValueError:
            raise web.HTTPError(400, "after, before, wait and limit are numbers") from None
        if before is not None:
            if self.get_query_argument("after", None) is not None:
                raise web.HTTPError(400, "give after (older to newer) or before (the newest before it), not both")
            self.send(
                {"events": self.hub.events(session, 0, limit, before=before), "session": self.hub.describe(session)}
            )
            return
        events = self.hub.events(session, after, limit)
        if not events and wait > 0:
            fut: asyncio.Future[list[dict[str, Any]]] = asyncio.get_running_loop().create_future()

            def deliver(evs: list[dict[str, Any]], *_encoded: Any) -> None:
                if not fut.done():
                    fut.set_result(evs)

            replay, unsubscribe = self.hub.subscribe(session, after, deliver)
            try:
                if replay:
                    events = replay
                else:
                    with contextlib.suppress(asyncio.TimeoutError):
                        events = await asyncio.wait_for(fut, wait)
            finally:
                unsubscribe()
            events = events[:limit]
        self.send({"events": events, "session": self.hub.describe(session)})


class CancelHandler(KernelHandler):
    @allow_unauthenticated
    async def post(self, session_id: str) -> None:
        self.check_secret()
        cancelled = await self.hub.cancel(await self.own_session(session_id))
        self.send({"cancelled": cancelled})


class PermissionHandler(KernelHandler):
    @allow_unauthenticated
    async def post(self, session_id: str, request_id: str) -> None:
        self.check_secret()
        option_id = self.body().get("option_id")
        if not isinstance(option_id, str) or not option_id:
            raise web.HTTPError(400, "option_id is required")
        session = await self.own_session(session_id)
        try:
            self.hub.answer_permission(session, request_id, option_id)
        except HubError as exc:
            raise web.HTTPError(exc.status, str(exc)) from None
        self.send({"request_id": request_id, "option_id": option_id})


def handlers() -> list[tuple[str, Any]]:
    sid = SESSION_ID
    return [
        (r"/jupyter-acp/kernel/whoami", WhoamiHandler),
        (r"/jupyter-acp/kernel/agents", AgentsHandler),
        (r"/jupyter-acp/kernel/session", OpenHandler),
        (r"/jupyter-acp/kernel/prompt", PromptHandler),
        (rf"/jupyter-acp/kernel/sessions/{sid}", SessionHandler),
        (rf"/jupyter-acp/kernel/sessions/{sid}/events", EventsHandler),
        (rf"/jupyter-acp/kernel/sessions/{sid}/cancel", CancelHandler),
        (rf"/jupyter-acp/kernel/sessions/{sid}/permissions/{REQUEST_ID}", PermissionHandler),
    ]


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value
