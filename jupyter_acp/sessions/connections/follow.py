"""The tools follow the notebook's kernel: an agent that was told a tool list learns when it no longer holds.

In ``request`` discovery an agent asks ``_org.mini-me/tools/list`` only when a session is opened, loaded or
resumed. JupyterLab warms the notebook's agent session up as soon as the notebook opens, before its kernel has
started, so the agent's list says "no kernel" for the whole conversation unless the client makes it ask again.

What the list depends on (the kernel started, switched to another language, shut down or died; the notebook
became read-only or writable) is compared with what the agent was last told (``session.listed_tools``):

- on the kernel manager's own events (start, restart, shutdown), a few times shortly after, since the
  notebook's session row is saved after its kernel starts;
- before every prompt, after waiting briefly for a kernel that is still starting (the user typed while
  JupyterLab was starting it);
- after a turn, when a change arrived during it (never in the middle of a turn).

When it changed, the agent asks again: ``session/resume`` (or ``session/load``) where the agent offers it, with
a short notice in the conversation; where it offers neither, the next prompt opens a fresh session seeded with
the recent history, as after a crash. MCP channels list tools per request already: nothing to do there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from ...channels import CLIENT_TOOLS

if TYPE_CHECKING:  # pragma: no cover
    from ...acp.connection import AgentConnection
    from ...tools import ToolContext, ToolSurface
    from ..state import NotebookSession

log = logging.getLogger(__name__)

KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
#: after a kernel event, check again at these delays (s): the notebook's session row lands after the kernel
CHECK_DELAYS = (0.3, 1.0, 3.0)
#: how long a prompt waits for a kernel that a tab showing the notebook has not started yet (s)
NO_KERNEL_WAIT = 3.0
#: a kernel that has not answered ``kernel_info`` within this (s) gets the "waiting for the kernel" notice
KERNEL_ASK_QUIET = 0.5
RUN_CODE = {"client_execute_cells", "client_execute_code"}
VARIABLES = {"client_list_variables", "client_inspect_variable"}
EDITS = {"client_insert_cell", "client_edit_cell", "client_delete_cells", "client_move_cell"}


def describe_change(gained: set[str], lost: set[str], kernel: str | None) -> str:
    """One line for the conversation: what the agent can do now that it could not (or no longer can)."""
    parts = []
    if gained & RUN_CODE:
        what = "run code" + (" and look at its variables" if gained & VARIABLES else "")
        parts.append(f"the {kernel or 'notebook'} kernel is up: the agent can now {what}")
    elif lost & RUN_CODE:
        parts.append("the notebook's kernel is gone: the agent can no longer run code until one is started")
    elif gained & VARIABLES:
        parts.append(
            f"the {kernel or 'notebook'} kernel offers variable inspection: the agent can now look at variables"
        )
    elif lost & VARIABLES:
        parts.append(f"the {kernel or 'new'} kernel offers no variable inspection: the agent can still run code")
    if gained & EDITS:
        parts.append("the notebook is writable again: the agent can edit it")
    elif lost & EDITS:
        parts.append("the notebook is read-only: the agent can no longer edit it")
    if not parts:
        added = ", ".join(sorted(gained)) or "none"
        removed = ", ".join(sorted(lost)) or "none"
        parts.append(f"the notebook's tools changed (added: {added}; removed: {removed})")
    return "; ".join(parts)


class FollowerHub(Protocol):
    """What following the tool lists asks of the session hub: its sessions and agents, the tools a session would see,
    the kernel of a notebook, the event log, and the hub's own tasks (and whether it is stopping)."""

    @property
    def closing(self) -> bool: ...

    @property
    def sessions(self) -> dict[str, NotebookSession]: ...

    @property
    def connections(self) -> dict[str, AgentConnection]: ...

    @property
    def tools(self) -> ToolSurface: ...

    def tool_context(
        self, session: NotebookSession, channel: str, tool_call_id: str | None = None, *, action: Any = None
    ) -> ToolContext: ...

    async def kernel_id_for(self, notebook: str) -> str | None: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    async def ensure_acp_session(self, session: NotebookSession, *, trace: dict[str, str] | None = None) -> None: ...

    async def warm_up(self, session: NotebookSession, trace: dict[str, str] | None = None) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...


