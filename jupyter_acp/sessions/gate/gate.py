"""The one gate: every action an agent asks of the client passes here, whatever carried it.

Channels (the ``org.mini-me`` client-tools convention, loopback MCP, the stdio shim) and the ``fs/*``
methods only translate their wire into an :class:`Action` and hand it to :class:`Gate`, which decides in
one order, for every power alike:

1. the session: the channel found it from the agent's own session id or bearer;
2. the turn: an agent acts only while a turn of *that* session runs (a prompt the user sent);
3. the arguments: validated against the tool's schema (or the power's own rules, for files);
4. the policy: ``auto`` / ``ask`` / ``deny`` / ``review`` per tool and per power (``JupyterACPTools``, or a notebook
   session's own ``review``): ``review`` runs what the turn's checkpoint undoes (``review/``) and asks the rest;
5. the approval: an earlier "allow" that matches *this* action, or the user asked now;
6. the run, and an ``audit`` event in the transcript saying what was decided and by which rule.

Approvals are bound to one action: the tool and a canonical digest of its arguments. An agent's own
``session/request_permission`` that the user allowed pre-approves our gate only for the call whose tool
and arguments match what its card showed *when the user answered* (frozen then: ``approvals.ShownCard``), once;
an update of that card that changes what it shows cancels the approval. A command is matched only against what
the card showed as the command, exactly. Ids the agent attaches (``_meta.toolCallId``,
``claudecode/toolUseId``) only help find what the user saw, they never approve by themselves. "Always
allow" is per tool and per notebook session, listed by the session and revocable.

What an agent may have under way is bounded too, each bound a setting the refusal names: its requests at once
(``JupyterACP.max_agent_requests``), its own permission requests waiting (``max_pending_permissions``), the bytes
of one file read and of a turn's reads (``max_read_bytes``, ``max_read_bytes_per_turn``).

Every refusal names its rule and how the owner can change it, so the agent can tell the user.
The threat model is in ``docs/security.md``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...channels import CLIENT_TOOLS
from ...protocol.actor import Actor
from ...tools.files import MAX_READ_BYTES, FileRefused, FileRules
from ...tools.host import PERMISSION_OPTIONS, Action, Approver, Refused
from ..review import REVIEW, Prepared, resolve_review
from .approvals import (
    MAX_REMEMBERED_CALLS,
    PERMISSION,  # the agent's own question: only during a turn, a few at a time
    OwnCardGrant,
    ShownCard,
    command_lines,
    own_tool_call,
)
from .own_tools import ask_about_own_tool

if TYPE_CHECKING:  # pragma: no cover
    import contextlib

    from ...tools import ToolContext, ToolSurface
    from ..state import NotebookSession


class GateHub(Protocol):
    """What the gate asks of the session hub: the sessions, their tools and event log, the user's answer to a card,
    and the marks that a request of the agent is being served (the turn's watchdog waits for us, not the agent)."""

    @property
    def sessions(self) -> dict[str, NotebookSession]: ...

    @property
    def tools(self) -> ToolSurface: ...

    def tool_context(
        self, session: NotebookSession, channel: str, tool_call_id: str | None = None, *, action: Any = None
    ) -> ToolContext: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    async def ask_permission(
        self,
        session: NotebookSession,
        tool_call: dict[str, Any],
        options: list[dict[str, Any]],
        *,
        source: str = "agent",
        wording: str | None = None,
        grants: Any = None,
    ) -> dict[str, Any]: ...

    def serving(self, session: NotebookSession) -> contextlib.AbstractContextManager[None]: ...

    def count_tool_call(self, session: NotebookSession) -> None: ...


class Reviewer(Protocol):
    """What the gate asks of the review service (``review/service.py``): a notebook session's own policy, and the
    turn's checkpoint before a change."""

    def session_policy(self, session_id: str) -> str | None: ...

    async def before_change(self, session: NotebookSession, name: str) -> Prepared | None: ...

    def went_ahead(self, session: NotebookSession) -> None: ...


log = logging.getLogger(__name__)

#: the powers an agent has besides the client tools (a tool's power is "tool")
FS_READ = "fs/read_text_file"
FS_WRITE = "fs/write_text_file"
#: an agent's command in a client terminal (kind ``execute``: asked by default, like the destructive tools)
TERMINAL_CREATE = "terminal/create"
#: the terminal methods that act on a terminal the session already has (no approval: the id must be the session's)
TERMINAL_METHODS = ("terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release")
POLICIES = ("ask", "auto", "deny", REVIEW)
#: defaults of the bounds on what one agent may have under way (``JupyterACP.*`` of the same names)
MAX_AGENT_REQUESTS = 32
MAX_PENDING_PERMISSIONS = 4
MAX_READ_BYTES_PER_TURN = 32 * 1024 * 1024


class Gate:
    """Decides, for every session, what its agent may do; the only place that does."""

    def __init__(self, hub: GateHub, settings: Any, review: Reviewer | None = None) -> None:
        self.hub = hub
        #: ``JupyterACPTools``: permission_policy, tool_policies
        self.settings = settings
        #: turns' checkpoints and the policy ``review`` (None: a bare gate, every turn asked as configured)
        self.review = review
        #: cards shown with a caller's ``card_id`` that the caller has not reported on yet
        self.shown_cards: set[str] = set()
        #: tool calls under way over MCP, per notebook session (the ACP connection counts its own requests)
        self.mcp_calls: dict[str, int] = {}

    def limit(self, name: str, default: int) -> int:
        """A bound of ``JupyterACP`` (the hub's app), or its default when the app has none (a bare hub)."""
        value = getattr(getattr(self.hub, "app", None), name, default)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default

    # -- policy ----------------------------------------------------------------------------------
    def policy(self, name: str, *, destructive: bool, session: NotebookSession | None = None) -> tuple[str, str]:
        """(policy, the setting that decided it) for a tool or a power; ``review`` is resolved here to ``review``
        (a checkpoint undoes it), ``ask`` (none does) or ``auto`` (it only reads). A notebook session's own policy
        (``review``, picked by its user) applies where the configuration would ask."""
        per_tool = self.settings.tool_policies.get(name)
        if per_tool in POLICIES:
            value, rule = per_tool, f"JupyterACPTools.tool_policies[{name!r}] = {per_tool!r}"
        elif name == FS_READ:
            return (
                "auto",
                f"agents read files under the server root unless JupyterACPTools.tool_policies[{FS_READ!r}] says otherwise",
            )
        elif destructive or name == FS_WRITE:
            value = self.settings.permission_policy
            rule = f"JupyterACPTools.permission_policy = {value!r}"
            if value == "ask" and session is not None and self.review is not None:
                if self.review.session_policy(session.id) == REVIEW:
                    value, rule = (
                        REVIEW,
                        "this notebook session's policy is 'review' (Review after), picked by its user",
                    )
        else:
            return (
                "auto",
                f"{name} only reads, and tools that only read run unasked unless "
                f"JupyterACPTools.tool_policies[{name!r}] says 'ask' or 'deny'",
            )
        if value == REVIEW:
            return resolve_review(name, rule, destructive=destructive or name == FS_WRITE)
        return value, rule

    # -- the steps every action takes ------------------------------------------------------------
    def require_turn(self, session: NotebookSession, action: Action) -> None:
        if session.turn is None:
            raise Refused(
                "outside_turn",
                f"{action.name} refused (rule: outside_turn): no turn of this notebook session is running, and "
                "agents act only while a prompt of the user runs. Nothing was done; it works during the next prompt.",
                kind="outside_turn",
            )

    def admit_request(self, method: str, under_way: int) -> None:
        """An agent's request to the client, with ``under_way`` of its others not answered yet: past
        ``JupyterACP.max_agent_requests`` it is refused at once (each request holds memory until answered)."""
        most = self.limit("max_agent_requests", MAX_AGENT_REQUESTS)
        if under_way >= most:
            raise Refused(
                "too_many_requests",
                f"{method} refused (rule: too_many_requests): this agent already has {under_way} requests to the "
                f"client under way (JupyterACP.max_agent_requests = {most}). Nothing was done; wait for their "
                "answers before sending more. The owner can change the setting in jupyter_server_config.py.",
                kind="too_many_requests",
            )

    def refuse_by_policy(self, action: Action, *, destructive: bool) -> None:
        policy, rule = self.policy(action.name, destructive=destructive)
        if policy == "deny":
            raise Refused(
                "policy",
                f"{action.name} refused (rule: {rule}): the owner of this Jupyter server disabled it. Do not retry; "
                "tell the user what you wanted to do. The owner can change it in jupyter_server_config.py.",
                kind="denied",
            )

    async def approve(
        self,
        session: NotebookSession,
        action: Action,
        *,
        title: str,
        kind: str,
        preview: str = "",
        destructive: bool = True,
        content: list[dict[str, Any]] | None = None,
        card_id: str | None = None,
    ) -> str:
        """Allow the action or raise :class:`Refused`; returns how it was allowed (for the audit).

        ``card_id``: the tool call id of the card the user is shown, when the caller reports on it afterwards."""
        self.refuse_by_policy(action, destructive=destructive)
        policy, rule = self.policy(action.name, destructive=destructive, session=session)
        if policy == REVIEW:
            prepared = await self._before_change(session, action)
            if prepared is not None and prepared.covers(action.name):
                assert self.review is not None  # a checkpoint was prepared
                self.review.went_ahead(session)
                return f"review ({rule}): under the turn's checkpoint {prepared.checkpoint_id}"
            why = (prepared.kernel_error if prepared is not None else None) or "no checkpoint could be taken"
            preview = f"Asked although the policy is 'review': no checkpoint could undo this ({why}).\n\n{preview}"
        how = await self._allow(
            session, action, policy, rule, title=title, kind=kind, preview=preview, content=content, card_id=card_id
        )
        await self._before_change(session, action)
        return how

    def approver(self, session: NotebookSession) -> Approver:
        """``approve`` for one session, as the tools' contexts carry it (``ToolContext.approver``): a tool asks with
        its own card from inside the call the gate runs (``call_tool``), as a step of that call, never through
        another door of the hub."""

        async def approve(action: Action, *, title: str, kind: str, preview: str = "") -> str:
            return await self.approve(session, action, title=title, kind=kind, preview=preview)

        return approve

    async def _before_change(self, session: NotebookSession, action: Action) -> Prepared | None:
        """The turn's checkpoint, before an allowed change of the notebook or the kernel (``review/service.py``)."""
        if self.review is None or action.power != "tool":
            return None
        return await self.review.before_change(session, action.name)

    async def _allow(
        self,
        session: NotebookSession,
        action: Action,
        policy: str,
        rule: str,
        *,
        title: str,
        kind: str,
        preview: str = "",
        content: list[dict[str, Any]] | None = None,
        card_id: str | None = None,
    ) -> str:
        if policy == "auto":
            return f"auto ({rule})"
        if action.name in session.always_allowed:
            return "always allowed in this notebook's session"
        matched = self._take_agent_approval(session, action)
        if matched is not None:
            return f"the user allowed the agent's request {matched}"
        shown = self._agent_card(session, action)
        tool_call = self.question_card(
            session, action, title=title, kind=kind, preview=preview, content=content, card_id=card_id, on=shown
        )
        if card_id and shown is None:
            # the caller reports on its own card afterwards; asked on the agent's card, the agent reports on it
            self.shown_cards.add(card_id)
        outcome = await self.hub.ask_permission(session, tool_call, PERMISSION_OPTIONS, source="client")
        if outcome.get("outcome") == "selected":
            option = outcome.get("optionId")
            if option == "allow_always":
                self.allow_always(session, action.name, actor=outcome.get("actor"))
                return "the user chose always allow"
            if option == "allow_once":
                return "the user allowed it"
            raise Refused(
                "user_rejected",
                f"the user rejected {title!r}. Do not retry the same change; ask the user what they want instead.",
                kind="rejected",
            )
        raise Refused(
            "cancelled",
            f"the permission request for {title!r} was cancelled (the turn ended, or nobody answered within "
            "JupyterACP.permission_timeout); nothing was changed.",
            kind="cancelled",
        )

    def question_card(
        self,
        session: NotebookSession,
        action: Action,
        *,
        title: str,
        kind: str,
        preview: str = "",
        content: list[dict[str, Any]] | None = None,
        card_id: str | None = None,
        on: str | None = None,
    ) -> dict[str, Any]:
        """The card the gate asks on, in its own words: title, kind, the arguments and the preview (or content: a
        diff). ``on``: the agent's card of this call, when it shows one: the panel asks on that card (one card per
        call) while the question, title and preview stay ours, under an id the agent cannot know."""
        tool_call: dict[str, Any] = {
            "toolCallId": card_id or f"client-{secrets.token_hex(8)}",
            "title": title,
            "kind": kind,
            "status": "pending",
            "rawInput": action.arguments,
            "_meta": {"jupyter_acp": {"tool": action.name, "notebook": session.notebook, "power": action.power}},
        }
        if on is not None:
            tool_call["_meta"]["jupyter_acp"]["agent_call"] = on
        if content:
            tool_call["content"] = content
        elif preview:
            tool_call["content"] = [{"type": "content", "content": {"type": "text", "text": preview}}]
        return tool_call

    # -- approvals -------------------------------------------------------------------------------
    def note_tool_call(self, session: NotebookSession, update: dict[str, Any], *, keep: bool = False) -> None:
        """Follow what the agent's cards show (``tool_call`` / ``tool_call_update``, and its permission requests'
        ``toolCall``, ``keep``: remembered past the cap) as the panel does; a card that changes after the user
        allowed it cancels that approval."""
        turn = session.turn
        call_id = update.get("toolCallId")
        if turn is None or not isinstance(call_id, str):
            return
        card = turn.seen_calls.get(call_id)
        if card is None:
            if len(turn.seen_calls) >= MAX_REMEMBERED_CALLS and not keep:
                turn.cards_overflowed = True  # what the panel shows of this id is not known from now on
                return
            card = turn.seen_calls[call_id] = ShownCard()
        if card.fold(update):
            self._cancel_changed_approvals(session, call_id, card)

    def _cancel_changed_approvals(self, session: NotebookSession, call_id: str, card: ShownCard) -> None:
        turn = session.turn
        assert turn is not None
        for approval in list(turn.agent_approvals):
            if approval.call_id == call_id and approval.shown != card.shown:
                turn.agent_approvals.remove(approval)
                card.changed_after_allow = True
                self.audit(
                    session,
                    Action(PERMISSION, PERMISSION, {}, "acp", (call_id,)),
                    "cancelled",
                    "card_changed",
                    f"the agent changed what its card {call_id!r} shows (title, arguments or content) after the user "
                    f"allowed its request {approval.request_id}: that approval is cancelled, and the next call is asked "
                    "on the gate's own card",
                )

    def agent_request_allowed(self, session: NotebookSession, request_id: str, tool_call: dict[str, Any]) -> None:
        """The user allowed an agent's permission request: one call matching what its card shows *now* (frozen)
        needs no second ask."""
        turn = session.turn
        if turn is None:
            return
        call_id = tool_call.get("toolCallId")
        if isinstance(call_id, str):
            card = turn.seen_calls.get(call_id)
            if card is None:
                return  # not followed (past MAX_REMEMBERED_CALLS): what the panel shows is unknown, so asked again
        else:
            call_id = None
            card = ShownCard()  # a card of its own in the panel: the request's toolCall alone
            card.fold(tool_call)
        approval = card.approval(request_id, call_id)
        if approval.useful:
            turn.agent_approvals.append(approval)

    def grant_own_card(
        self,
        session: NotebookSession,
        request_id: str,
        grant: OwnCardGrant,
        *,
        always: bool,
        actor: Actor | None = None,
    ) -> None:
        """The user allowed an agent's request asked on the project's own card (``own_tools.py``): the call that
        card showed needs no second ask, and an "always" of the agent's is one of the gate's too."""
        if session.turn is not None:
            session.turn.agent_approvals.append(grant.approval(request_id))
        if always:
            self.allow_always(session, grant.tool, actor=actor)

    def _take_agent_approval(self, session: NotebookSession, action: Action) -> str | None:
        turn = session.turn
        if turn is None:
            return None
        if action.name == TERMINAL_CREATE:
            return self._take_command_approval(session, action)
        wanted = action.digest
        for approval in list(turn.agent_approvals):
            if action.name in approval.names and wanted in approval.digests:
                turn.agent_approvals.remove(approval)  # used up
                request_id: str = approval.request_id
                return request_id
        return None

    def _take_command_approval(self, session: NotebookSession, action: Action) -> str | None:
        """A command the user allowed in the agent's own card runs without a second question: the same command
        line as the card showed as the command, in the notebook's folder, with no variables of the agent's (what
        the agent's card did not show)."""
        turn = session.turn
        args = action.arguments
        if turn is None or args.get("env") or args.get("cwd") not in (None, "", session.cwd):
            return None
        wanted = command_lines(args.get("command"), args.get("args"))
        for approval in list(turn.agent_approvals):
            if approval.commands & wanted:
                turn.agent_approvals.remove(approval)  # used up
                request_id: str = approval.request_id
                return request_id
        return None

    def _agent_card(self, session: NotebookSession, action: Action) -> str | None:
        """The agent's card of this turn that shows this very call, for the panel to ask on (one card per call): an
        id the agent attached, or for a command, the latest card showing that command line exactly. Never a card
        the agent changed after an Allow."""
        turn = session.turn
        if turn is None:
            return None
        for call_id in action.ids:
            card = turn.seen_calls.get(call_id)
            if card is not None and not card.changed_after_allow:
                return call_id
        answered = turn.answered_for_agent.pop(action.name, None)
        if answered is not None:
            return answered  # the agent's question about this tool, answered for the user: its card is this call
        if action.name == TERMINAL_CREATE:
            wanted = command_lines(action.arguments.get("command"), action.arguments.get("args"))
            for call_id, card in reversed(turn.seen_calls.items()):
                if card.commands & wanted and not card.changed_after_allow:
                    return str(call_id)
        return None

    def allow_always(self, session: NotebookSession, name: str, actor: Actor | None = None) -> None:
        """Stop asking for ``name`` in this session; ``actor``: who picked "Always allow" on the card (every panel
        names who changed what the agent may do unasked)."""
        session.always_allowed.add(name)
        self.hub.emit(
            session,
            "policy_changed",
            always_allowed=sorted(session.always_allowed),
            **({"actor": actor} if actor else {}),
        )

    def revoke_always(self, session: NotebookSession, name: str | None = None, actor: Actor | None = None) -> list[str]:
        """Ask again for ``name`` (every tool: None); ``actor``: who undid it, as every panel says it."""
        if name is None:
            session.always_allowed.clear()
        else:
            session.always_allowed.discard(name)
        self.hub.emit(
            session,
            "policy_changed",
            always_allowed=sorted(session.always_allowed),
            **({"actor": actor} if actor else {}),
        )
        return sorted(session.always_allowed)

    # -- audit -----------------------------------------------------------------------------------
    def audit(
        self,
        session: NotebookSession,
        action: Action,
        decision: str,
        rule: str,
        message: str = "",
        *,
        took: float | None = None,
    ) -> None:
        """``took``: seconds a call took from its arrival to its answer, the user's question included (``took_ms``)."""
        extra: dict[str, Any] = {"message": message} if message else {}
        if took is not None:
            extra["took_ms"] = round(took * 1000, 1)
        self.hub.emit(
            session,
            "audit",
            **extra,
            power=action.power,
            action=action.name,
            channel=action.channel,
            decision=decision,
            rule=rule,
            turn_id=session.turn.id if session.turn else None,
            call_ids=list(action.ids),
        )

    # -- the entry points channels call (``channels.ToolGate``) ----------------------------------
    def find_session(self, session_id: str) -> NotebookSession | None:
        return self.hub.sessions.get(session_id)

    async def list_tools(self, session: NotebookSession, channel: str) -> list[dict[str, Any]]:
        """The session's tools in MCP's shape, asked afresh (kernel, language, writability)."""
        ctx = self.hub.tool_context(session, channel)
        out = []
        for tool in await self.hub.tools.list_tools(ctx):
            wire = tool.to_wire()
            wire.pop("method", None)
            out.append(wire)
        return out

    async def call_tool(
        self, session: NotebookSession, name: str, arguments: dict[str, Any], *, channel: str, ids: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """A client tool call from any channel; always a ``CallToolResult``. Calls over MCP are counted per session
        against ``JupyterACP.max_agent_requests`` here (the agent's own connection counts what it carries)."""
        from ...tools import error_result

        if channel == CLIENT_TOOLS:
            return await self._call_tool(session, name, arguments, channel=channel, ids=ids)
        under_way = self.mcp_calls.get(session.id, 0)
        try:
            self.admit_request(name, under_way)
        except Refused as refusal:
            return error_result(str(refusal), kind=refusal.kind, structured={"rule": refusal.rule})
        self.mcp_calls[session.id] = under_way + 1
        try:
            return await self._call_tool(session, name, arguments, channel=channel, ids=ids)
        finally:
            left = self.mcp_calls.pop(session.id, 1) - 1
            if left:
                self.mcp_calls[session.id] = left

    async def _call_tool(
        self, session: NotebookSession, name: str, arguments: dict[str, Any], *, channel: str, ids: tuple[str, ...]
    ) -> dict[str, Any]:
        from ...tools import error_result

        started = time.monotonic()
        action = Action("tool", name, arguments, channel, ids)
        tools = self.hub.tools
        tool = tools.by_name(name)
        try:
            self.require_turn(session, action)
            ctx = self.hub.tool_context(session, channel, action=action)
            if tool is None:
                raise Refused("unknown_tool", f"unknown tool: {name} is not a tool of this client", "unknown_tool")
            if not await tools.available(tool, ctx):
                why = (
                    "the notebook has no kernel yet: ask the user to start one"
                    if await ctx.kernel_id() is None
                    else "the notebook's kernel or its writability does not allow it now"
                )
                raise Refused("unavailable", f"{name} is not available for this notebook: {why}", "unknown_tool")
            problem = tool.validate(arguments)
            if problem is not None:
                raise Refused("invalid_arguments", f"invalid arguments for {name}: {problem}", "invalid_arguments")
            if tool.read_only:
                # tools that change nothing are not gated by their executor: ask here when policy says so
                card = tools.read_card(tool, arguments)
                how = await self.approve(
                    session, action, title=card["title"], kind="read", destructive=False, preview=card["preview"]
                )
            else:
                self.refuse_by_policy(action, destructive=True)
                how = "checked by the tool with its preview"
        except Refused as refusal:
            self.audit(session, action, "refused", refusal.rule, str(refusal))
            return error_result(str(refusal), kind=refusal.kind, structured={"rule": refusal.rule})
        self.hub.count_tool_call(session)
        with self.hub.serving(session):
            result = await tools.run(ctx, tool, arguments)  # checked above: not again
        refused = result.get("isError") and (result.get("structuredContent") or {}).get("rule")
        decision = "refused" if refused else "allowed"
        self.audit(session, action, decision, str(refused or ctx.approval or how), took=time.monotonic() - started)
        return result

    async def perform(
        self,
        session: NotebookSession,
        action: Action,
        run: Callable[[], Awaitable[Any]],
        *,
        title: str,
        kind: str,
        destructive: bool,
        preview: str = "",
        content: list[dict[str, Any]] | None = None,
        card_id: str | None = None,
    ) -> Any:
        """A power other than a tool (``fs/*``, ``terminal/create``): turn, policy, approval, run, audit. Raises
        Refused."""
        try:
            self.require_turn(session, action)
            how = await self.approve(
                session,
                action,
                title=title,
                kind=kind,
                destructive=destructive,
                preview=preview,
                content=content,
                card_id=card_id,
            )
        except Refused as refusal:
            self.audit(session, action, "refused", refusal.rule, str(refusal))
            raise
        with self.hub.serving(session):
            result = await run()
        self.audit(session, action, "allowed", how)
        return result

    async def agent_permission(
        self, session: NotebookSession, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The agent's own ``session/request_permission``: only during a turn, at most
        ``JupyterACP.max_pending_permissions`` waiting at once; its card is followed from here (the panel adds the
        request's toolCall to the card of that id). The outcome, or raises :class:`Refused`."""
        call_id = tool_call.get("toolCallId")
        action = Action(PERMISSION, PERMISSION, {}, "acp", (call_id,) if isinstance(call_id, str) else ())
        try:
            self.require_turn(session, action)
            most = self.limit("max_pending_permissions", MAX_PENDING_PERMISSIONS)
            waiting = sum(1 for p in session.pending_permissions.values() if p.source == "agent")
            if waiting >= most:
                raise Refused(
                    "pending_permissions",
                    f"{PERMISSION} refused (rule: pending_permissions): {waiting} permission requests of the agent "
                    f"already wait for the user (JupyterACP.max_pending_permissions = {most}). Nothing was asked; "
                    "wait for their answers first. The owner can change the setting in jupyter_server_config.py.",
                    kind="denied",
                )
        except Refused as refusal:
            self.audit(session, action, "refused", refusal.rule, str(refusal))
            raise
        turn = session.turn
        assert turn is not None
        own = own_tool_call(tool_call)
        if own is not None:  # about one of the project's own tools: asked in the notebook's words, or answered
            outcome = await ask_about_own_tool(self, session, tool_call, options, own)
            if outcome is not None:
                return outcome
        # no await between following the card and showing the request: the panel sees them in this order too
        self.note_tool_call(session, tool_call, keep=not turn.cards_overflowed)
        return await self.hub.ask_permission(session, tool_call, options)

    async def read_file(
        self, session: NotebookSession, action: Action, rules: FileRules, line: Any = None, limit: Any = None
    ) -> str:
        """``fs/read_text_file``: turn, policy, approval, then the bytes: at most ``JupyterACP.max_read_bytes`` per
        read and ``JupyterACP.max_read_bytes_per_turn`` per turn, reserved before a byte is read (reads at once
        share the budget) and settled to what was answered. Raises Refused or FileRefused."""
        path = action.arguments.get("path")
        cap = self.limit("max_read_bytes", MAX_READ_BYTES)
        budget = self.limit("max_read_bytes_per_turn", MAX_READ_BYTES_PER_TURN)
        part = isinstance(line, int) or isinstance(limit, int)
        try:
            self.require_turn(session, action)
            how = await self.approve(
                session, action, title=f"Read {path}", kind="read", destructive=False, preview=str(path)
            )
            size = rules.size(path)
            self.require_turn(session, action)  # again: the turn may have ended while the user was asked
            turn = session.turn
            assert turn is not None
            if not part and size > cap:
                raise FileRefused(
                    "too_large",
                    f"{path} is {size} bytes, larger than one read may be (JupyterACP.max_read_bytes = {cap}). Read "
                    "a part of it with line and limit; the owner can change the setting in jupyter_server_config.py.",
                )
            left = budget - turn.read_bytes
            if left <= 0 or (not part and size > left):
                raise self._budget_refusal(path, budget, turn.read_bytes)
            grant = min(size, cap, left)
            by_budget = left < min(size, cap)
            turn.read_bytes += grant
        except Refused as refusal:
            self.audit(session, action, "refused", refusal.rule, str(refusal))
            raise
        try:
            with self.hub.serving(session):
                text, used = await asyncio.to_thread(rules.read_counted, path, line, limit, grant)
        except FileRefused as exc:
            turn.read_bytes -= grant
            if exc.rule == "too_large" and by_budget:  # the lines asked are more than the turn has left
                over = self._budget_refusal(path, budget, turn.read_bytes)
                self.audit(session, action, "refused", over.rule, str(over))
                raise over from None
            if exc.rule == "too_large" and grant == cap:
                raise FileRefused(
                    "too_large",
                    f"{exc} (JupyterACP.max_read_bytes = {cap}). Read fewer lines at once; the owner can change the "
                    "setting in jupyter_server_config.py.",
                ) from None
            raise
        turn.read_bytes -= grant - used
        self.audit(session, action, "allowed", how)
        return text

    @staticmethod
    def _budget_refusal(path: Any, budget: int, spent: int) -> Refused:
        return Refused(
            "read_budget",
            f"{FS_READ} of {path} refused (rule: read_budget): this turn's file reads already count {spent} "
            f"bytes (JupyterACP.max_read_bytes_per_turn = {budget}). Nothing was read; read less (line and limit), or "
            "continue in the next prompt. The owner can change the setting in jupyter_server_config.py.",
            kind="denied",
        )
