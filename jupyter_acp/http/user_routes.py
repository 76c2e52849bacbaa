"""REST handlers: thin. Validate, authorize, call the hub (the session's WebSocket is ``session_socket.py``).

Every handler is authenticated and authorized through jupyter_server (``auth_resource =
"jupyter_acp"``); the Authorizer sees read for GET and write for POST.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import (
    REQUEST_ID,
    SESSION_ID,
    BaseHandler,
    ConfigBody,
    ModeBody,
    OpenSessionBody,
    PermissionBody,
    PromptBody,
    acting,
    current_only,
    hub_errors,
    request_trace,
    username,
)

if TYPE_CHECKING:  # the hub (and pydantic, the store, the tools) stays off the server's start
    pass

log = logging.getLogger(__name__)


# -- routes --------------------------------------------------------------------------------------
class AgentsHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """Configured agents (with their state), then known agents found on PATH."""
        self.send(self.extensionapp.describe_agents())


class SessionsHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        notebook = self.get_query_argument("notebook", None)
        try:
            sessions = self.hub.list(notebook)
        except ValueError as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.send([await self.described(s) for s in sessions])

    @web.authenticated
    @authorized
    @hub_errors
    async def post(self) -> None:
        body: OpenSessionBody = self.parse(OpenSessionBody)
        session = await self.hub.open_session(body.notebook, body.agent, trace=request_trace(self.request))
        self.send(await self.described(session), 201)


class SessionHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        self.send(await self.described(self.session(session_id)))


class PromptHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def post(self, session_id: str) -> None:
        session = self.session(session_id)
        if len(self.request.body) > self.extensionapp.max_prompt_bytes * 2 + 4096:
            raise web.HTTPError(413, f"prompt larger than {self.extensionapp.max_prompt_bytes} bytes")
        body: PromptBody = self.parse(PromptBody)
        try:
            blocks = body.blocks()
        except ValueError as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.extensionapp.check_prompt(blocks)
        turn_id = await self.hub.prompt(
            session, blocks, user=username(self), trace=request_trace(self.request), actor=acting(self)
        )
        self.hub.store_now()  # the 202 says the turn started: its turn_started is stored first
        self.send({"turn_id": turn_id}, 202)


class CancelHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        cancelled = await self.hub.cancel(self.session(session_id))
        self.send({"cancelled": cancelled})


class ResetHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def post(self, session_id: str) -> None:
        """A new conversation for this notebook (same session id; the agent forgets)."""
        session = await self.hub.reset(self.session(session_id))
        self.send(await self.described(session))


class ModeHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def post(self, session_id: str) -> None:
        """Switch the agent's mode for this session (the agent's own modes, e.g. ask / auto)."""
        body: ModeBody = self.parse(ModeBody)
        session = self.session(session_id)
        await self.hub.set_mode(session, body.mode_id, acting(self))
        self.send(await self.described(session))


class ConfigHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def post(self, session_id: str) -> None:
        """Change one of the agent's session options (model, reasoning level, ...)."""
        body: ConfigBody = self.parse(ConfigBody)
        session = self.session(session_id)
        await self.hub.set_config_option(session, body.config_id, body.value, acting(self))
        self.send(await self.described(session))


class PermissionHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def post(self, session_id: str, request_id: str) -> None:
        body: PermissionBody = self.parse(PermissionBody)
        self.hub.answer_permission(self.session(session_id), request_id, body.option_id, acting(self))
        self.send({"request_id": request_id, "option_id": body.option_id})


class AlwaysAllowHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        """The tools the user chose "always allow" for in this notebook's session."""
        self.send({"always_allowed": sorted(self.session(session_id).always_allowed)})

    @web.authenticated
    @authorized
    async def delete(self, session_id: str) -> None:
        """Revoke "always allow" for one tool (``?tool=NAME``), or for all of them."""
        tool = self.get_query_argument("tool", None)
        self.send({"always_allowed": self.hub.gate.revoke_always(self.session(session_id), tool, acting(self))})


class EventsHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        """A page of events (``JupyterACP.replay_page_bytes`` / ``replay_page_events``), oldest first:
        ``?after=SEQ`` those after SEQ, ``?before=SEQ`` the newest before SEQ (older history on demand);
        ``?conversation=current``: only the current conversation's (the earlier ones: ``conversations/``)."""
        session = self.session(session_id)
        try:
            after = int(self.get_query_argument("after", "0"))
            before_arg = self.get_query_argument("before", None)
            before = int(before_arg) if before_arg is not None else None
            limit = self.get_query_argument("limit", None)
            limit_n = int(limit) if limit is not None else None
        except ValueError:
            raise web.HTTPError(400, "after, before and limit are integers") from None
        if before is not None and self.get_query_argument("after", None) is not None:
            raise web.HTTPError(400, "give after (older to newer) or before (the newest before it), not both")
        if limit_n is not None and limit_n < 1:
            raise web.HTTPError(400, "limit is at least 1")
        self.send(self.hub.events(session, after, limit_n, before=before, current=current_only(self)))


def handlers() -> list[tuple[str, type]]:
    from .agent_routes import handlers as agent_handlers
    from .conversation_routes import handlers as conversation_handlers
    from .current_agent_routes import handlers as current_agent_handlers
    from .elicitation_routes import handlers as elicitation_handlers
    from .frontend_socket import FrontendWebSocket
    from .registry_routes import handlers as registry_handlers
    from .revert import RevertHandler
    from .review_routes import handlers as review_handlers
    from .session_socket import StreamHandler

    sid = SESSION_ID
    return [
        (r"/jupyter-acp/agents", AgentsHandler),
        (r"/jupyter-acp/sessions", SessionsHandler),
        (rf"/jupyter-acp/sessions/{sid}", SessionHandler),
        (rf"/jupyter-acp/sessions/{sid}/prompt", PromptHandler),
        (rf"/jupyter-acp/sessions/{sid}/cancel", CancelHandler),
        (rf"/jupyter-acp/sessions/{sid}/reset", ResetHandler),
        (rf"/jupyter-acp/sessions/{sid}/mode", ModeHandler),
        (rf"/jupyter-acp/sessions/{sid}/config", ConfigHandler),
        (rf"/jupyter-acp/sessions/{sid}/permissions/{REQUEST_ID}", PermissionHandler),
        (rf"/jupyter-acp/sessions/{sid}/always-allow", AlwaysAllowHandler),
        (rf"/jupyter-acp/sessions/{sid}/events", EventsHandler),
        (rf"/jupyter-acp/sessions/{sid}/stream", StreamHandler),
        (rf"/jupyter-acp/sessions/{sid}/revert", RevertHandler),
        (r"/jupyter-acp/frontend/ws", FrontendWebSocket),
        *conversation_handlers(),  # the notebook's past conversations (conversation_routes.py)
        *agent_handlers(),  # set an agent up: settings, models, login, enable (agent_routes.py)
        *current_agent_handlers(),  # the notebook's current agent, panel and magic alike (current_agent_routes.py)
        *elicitation_handlers(),  # the user's answers to an agent's questions (elicitation_routes.py)
        *registry_handlers(),  # agents from the ACP Agent Registry: list, install (registry_routes.py)
        *review_handlers(),  # a turn's review and rewind, checkpoints, "Review after" (review_routes.py)
    ]
