"""Turns: queue per agent, the watchdog, cancel, reset, re-seeding after a lost conversation, modes and options.

A service of the hub (``hub.turns``): it holds the agents' turn slots and takes what it uses of the hub as
:class:`TurnHub`, never importing the hub.  The hub keeps its names for the routes (``hub.prompt``, ``hub.cancel``,
``hub.reset``, ``hub.set_mode``, ``hub.set_config_option``), each a line that calls this.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from ...acp.connection import AgentConnection, AgentError, AgentNeedsLogin
from ...channels import MCP_HTTP, MCP_STDIO, notebook_preamble, starts_with_command
from ...notebook.provenance import PROMPT_CHARS
from ...protocol.actor import Actor
from ...protocol.jsonrpc import RpcError
from ...protocol.transcript import exchanges
from ..hub_parts import ConversationSteps, KernelFollowing, QuestionSteps
from ..review.service import prompt_of
from ..state import HubError, NotebookSession, Turn, TurnTimeout

if TYPE_CHECKING:  # pragma: no cover
    from ...catalog.agents import AgentSpec
    from ..review import ReviewService
    from ..settings import HubSettings

log = logging.getLogger(__name__)


class TurnHub(Protocol):
    """What turns use of the hub: its settings, the event log, the agents (their specs, connections and sessions),
    the tool lists' follower, the review (a turn's checkpoints), the agents' questions, the conversations (a reset, a
    re-seed), the held cards, opening a session again, its tasks, and whether it is stopping."""

    app: HubSettings
    connections: dict[str, AgentConnection]
    review: ReviewService | None
    closing: bool

    @property
    def follower(self) -> KernelFollowing: ...

    @property
    def questions(self) -> QuestionSteps: ...

    @property
    def conversations(self) -> ConversationSteps: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    def specs(self) -> dict[str, AgentSpec]: ...

    def connection(self, agent: str) -> AgentConnection: ...

    async def ensure_acp_session(self, session: NotebookSession, *, trace: dict[str, str] | None = None) -> None: ...

    def cancel_pending_permissions(self, session: NotebookSession) -> None: ...

    async def open_session(
        self, notebook: str, agent: str | None = None, *, trace: dict[str, str] | None = None
    ) -> NotebookSession: ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...


class Turns:
    """The sessions' turns (the hub holds one)."""

    def __init__(self, hub: TurnHub) -> None:
        self.hub = hub
        #: each agent's turns running at once, at most ``JupyterACP.max_concurrent_turns``
        self._turn_slots: dict[str, asyncio.Semaphore] = {}

    async def prompt(
        self,
        session: NotebookSession,
        blocks: list[dict[str, Any]],
        user: str | None = None,
        *,
        trace: dict[str, str] | None = None,
        actor: Actor | None = None,
    ) -> str:
        """Start a turn; ``user``: who sent it (the provenance of its changes), ``actor``: who, as its
        ``turn_started`` says it to every panel (``protocol/actor.py``); ``trace`` (a validated W3C
        ``traceparent`` / ``tracestate`` of the server's request) goes to the agent as the prompt's ``params._meta``,
        and as ``session/new``'s where the turn opens the session."""
        if session.turn is not None:
            raise HubError("a turn is already running in this session; cancel it or wait for it to end", 409)
        if session.agent not in self.hub.specs():
            raise HubError(
                f"agent {session.agent!r} is no longer configured (JupyterACP.agents); its history stays readable", 409
            )
        conn = self.hub.connections.get(session.agent)
        if conn is not None and conn.init_result:
            refusal = unsupported_content(session.agent, conn.init_result, blocks)
            if refusal:
                raise HubError(refusal, 400)
        turn = Turn(id=uuid.uuid4().hex[:12], prompt=prompt_of(blocks)[:PROMPT_CHARS], user=user, trace=trace)
        session.turn = turn
        session.last_used = time.monotonic()
        self.hub.emit(session, "turn_started", turn_id=turn.id, prompt=blocks, **({"actor": actor} if actor else {}))
        turn.task = self.hub.spawn(self._run_turn(session, turn, blocks))
        # the turn takes its first step now: a ready agent gets the prompt before our client gets its answer
        await asyncio.sleep(0)
        return turn.id

    def _slots(self, agent: str) -> asyncio.Semaphore:
        slots = self._turn_slots.get(agent)
        if slots is None:
            slots = self._turn_slots[agent] = asyncio.Semaphore(self.hub.app.max_concurrent_turns)
        return slots

    async def _run_turn(self, session: NotebookSession, turn: Turn, blocks: list[dict[str, Any]]) -> None:
        outcome: dict[str, Any]
        slots = self._slots(session.agent)
        try:
            if slots.locked():
                self.hub.emit(
                    session,
                    "notice",
                    level="info",
                    phase="queued",
                    text=f"agent {session.agent!r} already runs {self.hub.app.max_concurrent_turns} turns; "
                    "this one starts as soon as one ends (JupyterACP.max_concurrent_turns)",
                )
            async with slots:
                outcome = await self._turn_body(session, turn, blocks)
        except asyncio.CancelledError:
            if turn.cancelled and not self.hub.closing:
                # the user cancelled and the agent did not stop in time (or the turn was still queued)
                self._end_turn(session, turn, {"stop_reason": "cancelled"})
                return
            self._end_turn(session, turn, {"error": "the server is shutting down", "error_kind": "shutdown"})
            raise
        self._end_turn(session, turn, outcome)

    async def _turn_body(self, session: NotebookSession, turn: Turn, blocks: list[dict[str, Any]]) -> dict[str, Any]:
        outcome: dict[str, Any]
        try:
            if session.setup_task is not None:
                await asyncio.shield(session.setup_task)
            await self.hub.follower.wait_for_kernel(session)
            await self.hub.ensure_acp_session(session, trace=turn.trace)
            if await self.hub.follower.refresh_if_changed(session, in_turn=True):
                # reopened (resumed, loaded, or new and re-seeded)
                await self.hub.ensure_acp_session(session, trace=turn.trace)
            conn = self.hub.connection(session.agent)
            refusal = unsupported_content(session.agent, conn.init_result or {}, blocks)
            if refusal:  # the agent started with this prompt waiting: only now are its capabilities known
                return {"error": refusal, "error_kind": "unsupported_content"}
            blocks = fit_prompt(conn.init_result or {}, blocks)
            if session.reseed:
                blocks = self._seeded(session, blocks, turn.id)
                session.reseed = False
            if (
                not session.primed
                and session.channels & {MCP_HTTP, MCP_STDIO}
                and self.hub.specs()[session.agent].preamble
            ):
                if not starts_with_command(blocks):  # a slash command keeps the prompt to itself
                    blocks = [*blocks, {"type": "text", "text": notebook_preamble(session.notebook, session.cwd)}]
                    session.primed = True
            else:
                session.primed = True
            turn.touch()
            params: dict[str, Any] = {"sessionId": session.acp_session_id, "prompt": blocks}
            if turn.trace:
                params["_meta"] = dict(turn.trace)
            request = conn.start_request("session/prompt", params)
            result = await self._watch_turn(session, turn, conn, request)
            stop = result.get("stopReason", "end_turn") if isinstance(result, dict) else "end_turn"
            outcome = {"stop_reason": "cancelled" if turn.cancelled and stop == "end_turn" else stop}
        except AgentNeedsLogin as exc:
            outcome = {"error": str(exc), "error_kind": "needs_login"}
        except TurnTimeout as exc:
            outcome = {"error": str(exc), "error_kind": "timeout"}
        except (AgentError, RpcError) as exc:
            kind = "agent_error" if isinstance(exc, RpcError) else "agent_failed"
            outcome = {"error": str(exc), "error_kind": kind}
        except Exception as exc:  # pragma: no cover - a bug, but never lose the turn's end
            log.exception("turn %s failed", turn.id)
            outcome = {"error": f"internal error: {exc!r}", "error_kind": "internal"}
        return outcome

    def _end_turn(self, session: NotebookSession, turn: Turn, outcome: dict[str, Any]) -> None:
        if session.turn is not turn:
            return
        self.hub.cancel_pending_permissions(session)
        self.hub.questions.cancel_pending(session, "the turn ended")
        session.turn = None
        # what the turn changed, ready for its review: {changes, checkpoint} (none when it changed nothing)
        review = self.hub.review.turn_ended(session, turn.id) if self.hub.review is not None else None
        self.hub.emit(
            session,
            "turn_ended",
            turn_id=turn.id,
            tool_calls_served=turn.tool_calls_served,
            # with tool_calls_served 0 on an MCP channel: the seed's signal that the agent ignored the tools
            tool_channels=sorted(session.channels),
            **({"review": review} if review is not None else {}),
            **outcome,
        )
        self.hub.follower.turn_ended(session)

    async def _watch_turn(
        self, session: NotebookSession, turn: Turn, conn: AgentConnection, request: asyncio.Future[Any]
    ) -> Any:
        """Await the prompt's answer; end a turn whose agent goes silent for too long.

        A prompt given up on (the turn ended past ``cancel_grace`` after Stop, or by the idle watchdog) is cancelled
        here, which tells the agent with ``$/cancel_request`` (``protocol/jsonrpc.py``): ``session/cancel`` asked
        first, so an agent that honours it answers ``cancelled`` as ACP wants before it comes to that."""
        # a cancelled turn ends before its answer: a pipe closing later fails the request with no one to hear it
        request.add_done_callback(_heard)
        try:
            return await self._await_prompt(session, turn, conn, request)
        except asyncio.CancelledError:
            request.cancel()
            raise

    async def _await_prompt(
        self, session: NotebookSession, turn: Turn, conn: AgentConnection, request: asyncio.Future[Any]
    ) -> Any:
        idle = self.hub.app.turn_idle_timeout
        while True:
            done, _ = await asyncio.wait({request}, timeout=min(1.0, idle))
            if done:
                return await conn.answer(request)
            if session.pending_permissions or turn.serving:
                turn.touch()  # waiting on the user, or on our own tool: not the agent hanging
                continue
            silent_since = turn.last_activity
            if time.monotonic() - silent_since < idle:
                continue
            await conn.notify("session/cancel", {"sessionId": session.acp_session_id})
            done, _ = await asyncio.wait({request}, timeout=self.hub.app.cancel_grace)
            if done:
                return await conn.answer(request)
            request.cancel()
            hung = conn.last_traffic <= silent_since
            if hung:  # not a byte from the agent, for any session, since this turn went quiet
                await conn.kill_hung(f"agent {conn.name!r} stopped answering and was stopped")
            raise TurnTimeout(
                f"agent {conn.name!r} sent nothing for {idle:g} s; the turn was ended "
                "(JupyterACP.turn_idle_timeout). "
                + (
                    "The agent did not answer at all and was stopped; your next prompt starts it again. "
                    if hung
                    else ""
                )
                + "The conversation is kept: send the prompt again."
            )

    def _seeded(self, session: NotebookSession, blocks: list[dict[str, Any]], turn_id: str) -> list[dict[str, Any]]:
        """Prefix a prompt with the recent history, for an agent that lost the conversation."""
        lines: list[str] = []
        # the latest page of the current conversation: a bounded tail
        for ex in exchanges(self.hub.conversations.tail(session)):
            if ex.turn_id == turn_id:
                continue
            lines.append(f"User: {ex.prompt}")
            if ex.answer:
                lines.append(f"Agent: {ex.answer}")
        history = "\n".join(lines)
        budget = self.hub.app.reseed_history_chars
        if len(history) > budget:
            history = "…" + history[-budget:]
        if not history:
            return blocks
        preface = {
            "type": "text",
            "text": "Earlier in this conversation (the agent could not reload it: it was restarted, or the "
            "conversation was resumed from the history):\n" + history + "\n\nThe user's new message follows.",
        }
        return [preface, *blocks]

    async def cancel(self, session: NotebookSession) -> bool:
        turn = session.turn
        if turn is None:
            return False
        turn.cancelled = True
        self.hub.cancel_pending_permissions(session)
        self.hub.questions.cancel_pending(session, "the turn was stopped")
        conn = self.hub.connections.get(session.agent)
        if conn is not None and session.acp_session_id:
            await conn.notify("session/cancel", {"sessionId": session.acp_session_id})
        self.hub.spawn(self._force_end(session, turn))
        return True

    async def _force_end(self, session: NotebookSession, turn: Turn) -> None:
        """An agent that ignores session/cancel (or a turn still queued) still gets its turn ended."""
        await asyncio.sleep(self.hub.app.cancel_grace)
        if session.turn is turn and turn.task is not None and not turn.task.done():
            turn.task.cancel()

    async def reset(self, session: NotebookSession) -> NotebookSession:
        """A new conversation for the notebook: the agent forgets; the earlier one is kept and listed
        (``conversations.py``: it can be read, resumed or deleted).

        The notebook session (and its id) stays: only its ACP session and its conversation number change; the new
        conversation starts with a marker.
        """
        await self.hub.conversations.new(session)
        self.hub.emit(
            session,
            "notice",
            level="info",
            phase="session_reset",
            text="new conversation: the agent does not remember what came before this point "
            "(the earlier one is kept: see the history menu)",
        )
        return await self.hub.open_session(session.notebook, session.agent)

    async def set_mode(self, session: NotebookSession, mode_id: str, actor: Actor | None = None) -> None:
        """Switch the agent's session mode (``session/set_mode``) and tell every watcher (and who: ``actor``)."""
        await self.hub.ensure_acp_session(session)
        modes = session.modes or {}
        if mode_id not in {m.get("id") for m in modes.get("availableModes") or []}:
            raise HubError(f"{mode_id!r} is not one of the agent's modes", 400)
        why = self.hub.app.admin_rules.mode(mode_id)
        if why:
            raise HubError(why, 403)
        conn = self.hub.connection(session.agent)
        try:
            await conn.request("session/set_mode", {"sessionId": session.acp_session_id, "modeId": mode_id}, timeout=30)
        except RpcError as exc:
            raise HubError(f"the agent refused the mode: {exc}", 502) from None
        session.modes = {**modes, "currentModeId": mode_id}
        self.hub.emit(
            session,
            "session_config",
            modes=session.modes,
            config_options=session.config_options,
            switched={"kind": "mode", "id": "mode", "value": mode_id},
            **({"actor": actor} if actor else {}),
        )

    async def set_config_option(
        self, session: NotebookSession, config_id: str, value: Any, actor: Actor | None = None
    ) -> None:
        """Change one of the agent's session options (``session/set_config_option``); ``actor``: who."""
        await self.hub.ensure_acp_session(session)
        option = next((o for o in session.config_options or [] if o.get("id") == config_id), None)
        if option is None:
            raise HubError(f"{config_id!r} is not one of the agent's options", 400)
        if option.get("type", "select") == "select" and option.get("options"):
            # flat choices or groups of choices (ACP allows both)
            flat = [c for o in option["options"] for c in (o.get("options") or [o])]
            if value not in {c.get("value") for c in flat}:
                raise HubError(f"{value!r} is not one of the choices of {option.get('name') or config_id!r}", 400)
        if option.get("category") == "mode" and isinstance(value, str):
            why = self.hub.app.admin_rules.mode(value)
            if why:
                raise HubError(why, 403)
        params: dict[str, Any] = {"sessionId": session.acp_session_id, "configId": config_id, "value": value}
        if isinstance(value, bool):
            params["type"] = "boolean"
        conn = self.hub.connection(session.agent)
        try:
            result = await conn.request("session/set_config_option", params, timeout=30)
        except RpcError as exc:
            raise HubError(f"the agent refused the option: {exc}", 502) from None
        if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
            session.config_options = result["configOptions"]
        self.hub.emit(
            session,
            "session_config",
            modes=session.modes,
            config_options=session.config_options,
            switched={"kind": "option", "id": config_id, "value": value},
            **({"actor": actor} if actor else {}),
        )


