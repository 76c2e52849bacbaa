"""The session model: a notebook's conversation with one agent, its turns and pending permissions."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocol import codec

if TYPE_CHECKING:  # the store (and pydantic) stays off the server's start: handlers import this module
    from .store import SessionRecord

#: called with a batch of events and the same events JSON-encoded (encoded once, for store and wire)
Subscriber = Callable[[list[dict[str, Any]], list[str]], None]


def encode(event: dict[str, Any]) -> str:
    return codec.dumps(event)


class HubError(Exception):
    """A request the hub refuses; ``status`` is the HTTP status the handlers answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class PendingPermission:
    request_id: str
    future: asyncio.Future[dict[str, Any]]
    options: list[dict[str, Any]]
    turn_id: str | None
    tool_call_id: str | None = None
    #: the tool call as the user saw it on the card (matched against the agent's later call)
    tool_call: dict[str, Any] = field(default_factory=dict)
    source: str = "agent"
    #: an agent's request asked on the project's own card: what its "allow" grants at the gate
    #: (``approvals.OwnCardGrant``; None for every other request, matched by ``tool_call`` instead)
    grants: Any = None
    #: who answered it (set with the answer): the gate's own card says who gave an "always allow"
    actor: Any = None


@dataclass
class Turn:
    id: str
    started: float = field(default_factory=time.monotonic)
    last_activity: float = field(default_factory=time.monotonic)
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    tool_calls_served: int = 0
    #: what the agent showed of its own tool calls, by id (see ``sessions.gate``)
    seen_calls: dict[str, Any] = field(default_factory=dict)
    #: agent permission requests the user allowed, each good for one matching call of ours
    agent_approvals: list[Any] = field(default_factory=list)  # approvals.AgentApproval (the gate's own type)
    #: more cards than ``seen_calls`` keeps were shown: a card not kept is never an approval
    cards_overflowed: bool = False
    #: tool name -> the agent's card id of a question about it answered for the user (no arguments in it): the
    #: gate's own question about that tool's next call is asked on that card (``own_tools.py``)
    answered_for_agent: dict[str, str] = field(default_factory=dict)
    #: bytes of files read (or reserved by reads under way) this turn, against ``JupyterACP.max_read_bytes_per_turn``
    read_bytes: int = 0
    #: requests of the agent we are serving now (tool calls, files): the agent waits on us, not hangs
    serving: int = 0
    #: the prompt's text and the user who sent it: what the provenance of the turn's changes records
    prompt: str = ""
    user: str | None = None
    #: W3C trace context of the request that started the turn (``acp.v1.trace_meta``): the prompt's ``_meta``
    trace: dict[str, str] | None = None

    def touch(self) -> None:
        self.last_activity = time.monotonic()


#: ``NotebookSession.run_end`` of a reservation that is one run
NO_RUN_END = 1 << 62


class NotebookSession:
    """One notebook's conversation with one agent."""

    def __init__(self, record: SessionRecord, last_seq: int) -> None:
        self.record = record
        self.seq = last_seq
        self.turn: Turn | None = None
        self.subscribers: set[Subscriber] = set()
        self.pending_permissions: dict[str, PendingPermission] = {}
        self.outbox: list[dict[str, Any]] = []
        #: text pieces of the last outbox event, a text chunk that later chunks of the same message join (sealed
        #: into its text when the outbox is read)
        self.merging: list[str] | None = None
        self.merged_chars = 0
        #: events (their JSON, their conversation's number) sent out but not yet in the store: only while it fails
        self.unsaved: list[tuple[dict[str, Any], str, int]] = []
        #: the highest seq reserved in the store for this server (``TranscriptStore.reserve``): nothing past it is
        #: sent, so a seq a client holds is never given to another event, whatever stops the server
        self.reserved = last_seq
        #: the last seq of the current run of reserved seqs and where the next run starts (another server on the
        #: store reserved the seqs between); NO_RUN_END while the reservation is one run
        self.run_end = NO_RUN_END
        self.next_start = 0
        #: events past ``reserved`` while the store fails: stored, then sent, once it works again
        self.held: list[tuple[dict[str, Any], str]] = []
        #: events the store refused row by row (not the store failing: another row saves): kept in memory for
        #: replays while this server runs, said in a notice
        self.quarantined: list[dict[str, Any]] = []
        #: the session's record needs saving (a change not stored yet)
        self.record_dirty = False
        #: generation of the agent connection the ACP session lives in (None: must be (re)opened)
        self.acp_generation: int | None = None
        self.replaying = False
        self.setup_task: asyncio.Task[None] | None = None
        self.state = "new"  # new | starting | ready | error
        self.error: str | None = None
        self.modes: dict[str, Any] | None = None
        self.config_options: list[Any] | None = None
        self.always_allowed: set[str] = set()
        #: the agent lost the conversation: the next prompt carries the recent history
        self.reseed = False
        #: the conversation is one of the agent's own past sessions, taken over: its replay (session/load) is kept
        self.adopted = False
        #: channels carrying the tools to this session's agent, and whether it was told about them
        self.channels: frozenset[str] = frozenset()
        self.primed = False
        self.last_used = 0.0  # monotonic time of the last prompt: the least recently used yields first
        #: the client tools the agent was last told (request discovery), and whether that changed mid-turn
        self.listed_tools: frozenset[str] | None = None
        self.tools_stale = False
        #: the first prompt already waited for a kernel a tab had not started yet
        self.waited_for_kernel = False

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def notebook(self) -> str:
        return self.record.notebook

    @property
    def agent(self) -> str:
        return self.record.agent

    @property
    def cwd(self) -> str:
        return self.record.cwd

    @property
    def acp_session_id(self) -> str | None:
        return self.record.acp_session_id

    @property
    def conversation(self) -> int:
        """The number of the notebook's current conversation (its events carry it in the store)."""
        return self.record.conversation


class TurnTimeout(Exception):
    pass
