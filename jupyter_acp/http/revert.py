"""REST routes of the tool surface: revert the agent's edits of a turn, or of one cell."""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import BaseHandler, acting


def _changes(n: int) -> str:
    return f"{n} change{'' if n == 1 else 's'}"


class RevertHandler(BaseHandler):
    """``POST jupyter-acp/sessions/{id}/revert`` ``{turn_id?}``: undo the agent's edits of one turn
    (default: its latest turn with edits), leaving the user's own edits alone.
    ``{cell_id, turn_id?}``: undo only that cell's agent edits (of that turn, default every turn that
    still holds some), leaving the user's edits and the agent's other edits alone.
    ``{cell_id, accept: true}``: keep the agent's edits of that cell (its per-cell undo is no longer
    offered; the whole turn's revert still includes them).
    ``GET`` lists the turns whose edits can still be reverted; ``GET ?cells=1`` also the cells whose
    agent edits can be undone alone (``cells``: cell id -> turns)."""

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        session = self.session(session_id)
        notebooks = self.extensionapp.tools.services.notebooks
        turns = notebooks.turns_with_edits(session.id)
        out: dict[str, Any] = {"turns": [None if t == "-" else t for t in turns]}
        if self.get_argument("cells", ""):
            out["cells"] = notebooks.cells_with_edits(session.id)
        self.send(out)

    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        from ..notebook import NotebookError  # pycrdt: imported by the extension's background start, not at load

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
        cell_id = body.get("cell_id")
        if cell_id is not None and (not isinstance(cell_id, str) or not cell_id):
            raise web.HTTPError(400, "cell_id is a cell's id (a non-empty string)")
        accept = body.get("accept", False)
        if not isinstance(accept, bool) or (accept and cell_id is None):
            raise web.HTTPError(400, "accept is true or false, and needs a cell_id")
        notebooks = self.extensionapp.tools.services.notebooks
        if accept:
            self.send(notebooks.accept_cell(session.id, cell_id))
            return
        try:
            if cell_id is not None:
                result = await notebooks.revert_cell(session.id, session.notebook, cell_id, turn_id)
            else:
                result = await notebooks.revert(session.id, session.notebook, turn_id)
        except NotebookError as exc:
            raise web.HTTPError(409, str(exc)) from None
        # the notice's fields say which turn and cell; its text names no internal id
        what = "one cell" if cell_id is not None else "one turn"
        self.extensionapp.hub.emit(
            session,
            "notice",
            level="info",
            phase="reverted",
            turn_id=result["turn_id"],
            edits=result["edits"],
            **({"cell_id": cell_id} if cell_id is not None else {}),
            text=f"reverted the agent's edits of {what} ({_changes(result['edits'])}).",
            actor=acting(self),
        )
        self.send(result)
