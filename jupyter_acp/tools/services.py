"""What the tool executors share: kernel bridge, notebook access, frontend bridge, policy, and
per-session memory of what the agent last saw of each cell (for the stale-edit refusal)."""

from __future__ import annotations

import logging
from typing import Any

from traitlets import Dict, Enum, Float, Integer
from traitlets.config import Configurable

from ..frontend import FrontendBridge
from ..kernels import KernelBridge
from ..notebook import NotebookAccess
from .host import Action, Refused
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
        help="""Per-tool and per-power overrides of permission_policy, e.g. {'client_execute_code': 'deny'},
        {'client_read_cells': 'ask'}, {'fs/write_text_file': 'auto'}, {'fs/read_text_file': 'deny'}.
        Tools that change nothing and fs/read_text_file default to 'auto'.""",
    )
    execute_timeout = Float(
        60.0, config=True, help="Default seconds a cell or code run may take before the kernel is interrupted."
    )
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


async def gate(
    ctx: ToolContext, tool_name: str, *, title: str, kind: str, arguments: dict[str, Any], preview: str = ""
) -> dict[str, Any] | None:
    """A destructive tool asks the one gate (``sessions/gate.py``) with its own title and preview.

    None when allowed, else the refusal to answer (it names the rule and how to change it).
    """
    action = ctx.action if ctx.action is not None and ctx.action.name == tool_name else None
    if action is None:
        action = Action("tool", tool_name, arguments, ctx.channel, (ctx.tool_call_id,) if ctx.tool_call_id else ())
    try:
        ctx.approval = await ctx.host.approve(ctx.session, action, title=title, kind=kind, preview=preview)
    except Refused as refusal:
        return error_result(str(refusal), kind=refusal.kind, structured={"rule": refusal.rule})
    return None
