"""The session hub: notebook session <-> ACP session, turns, permissions, fan-out and replay.

A session is a notebook, not a chat: (notebook path, agent) names exactly one session, whose cwd
is the notebook's folder as its kernel sees it.  Every event is written to the transcript store
before any subscriber sees it; subscribers replay from the last sequence number they saw.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import time
import uuid
from typing import TYPE_CHECKING, Any

from jupyter_core.utils import ensure_async

from ..acp.connection import AgentConnection
from ..agents.catalog import AgentSpec
from ..protocol.paths import PathError, notebook_api_path
from ..tools import ToolSurface
from ..tools.files import FileRules
from .agent_sessions import AgentSessions
from .conversations import Conversations
from .current_agent import CurrentAgents
from .elicitations import Elicitations
from .events import EventLog
from .follow import ToolListFollower
from .gate import Gate
from .model import HubError, NotebookSession, PendingPermission, Subscriber, Turn, TurnTimeout, encode
from .permissions import Permissions
from .store import SessionRecord, StoreError, TranscriptStore
from .terminals import TerminalService
from .turns import Turns

if TYPE_CHECKING:  # pragma: no cover
    from .settings import HubSettings

log = logging.getLogger(__name__)

__all__ = [
    "HubError",
    "NotebookSession",
    "PendingPermission",
    "SessionHub",
    "Subscriber",
    "Turn",
    "TurnTimeout",
    "encode",
]


class SessionHub(EventLog, AgentSessions, Turns, Permissions, Elicitations, Conversations, CurrentAgents):
    """The facade the routes and the app hold: the session registry and the lifecycle here; the event log,
    agent sessions, turns and permissions in their own modules (mixins of one object, one state)."""

    def __init__(self, app: HubSettings, store: TranscriptStore, tools: ToolSurface) -> None:
        self.app = app
        self.serverapp = app.serverapp
        self.store = store
        self.tools = tools
        self.sessions: dict[str, NotebookSession] = {}
        self.elicitations = {}  # questions of agents waiting for the user (elicitations.py)
        self._by_key: dict[tuple[str, str], NotebookSession] = {}
        self._by_acp: dict[tuple[str, str], NotebookSession] = {}
        self.connections: dict[str, AgentConnection] = {}
        self._flush_handle: asyncio.Handle | None = None
        self._last_flush = 0.0
        self._dirty: set[NotebookSession] = set()
        self._store_failed: str | None = None
        self._store_retry_at = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.mcp_host: Any = None  # channels.mcp_http.McpToolHost, started when first needed
        self._turn_slots: dict[str, asyncio.Semaphore] = {}
        #: the one gate every agent action passes
        self._file_rules: FileRules | None = None
        self.follower = ToolListFollower(self, kernel_wait=getattr(app, "kernel_start_wait", 10.0))
        self.gate = Gate(self, tools.services.config if tools.services is not None else None)
        #: agents' commands in Jupyter terminals (``terminal/*``)
        self.terminals = TerminalService(self)
        #: the server root's real path: a session belongs to a notebook of this root, and only its
        #: sessions are loaded (two projects sharing the per-user store never see each other's)
        self.root = os.path.realpath(self.serverapp.root_dir)
        store.max_event_bytes = app.max_event_bytes
        store.max_session_bytes = app.max_session_bytes
        for rec in store.load_sessions(self.root):
            rec.cwd = self.cwd_for(rec.notebook)  # recomputed at every load: always a folder of this root
            self._add(NotebookSession(rec, store.last_seq(rec.id)))

    # -- sessions --------------------------------------------------------------------------------
    def _add(self, session: NotebookSession) -> None:
        self.sessions[session.id] = session
        self._by_key[(session.notebook, session.agent)] = session
        if session.acp_session_id:
            self._by_acp[(session.agent, session.acp_session_id)] = session

    def specs(self) -> dict[str, AgentSpec]:
        return self.app.agent_specs

    def get(self, session_id: str) -> NotebookSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise HubError(f"no session {session_id!r}", 404)
        return session

    def list(self, notebook: str | None = None) -> list[NotebookSession]:
        if notebook is None:
            return list(self.sessions.values())
        path = notebook_api_path(notebook)
        return [s for s in self.sessions.values() if s.notebook == path]

    async def open_session(self, notebook: str, agent: str | None = None) -> NotebookSession:
        """The session for (notebook, agent), created on first use; idempotent.  No agent: the notebook's
        current agent (``current_agent.py``)."""
        try:
            path = notebook_api_path(notebook)
        except PathError as exc:
            raise HubError(str(exc), 400) from None
        agent = agent or self.current_agent(path)
        if agent not in self.specs():
            raise HubError(f"no agent named {agent!r} is configured", 404)
        session = self._by_key.get((path, agent))
        if session is None:
            cm = self.serverapp.contents_manager
            exists = await ensure_async(cm.file_exists(path))
            if not exists:
                raise HubError(f"no notebook at {path!r}", 404)
            now = time.time()
            rec = SessionRecord(
                id=uuid.uuid4().hex,
                notebook=path,
                agent=agent,
                cwd=self.cwd_for(path),
                created=now,
                updated=now,
                root=self.root,
            )
            self._save(rec)
            session = NotebookSession(rec, 0)
            self._add(session)
        elif session.record.cwd != (cwd := self.cwd_for(path)):
            session.record.cwd = cwd  # recomputed at every open: the agent session (re)opens in this root
            self._save(session.record)
        if (
            session.acp_generation is None
            and session.setup_task is None
            and not self._closing
            and session.agent in self.specs()
        ):
            # warm up in the background: the agent starts while the user types
            session.setup_task = self._spawn(self._warm_up(session))
        return session

    def _sessions_of(self, agent: str) -> builtins.list[NotebookSession]:
        return [s for s in self.sessions.values() if s.agent == agent]

    async def approve(self, session: Any, action: Any, *, title: str, kind: str, preview: str = "") -> str:
        """``ToolHost.approve``: a tool asks the one gate, with its own title and preview."""
        return await self.gate.approve(session, action, title=title, kind=kind, preview=preview)

    def file_rules(self) -> FileRules:
        """What ``fs/*`` may touch (computed once: Jupyter's and IPython's folders, allow_hidden)."""
        if self._file_rules is None:
            self._file_rules = FileRules.for_server(self.serverapp)
        return self._file_rules

    def cwd_for(self, path: str) -> str:
        km = self.serverapp.kernel_manager
        return km.cwd_for_path(os.path.dirname(path)) if hasattr(km, "cwd_for_path") else self.serverapp.root_dir

    async def kernel_id_for(self, notebook: str) -> str | None:
        """The kernel currently attached to a notebook, asked at call time."""
        sm = self.serverapp.session_manager
        for s in await ensure_async(sm.list_sessions()):
            if s.get("path") == notebook and s.get("kernel"):
                return s["kernel"]["id"]
        return None

    def rename(self, old: str, new: str) -> None:
        """A renamed notebook keeps its conversation and its current agent; its cwd follows the new folder."""
        self._rename_current_agents(old, new)
        for session in list(self.sessions.values()):
            if session.notebook == old or session.notebook.startswith(old.rstrip("/") + "/"):
                new_path = new + session.notebook[len(old) :]
                self._by_key.pop((session.notebook, session.agent), None)
                session.record.notebook = new_path
                session.record.cwd = self.cwd_for(new_path)
                self._by_key[(new_path, session.agent)] = session
                self._save(session.record)
                self.emit(session, "notice", text=f"notebook renamed to {new_path}; the conversation follows it")

    def _save(self, rec: SessionRecord) -> None:
        try:
            self.store.save_session(rec)
            self._schedule_flush()
        except StoreError as exc:
            self._store_failure(str(exc))

    # -- lifecycle -------------------------------------------------------------------------------
    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        self._closing = True
        await self.terminals.stop()
        for session in self.sessions.values():
            self._cancel_pending_permissions(session)
            self._cancel_pending_elicitations(session, "the server is stopping")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.stop() for c in self.connections.values()), return_exceptions=True)
        if self.mcp_host is not None:
            self.mcp_host.stop()
        self._flush()

    def kill_agents_now(self) -> None:
        for conn in self.connections.values():
            if conn.process:
                conn.process.kill_now()

    def describe(self, session: NotebookSession) -> dict[str, Any]:
        return {
            "id": session.id,
            "notebook": session.notebook,
            "agent": session.agent,
            "cwd": session.cwd,
            "state": "busy" if session.turn else session.state,
            "turn_id": session.turn.id if session.turn else None,
            "last_seq": session.seq,
            "error": session.error,
            "modes": session.modes,
            "config_options": session.config_options,
            "pending_permissions": list(session.pending_permissions),
            "pending_elicitations": [
                k for k, p in self.elicitations.items() if p.session_id == session.id and not p.answered
            ],
            "always_allowed": sorted(session.always_allowed),
            "tool_channels": sorted(session.channels),
        }
