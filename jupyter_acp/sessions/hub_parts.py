"""What the hub's services ask of one another, and what its one remaining part reads of it, declared with types.

:class:`~jupyter_acp.sessions.hub.SessionHub` holds services (the turns, the agent sessions, the permissions, the
conversations, the gate, the terminals, the tool lists' follower, the agents' questions, the current agents), each
built with the hub as a Protocol of what it uses of it, and keeps one part of its own: the event log (still a mixin: the
store-failure tests reach into its state on the hub, and moving it means rewriting them first).  A service that uses another
sees it through a narrow Protocol declared here (``GateSteps``, ``QuestionSteps``, ``KernelFollowing``,
``ConversationSteps``): their packages import this module, and it imports none of them, so the imports among
``sessions/``'s packages stay one way.  :class:`HubParts` declares, for the checker only, the hub state the event log
reads and the event log's own state, so a misspelt name there fails ``mypy`` as it does in every service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

    from ..protocol.actor import Actor
    from ..tools.host import Action, Approver
    from .settings import HubSettings
    from .state import NotebookSession
    from .store import TranscriptStore
    from .store.lives import Lives


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


class HubParts:
    """What the event log, the hub's one remaining part, uses of the hub's state, and the event log's own state
    (declared for the checker; SessionHub sets it up in its ``__init__``)."""

    if TYPE_CHECKING:  # pragma: no cover
        # -- the hub's state the event log reads (hub.py) --------------------------------------
        app: HubSettings
        store: TranscriptStore
        lives: Lives
        sessions: dict[str, NotebookSession]
        closing: bool
        questions: QuestionSteps

        # -- the event log's own state (events.py) ---------------------------------------------
        _flush_handle: asyncio.Handle | None
        _last_flush: float
        _dirty: set[NotebookSession]
        _store_failed: str | None
        _store_busy: bool
        _store_retry_at: float
        _store_retry: asyncio.TimerHandle | None
        _store_told: set[str]
        _refused_records: set[str]
