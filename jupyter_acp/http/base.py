"""What the routes share: the request models, one way to parse a body, one HubError translation, the route
patterns, and the user routes' handler (``BaseHandler``) that every module of user routes builds on.

The user routes (``user_routes.py``: a logged-in user, the Authorizer) and the kernel routes (``kernel_routes.py``:
a kernel's own token) validate prompts alike and answer the hub's refusals alike.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from ..acp.v1 import trace_meta
from ..protocol.actor import Actor, person
from ..protocol.kernel_link import AUTH_RESOURCE
from ..sessions.state import HubError

if TYPE_CHECKING:  # the hub (and pydantic, the store, the tools) stays off the server's start
    from ..sessions.hub import NotebookSession, SessionHub


# -- request bodies ------------------------------------------------------------------------------
class LazyBody:
    """A request body's model (in ``bodies.py``) by name: pydantic is imported when a body is first parsed (the
    extension's background build does it before the first request), never while the server starts."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def model(self) -> Any:
        return getattr(importlib.import_module(f"{__package__}.bodies"), self.name)

    def model_validate(self, data: Any) -> Any:
        return self.model.model_validate(data)

    def __repr__(self) -> str:
        return f"LazyBody({self.name!r})"


if TYPE_CHECKING:  # the checker sees the models themselves (re-exported: the routes take them from here)
    from .bodies import AuthenticateBody as AuthenticateBody
    from .bodies import ConfigBody as ConfigBody
    from .bodies import CurrentAgentBody as CurrentAgentBody
    from .bodies import EnableBody as EnableBody
    from .bodies import ForkBody as ForkBody
    from .bodies import KernelPromptBody as KernelPromptBody
    from .bodies import ModeBody as ModeBody
    from .bodies import OpenSessionBody as OpenSessionBody
    from .bodies import PermissionBody as PermissionBody
    from .bodies import PromptBody as PromptBody
    from .bodies import RegistryInstallBody as RegistryInstallBody
    from .bodies import SettingsBody as SettingsBody
else:
    OpenSessionBody = LazyBody("OpenSessionBody")
    PromptBody = LazyBody("PromptBody")
    ModeBody = LazyBody("ModeBody")
    ConfigBody = LazyBody("ConfigBody")
    PermissionBody = LazyBody("PermissionBody")
    KernelPromptBody = LazyBody("KernelPromptBody")
    SettingsBody = LazyBody("SettingsBody")
    AuthenticateBody = LazyBody("AuthenticateBody")
    EnableBody = LazyBody("EnableBody")
    CurrentAgentBody = LazyBody("CurrentAgentBody")
    RegistryInstallBody = LazyBody("RegistryInstallBody")
    ForkBody = LazyBody("ForkBody")


def parse_body(raw: bytes | None, model: Any) -> Any:
    """A request body as ``model`` (a pydantic model or a ``LazyBody``), or a 400 that says which field is wrong and why."""
    from pydantic import ValidationError  # imported by then (the background build, or the model itself)

    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise web.HTTPError(400, "the body is not JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise web.HTTPError(400, errors) from None


def http_error(exc: HubError) -> web.HTTPError:
    """The hub's refusal as the HTTP error the routes answer (its status, its words)."""
    return web.HTTPError(exc.status, str(exc))


def hub_errors(method: Any) -> Any:
    """Turn a HubError into an HTTP error with the same message."""

    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except HubError as exc:
            raise http_error(exc) from None

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


#: a notebook session id in a route
SESSION_ID = r"(?P<session_id>[0-9a-f]{32})"
#: a permission request id (in a route and in a WebSocket permission op)
REQUEST_ID_CHARS = r"[0-9a-zA-Z_-]{1,64}"
REQUEST_ID = rf"(?P<request_id>{REQUEST_ID_CHARS})"


# -- the Authorizer, asked beyond the decorator -------------------------------------------------------------------------
async def allowed(handler: Any, action: str) -> bool:
    """Whether the Authorizer gives the handler's user ``action`` on ``jupyter_acp`` now (sockets ask again while they
    live, routes ask for ``execute`` beyond the ``read`` / ``write`` of ``@authorized``)."""
    return bool(
        await ensure_async(handler.authorizer.is_authorized(handler, handler.current_user, action, AUTH_RESOURCE))
    )


def username(handler: Any) -> str:
    user = handler.current_user
    return str(getattr(user, "username", None) or getattr(user, "name", None) or "?")


def acting(handler: Any) -> Actor:
    """The person behind the request as the ``actor`` its events carry (username, display name, colour): under
    JupyterHub the hub's user, on one server its identity provider's; what every collaborator's panel may show."""
    return person(handler.current_user)


# -- the user routes' handler ----------------------------------------------------------------------------------------
class BaseHandler(ExtensionHandlerMixin, APIHandler):
    if TYPE_CHECKING:  # pragma: no cover
        # the app (JupyterACP), typed loosely: http/ never imports the app, not even for types
        @property
        def extensionapp(self) -> Any: ...

    auth_resource = AUTH_RESOURCE

    @property
    def hub(self) -> SessionHub:
        hub: SessionHub = self.extensionapp.hub
        return hub

    def parse(self, model: Any) -> Any:  # a pydantic model or a base.LazyBody
        return parse_body(self.request.body, model)

    def session(self, session_id: str) -> NotebookSession:
        try:
            return self.hub.get(session_id)
        except HubError as exc:
            raise http_error(exc) from None

    async def described(self, session: NotebookSession) -> dict[str, Any]:
        """A session as the API shows it, with the notebook's current kernel looked up now."""
        return {**self.hub.describe(session), "kernel_id": await self.hub.kernel_id_for(session.notebook)}

    def send(self, payload: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(payload))

    async def require_execute(self, doing: str) -> None:
        """403 unless the user has ``execute`` on ``jupyter_acp``: for what changes where an agent sends the user's
        data (model, API base, keys, logins) or what the server runs (an agent's command, its login command).
        ``write`` lets a collaborator prompt and answer; it must not redirect the owner's key to another host."""
        if not await allowed(self, "execute"):
            raise web.HTTPError(
                403,
                f"{doing} needs 'execute' on resource 'jupyter_acp' (rule: changing where an agent sends data or what "
                f"the server runs takes execute, not only write), which the Authorizer does not give user "
                f"{username(self)!r}; ask the server's owner to grant execute on jupyter_acp, or to make the change",
            )


def request_trace(request: Any) -> dict[str, str] | None:
    """The W3C trace context of a request to the server (its ``traceparent`` and ``tracestate`` headers), checked,
    for the agent's ``params._meta``; nothing else of the request's headers ever reaches the agent."""
    return trace_meta(request.headers.get("traceparent"), request.headers.get("tracestate"))


def current_only(handler: web.RequestHandler) -> bool:
    """``?conversation=current``: the current conversation's events only (anything else is refused)."""
    which = handler.get_query_argument("conversation", None)
    if which not in (None, "current"):
        raise web.HTTPError(400, "conversation is 'current' here; an earlier one is read at conversations/{id}/events")
    return which == "current"
