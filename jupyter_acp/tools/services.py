"""What the tool executors share: kernel bridge, notebook access, frontend bridge, policy, and
per-session memory of what the agent last saw of each cell (for the stale-edit refusal)."""

from __future__ import annotations

import copy
import logging
from typing import Any

from traitlets import Dict, Enum, Float, Integer
from traitlets.config import Configurable

from ..frontend import FrontendBridge
from ..kernels import KernelBridge
from ..notebook import NotebookAccess
from .files import FileRules
from .host import Action, Refused
from .surface import ToolContext, error_result

log = logging.getLogger(__name__)

POLICIES = ("ask", "auto", "deny", "review")


class JupyterACPTools(Configurable):
    """Settings of the notebook tools lent to agents (``c.JupyterACPTools.*``)."""

    permission_policy = Enum(
        list(POLICIES),
        default_value="ask",
        config=True,
        help="""How the client gates its own destructive tools (edit, delete, move, execute),
        whatever the agent does: 'ask' the user each time (with a per-session 'always allow'),
        'auto' (allow without asking), 'deny' (refuse them), 'review' (Review after: inside a turn, changes
        of the notebook and runs in its kernel go ahead without asking, under the turn's checkpoint, and are
        reviewed after; what no checkpoint undoes, a terminal, fs/write_text_file, a kernel restart, is asked).""",
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
    checkpoint_bytes = Integer(
        1 << 30,
        min=0,
        config=True,
        help="""The most bytes one checkpoint of a kernel's namespace saves (taken before a turn first runs
        cells or code). Variables past it are skipped, each with its reason; 0 saves no namespace (a rewind then
        puts back the cells only).""",
    )


class ToolServices:
    def __init__(self, serverapp: Any, config: JupyterACPTools) -> None:
        self.serverapp = serverapp
        self.config = config
        self.kernels = KernelBridge(serverapp)
        self.frontend = FrontendBridge()
        self.notebooks = NotebookAccess(serverapp, self.frontend)
        #: session id -> cell id -> the source the agent last saw
        self.seen: dict[str, dict[str, str]] = {}
        self._file_rules: FileRules | None = None
        #: a view for a rehearsal (``ToolSurface.rehearse``): what the agent saw is read, never written
        self.rehearsing = False

    def file_rules(self) -> FileRules:
        """What the notebook-file tools may touch: the rules of ``fs/*`` (computed once, as the hub does)."""
        if self._file_rules is None:
            self._file_rules = FileRules.for_server(self.serverapp)
        return self._file_rules

    def rehearsal_view(self) -> ToolServices:
        """The same services for a call only rehearsed: a tool that notes what the agent saw before it asks its gate
        (a stale edit's refusal shows the source) notes nothing, since that refusal never reaches the agent."""
        view = copy.copy(self)
        view.rehearsing = True
        return view

    def saw(self, session_id: str, cell_id: str, source: str) -> None:
        if not self.rehearsing:
            self.seen.setdefault(session_id, {})[cell_id] = source

    def last_seen(self, session_id: str, cell_id: str) -> str | None:
        return self.seen.get(session_id, {}).get(cell_id)

    async def close(self) -> None:
        await self.kernels.close()


async def gate(
    ctx: ToolContext, tool_name: str, *, title: str, kind: str, arguments: dict[str, Any], preview: str = ""
) -> dict[str, Any] | None:
    """A destructive tool asks the one gate (``sessions/gate/gate.py``) with its own title and preview; in a rehearsal
    (``ctx.rehearsal``) it only keeps that card in ``ctx.card`` and refuses.

    None when allowed, else the refusal to answer (it names the rule and how to change it).
    """
    if ctx.rehearsal:
        # only rehearsed (``ToolSurface.rehearse``): the card is what was wanted, nothing is asked nor done
        ctx.card = {"title": title, "kind": kind, "preview": preview, "arguments": arguments}
        return error_result(f"{tool_name} was only rehearsed: nothing was done", kind="rehearsal")
    if ctx.approver is None:  # a context no gate made: nothing that asks runs unasked
        return error_result(
            f"{tool_name} refused (rule: no_gate): this call's context has no gate to ask (it was not made by the "
            "session hub), so nothing was done. Call the tool through the agent's tools.",
            kind="denied",
            structured={"rule": "no_gate"},
        )
    action = ctx.action if ctx.action is not None and ctx.action.name == tool_name else None
    if action is None:
        action = Action("tool", tool_name, arguments, ctx.channel, (ctx.tool_call_id,) if ctx.tool_call_id else ())
    try:
        ctx.approval = await ctx.approver(action, title=title, kind=kind, preview=preview)
    except Refused as refusal:
        return error_result(str(refusal), kind=refusal.kind, structured={"rule": refusal.rule})
    return None
