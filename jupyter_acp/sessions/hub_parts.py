"""What the parts of the session hub use of one another, declared once with its types.

:class:`~jupyter_acp.sessions.hub.SessionHub` is one object made of two parts, each in its own module (the event log,
turns), and holds services (the agent sessions, the permissions, the conversations, the gate, the terminals, the tool
lists' follower, the agents' questions, the current agents) that take a Protocol of what they use of it.  A part
calls what the other part or the hub defines (``self.emit(...)`` in turns, ``self.connections`` in the event log).  Each part derives from
:class:`HubParts`, which names every such attribute and method with its type, so the checker sees a misspelt name or a
wrong argument in any part instead of a catch-all ``__getattr__`` that let any name pass.  The declarations exist for
the checker only (at run time the class is empty); where a part defines a declared method, mypy checks that its
signature matches the declaration, so the two cannot drift apart.  The services a part uses are declared by what
the parts use of them (``GateSteps``, ``QuestionSteps``, ``KernelFollowing``): their packages hold parts too, and
this module imports none of them, so the imports among ``sessions/``'s packages stay one way.
"""

from __future__ import annotations

import builtins
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import asyncio
    import contextlib

    from ..acp.connection import AgentConnection
    from ..catalog.agents import AgentSpec
    from ..tools import ToolContext, ToolSurface
    from ..tools.files import FileRules
    from ..tools.host import Action, Approver
    from .review import ReviewService
    from .settings import HubSettings
    from .state import NotebookSession
    from .store import SessionRecord, TranscriptStore
    from .store.lives import Lives
    from .terminals.terminals import TerminalService


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

    def grant_own_card(self, session: NotebookSession, request_id: str, grant: Any, *, always: bool) -> None: ...


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
    """The hub's state and the methods its parts call across modules (declared for the checker; SessionHub sets the
    state up in its ``__init__``, and each method is defined by exactly one part or by the hub itself)."""

    if TYPE_CHECKING:  # pragma: no cover
        # -- the hub's state (hub.py) ----------------------------------------------------------
        app: HubSettings
        serverapp: Any  # jupyter_server's ServerApp (HubSettings.serverapp)
        store: TranscriptStore
        tools: ToolSurface
        root: str
        lives: Lives
        sessions: dict[str, NotebookSession]
        _by_key: dict[tuple[str, str], NotebookSession]
        _by_acp: dict[tuple[str, str], NotebookSession]
        connections: dict[str, AgentConnection]
        _tasks: set[asyncio.Task[Any]]
        closing: bool
        mcp_host: Any  # channels.mcp_http.McpToolHost, started when first needed
        _turn_slots: dict[str, asyncio.Semaphore]
        _file_rules: FileRules | None
        follower: KernelFollowing
        review: ReviewService | None
        gate: GateSteps
        questions: QuestionSteps
        conversations: ConversationSteps
        terminals: TerminalService

        # -- the event log's state (events.py) -------------------------------------------------
        _flush_handle: asyncio.Handle | None
        _last_flush: float
        _dirty: set[NotebookSession]
        _store_failed: str | None
        _store_busy: bool
        _store_retry_at: float
        _store_retry: asyncio.TimerHandle | None
        _store_told: set[str]
        _refused_records: set[str]

        # -- the hub (hub.py) ------------------------------------------------------------------
        def specs(self) -> dict[str, AgentSpec]: ...
        def get(self, session_id: str) -> NotebookSession: ...
        def list(self, notebook: str | None = None) -> builtins.list[NotebookSession]: ...
        async def open_session(
            self, notebook: str, agent: str | None = None, *, trace: dict[str, str] | None = None
        ) -> NotebookSession: ...
        def describe(self, session: NotebookSession) -> dict[str, Any]: ...
        def _sessions_of(self, agent: str) -> builtins.list[NotebookSession]: ...
        def _save(self, rec: SessionRecord) -> None: ...
        def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...
        def cwd_for(self, path: str) -> str: ...
        def file_rules(self) -> FileRules: ...
        async def kernel_id_for(self, notebook: str) -> str | None: ...

        # -- the event log (events.py) ---------------------------------------------------------
        def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...
        @staticmethod
        def _seal(session: NotebookSession) -> None: ...
        def _schedule_flush(self, soon: bool = False) -> None: ...
        def _flush(self) -> None: ...
        def emit_update(self, session: NotebookSession, update: dict[str, Any]) -> None: ...
        def _store_failure(
            self, message: str, *, busy: bool = False, touched: Sequence[NotebookSession] = ()
        ) -> None: ...

        # -- the agent sessions (a service; the hub's lines that call it) -------------------------
        def connection(self, agent: str) -> AgentConnection: ...
        async def ensure_acp_session(
            self, session: NotebookSession, *, trace: dict[str, str] | None = None
        ) -> None: ...
        def session_for_acp(self, conn: AgentConnection, acp_session_id: Any) -> NotebookSession | None: ...

        # -- turns (turns.py) ------------------------------------------------------------------
        async def cancel(self, session: NotebookSession) -> bool: ...

        # -- the permissions (a service; the hub's lines that call it) ---------------------------
        def cancel_pending_permissions(self, session: NotebookSession) -> None: ...
        def serving(self, session: NotebookSession) -> contextlib.AbstractContextManager[None]: ...
        def tool_context(
            self, session: NotebookSession, channel: str, tool_call_id: str | None = None, *, action: Any = None
        ) -> ToolContext: ...
