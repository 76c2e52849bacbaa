"""An agent asks permission for one of the project's own tools: one card, in the notebook's words, or none.

Third-party agents reach the notebook's tools over MCP and most ask their own permission before each call, in
their own words ("Approve MCP tool call", ``mcp__jupyter__client_read_cells``, a tool's whole description, no
arguments at all); the gate then asks again with the diff when the agent's card did not show the call exactly.
So when the agent's ``session/request_permission`` is about one of our tools (``approvals.own_tool_call``), the
question is decided as the gate would decide the call:

- the gate would not ask (a tool that only reads under ``auto``, a policy ``auto``, ``review`` or ``deny``, a tool
  "always allowed" in this notebook's session): the agent's request is answered for the user, "allow once", with no card,
  and the gate decides the call itself when it comes (a ``deny`` is refused there, naming its rule);
- the gate would ask: the user sees the gate's own card for that call (its title, the cell's diff, the code to
  run), found by rehearsing the tool up to its gate (``ToolSurface.rehearse``), with the agent's own options; the
  one answer goes to the agent, and an "allow" also approves that very call at the gate (tool and arguments),
  "always" included;
- the request carries no arguments (gemini-cli, qwen-code) or none that make a card (no such cell, a stale edit):
  it is answered for the user, "allow once", and the gate asks at the call, where the arguments are known, on
  the agent's card of that call.

An agent that offers no "allow once" option is asked as it asks. The answer the user did not give is audited
(decision ``answered``) with the rule that would have decided the call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from ...channels import CLIENT_TOOLS, MCP_HTTP
from ...tools.host import Action, digest
from .approvals import PERMISSION, OwnCardGrant, OwnToolCall

if TYPE_CHECKING:  # pragma: no cover
    from ...tools.surface import ToolContext, ToolSurface
    from ..state import NotebookSession

log = logging.getLogger(__name__)


class OwnToolHub(Protocol):
    """What this asks of the session hub."""

    @property
    def tools(self) -> ToolSurface: ...

    def tool_context(
        self, session: NotebookSession, channel: str, tool_call_id: str | None = None, *, action: Any = None
    ) -> ToolContext: ...

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


class AskingGate(Protocol):
    """What this asks of the gate: its policy, its card, its audit."""

    @property
    def hub(self) -> OwnToolHub: ...

    def policy(self, name: str, *, destructive: bool, session: NotebookSession | None = None) -> tuple[str, str]: ...

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
    ) -> dict[str, Any]: ...

    def audit(self, session: NotebookSession, action: Action, decision: str, rule: str, message: str = "") -> None: ...


async def ask_about_own_tool(
    gate: AskingGate,
    session: NotebookSession,
    tool_call: dict[str, Any],
    options: list[dict[str, Any]],
    own: OwnToolCall,
) -> dict[str, Any] | None:
    """The outcome for the agent, or None to ask the agent's request as it is (not a tool of ours after all, or
    no "allow once" to answer it with). None is only answered before anything is awaited."""
    hub = gate.hub
    tool = hub.tools.by_name(own.name)
    once = next((o for o in options if o.get("kind") == "allow_once"), None)
    turn = session.turn
    over_mcp = any(c.startswith("mcp") for c in session.channels)  # else the agent's "jupyter" server is not ours
    # a tool the agent names by our own convention is ours on the client-tools channel too (the built-in agent)
    in_band = own.declared and CLIENT_TOOLS in session.channels
    if tool is None or once is None or turn is None or not (over_mcp or in_band):
        return None
    agent_call = tool_call.get("toolCallId") if isinstance(tool_call.get("toolCallId"), str) else None
    ids = (agent_call,) if agent_call else ()
    policy, rule = gate.policy(own.name, destructive=not tool.read_only, session=session)
    if policy != "ask" or own.name in session.always_allowed:
        why = rule if policy != "ask" else f"{own.name} is always allowed in this notebook's session"
        return _answered(gate, session, own, ids, once, why)
    channel = next((c for c in sorted(session.channels) if c.startswith("mcp")), CLIENT_TOOLS if in_band else MCP_HTTP)
    arguments = own.arguments
    action = Action("tool", own.name, arguments or {}, channel, ids)
    card = None
    if arguments is not None and tool.validate(arguments) is None:
        ctx = hub.tool_context(session, channel, action=action)
        if await hub.tools.available(tool, ctx):
            card = await hub.tools.rehearse(ctx, tool, arguments)
    if session.turn is not turn:
        return {"outcome": "cancelled"}  # the turn ended while the card was made
    if card is None or arguments is None:
        if agent_call:
            turn.answered_for_agent[own.name] = agent_call  # the gate's question is asked on the agent's card
        return _answered(
            gate,
            session,
            own,
            ids,
            once,
            f"{rule}: the agent's request shows no call the gate could put on a card, so the gate asks at the call, "
            "where its arguments are known",
        )
    question = gate.question_card(
        session, action, title=str(card["title"]), kind=str(card["kind"]), preview=str(card["preview"]), on=agent_call
    )
    grant = OwnCardGrant(own.name, digest(arguments))
    return await hub.ask_permission(session, question, options, source="agent", wording="client", grants=grant)


def _answered(
    gate: AskingGate,
    session: NotebookSession,
    own: OwnToolCall,
    ids: tuple[str, ...],
    once: dict[str, Any],
    why: str,
) -> dict[str, Any]:
    """The agent's request answered "allow once" for the user (the gate decides the call itself), audited."""
    gate.audit(
        session,
        Action(PERMISSION, own.name, {}, "acp", ids),
        "answered",
        why,
        f"the agent's request to run {own.name} was answered for the user with its option {once.get('optionId')!r} "
        "(allow once): the gate decides the call itself",
    )
    return {"outcome": "selected", "optionId": once["optionId"]}
