"""Permission requests held for the user, and the bookkeeping of the tool calls an agent makes during a turn.

A service of the hub (``hub.permissions``): it takes what it uses of the hub as :class:`PermissionHub` and never
imports the hub.  The hub keeps its names for the routes and the gate (``hub.ask_permission``,
``hub.answer_permission``, ``hub.tool_context``, ``hub.serving``, ...), each a line that calls this.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.actor import AGENT, SERVER, Actor
from ...protocol.jsonrpc import withdrawn_by_peer
from ...tools import ToolContext, ToolSurface
from ...tools.host import ToolHost
from ..hub_parts import GateSteps
from ..state import HubError, NotebookSession, PendingPermission

if TYPE_CHECKING:  # pragma: no cover
    from ..review import ReviewService
    from ..settings import HubSettings

log = logging.getLogger(__name__)


class PermissionHub(ToolHost, Protocol):
    """What the permissions use of the hub: its settings (the admin's rules, the card's timeout), the event log, the
    gate (what an Allow grants, the approval step a tool's context carries), the tools, the review (the provenance
    stamp a tool's context carries); and the hub itself as the tools' host (``ToolHost``)."""

    app: HubSettings
    tools: ToolSurface
    review: ReviewService | None

    @property
    def gate(self) -> GateSteps: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...


class Permissions:
    """The cards held for the user, and the bookkeeping of an agent's tool calls (the hub holds one)."""

    def __init__(self, hub: PermissionHub) -> None:
        self.hub = hub

    async def ask_permission(
        self,
        session: NotebookSession,
        tool_call: dict[str, Any],
        options: list[dict[str, Any]],
        *,
        source: str = "agent",
        wording: str | None = None,
        grants: Any = None,
    ) -> dict[str, Any]:
        """Hold a permission request for the user; answered by option id, or cancelled.

        ``wording="client"``: an agent's request shown in the project's own words (its title, diff or code, the
        agent's options), whose "allow" also grants ``grants`` at the gate (``own_tools.py``)."""
        request_id = secrets.token_hex(16)  # unguessable: only who was shown the card can answer it
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        turn_id = session.turn.id if session.turn else None
        call_id = tool_call.get("toolCallId") if isinstance(tool_call.get("toolCallId"), str) else None
        pending = session.pending_permissions[request_id] = PendingPermission(
            request_id, fut, options, turn_id, call_id, tool_call=tool_call, source=source, grants=grants
        )
        # an "always" option the admin does not let users pick is shown greyed, with the reason
        rules = self.hub.app.admin_rules
        shown = [
            {**o, "fixed_by_admin": why} if isinstance(o, dict) and (why := rules.option(str(o.get("kind", "")))) else o
            for o in options
        ]
        self.hub.emit(
            session,
            "permission_request",
            request_id=request_id,
            turn_id=turn_id,
            tool_call=tool_call,
            options=shown,
            source=source,
            **({"wording": wording} if wording else {}),
        )
        try:
            outcome = await asyncio.wait_for(asyncio.shield(fut), self.hub.app.permission_timeout)
        except TimeoutError:
            outcome = {"outcome": "cancelled"}
            self.hub.emit(
                session, "permission_resolved", request_id=request_id, cancelled=True, reason="timeout", actor=SERVER
            )
        except asyncio.CancelledError:
            # the asker gave up (the agent's ``$/cancel_request``): the card is withdrawn, unanswerable from now on
            if withdrawn_by_peer() and not fut.done() and request_id in session.pending_permissions:
                fut.cancel()
                self.hub.emit(
                    session,
                    "permission_resolved",
                    request_id=request_id,
                    cancelled=True,
                    reason="withdrawn",
                    actor=AGENT,
                )
            raise
        finally:
            session.pending_permissions.pop(request_id, None)
            if session.turn:
                session.turn.touch()
        if source == "client" and pending.actor is not None:
            # the gate's own card (never sent to an agent): who answered, for what the answer changes ("always")
            outcome = {**outcome, "actor": pending.actor}
        return outcome

    def answer_permission(
        self, session: NotebookSession, request_id: str, option_id: str, actor: Actor | None = None
    ) -> None:
        """The user's answer to a card; ``actor``: who answered (every panel says "bob allowed · 14:02")."""
        pending = session.pending_permissions.get(request_id)
        if pending is None:
            raise HubError(f"no pending permission request {request_id!r} (answered, cancelled or expired)", 404)
        kinds = {o.get("optionId"): o.get("kind", "") for o in pending.options}
        if option_id not in kinds:
            raise HubError(f"{option_id!r} is not one of the offered options", 400)
        why = self.hub.app.admin_rules.option(str(kinds[option_id]))
        if why:
            raise HubError(why, 403)
        pending.actor = actor
        if str(kinds[option_id]).startswith("allow") and pending.grants is not None:
            self.hub.gate.grant_own_card(
                session, request_id, pending.grants, always=kinds[option_id] == "allow_always", actor=actor
            )
        elif str(kinds[option_id]).startswith("allow") and pending.source == "agent":
            self.hub.gate.agent_request_allowed(session, request_id, pending.tool_call)
        if not pending.future.done():
            pending.future.set_result({"outcome": "selected", "optionId": option_id})
        session.pending_permissions.pop(request_id, None)
        self.hub.emit(
            session,
            "permission_resolved",
            request_id=request_id,
            option_id=option_id,
            **({"actor": actor} if actor else {}),
        )

    def cancel_pending(self, session: NotebookSession) -> None:
        for request_id, pending in list(session.pending_permissions.items()):
            if not pending.future.done():
                pending.future.set_result({"outcome": "cancelled"})
                self.hub.emit(session, "permission_resolved", request_id=request_id, cancelled=True)
        session.pending_permissions.clear()

    # -- tool calls ------------------------------------------------------------------------------
    def tool_context(
        self, session: NotebookSession, channel: str, tool_call_id: str | None = None, *, action: Any = None
    ) -> ToolContext:
        if tool_call_id is None and action is not None and action.ids:
            tool_call_id = action.ids[0]
        return ToolContext(
            host=self.hub,
            session=session,
            services=self.hub.tools.services,
            turn_id=session.turn.id if session.turn else None,
            tool_call_id=tool_call_id,
            channel=channel,
            action=action,
            approver=self.hub.gate.approver(session),
            provenance=self.hub.review.stamp(session, tool_call_id) if self.hub.review is not None else None,
        )

    @contextlib.contextmanager
    def serving(self, session: NotebookSession) -> Iterator[None]:
        """Mark a request of the agent as being served: the watchdog waits for us, not the agent."""
        turn = session.turn
        if turn is not None:
            turn.serving += 1
        try:
            yield
        finally:
            if turn is not None:
                turn.serving -= 1
                turn.touch()

    def count_tool_call(self, session: NotebookSession) -> None:
        if session.turn is not None:
            session.turn.tool_calls_served += 1
            session.turn.touch()
