"""The user routes of a notebook's past conversations: list, read (paged, read-only), resume, delete.

Apart from ``user_routes.py`` (the running conversation) because these act on what the notebook said before.  Each
route names the notebook session and one of *its* conversations: a conversation id of another session is unknown
here (404), whatever it names.  The Authorizer sees read for GET (list, open) and write for POST and DELETE
(resume, delete), as for every route of this extension.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import SESSION_ID, BaseHandler, ForkBody, hub_errors

#: a conversation id: ours (hex), or one of the agent's own past sessions (``agent:`` and its session id, quoted);
#: any other is matched too, so that the Authorizer answers first and the hub then says it is unknown (404)
CONVERSATION_ID = r"(?P<cid>[^/]{1,300})"


def page_args(handler: web.RequestHandler) -> tuple[int, int | None, int | None]:
    """``after``, ``limit`` and ``before`` of a paged events route (400 when they are not integers)."""
    try:
        after = int(handler.get_query_argument("after", "0"))
        before_arg = handler.get_query_argument("before", None)
        before = int(before_arg) if before_arg is not None else None
        limit = handler.get_query_argument("limit", None)
        limit_n = int(limit) if limit is not None else None
    except ValueError:
        raise web.HTTPError(400, "after, before and limit are integers") from None
    if before is not None and handler.get_query_argument("after", None) is not None:
        raise web.HTTPError(400, "give after (older to newer) or before (the newest before it), not both")
    if limit_n is not None and limit_n < 1:
        raise web.HTTPError(400, "limit is at least 1")
    return after, limit_n, before


class ConversationsHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def get(self, session_id: str) -> None:
        """The notebook's conversations with this agent, newest first (first prompt, dates, agent, turns, the
        current one flagged), then the agent's own past sessions in the notebook's folder (``kind: "agent"``)."""
        session = self.session(session_id)
        ours = self.hub.conversations.listing(session)
        self.send([*ours, *await self.hub.conversations.agent_listing(session)])


class ConversationEventsHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def get(self, session_id: str, cid: str) -> None:
        """A page of one conversation's events, as ``events`` pages the session's (``after`` / ``before``)."""
        session = self.session(session_id)
        after, limit, before = page_args(self)
        self.send(self.hub.conversations.events(session, cid, after, limit, before=before))


class ConversationResumeHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def post(self, session_id: str, cid: str) -> None:
        """Make this conversation the current one again (the agent resumes or loads it, or is given its history)."""
        session = await self.hub.conversations.resume(self.session(session_id), cid)
        self.send(await self.described(session))


class ConversationHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def delete(self, session_id: str, cid: str) -> None:
        """Remove an earlier conversation and its events (not the current one), and the agent's own copy where it
        offers ``session/delete`` (``agent_deleted``; ``agent_error`` says why it kept it: ours is gone anyway)."""
        outcome = await self.hub.conversations.delete(self.session(session_id), cid)
        self.send({"deleted": cid, **outcome})


class ForkHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def post(self, session_id: str) -> None:
        """``{turn_id}``: a new conversation of the notebook from the end of that turn of the current one (the
        agent's ``session/fork`` where it offers it, else our transcript seeds it); the earlier one stays listed."""
        body: ForkBody = self.parse(ForkBody)
        session = await self.hub.conversations.fork(self.session(session_id), body.turn_id)
        self.send(await self.described(session), 201)


def handlers() -> list[tuple[str, Any]]:
    base = rf"/jupyter-acp/sessions/{SESSION_ID}/conversations"
    return [
        (base, ConversationsHandler),
        (rf"/jupyter-acp/sessions/{SESSION_ID}/fork", ForkHandler),
        (rf"{base}/{CONVERSATION_ID}/events", ConversationEventsHandler),
        (rf"{base}/{CONVERSATION_ID}/resume", ConversationResumeHandler),
        (rf"{base}/{CONVERSATION_ID}", ConversationHandler),
    ]
