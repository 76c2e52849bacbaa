"""What the hub's services ask of one another, declared with types.

:class:`~jupyter_acp.sessions.hub.SessionHub` holds services (the event log, the turns, the agent sessions, the
permissions, the conversations, the gate, the terminals, the tool lists' follower, the agents' questions, the current
agents), each built with the hub as a Protocol of what it uses of it. A service that uses another sees it through a
narrow Protocol declared here (``GateSteps``, ``QuestionSteps``, ``KernelFollowing``, ``ConversationSteps``,
``LogSteps``): their packages import this module, and it imports none of them, so the imports among ``sessions/``'s
packages stay one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from ..protocol.actor import Actor
    from ..tools.host import Action, Approver
    from .state import NotebookSession


class GateSteps(Protocol):
    """What the parts ask of the gate (``gate/gate.py``): the audit, the approval step a tool's context carries, and
    what an answer of the user to the agent's own question grants (``grant``: an ``approvals.OwnCardGrant``)."""

    def audit(
        self,
        session: NotebookSession,
        action: Action,
        decision: str,
        rule: str,
        message: str = "",
        *,
        took: float | None = None,
    ) -> None: ...

    def approver(self, session: NotebookSession) -> Approver: ...

    def agent_request_allowed(self, session: NotebookSession, request_id: str, tool_call: dict[str, Any]) -> None: ...

    def grant_own_card(
        self, session: NotebookSession, request_id: str, grant: Any, *, always: bool, actor: Actor | None = None
    ) -> None: ...


class QuestionSteps(Protocol):
    """What the parts ask of the agents' questions (``gate/elicitations.py``): which of a session's wait for the
    user (a replay shows them first), and cancelling them when its turn ends."""

    def waiting(self, session: NotebookSession) -> set[str]: ...

    def cancel_pending(self, session: NotebookSession, reason: str = "cancelled") -> None: ...


class KernelFollowing(Protocol):
    """What turns ask of the tool lists' follower (``connections/follow.py``): a starting kernel waited for, the
    agent's list refreshed when it no longer holds, a check when the turn ends."""

    async def wait_for_kernel(self, session: NotebookSession) -> None: ...

    async def refresh_if_changed(self, session: NotebookSession, *, in_turn: bool = False) -> bool: ...

    def turn_ended(self, session: NotebookSession) -> None: ...


class ConversationSteps(Protocol):
    """What turns ask of the conversations (``log/conversations.py``): the current one's latest page (a re-seed
    carries it) and a new one (a reset)."""

    def tail(self, session: NotebookSession) -> list[dict[str, Any]]: ...

    async def new(self, session: NotebookSession) -> None: ...


class LogSteps(Protocol):
    """What the hub's other services ask of the event log (``log/events.py``) beyond ``emit``: a session's joined
    chunks written out, a flush now or soon, the store's failure said."""

    def seal(self, session: NotebookSession) -> None: ...

    def flush(self) -> None: ...

    def schedule_flush(self, soon: bool = False) -> None: ...

    def store_failure(self, message: str, *, busy: bool = False, touched: Sequence[NotebookSession] = ()) -> None: ...
