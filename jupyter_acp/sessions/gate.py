"""The one gate: every action an agent asks of the client passes here, whatever carried it.

Channels (the ``org.mini-me`` client-tools convention, loopback MCP, the stdio shim) and the ``fs/*``
methods only translate their wire into an :class:`Action` and hand it to :class:`Gate`, which decides in
one order, for every power alike:

1. the session: the channel found it from the agent's own session id or bearer;
2. the turn: an agent acts only while a turn of *that* session runs (a prompt the user sent);
3. the arguments: validated against the tool's schema (or the power's own rules, for files);
4. the policy: ``auto`` / ``ask`` / ``deny`` per tool and per power (``JupyterACPTools``);
5. the approval: an earlier "allow" that matches *this* action, or the user asked now;
6. the run, and an ``audit`` event in the transcript saying what was decided and by which rule.

Approvals are bound to one action: the tool and a canonical digest of its arguments. An agent's own
``session/request_permission`` that the user allowed pre-approves our gate only for the call whose tool
and arguments match what the user saw, once; ids the agent attaches (``_meta.toolCallId``,
``claudecode/toolUseId``) only help find what the user saw, they never approve by themselves. "Always
allow" is per tool and per notebook session, listed by the session and revocable.

Every refusal names its rule and how the owner can change it, so the agent can tell the user.
The threat model is in ``docs/security.md``.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..tools.host import PERMISSION_OPTIONS, Action, Refused
from .approvals import MAX_REMEMBERED_CALLS, AgentApproval, SeenCall, command_lines

if TYPE_CHECKING:  # pragma: no cover
    from .hub import NotebookSession, SessionHub

log = logging.getLogger(__name__)

#: the powers an agent has besides the client tools (a tool's power is "tool")
FS_READ = "fs/read_text_file"
FS_WRITE = "fs/write_text_file"
#: an agent's command in a client terminal (kind ``execute``: asked by default, like the destructive tools)
TERMINAL_CREATE = "terminal/create"
#: the terminal methods that act on a terminal the session already has (no approval: the id must be the session's)
TERMINAL_METHODS = ("terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release")
POLICIES = ("ask", "auto", "deny")


class Gate:
    """Decides, for every session, what its agent may do; the only place that does."""

    def __init__(self, hub: SessionHub, settings: Any) -> None:
        self.hub = hub
        #: ``JupyterACPTools``: permission_policy, tool_policies
        self.settings = settings
        #: cards shown with a caller's ``card_id`` that the caller has not reported on yet
        self.shown_cards: set[str] = set()

    # -- policy ----------------------------------------------------------------------------------
    def policy(self, name: str, *, destructive: bool) -> tuple[str, str]:
        """(policy, the setting that decided it) for a tool or a power."""
        per_tool = self.settings.tool_policies.get(name)
        if per_tool in POLICIES:
            return per_tool, f"JupyterACPTools.tool_policies[{name!r}] = {per_tool!r}"
        if name == FS_READ:
            return (
                "auto",
                f"agents read files under the server root unless JupyterACPTools.tool_policies[{FS_READ!r}] says otherwise",
            )
        if destructive or name == FS_WRITE:
            policy = self.settings.permission_policy
            return policy, f"JupyterACPTools.permission_policy = {policy!r}"
        return "auto", f"{name} reads only; JupyterACPTools.tool_policies[{name!r}] can set 'ask' or 'deny'"

    # -- the steps every action takes ------------------------------------------------------------
    def require_turn(self, session: NotebookSession, action: Action) -> None:
        if session.turn is None:
            raise Refused(
                "outside_turn",
                f"{action.name} refused (rule: outside_turn): no turn of this notebook session is running, and "
                "agents act only while a prompt of the user runs. Nothing was done; it works during the next prompt.",
                kind="outside_turn",
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
        policy, rule = self.policy(action.name, destructive=destructive)
        if policy == "auto":
            return f"auto ({rule})"
        if action.name in session.always_allowed:
            return "always allowed in this notebook's session"
        matched = self._take_agent_approval(session, action)
        if matched is not None:
            return f"the user allowed the agent's request {matched}"
        tool_call: dict[str, Any] = {
            "toolCallId": card_id or f"client-{secrets.token_hex(8)}",
            "title": title,
            "kind": kind,
            "status": "pending",
            "rawInput": action.arguments,
            "_meta": {"jupyter_acp": {"tool": action.name, "notebook": session.notebook, "power": action.power}},
        }
        turn = session.turn
        shown = next((i for i in action.ids if turn is not None and i in turn.seen_calls), None)
        if shown is not None:
            # the agent already shows this call as a card of its own: the panel asks on that card (one card per
            # call) while the question, title and preview stay ours, under an id the agent cannot know
            tool_call["_meta"]["jupyter_acp"]["agent_call"] = shown
        if content:
            tool_call["content"] = content
        elif preview:
            tool_call["content"] = [{"type": "content", "content": {"type": "text", "text": preview}}]
        if card_id:
            self.shown_cards.add(card_id)
        outcome = await self.hub.ask_permission(session, tool_call, PERMISSION_OPTIONS, source="client")
        if outcome.get("outcome") == "selected":
            option = outcome.get("optionId")
            if option == "allow_always":
                self.allow_always(session, action.name)
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

    # -- approvals -------------------------------------------------------------------------------
    def note_tool_call(self, session: NotebookSession, update: dict[str, Any]) -> None:
        """Remember what the agent shows of its own tool calls (``tool_call`` / ``tool_call_update``)."""
        turn = session.turn
        call_id = update.get("toolCallId")
        if turn is None or not isinstance(call_id, str):
            return
        seen = turn.seen_calls.get(call_id)
        if seen is None:
            if len(turn.seen_calls) >= MAX_REMEMBERED_CALLS:
                return
            seen = turn.seen_calls[call_id] = SeenCall()
        seen.add(update)

    def agent_request_allowed(self, session: NotebookSession, request_id: str, tool_call: dict[str, Any]) -> None:
        """The user allowed an agent's permission request: one matching call of ours needs no second ask."""
        turn = session.turn
        if turn is None:
            return
        seen = SeenCall()
        call_id = tool_call.get("toolCallId")
        if isinstance(call_id, str) and call_id in turn.seen_calls:
            seen.merge(turn.seen_calls[call_id])
        seen.add(tool_call)
        if (seen.names and seen.digests) or seen.commands:
            turn.agent_approvals.append(AgentApproval(request_id, seen))

    def _take_agent_approval(self, session: NotebookSession, action: Action) -> str | None:
        turn = session.turn
        if turn is None:
            return None
        # the ids an agent attaches let later updates of that call count (their rawInput is often filled late)
        for call_id in action.ids:
            known = turn.seen_calls.get(call_id)
            if known is None:
                continue
            for approval in turn.agent_approvals:
                if approval.seen.names & known.names and approval.seen.digests & known.digests:
                    approval.seen.names |= known.names
                    approval.seen.digests |= known.digests
        if action.name == TERMINAL_CREATE:
            return self._take_command_approval(session, action)
        wanted = action.digest
        for approval in list(turn.agent_approvals):
            if action.name in approval.seen.names and wanted in approval.seen.digests:
                turn.agent_approvals.remove(approval)  # used up
                return approval.request_id
        return None

    def _take_command_approval(self, session: NotebookSession, action: Action) -> str | None:
        """A command the user allowed in the agent's own card runs without a second question: the same command
        line, in the notebook's folder, with no variables of the agent's (what the agent's card did not show)."""
        turn = session.turn
        args = action.arguments
        if turn is None or args.get("env") or args.get("cwd") not in (None, "", session.cwd):
            return None
        wanted = command_lines(args.get("command"), args.get("args"))
        for approval in list(turn.agent_approvals):
            if approval.seen.commands & wanted:
                turn.agent_approvals.remove(approval)  # used up
                return approval.request_id
        return None

    def allow_always(self, session: NotebookSession, name: str) -> None:
        session.always_allowed.add(name)
        self.hub.emit(session, "policy_changed", always_allowed=sorted(session.always_allowed))

    def revoke_always(self, session: NotebookSession, name: str | None = None) -> list[str]:
        if name is None:
            session.always_allowed.clear()
        else:
            session.always_allowed.discard(name)
        self.hub.emit(session, "policy_changed", always_allowed=sorted(session.always_allowed))
        return sorted(session.always_allowed)

    # -- audit -----------------------------------------------------------------------------------
    def audit(self, session: NotebookSession, action: Action, decision: str, rule: str, message: str = "") -> None:
        extra = {"message": message} if message else {}
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
        """A client tool call from any channel; always a ``CallToolResult``."""
        from ..tools import error_result

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
            if not tool.destructive:
                # tools that change nothing are not gated by their executor: ask here when policy says so
                how = await self.approve(
                    session,
                    action,
                    title=tool.title or name,
                    kind="read",
                    destructive=False,
                    preview=json.dumps(arguments, ensure_ascii=False, indent=1)[:2000],
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
        self.audit(session, action, "refused" if refused else "allowed", str(refused or ctx.approval or how))
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
