"""The store's part for each notebook's current agent (``current_agents``: one row per server root and notebook).

Apart from the transcript because it is one small fact per notebook, not a conversation: the agent the panel shows
and a ``%%acp`` cell naming none talks to (``current_agent.py`` keeps it in the hub).  The table is created by
``CREATE TABLE IF NOT EXISTS`` in ``store_file.SCHEMA`` when any store opens, so an older store gains it empty (no
row means "the configured default agent").
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import sqlite3


class CurrentAgentStore:
    """A part of :class:`~jupyter_acp.sessions.store.TranscriptStore` (a mixin over its file)."""

    if TYPE_CHECKING:  # pragma: no cover
        # set by StoreFile
        @property
        def db(self) -> sqlite3.Connection: ...

        def _write(self, sql: str, args: tuple[Any, ...]) -> None: ...

    def load_current_agents(self, root: str) -> dict[str, str]:
        """notebook -> agent chosen for it, for one server root (its real path)."""
        if not root:
            return {}
        rows = self.db.execute("SELECT notebook, agent FROM current_agents WHERE root = ?", (root,)).fetchall()
        return {r[0]: r[1] for r in rows}

    def save_current_agent(self, root: str, notebook: str, agent: str) -> None:
        self._write(
            "INSERT INTO current_agents (root, notebook, agent, updated) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(root, notebook) DO UPDATE SET agent=excluded.agent, updated=excluded.updated",
            (root, notebook, agent, time.time()),
        )

    def forget_current_agent(self, root: str, notebook: str) -> None:
        self._write("DELETE FROM current_agents WHERE root = ? AND notebook = ?", (root, notebook))
