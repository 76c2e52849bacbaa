"""What the tool executors share: kernel bridge, notebook access, frontend bridge, policy, and
per-session memory of what the agent last saw of each cell (for the stale-edit refusal)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from traitlets import Dict, Enum, Float, Integer
from traitlets.config import Configurable

from ..frontend import FrontendBridge
from ..kernel import KernelBridge
from ..notebook import NotebookAccess
from .surface import ToolContext, error_result

log = logging.getLogger(__name__)

POLICIES = ("ask", "auto", "deny")


class JupyterACPTools(Configurable):
    """Settings of the notebook tools lent to agents (``c.JupyterACPTools.*``)."""

    permission_policy = Enum(
        list(POLICIES),
        default_value="ask",
        config=True,
        help="""How the client gates its own destructive tools (edit, delete, move, execute),
        whatever the agent does: 'ask' the user each time (with a per-session 'always allow'),
        'auto' (allow without asking), 'deny' (refuse them).""",
    )
    tool_policies = Dict(
        default_value={},
        config=True,
        help="Per-tool overrides of permission_policy, e.g. {'client_execute_code': 'deny'}.",
    )
    execute_timeout = Float(60.0, config=True, help="Default seconds a cell or code run may take before the kernel is interrupted.")
    max_execute_timeout = Float(600.0, config=True, help="Largest timeout an agent may ask for.")
    output_budget = Integer(2000, config=True, help="Characters kept of each text output returned to the agent.")
    variable_timeout = Float(15.0, config=True, help="Seconds a variable listing or inspection may take.")
    selection_timeout = Float(5.0, config=True, help="Seconds the browser tab has to answer getSelection.")


class ToolServices:
    def __init__(self, serverapp: Any, config: JupyterACPTools) -> None:
        self.serverapp = serverapp
        self.config = config
        self.kernels = KernelBridge(serverapp)
        self.frontend = FrontendBridge()
        self.notebooks = NotebookAccess(serverapp, self.frontend)
        #: session id -> cell id -> the source the agent last saw
        self.seen: dict[str, dict[str, str]] = {}

    def saw(self, session_id: str, cell_id: str, source: str) -> None:
        self.seen.setdefault(session_id, {})[cell_id] = source

    def last_seen(self, session_id: str, cell_id: str) -> str | None:
        return self.seen.get(session_id, {}).get(cell_id)

    async def close(self) -> None:
        await self.kernels.close()

    def policy_for(self, tool_name: str) -> str:
        policy = self.config.tool_policies.get(tool_name, self.config.permission_policy)
        return policy if policy in POLICIES else "ask"


PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow in this notebook's session", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


async def gate(
    ctx: ToolContext, tool_name: str, *, title: str, kind: str, arguments: dict[str, Any], preview: str = ""
) -> dict[str, Any] | None:
    """Ask the user before a destructive tool runs; None when allowed, else the refusal to answer."""
    services: ToolServices = ctx.services
    policy = services.policy_for(tool_name)
    if policy == "deny":
        return error_result(
            f"{tool_name} is disabled by the user's settings (JupyterACPTools.permission_policy); "
            "do not retry it, tell the user what you wanted to do instead.",
            kind="denied",
        )
    if policy == "auto" or tool_name in ctx.session.always_allowed:
        return None
    if ctx.hub.user_approved(ctx.session, ctx.tool_call_id):
        return None  # the agent asked the user about this very call a moment ago
    tool_call: dict[str, Any] = {
        "toolCallId": ctx.tool_call_id or f"client-{uuid.uuid4().hex[:8]}",
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": arguments,
        "_meta": {"jupyter_acp": {"tool": tool_name, "notebook": ctx.notebook}},
    }
    if preview:
        tool_call["content"] = [{"type": "content", "content": {"type": "text", "text": preview}}]
    outcome = await ctx.hub.ask_permission(ctx.session, tool_call, PERMISSION_OPTIONS, source="client")
    if outcome.get("outcome") == "selected":
        option = outcome.get("optionId")
        if option == "allow_always":
            ctx.session.always_allowed.add(tool_name)
            return None
        if option == "allow_once":
            return None
        return error_result(
            f"the user rejected {title!r}. Do not retry the same change; ask the user what they want instead.",
            kind="rejected",
        )
    return error_result(f"the permission request for {title!r} was cancelled; nothing was changed.", kind="cancelled")
