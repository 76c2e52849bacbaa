"""Each notebook's current agent: one server-side fact the Agent panel and the ``%acp`` magic both follow.

The panel's agent picker and ``%acp use AGENT`` change it; the panel shows that agent's conversation and a
``%%acp`` cell naming no agent talks to it.  It is kept per server root and notebook in the store (a server
restart keeps it); a notebook nobody chose one for is on the configured default agent.  A change is said in one
notice (``phase: "current_agent"``, ``agent``, ``previous``, ``by``) in every session of that notebook, so every
panel watching any of them (another browser tab too) sees it and switches.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..protocol.paths import PathError, notebook_api_path
from .model import HubError
from .store import StoreError

log = logging.getLogger(__name__)

#: who changed the agent, as the notice says it
BY = {
    "panel": "in the Agent panel",
    "magic": "with %acp use in the notebook",
    "api": "through the jupyter-acp API",
}


class CurrentAgents:
    """A part of :class:`~jupyter_acp.sessions.hub.SessionHub` (a mixin: one object, one state)."""

    if TYPE_CHECKING:  # pragma: no cover
        # the rest of the hub (its state, its other parts), set up by SessionHub
        root: str

        def __getattr__(self, name: str) -> Any: ...

    _current_agents: dict[str, str] | None = None

    def _chosen_agents(self) -> dict[str, str]:
        """notebook -> the agent chosen for it (loaded from the store on first use)."""
        if self._current_agents is None:
            try:
                self._current_agents = self.store.load_current_agents(self.root)
            except StoreError as exc:  # the store is away: every notebook on the default until it is back
                log.warning("jupyter_acp: could not read the notebooks' current agents: %s", exc)
                return {}
        return self._current_agents

    def _agent_path(self, notebook: str) -> str:
        try:
            return notebook_api_path(notebook)
        except PathError as exc:
            raise HubError(str(exc), 400) from None

    def current_agent(self, notebook: str) -> str:
        """The agent this notebook is on: the one chosen for it while it is configured, else the default."""
        chosen = self._chosen_agents().get(self._agent_path(notebook))
        return chosen if chosen is not None and chosen in self.specs() else str(self.app.default_agent_name)

    def current_agent_info(self, notebook: str) -> dict[str, Any]:
        path = self._agent_path(notebook)
        chosen = self._chosen_agents().get(path)
        return {
            "notebook": path,
            "agent": self.current_agent(path),
            "chosen": chosen in self.specs(),
            "default_agent": self.app.default_agent_name,
            "agents": sorted(self.specs()),
        }

    async def set_current_agent(self, notebook: str, agent: Any, by: str = "api") -> dict[str, Any]:
        """Make ``agent`` this notebook's current agent: its session is opened (created on first use), the choice
        stored, and a change is said in every session of the notebook.  An unknown agent is refused (400)."""
        path = self._agent_path(notebook)
        known = sorted(self.specs())
        if not isinstance(agent, str) or agent not in self.specs():
            raise HubError(
                f"no agent named {agent!r} is configured; the agents are: {', '.join(known)} "
                "(JupyterACP.agents in the server's configuration adds one)",
                400,
            )
        previous = self.current_agent(path)
        session = await self.open_session(path, agent)  # 404 for a notebook that does not exist
        chosen = self._chosen_agents()
        if chosen.get(path) != agent:
            chosen[path] = agent
            try:
                self.store.save_current_agent(self.root, path, agent)
                self._schedule_flush()
            except StoreError as exc:
                self._store_failure(str(exc))
        if previous != agent:
            text = f"The notebook's agent is now {agent} (changed {BY.get(by, BY['api'])}; it was {previous})."
            for other in self.list(path):
                self.emit(
                    other,
                    "notice",
                    level="info",
                    text=text,
                    phase="current_agent",
                    agent=agent,
                    previous=previous,
                    by=by,
                )
        return {**self.current_agent_info(path), "previous": previous, "session": self.describe(session)}

    def _rename_current_agents(self, old: str, new: str) -> None:
        """A renamed notebook (or folder) keeps its current agent."""
        chosen = self._chosen_agents()
        prefix = old.rstrip("/") + "/"
        for path in [p for p in chosen if p == old or p.startswith(prefix)]:
            moved = new + path[len(old) :]
            chosen[moved] = chosen.pop(path)
            try:
                self.store.forget_current_agent(self.root, path)
                self.store.save_current_agent(self.root, moved, chosen[moved])
                self._schedule_flush()
            except StoreError as exc:
                self._store_failure(str(exc))