#: content block types an agent takes only when its ``promptCapabilities`` says so (text and resource links always)
CAPABILITY_OF = {"image": "image", "audio": "audio"}


def _heard(request: asyncio.Future[Any]) -> None:
    """Mark a request's failure as seen (asyncio logs an unseen one), whether or not a turn still awaits it."""
    if not request.cancelled():
        request.exception()


def unsupported_content(agent: str, init_result: dict[str, Any], blocks: list[dict[str, Any]]) -> str | None:
    """Why the agent cannot take this prompt (images or audio its ``promptCapabilities`` leaves out), else None.

    ACP says a client must not send what the agent did not advertise; an agent may fail on it or drop it unsaid.
    Embedded resources are not refused: ``fit_prompt`` turns them into text for an agent without
    ``embeddedContext``."""
    caps = (init_result.get("agentCapabilities") or {}).get("promptCapabilities") or {}
    kinds = {b.get("type") for b in blocks if isinstance(b, dict)}
    missing = sorted(k for k in kinds if k in CAPABILITY_OF and not caps.get(CAPABILITY_OF[k]))
    if not missing:
        return None
    what = " and ".join(f"{k} blocks (promptCapabilities.{CAPABILITY_OF[k]})" for k in missing)
    return (
        f"agent {agent!r} does not take {what}: nothing was sent. Remove them from the prompt, or pick an agent "
        "that takes them."
    )


def fit_prompt(init_result: dict[str, Any], blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Embedded text resources (the panel's selection, the cells above) as text for an agent without
    ``promptCapabilities.embeddedContext``, which ACP says must not receive them."""
    caps = (init_result.get("agentCapabilities") or {}).get("promptCapabilities") or {}
    if caps.get("embeddedContext"):
        return blocks
    out = []
    for b in blocks:
        res = b.get("resource") if isinstance(b, dict) and b.get("type") == "resource" else None
        if isinstance(res, dict) and isinstance(res.get("text"), str):
            # a titled attachment (the selection, an @variable) says what it is; an untitled one speaks for itself
            title = res.get("title")
            out.append({"type": "text", "text": f"{title}:\n\n{res['text']}" if title else res["text"]})
        else:
            out.append(b)
    return out