class ToolListFollower:
    """Keeps each agent's tool list (``request`` discovery) in step with its notebook."""

    def __init__(self, hub: FollowerHub, kernel_wait: float = 10.0) -> None:
        self.hub = hub
        self.kernel_wait = kernel_wait
        self._pending: dict[str, asyncio.Task[None]] = {}
        #: kernels that answered our ``kernel_info`` (up, whatever Jupyter's state says), and the asks under way
        self._answered: set[str] = set()
        self._asking: dict[str, asyncio.Task[Any]] = {}

    # -- wiring ----------------------------------------------------------------------------------
    def listen(self, event_logger: Any) -> None:
        async def on_kernel_event(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            if data.get("action") in ("start", "restart", "shutdown"):
                self._answered.discard(data.get("kernel_id"))  # a restarted kernel is asked again
                self.kernel_changed()

        try:
            event_logger.add_listener(schema_id=KERNEL_ACTIONS, listener=on_kernel_event)
        except Exception as exc:  # an older server without the schema: the check before each prompt remains
            log.warning("jupyter_acp: kernel events are not followed (%s); tool lists are checked per prompt", exc)

    def following(self, session: NotebookSession) -> bool:
        return session.listed_tools is not None and CLIENT_TOOLS in session.channels

    def kernel_changed(self) -> None:
        """Some kernel started, restarted or stopped: check every session whose agent holds a list."""
        if self.hub.closing:  # kernels are shut down after the extension stops: nothing to tell anyone
            return
        for session in list(self.hub.sessions.values()):
            if self.following(session) and session.id not in self._pending:
                self._pending[session.id] = self.hub.spawn(self._check_soon(session))

    async def _check_soon(self, session: NotebookSession) -> None:
        try:
            for delay in CHECK_DELAYS:
                await asyncio.sleep(delay)
                if await self.refresh_if_changed(session):
                    return
        except Exception:
            log.exception("checking the tool list of session %s failed", session.id)
        finally:
            self._pending.pop(session.id, None)

    # -- checks ----------------------------------------------------------------------------------
    async def current_tools(self, session: NotebookSession) -> frozenset[str]:
        ctx = self.hub.tool_context(session, CLIENT_TOOLS)
        return frozenset(t.name for t in await self.hub.tools.list_tools(ctx))

    async def wait_for_kernel(self, session: NotebookSession) -> None:
        """A prompt sent while the notebook's kernel is starting waits for it, briefly, to keep its tools.

        Jupyter reports a kernel as ``starting`` until some client sends it a request: a kernel started through
        ``POST api/sessions`` by a script stays ``starting`` while it idles, for as long as nobody asks it
        anything. So the kernel itself is asked, once per kernel: one ``kernel_info`` over the project's own
        client. An answer means it is up (and its ``status`` messages move Jupyter's state on too); a kernel
        that really is starting answers when it is up, or the wait ends at ``JupyterACP.kernel_start_wait``.
        """
        kernels = getattr(self.hub.tools.services, "kernels", None)
        if kernels is None:
            return
        deadline = time.monotonic() + self.kernel_wait
        #: a tab shows the notebook but JupyterLab has not asked for its kernel yet: wait a little for it too
        frontend = getattr(self.hub.tools.services, "frontend", None)
        # (once per session: a notebook kept without a kernel must not make every prompt wait)
        tab_open = frontend is not None and frontend.has_tab(session.notebook) and not session.waited_for_kernel
        session.waited_for_kernel = True
        no_kernel_until = time.monotonic() + min(NO_KERNEL_WAIT, self.kernel_wait)
        told = False
        while time.monotonic() < deadline:
            kid = await self.hub.kernel_id_for(session.notebook)
            if kid is None and tab_open and time.monotonic() < no_kernel_until:
                await asyncio.sleep(0.1)
                continue
            if kid is None or kid in self._answered or kernels.execution_state(kid) != "starting":
                return
            asking = self._asking.get(kid)
            if asking is None:
                # a task of the hub: cancelled and awaited when the server stops, never left pending
                asking = self._asking[kid] = self.hub.spawn(self._ask_kernel(kernels, kid))
            done, _ = await asyncio.wait({asking}, timeout=min(KERNEL_ASK_QUIET, max(0.0, deadline - time.monotonic())))
            if done and kid in self._answered:
                return
            if not told:
                told = True
                self.hub.emit(
                    session,
                    "notice",
                    level="info",
                    phase="kernel_starting",
                    text="waiting for the notebook's kernel to start…",
                )
            if done:  # it did not answer (not up yet, or refused): look again shortly
                await asyncio.sleep(0.1)

    async def _ask_kernel(self, kernels: Any, kernel_id: str) -> None:
        """One ``kernel_info`` to a kernel Jupyter calls ``starting``: remembered when it answers."""
        try:
            await kernels.kernel_info(kernel_id, timeout=self.kernel_wait)
        except Exception as exc:  # not up yet, gone, or a gateway that refuses: the state decides then
            log.debug("kernel %s did not answer kernel_info: %s", kernel_id, exc)
        else:
            if len(self._answered) > 1000:
                self._answered.clear()
            self._answered.add(kernel_id)
        finally:
            self._asking.pop(kernel_id, None)

    async def refresh_if_changed(self, session: NotebookSession, *, in_turn: bool = False) -> bool:
        """Make the agent ask for its list again when it no longer holds; True when it did (or will)."""
        if not self.following(session) or session.acp_generation is None:
            return False
        if session.turn is not None and not in_turn:
            session.tools_stale = True  # never in the middle of a turn: after it
            return False
        listed = session.listed_tools or frozenset()
        current = await self.current_tools(session)
        if current == listed:
            session.tools_stale = False
            return False
        if (session.turn is not None and not in_turn) or session.acp_generation is None:
            session.tools_stale = True
            return False
        kernels = getattr(self.hub.tools.services, "kernels", None)
        kid = await self.hub.kernel_id_for(session.notebook)
        kernel = None
        if kid and kernels is not None:
            language = await kernels.language_async(kid)
            kernel = language.capitalize() if isinstance(language, str) and language else kernels.kernel_name(kid)
        text = describe_change(set(current - listed), set(listed - current), kernel)
        session.tools_stale = False
        conn = self.hub.connections.get(session.agent)
        if conn is not None and conn.alive and (conn.supports_resume or conn.supports_load):
            self.hub.emit(session, "notice", level="info", phase="tools_changed", text=text)
            session.acp_generation = None  # reopen: the agent asks for the list with reason resume (or load)
            if in_turn:
                await self.hub.ensure_acp_session(session)
            else:
                session.setup_task = self.hub.spawn(self.hub.warm_up(session))
        else:
            # the agent can reopen nothing: the next prompt (this one, in a turn) opens a new session, re-seeded
            self.hub.emit(session, "notice", level="info", phase="tools_changed", text=text)
            session.acp_generation = None
        return True

    def turn_ended(self, session: NotebookSession) -> None:
        if session.tools_stale and session.id not in self._pending:
            self._pending[session.id] = self.hub.spawn(self._check_soon(session))
