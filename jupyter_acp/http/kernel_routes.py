"""The kernel routes (``jupyter-acp/kernel/...``): the ``%acp`` magic's way in, each kernel only for its own
notebook, checked with its own token (``kernel_link.py`` says how kernels get it).

Kernels reach the server directly: at its own URL (local kernels, on loopback or the host's address) or at
``JupyterACP.kernel_server_url`` (a gateway's kernels, at the pod's address).  A request a proxy forwarded (JupyterHub's
public URL ``/user/NAME/jupyter-acp/kernel/whoami``: the hub's proxy marks it ``X-Forwarded-For``) is nobody's
kernel, so it is refused before its token is looked at: the proxy path is never needed, and this
keeps the routes' token check off the public side.  Where kernels do come through a proxy (``kernel_server_url``
behind one), ``JupyterACP.kernel_routes_through_proxy`` lets them.  The rule relies on the proxy marking what it
forwards, as JupyterHub's configurable-http-proxy does by default (not with ``--no-x-forward``), Traefik does, and
nginx where it is configured to; a request that is not marked still needs a kernel's own token.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from typing import TYPE_CHECKING, Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from ..protocol.actor import MAGIC
from ..protocol.kernel_link import ENV_TOKEN, HEADER, KERNEL_HEADER, MAX_WAIT
from ..sessions.context import cells_above_block
from ..sessions.state import HubError
from .base import REQUEST_ID, SESSION_ID, KernelPromptBody, http_error, parse_body
from .kernel_link import kernel_token
from .kernel_link import start as start  # the app starts and stops the link here
from .kernel_link import stop as stop

if TYPE_CHECKING:  # the hub (and pydantic, the store, the tools) stays off the server's start
    from ..sessions.hub import NotebookSession, SessionHub

#: the extension app (``JupyterACP``), typed loosely: the routes never import the app
JupyterACP = Any
#: headers a proxy adds to what it forwards (de facto X-Forwarded-*, RFC 7239 Forwarded, nginx's X-Real-IP)
PROXY_HEADERS = ("X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded", "X-Real-IP")


# -- handlers -------------------------------------------------------------------------------------
class KernelHandler(ExtensionHandlerMixin, APIHandler):
    """Base of the kernel routes: the calling kernel's own token, never a login."""

    if TYPE_CHECKING:  # pragma: no cover
        # the app (JupyterACP), typed loosely: http/ never imports the app, not even for types
        @property
        def extensionapp(self) -> Any: ...

    #: the calling kernel's id, set by :meth:`check_secret` once its token matched
    _caller: str = ""

    def check_xsrf_cookie(self) -> None:
        """No cookies are involved: the secret travels in a header a browser never sends by itself."""
        return

    @property
    def hub(self) -> SessionHub:
        hub: SessionHub = self.extensionapp.hub
        return hub

    def check_direct(self) -> None:
        """403 for a request a proxy forwarded (kernels reach the server directly), unless the setting allows it."""
        if getattr(self.extensionapp, "kernel_routes_through_proxy", False):
            return
        marked = next((h for h in PROXY_HEADERS if h in self.request.headers), None)
        if marked is not None:
            raise web.HTTPError(
                403,
                f"the kernel routes serve kernels, which reach this server directly (at its own URL or "
                f"JupyterACP.kernel_server_url), never through a proxy; this request came through one (it carries "
                f"{marked}) (rule: no proxied kernel requests). If this server's kernels do reach it through a "
                "proxy, set c.JupyterACP.kernel_routes_through_proxy = True",
            )

    def check_secret(self) -> str:
        """The calling kernel's id, once its token is checked against that id (403 otherwise); a proxied request
        is refused first (:meth:`check_direct`)."""
        self.check_direct()
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
            if self.gateway_enabled():
                # a gateway kernel restart keeps the environment it was started with, so the old token stays
                fix = (
                    "this server runs its kernels on a Jupyter Gateway, where restarting a kernel keeps its old "
                    "token: if this kernel outlived a restart of the Jupyter server, shut it down and start a new kernel"
                )
            else:
                fix = "restart the kernel from Jupyter if it lacks one"
            raise web.HTTPError(
                403,
                f"wrong jupyter_acp kernel token for kernel {kernel_id}: each kernel's token ({ENV_TOKEN} in its "
                f"environment) opens only that kernel's notebook; {fix}",
            )
        self._caller = kernel_id
        return kernel_id

    def gateway_enabled(self) -> bool:
        """Kernels run on a Jupyter Gateway (``GatewayClient.url``)."""
        return bool(getattr(getattr(self.serverapp, "gateway_config", None), "gateway_enabled", False))

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
            raise http_error(exc) from None

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
            for s in await ensure_async(sm.list_sessions())
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
                notebook: str = path
                return notebook
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
            raise http_error(exc) from None
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
        current = self.hub.current_agents.current(notebook)
        self.send(
            {
                "kernel_id": kernel_id,
                "notebook": notebook,
                # the agent a prompt naming none goes to: the notebook's current agent (the panel shows it too)
                "default_agent": current,
                "current_agent": current,
                "configured_default": self.extensionapp.default_agent_name,
                "sessions": sessions,
            }
        )


