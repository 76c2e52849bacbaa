"""The kernel's way in (``%acp``): server URL and a per-server secret handed to kernels.

How a kernel reaches the session hub (see ``docs`` and ``../shared/reference/jupyter-internals.md`` §7):

* At start (the port is final) the extension puts ``JUPYTER_ACP_URL`` and a fresh random
  ``JUPYTER_ACP_TOKEN`` into ``os.environ``; every kernel started afterwards inherits both, whether it
  is started through ``api/sessions`` or ``api/kernels``.  The same pair is written to
  ``<runtime dir>/jupyter_acp-<server pid>.json`` (mode 0600) for kernels that were started with another
  environment; the magic checks that the pid is alive, so files left by killed servers are ignored.
* The secret is **not** the server token: it opens only the routes below, and agent subprocesses never
  see it (``acp/process.py`` drops ``JUPYTER_ACP_*`` secrets).
* A kernel names itself by its kernel id (from its connection file name); the server maps the id to the
  notebook through the session manager, at call time (renames and kernel switches follow).
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
import hmac
import json
import os
import secrets
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from .handlers import REQUEST_ID, SESSION_ID
from .hub import HubError, NotebookSession, SessionHub

if TYPE_CHECKING:  # pragma: no cover
    from .app import JupyterACP

ENV_URL = "JUPYTER_ACP_URL"
ENV_TOKEN = "JUPYTER_ACP_TOKEN"
HEADER = "X-Jupyter-ACP-Token"
RUNTIME_PREFIX = "jupyter_acp-"
#: longest a single long poll may hold a request
MAX_WAIT = 30.0
#: characters of notebook context sent with ``--context cells-above``
CONTEXT_CHARS = 20_000


def runtime_file(app: JupyterACP) -> str:
    runtime_dir = getattr(app.serverapp, "runtime_dir", None)
    if not runtime_dir:
        from jupyter_core.paths import jupyter_runtime_dir

        runtime_dir = jupyter_runtime_dir()
    return os.path.join(runtime_dir, f"{RUNTIME_PREFIX}{os.getpid()}.json")


def start(app: JupyterACP) -> None:
    """Called once the server's URL is final: hand kernels the URL and a fresh secret."""
    secret = secrets.token_urlsafe(32)
    url = app.serverapp.connection_url
    app._acp_kernel_secret = secret  # type: ignore[attr-defined]
    os.environ[ENV_URL] = url
    os.environ[ENV_TOKEN] = secret
    info = {
        "url": url,
        "token": secret,
        "pid": os.getpid(),
        "base_url": app.serverapp.base_url,
        "root_dir": app.serverapp.root_dir,
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


def stop(app: JupyterACP) -> None:
    """Called at server stop: the secret dies with the server."""
    secret = getattr(app, "_acp_kernel_secret", None)
    if secret and os.environ.get(ENV_TOKEN) == secret:
        os.environ.pop(ENV_TOKEN, None)
        os.environ.pop(ENV_URL, None)
    path = getattr(app, "_acp_runtime_file", None)
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)
    app._acp_kernel_secret = None  # type: ignore[attr-defined]


# -- handlers -------------------------------------------------------------------------------------
class KernelHandler(ExtensionHandlerMixin, APIHandler):
    """Base of the kernel routes: the per-server secret, never a login."""

    def check_xsrf_cookie(self) -> None:
        """No cookies are involved: the secret travels in a header a browser never sends by itself."""
        return

    @property
    def hub(self) -> SessionHub:
        return self.extensionapp.hub

    def check_secret(self) -> None:
        expected = getattr(self.extensionapp, "_acp_kernel_secret", None)
        if not expected:  # not started: nobody can hold the secret, so refuse like a wrong one
            raise web.HTTPError(403, "the jupyter_acp kernel API is not started: no kernel secret exists")
        given = self.request.headers.get(HEADER, "")
        auth = self.request.headers.get("Authorization", "")
        if not given and auth.lower().startswith("token "):
            given = auth[6:].strip()
        if not given or not hmac.compare_digest(given.encode(), expected.encode()):
            raise web.HTTPError(403, "wrong or missing jupyter_acp kernel secret")

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

    async def notebook_of(self, kernel_id: Any) -> str:
        """The notebook this kernel serves, asked now (renames and kernel switches follow)."""
        if not isinstance(kernel_id, str) or not kernel_id:
            raise web.HTTPError(400, "kernel_id is required")
        km = self.serverapp.kernel_manager
        if kernel_id not in km:
            raise web.HTTPError(404, f"kernel {kernel_id} is not a kernel of this server")
        sm = self.serverapp.session_manager
        paths = []
        for s in await _maybe_await(sm.list_sessions()):
            if (s.get("kernel") or {}).get("id") == kernel_id:
                paths.append((s.get("type"), s.get("path")))
        for kind, path in paths:
            if kind in (None, "notebook") and path:
                return path
        if paths:
            raise web.HTTPError(
                409, f"this kernel serves a {paths[0][0]} ({paths[0][1]}), not a notebook: agent sessions belong to notebooks"
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
        self.check_secret()
        kernel_id = self.get_query_argument("kernel_id", "")
        notebook = await self.notebook_of(kernel_id)
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
            if not isinstance(prompt, list) or not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in prompt):
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
        self.send(self.hub.describe(self.session(session_id)))


class EventsHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self, session_id: str) -> None:
        """Events after ``after``; with ``wait``, held until at least one arrives (long poll)."""
        self.check_secret()
        session = self.session(session_id)
        try:
            after = int(self.get_query_argument("after", "0"))
            wait = min(max(float(self.get_query_argument("wait", "0")), 0.0), MAX_WAIT)
            limit = int(self.get_query_argument("limit", "2000"))
        except ValueError:
            raise web.HTTPError(400, "after, wait and limit are numbers") from None
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
        cancelled = await self.hub.cancel(self.session(session_id))
        self.send({"cancelled": cancelled})


class PermissionHandler(KernelHandler):
    @allow_unauthenticated
    async def post(self, session_id: str, request_id: str) -> None:
        self.check_secret()
        option_id = self.body().get("option_id")
        if not isinstance(option_id, str) or not option_id:
            raise web.HTTPError(400, "option_id is required")
        try:
            self.hub.answer_permission(self.session(session_id), request_id, option_id)
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
