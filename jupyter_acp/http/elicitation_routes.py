"""The user's answer to an agent's question (``elicitation/create``, see ``sessions/gate/elicitations.py``).

``POST /jupyter-acp/sessions/{sid}/elicitations/{id}`` with ``{"action": "accept" | "decline" | "cancel",
"content"?: {...}}``: write access (a read-only user gets 403 from the Authorizer); an id of another session's
question is 404; content that does not fit the form is 400 naming the field. The body is parsed here without
pydantic (nothing heavy on the server's start).
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import SESSION_ID, BaseHandler, acting, hub_errors

#: an elicitation id (128-bit hex; any short id is matched so the hub answers 404, not the router)
ELICITATION_ID = r"(?P<eid>[0-9a-zA-Z_-]{1,64})"
ACTIONS = ("accept", "decline", "cancel")


def parse_answer(raw: bytes | None) -> tuple[str, Any]:
    """``(action, content)`` of a body, or a 400 that says what is wrong."""
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise web.HTTPError(400, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise web.HTTPError(400, 'the body is {"action": "accept" | "decline" | "cancel", "content"?: {...}}')
    extra = sorted(set(data) - {"action", "content"})
    if extra:
        raise web.HTTPError(400, f"unknown fields {', '.join(extra)}: the body has action and content only")
    action = data.get("action")
    if action not in ACTIONS:
        raise web.HTTPError(400, f"action: one of {', '.join(ACTIONS)} (got {str(action)[:40]!r})")
    return action, data.get("content")


class ElicitationHandler(BaseHandler):
    @web.authenticated
    @authorized
    @hub_errors
    async def post(self, session_id: str, eid: str) -> None:
        action, content = parse_answer(self.request.body)
        user = self.current_user
        name = getattr(user, "username", None) or getattr(user, "name", None)
        self.hub.questions.answer(self.session(session_id), eid, action, content, by=name, actor=acting(self))
        self.send({"elicitation_id": eid, "action": action})


def handlers() -> list[tuple[str, type]]:
    return [(rf"/jupyter-acp/sessions/{SESSION_ID}/elicitations/{ELICITATION_ID}", ElicitationHandler)]
