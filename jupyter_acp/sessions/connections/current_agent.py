"""Each notebook's current agent: one server-side fact the Agent panel and the ``%acp`` magic both follow.

The panel's agent picker and ``%acp use AGENT`` change it; the panel shows that agent's conversation and a
``%%acp`` cell naming no agent talks to it.  It is kept per server root and notebook in the store (a server
restart keeps it); a notebook nobody chose one for is on the configured default agent.  A change is said in one
notice (``phase: "current_agent"``, ``agent``, ``previous``, ``by``) in every session of that notebook, so every
panel watching any of them (another browser tab too) sees it and switches.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.actor import Actor
from ...protocol.paths import PathError, notebook_api_path
from ..state import HubError
from ..store import StoreError

if TYPE_CHECKING:  # pragma: no cover
    from ...catalog.agents import AgentSpec
    from ..hub_parts import LogSteps
    from ..settings import HubSettings
    from ..state import NotebookSession
    from ..store import TranscriptStore

log = logging.getLogger(__name__)

#: who changed the agent, as the notice says it
BY = {
    "panel": "in the Agent panel",
    "magic": "with %acp use in the notebook",
    "api": "through the jupyter-acp API",
}


class CurrentAgentHub(Protocol):
    """What the notebooks' current agents ask of the session hub: the server root and the store they are kept in
    (and the hub's word when the store fails), the agents, the notebook's sessions (opened, described, told,
    their turns cancelled)."""

    @property
    def root(self) -> str: ...

    @property
    def store(self) -> TranscriptStore: ...

    @property
    def app(self) -> HubSettings: ...

    def specs(self) -> dict[str, AgentSpec]: ...

    def list(self, notebook: str | None = None) -> list[NotebookSession]: ...

    async def open_session(
        self, notebook: str, agent: str | None = None, *, trace: dict[str, str] | None = None
    ) -> NotebookSession: ...

    def describe(self, session: NotebookSession) -> dict[str, Any]: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    @property
    def log(self) -> LogSteps: ...

    async def cancel(self, session: NotebookSession) -> bool: ...


class CurrentAgents:
    """Each notebook's current agent, a service the session hub holds (``hub.current_agents``)."""

    def __init__(self, hub: CurrentAgentHub) -> None:
        self.hub = hub
        self._current_agents: dict[str, str] | None = None

    def _chosen_agents(self) -> dict[str, str]:
        """notebook -> the agent chosen for it (loaded from the store on first use)."""
        if self._current_agents is None:
            try:
                self._current_agents = self.hub.store.load_current_agents(self.hub.root)
            except StoreError as exc:  # the store is away: every notebook on the default until it is back
                log.warning("jupyter_acp: could not read the notebooks' current agents: %s", exc)
                return {}
        return self._current_agents

    def _agent_path(self, notebook: str) -> str:
        try:
            return notebook_api_path(notebook)
        except PathError as exc:
            raise HubError(str(exc), 400) from None

    def current(self, notebook: str) -> str:
        """The agent this notebook is on: the one chosen for it while it is configured, else the default."""
        chosen = self._chosen_agents().get(self._agent_path(notebook))
        return chosen if chosen is not None and chosen in self.hub.specs() else str(self.hub.app.default_agent_name)

    def info(self, notebook: str) -> dict[str, Any]:
        path = self._agent_path(notebook)
        chosen = self._chosen_agents().get(path)
        return {
            "notebook": path,
            "agent": self.current(path),
            "chosen": chosen in self.hub.specs(),
            "default_agent": self.hub.app.default_agent_name,
            "agents": sorted(self.hub.specs()),
        }

    async def choose(self, notebook: str, agent: Any, by: str = "api", actor: Actor | None = None) -> dict[str, Any]:
        """Make ``agent`` this notebook's current agent: its session is opened (created on first use), the choice
        stored, and a change is said in every session of the notebook.  An unknown agent is refused (400).

        ``by``: where (the panel, the magic, the API), as the notice's words say it; ``actor``: who (the person behind
        the request, or the magic), as every panel names them."""
        path = self._agent_path(notebook)
        known = sorted(self.hub.specs())
        if not isinstance(agent, str) or agent not in self.hub.specs():
            raise HubError(
                f"no agent named {agent!r} is configured; the agents are: {', '.join(known)} "
                "(JupyterACP.agents in the server's configuration adds one)",
                400,
            )
        previous = self.current(path)
        session = await self.hub.open_session(path, agent)  # 404 for a notebook that does not exist
        chosen = self._chosen_agents()
        if chosen.get(path) != agent:
            chosen[path] = agent
            try:
                self.hub.store.save_current_agent(self.hub.root, path, agent)
                self.hub.log.schedule_flush()
            except StoreError as exc:
                self.hub.log.store_failure(str(exc))
        if previous != agent:
            text = f"The notebook's agent is now {agent} (changed {BY.get(by, BY['api'])}; it was {previous})."
            for other in self.hub.list(path):
                self.hub.emit(
                    other,
                    "notice",
                    level="info",
                    text=text,
                    phase="current_agent",
                    agent=agent,
                    previous=previous,
                    by=by,
                    **({"actor": actor} if actor else {}),
                )
            await self._stop_turns_of_other_agents(path, agent)
        return {**self.info(path), "previous": previous, "session": self.hub.describe(session)}

    async def _stop_turns_of_other_agents(self, path: str, agent: str) -> None:
        """A turn another agent of this notebook is still running is stopped, and its conversation says why.

        The panel follows the notebook's current agent: a turn left running on the previous one (a permission card
        waiting, a run under way) would go on where nobody sees it, its card asked only by a badge and a toast with
        no conversation behind them. So it is cancelled as Stop would (its waiting cards answered ``cancelled``)
        and its conversation, which the history menu still opens, says so."""
        for other in self.hub.list(path):
            if other.agent == agent or other.turn is None:
                continue
            self.hub.emit(
                other,
                "notice",
                level="warning",
                phase="turn_stopped_by_agent_change",
                text=f"This turn of {other.agent} was stopped: the notebook's agent changed to {agent}. "
                f"Switch back to {other.agent} to continue its conversation.",
            )
            await self.hub.cancel(other)

    def rename(self, old: str, new: str) -> None:
        """A renamed notebook (or folder) keeps its current agent."""
        chosen = self._chosen_agents()
        prefix = old.rstrip("/") + "/"
        for path in [p for p in chosen if p == old or p.startswith(prefix)]:
            moved = new + path[len(old) :]
            chosen[moved] = chosen.pop(path)
            try:
                self.hub.store.forget_current_agent(self.hub.root, path)
                self.hub.store.save_current_agent(self.hub.root, moved, chosen[moved])
                self.hub.log.schedule_flush()
            except StoreError as exc:
                self.hub.log.store_failure(str(exc))
