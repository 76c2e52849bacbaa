"""``/jupyter-acp/notebooks/current-agent?path=NB``: the notebook's current agent, the one fact the Agent panel and
the ``%acp`` magic both follow (``sessions/connections/current_agent.py``).  GET reads it (read), PUT ``{"agent": NAME}``
changes it (write: a read-only user gets 403); the kernel's own way to it is ``kernel/current-agent``."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import BaseHandler, CurrentAgentBody, acting, hub_errors


class CurrentAgentHandler(BaseHandler):
    def notebook(self) -> str:
        path = self.get_query_argument("path", None)
        if not path:
            raise web.HTTPError(400, "which notebook? ?path=NOTEBOOK (its path from the server root)")
        return path

    @web.authenticated
    @authorized
    @hub_errors
    async def get(self) -> None:
        """The notebook's current agent (``chosen``: false while it is on the configured default)."""
        self.send(self.hub.current_agents.info(self.notebook()))

    @web.authenticated
    @authorized
    @hub_errors
    async def put(self) -> None:
        """Change it: the agent's session opens, every panel on the notebook switches, ``%%acp`` follows."""
        notebook = self.notebook()
        body: CurrentAgentBody = self.parse(CurrentAgentBody)
        self.send(await self.hub.current_agents.choose(notebook, body.agent, by=body.by, actor=acting(self)))


def handlers() -> list[tuple[str, type]]:
    return [(r"/jupyter-acp/notebooks/current-agent", CurrentAgentHandler)]
