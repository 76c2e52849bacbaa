"""REST routes of a turn's review and rewind, and of a notebook session's own policy (``sessions/review/``).

- ``GET  sessions/{id}/turns/{turn_id}/changes``: what the turn changed, the changes not decided yet;
- ``POST sessions/{id}/turns/{turn_id}/review`` ``{decision: keep | discard, cell_id?}``: the changes left;
- ``POST sessions/{id}/turns/{turn_id}/rewind``: cells and namespace as before the turn, itself a checkpoint;
- ``POST sessions/{id}/checkpoints/{checkpoint_id}/restore``: the same for any checkpoint (a rewind's undo);
- ``POST sessions/{id}/policy`` ``{policy: "review" | null}``: "Review after" for this notebook session;
- ``POST sessions/{id}/provenance/strip``: "Remove agent marks from this notebook".

Every one needs ``write`` on ``jupyter_acp`` (reading a turn's changes too: they are the notebook's cells as they
were, and the review is a step of changing it), and ``execute`` when it puts a kernel's namespace back (it runs
code in the kernel); a refusal names the rule.  Each leaves an ``audit`` event in the session's transcript.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tornado import web

from .base import SESSION_ID, BaseHandler, acting, allowed, hub_errors, username

if TYPE_CHECKING:  # the hub (and pydantic, the store, the tools) stays off the server's start
    from ..sessions.review import ReviewService

#: a turn id (``Turn.id``: 12 hex digits) or a checkpoint id (32 hex digits) in a route
TURN_ID = r"(?P<turn_id>[0-9a-zA-Z_-]{1,64})"
CHECKPOINT_ID = r"(?P<checkpoint_id>[0-9a-zA-Z_-]{1,64})"


class ReviewBase(BaseHandler):
    @property
    def review(self) -> ReviewService:
        service = self.hub.review
        if service is None:
            raise web.HTTPError(503, "review is not available: the tool surface has no notebook access")
        return service

    async def require(self, action: str, doing: str, why: str) -> None:
        """403 unless the Authorizer gives the user ``action`` on ``jupyter_acp``, naming the rule."""
        if not await allowed(self, action):
            raise web.HTTPError(
                403,
                f"{doing} needs {action!r} on resource 'jupyter_acp' (rule: {why}), which the Authorizer does not give "
                f"user {username(self)!r}; ask the server's owner to grant {action} on jupyter_acp",
            )

    def body(self) -> dict[str, Any]:
        try:
            body: Any = json.loads(self.request.body or b"{}")
        except ValueError:
            raise web.HTTPError(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise web.HTTPError(400, "the body is a JSON object")
        return body


WRITE_RULE = "a turn's review and rewind change the notebook, which takes write"
EXECUTE_RULE = "putting a kernel's namespace back runs code in the kernel, which takes execute"


class TurnChangesHandler(ReviewBase):
    @web.authenticated
    @hub_errors
    async def get(self, session_id: str, turn_id: str) -> None:
        """``{turn_id, changes: [{cell_id, change, before, after, outputs_changed}], checkpoint: {id, kernel} | null,
        decided: [{cell_id, decision}], running}``."""
        await self.require("write", "reading a turn's changes for review", WRITE_RULE)
        session = self.session(session_id)
        self.send(await self.review.changes(session, turn_id))


class TurnReviewHandler(ReviewBase):
    @web.authenticated
    @hub_errors
    async def post(self, session_id: str, turn_id: str) -> None:
        """``{decision: "keep" | "discard", cell_id?}``: one change, or every change left; answers the changes left."""
        await self.require("write", "keeping or discarding a turn's changes", WRITE_RULE)
        session = self.session(session_id)
        body = self.body()
        decision = body.get("decision")
        if decision not in ("keep", "discard"):
            raise web.HTTPError(400, 'decision is "keep" or "discard"')
        cell_id = body.get("cell_id")
        if cell_id is not None and (not isinstance(cell_id, str) or not cell_id):
            raise web.HTTPError(400, "cell_id is a cell's id (a non-empty string), or left out for the whole turn")
        self.send(await self.review.review(session, turn_id, decision, cell_id, username(self), acting(self)))


class TurnRewindHandler(ReviewBase):
    @web.authenticated
    @hub_errors
    async def post(self, session_id: str, turn_id: str) -> None:
        """The notebook and the kernel's namespace as before the turn: ``{turn_id, checkpoint_id, restored_cells,
        kernel: {restored, not_restored, removed} | null, undo_checkpoint, never_restored}``; 409 with the reason
        when nothing can be rewound."""
        await self.require("write", "rewinding a turn", WRITE_RULE)
        session = self.session(session_id)
        if self.review.touches_kernel(session, turn_id=turn_id):
            await self.require("execute", "rewinding a turn that ran code in the kernel", EXECUTE_RULE)
        self.send(await self.review.rewind(session, turn_id, username(self), acting(self)))


class CheckpointRestoreHandler(ReviewBase):
    @web.authenticated
    @hub_errors
    async def post(self, session_id: str, checkpoint_id: str) -> None:
        """Any checkpoint of the session (a rewind's ``undo_checkpoint`` undoes it): the rewind's shape."""
        await self.require("write", "restoring a checkpoint", WRITE_RULE)
        session = self.session(session_id)
        if self.review.touches_kernel(session, checkpoint_id=checkpoint_id):
            await self.require("execute", "restoring a checkpoint of the kernel's namespace", EXECUTE_RULE)
        self.send(await self.review.restore_checkpoint(session, checkpoint_id, username(self), acting(self)))


class StripMarksHandler(ReviewBase):
    @web.authenticated
    @hub_errors
    async def post(self, session_id: str) -> None:
        """ "Remove agent marks from this notebook": every ``metadata.jupyter_acp`` entry goes; ``{notebook, cells}``."""
        await self.require("write", "removing the agent marks of a notebook", WRITE_RULE)
        session = self.session(session_id)
        self.send(await self.review.strip_marks(session, username(self), acting(self)))


class SessionPolicyHandler(ReviewBase):
    @web.authenticated
    @hub_errors
    async def post(self, session_id: str) -> None:
        """``{policy: "review" | null}``: "Review after" for this notebook session (where the configuration asks),
        or back to the configuration's policy. Answers the session as ``GET sessions/{id}`` does."""
        await self.require("write", "changing a notebook session's policy", WRITE_RULE)
        session = self.session(session_id)
        policy = self.body().get("policy")
        if policy not in (None, "review", "ask"):
            raise web.HTTPError(400, 'policy is "review" (Review after), or null (or "ask") for the configuration\'s')
        policy = None if policy == "ask" else policy
        if policy is not None:
            why = self.hub.app.admin_rules.policy(policy)
            if why:
                raise web.HTTPError(403, why)
        self.review.set_session_policy(session, policy)
        self.hub.emit(
            session,
            "policy_changed",
            always_allowed=sorted(session.always_allowed),
            policy=policy,
            actor=acting(self),
        )
        self.hub.emit(
            session,
            "audit",
            message=f"{username(self)} set this notebook session's policy to {policy or 'the configuration'!s}",
            power="policy",
            action="policy",
            channel="http",
            decision="allowed",
            rule=f"the user {username(self)!r} has write on jupyter_acp",
            turn_id=None,
            call_ids=[],
            user=username(self),
            actor=acting(self),
        )
        self.send(await self.described(session))


def handlers() -> list[tuple[str, type]]:
    sid = SESSION_ID
    return [
        (rf"/jupyter-acp/sessions/{sid}/turns/{TURN_ID}/changes", TurnChangesHandler),
        (rf"/jupyter-acp/sessions/{sid}/turns/{TURN_ID}/review", TurnReviewHandler),
        (rf"/jupyter-acp/sessions/{sid}/turns/{TURN_ID}/rewind", TurnRewindHandler),
        (rf"/jupyter-acp/sessions/{sid}/checkpoints/{CHECKPOINT_ID}/restore", CheckpointRestoreHandler),
        (rf"/jupyter-acp/sessions/{sid}/policy", SessionPolicyHandler),
        (rf"/jupyter-acp/sessions/{sid}/provenance/strip", StripMarksHandler),
    ]