class CurrentAgentHandler(KernelHandler):
    """The calling kernel's notebook's current agent (``%acp use``): the one the Agent panel shows too."""

    @allow_unauthenticated
    async def get(self) -> None:
        kernel_id = self.check_secret()
        notebook = await self.notebook_of(self.get_query_argument("kernel_id", "") or kernel_id)
        try:
            self.send(self.hub.current_agents.info(notebook))
        except HubError as exc:
            raise http_error(exc) from None

    @allow_unauthenticated
    async def put(self) -> None:
        """``{"kernel_id", "agent"}``: change it; every panel on the notebook switches to that agent."""
        kernel_id = self.check_secret()
        data = self.body()
        notebook = await self.notebook_of(data.get("kernel_id") or kernel_id)
        try:
            self.send(await self.hub.current_agents.choose(notebook, data.get("agent"), by="magic", actor=MAGIC))
        except HubError as exc:
            raise http_error(exc) from None


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
        body: KernelPromptBody = parse_body(self.request.body, KernelPromptBody)
        try:
            blocks = body.blocks()
        except ValueError as exc:
            raise web.HTTPError(400, str(exc)) from None
        session = await self.open_for(body.model_dump())
        if body.context and body.context.get("kind") == "cells-above":
            extra = await cells_above_block(self.hub, session, body.context.get("cell_id"))
            if extra is not None:
                blocks = [*blocks, extra]
        self.extensionapp.check_prompt(blocks)
        after = session.seq
        try:
            turn_id = await self.hub.prompt(session, blocks, actor=MAGIC)
        except HubError as exc:
            raise http_error(exc) from None
        self.hub.store_now()  # the 202 says the turn started: its turn_started is stored first
        self.send({"turn_id": turn_id, "after": after, "session": self.hub.describe(session)}, 202)


class SessionHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self, session_id: str) -> None:
        self.check_secret()
        self.send(self.hub.describe(await self.own_session(session_id)))


class EventsHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self, session_id: str) -> None:
        """Events after ``after``; with ``wait``, held until at least one arrives (long poll).
        ``?before=SEQ``: the current conversation's newest page before SEQ instead (``%acp history``), never held."""
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
                {
                    "events": self.hub.events(session, 0, limit, before=before, current=True),
                    "session": self.hub.describe(session),
                }
            )
            return
        moved = self.hub.history_moved(session, after)
        if moved is not None:  # the caller saw events this store never had: it is told, not held waiting
            self.send({"events": [], "session": self.hub.describe(session), "history_moved": moved})
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


class ConversationsHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self, session_id: str) -> None:
        """The notebook's conversations with this agent, newest first (``%acp history --all``)."""
        self.check_secret()
        session = await self.own_session(session_id)
        try:
            self.send(self.hub.conversations.listing(session))
        except HubError as exc:
            raise http_error(exc) from None


class ConversationEventsHandler(KernelHandler):
    @allow_unauthenticated
    async def get(self, session_id: str, cid: str) -> None:
        """A page of one of the notebook's conversations, oldest first after ``after`` (``%acp history N``)."""
        self.check_secret()
        session = await self.own_session(session_id)
        try:
            after = int(self.get_query_argument("after", "0"))
        except ValueError:
            raise web.HTTPError(400, "after is an integer") from None
        try:
            self.send(self.hub.conversations.events(session, cid, after))
        except HubError as exc:
            raise http_error(exc) from None


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
            self.hub.answer_permission(session, request_id, option_id, MAGIC)
        except HubError as exc:
            raise http_error(exc) from None
        self.send({"request_id": request_id, "option_id": option_id})


def handlers() -> list[tuple[str, Any]]:
    sid = SESSION_ID
    return [
        (r"/jupyter-acp/kernel/whoami", WhoamiHandler),
        (r"/jupyter-acp/kernel/agents", AgentsHandler),
        (r"/jupyter-acp/kernel/current-agent", CurrentAgentHandler),
        (r"/jupyter-acp/kernel/session", OpenHandler),
        (r"/jupyter-acp/kernel/prompt", PromptHandler),
        (rf"/jupyter-acp/kernel/sessions/{sid}", SessionHandler),
        (rf"/jupyter-acp/kernel/sessions/{sid}/events", EventsHandler),
        (rf"/jupyter-acp/kernel/sessions/{sid}/conversations", ConversationsHandler),
        (
            rf"/jupyter-acp/kernel/sessions/{sid}/conversations/(?P<cid>[^/]{{1,300}})/events",
            ConversationEventsHandler,
        ),
        (rf"/jupyter-acp/kernel/sessions/{sid}/cancel", CancelHandler),
        (rf"/jupyter-acp/kernel/sessions/{sid}/permissions/{REQUEST_ID}", PermissionHandler),
    ]
