"""REST routes of the tool surface: revert the agent's edits of a turn."""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..notebook import NotebookError
from .user_routes import BaseHandler


class RevertHandler(BaseHandler):
    """``POST jupyter-acp/sessions/{id}/revert`` ``{turn_id?}``: undo the agent's edits of one turn
    (default: its latest turn with edits), leaving the user's own edits alone.
    ``GET`` lists the turns whose edits can still be reverted."""

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        session = self.session(session_id)
        turns = self.extensionapp.tools.services.notebooks.turns_with_edits(session.id)
        self.send({"turns": [None if t == "-" else t for t in turns]})

    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        session = self.session(session_id)
        try:
            body: Any = json.loads(self.request.body or b"{}")
        except ValueError:
            raise web.HTTPError(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise web.HTTPError(400, "the body is a JSON object")
        turn_id = body.get("turn_id")
        if turn_id is not None and not isinstance(turn_id, str):
            raise web.HTTPError(400, "turn_id is a string")
        notebooks = self.extensionapp.tools.services.notebooks
        try:
            result = await notebooks.revert(session.id, session.notebook, turn_id)
        except NotebookError as exc:
            raise web.HTTPError(409, str(exc)) from None
        self.extensionapp.hub.emit(
            session,
            "notice",
            level="info",
            text=f"reverted the agent's edits of turn {result['turn_id'] or '(outside a turn)'} ({result['edits']} change(s))",
        )
        self.send(result)
