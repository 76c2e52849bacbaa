"""What the extension answers when an agent calls its client.

``session/update`` notifications are recorded inline, in arrival order, before anything else
runs; requests (permissions, files, client tools) each run in their own task.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shlex
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, cast

from ...acp.v1 import (
    CreateTerminalRequest,
    ReadTextFileRequest,
    RequestPermissionRequest,
    SessionNotification,
    TerminalRequest,
    WriteTextFileRequest,
)
from ...channels import CLIENT_TOOLS
from ...channels.mcp_acp import METHODS as MCP_OVER_ACP  # hook: MCP over ACP
from ...channels.mcp_acp import handle as serve_mcp_over_acp
from ...protocol import client_tools
from ...protocol.client_tools import call_ids
from ...protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, RpcError
from ...tools.files import FileRefused
from ...tools.host import Action, Refused
from ..gate.approvals import PERMISSION, shell_line
from ..gate.elicitations import COMPLETE as ELICITATION_COMPLETE
from ..gate.elicitations import METHOD as ELICITATION_CREATE
from ..gate.elicitations import Questions
from ..gate.gate import FS_READ, FS_WRITE, TERMINAL_CREATE, Gate
from ..review.guard import guard_notebook_write
from ..terminals.terminal_plan import TerminalRefused
from ..terminals.terminals import TerminalService

if TYPE_CHECKING:  # pragma: no cover
    import contextlib

    from ...acp.connection import AgentConnection
    from ...tools import ToolContext, ToolSurface
    from ...tools.files import FileRules
    from ..state import NotebookSession
    from ..terminals.terminal_output import AgentTerminal

log = logging.getLogger(__name__)


#: what a withdrawn request was, in the user's words
WITHDRAWN_WHAT = {
    PERMISSION: "its question (the permission card)",
    ELICITATION_CREATE: "its question (the form or link)",
    FS_READ: "its file read",
    FS_WRITE: "its file write",
    TERMINAL_CREATE: "its command",
    "terminal/wait_for_exit": "its wait for a command to end",
}


#: a handler of the method table: the request's params (a dict, as the ACP schema names it) to its result
Handler = Callable[[Any], Awaitable[Any]]


async def _now(fn: Any, *args: Any) -> Any:
    """A synchronous step as the gate's ``run`` (it awaits what it runs)."""
    return fn(*args)


class ClientHub(Protocol):
    """What serving an agent's requests asks of the session hub: the notebook session an agent's session id names,
    the gate and the terminals, the tools and file rules, the event log, the user's questions, and the mark that a
    request is being served."""

    @property
    def gate(self) -> Gate: ...

    @property
    def terminals(self) -> TerminalService: ...

    @property
    def tools(self) -> ToolSurface: ...

    def session_for_acp(self, conn: AgentConnection, acp_session_id: Any) -> NotebookSession | None: ...

    def file_rules(self) -> FileRules: ...

    def tool_context(
        self, session: NotebookSession, channel: str, tool_call_id: str | None = None, *, action: Any = None
    ) -> ToolContext: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    def emit_update(self, session: NotebookSession, update: dict[str, Any]) -> None: ...

    @property
    def questions(self) -> Questions: ...

    def serving(self, session: NotebookSession) -> contextlib.AbstractContextManager[None]: ...


class ClientEndpoint:
    """The client side's request and notification handler for one agent connection."""

    def __init__(self, hub: ClientHub, conn: AgentConnection) -> None:
        self.hub = hub
        self.conn = conn
        #: the agent's requests being served now, and whether the last one was refused for their number
        self.under_way = 0
        self._refusing = False
        #: the agent's requests, by method, each to its handler (the params it reads, as the ACP schema names them);
        #: a method not here may be one of the client tools (``ToolSurface.by_method``), else it is not found
        self.requests: dict[str, Handler] = {
            PERMISSION: self._request_permission,
            ELICITATION_CREATE: self._create_elicitation,
            FS_READ: self._read_text_file,
            FS_WRITE: self._write_text_file,
            TERMINAL_CREATE: self._create_terminal,
            "terminal/output": self._terminal_output,
            "terminal/wait_for_exit": self._wait_for_terminal_exit,
            "terminal/kill": self._kill_terminal,
            "terminal/release": self._release_terminal,
            client_tools.TOOLS_LIST_METHOD: self._list_tools,
            # hook: MCP over ACP, translated to the one gate (channels/mcp_acp.py)
            **{method: partial(self._mcp_over_acp, method) for method in MCP_OVER_ACP},
        }
        #: the agent's notifications, by method (others are ignored)
        self.notifications: dict[str, Callable[[Any], None]] = {
            "session/update": self._session_update,
            ELICITATION_COMPLETE: self._complete_elicitation,
        }

    # -- notifications ---------------------------------------------------------------------------
    def handle_notification(self, method: str, params: Any) -> None:
        handler = self.notifications.get(method)
        if handler is not None and isinstance(params, dict):
            handler(params)
        elif method.startswith("_"):
            log.debug("extension notification %s ignored", method)
        else:
            log.debug("notification %s ignored", method)

    def _session_update(self, params: SessionNotification) -> None:
        session = self.hub.session_for_acp(self.conn, params.get("sessionId"))
        update = params.get("update")
        if session is None or not isinstance(update, dict):
            log.debug("update for unknown session %r dropped", params.get("sessionId"))
            return
        if session.replaying:
            return  # session/load replays what the transcript already holds
        kind = update.get("sessionUpdate")
        if session.turn is not None:
            session.turn.touch()
            if kind == "tool_call" or kind == "tool_call_update":
                self.hub.gate.note_tool_call(session, update)
        self.hub.emit_update(session, update)
        if kind == "current_mode_update" or kind == "config_option_update":
            self._track_session_state(session, kind, update)

    def _complete_elicitation(self, params: dict[str, Any]) -> None:
        self.hub.questions.complete((self.conn.name, self.conn.generation), params)

    def _track_session_state(self, session: NotebookSession, kind: str, update: dict[str, Any]) -> None:
        if kind == "current_mode_update" and session.modes is not None:
            mode = update.get("currentModeId") or update.get("modeId")
            if mode:
                session.modes = {**session.modes, "currentModeId": mode}
        elif kind == "config_option_update" and isinstance(update.get("configOptions"), list):
            session.config_options = update["configOptions"]

    def request_withdrawn(self, method: str, params: Any) -> None:
        """The agent sent ``$/cancel_request`` for a request of its own we are serving: its handler is being cancelled
        (a card waiting for the user is withdrawn by the part that showed it) and it is answered -32800; the
        conversation says so, for a card that vanishes must not look like a glitch."""
        session = self.hub.session_for_acp(self.conn, params.get("sessionId") if isinstance(params, dict) else None)
        if session is None:
            log.info("agent %s withdrew its %s request", self.conn.name, method)
            return
        what = WITHDRAWN_WHAT.get(method, f"its {method[:80]} request")
        self.hub.emit(
            session,
            "notice",
            level="info",
            phase="request_withdrawn",
            method=method[:80],
            text=f"agent {self.conn.name!r} withdrew {what} ($/cancel_request); nothing more is done for it",
        )

    # -- requests --------------------------------------------------------------------------------
    async def handle_request(self, method: str, params: Any) -> Any:
        """Every request of the agent, counted: past ``JupyterACP.max_agent_requests`` under way at once, the gate
        refuses the next at once (each holds memory until answered, and a hostile agent need not wait)."""
        try:
            self.hub.gate.admit_request(method, self.under_way)
        except Refused as exc:
            if not self._refusing:
                self._refusing = True  # said once per burst: the log is not the agent's to flood
                log.warning("agent %s: %s", self.conn.name, exc)
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        self._refusing = False
        self.under_way += 1
        try:
            return await self._handle_request(method, params)
        finally:
            self.under_way -= 1

    async def _handle_request(self, method: str, params: Any) -> Any:
        if not isinstance(params, dict):
            params = {}
        handler = self.requests.get(method)
        if handler is not None:
            return await handler(params)
        tool = self.hub.tools.by_method(method)
        if tool is not None:
            return await self._call_tool(tool.name, params)
        raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})

    # -- questions -------------------------------------------------------------------------------
    async def _request_permission(self, params: RequestPermissionRequest) -> dict[str, Any]:
        session = self._session(params.get("sessionId"))
        raw_call = params.get("toolCall")
        tool_call = raw_call if isinstance(raw_call, dict) else {}
        options = [o for o in params.get("options") or [] if isinstance(o, dict) and o.get("optionId")]
        if not options:
            raise RpcError(INVALID_PARAMS, "request_permission needs at least one option")
        try:
            outcome = await self.hub.gate.agent_permission(session, tool_call, options)
        except Refused as exc:
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        return {"outcome": outcome}

    async def _create_elicitation(self, params: dict[str, Any]) -> Any:
        session = self._session(params.get("sessionId"))  # one of this agent's sessions, during its turn
        return await self.hub.questions.ask(session, (self.conn.name, self.conn.generation), params)

    async def _mcp_over_acp(self, method: str, params: dict[str, Any]) -> Any:
        return await serve_mcp_over_acp(self.hub.gate, self.conn, method, params)

    def _session(self, acp_session_id: Any) -> NotebookSession:
        session = self.hub.session_for_acp(self.conn, acp_session_id)
        if session is None:
            raise RpcError(INVALID_PARAMS, f"unknown session {acp_session_id!r} for this agent")
        return session

    # -- files -----------------------------------------------------------------------------------
    def _refused(self, exc: Any) -> RpcError:
        if getattr(exc, "missing", False):
            return RpcError(RESOURCE_NOT_FOUND, str(exc))
        return RpcError(INVALID_PARAMS, str(exc), {"rule": getattr(exc, "rule", "")})

    async def _read_text_file(self, params: ReadTextFileRequest) -> dict[str, Any]:
        session = self._session(params.get("sessionId"))
        rules = self.hub.file_rules()
        path = params.get("path")
        action = Action(FS_READ, FS_READ, {"path": path}, "acp")
        try:
            rules.resolve(path)  # refused paths never reach the user as a question
            text = await self.hub.gate.read_file(session, action, rules, params.get("line"), params.get("limit"))
        except FileRefused as exc:
            self.hub.gate.audit(session, action, "refused", exc.rule, str(exc))
            raise self._refused(exc) from None
        except Refused as exc:
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        return {"content": text}

    async def _write_text_file(self, params: WriteTextFileRequest) -> dict[str, Any]:
        session = self._session(params.get("sessionId"))
        rules = self.hub.file_rules()
        path = params.get("path")
        content = params.get("content")
        action = Action(FS_WRITE, FS_WRITE, {"path": path, "content": content}, "acp")
        try:
            if not isinstance(content, str):
                raise FileRefused("invalid_arguments", "content must be a string")
            real = rules.prepare_write(path)
            old = await asyncio.to_thread(rules.current_text, real)
            # a notebook's provenance is jupyter-acp's to write: refused when forged, carried over when overwritten
            guarded = guard_notebook_write(str(path), old, content)
            if guarded != content:
                content = guarded
                action = Action(FS_WRITE, FS_WRITE, {"path": path, "content": content}, "acp")
            diff = {"type": "diff", "path": str(path), "oldText": old, "newText": content}
            await self.hub.gate.perform(
                session,
                action,
                lambda: asyncio.to_thread(rules.write, cast(str, path), real, cast(str, content)),
                title=f"{'Overwrite' if old is not None else 'Create'} {path}",
                kind="edit",
                destructive=True,
                content=[diff],
            )
        except FileRefused as exc:
            self.hub.gate.audit(session, action, "refused", exc.rule, str(exc))
            raise self._refused(exc) from None
        except Refused as exc:
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        return {}

    # -- terminals -------------------------------------------------------------------------------
    async def _create_terminal(self, params: CreateTerminalRequest) -> dict[str, Any]:
        """``terminal/create``: checked, shown to the user (command, args, cwd) unless policy says, then started."""
        session = self._session(params.get("sessionId"))
        terminals = self.hub.terminals
        shown: dict[str, Any] = {
            k: params.get(k) for k in ("command", "args", "cwd", "env", "outputByteLimit") if k in params
        }
        action = Action(TERMINAL_CREATE, TERMINAL_CREATE, shown, "acp")
        card = f"client-terminal-{secrets.token_hex(8)}"
        try:
            plan = terminals.plan(session, params)  # refused plans never reach the user as a question
            argv = [plan["command"], *plan["args"]]
            shell = shell_line(argv)
            # the line as it runs: a shell's own line unquoted (``bash -lc LINE`` shows LINE), else shell-quoted
            line = shell or (shlex.join(argv) if plan["args"] else plan["command"])
            preview = f"$ {line}\n" + (f"run by {shlex.join(argv[:2])} " if shell else "") + f"in {plan['cwd']}"
            if plan["env"]:
                preview += "\nwith " + ", ".join(f"{k}={v}" for k, v in plan["env"].items())
            terminal = await self.hub.gate.perform(
                session,
                action,
                lambda: _now(terminals.create, session, plan),
                title=f"Run {line[:200]}",
                kind="execute",
                destructive=True,
                preview=preview,
                card_id=card,
            )
        except TerminalRefused as exc:
            self.hub.gate.audit(session, action, "refused", exc.rule, str(exc))
            self._settle_card(session, card, "failed")
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        except Refused as exc:
            self.hub.gate.shown_cards.discard(card)  # rejected or cancelled: the card says so itself
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        self._settle_card(session, card, "completed")
        return {"terminalId": terminal.id}

    def _settle_card(self, session: NotebookSession, card: str, status: str) -> None:
        """The card the user allowed a command on says whether it started (not 'pending' until the turn ends)."""
        if card in self.hub.gate.shown_cards:
            self.hub.gate.shown_cards.discard(card)
            update = {"sessionUpdate": "tool_call_update", "toolCallId": card, "status": status}
            self.hub.emit(session, "session_update", update=update)

    def _own_terminal(self, method: str, params: TerminalRequest) -> tuple[NotebookSession, AgentTerminal]:
        """``terminal/output|wait_for_exit|kill|release`` act only on this session's own terminals."""
        session = self._session(params.get("sessionId"))
        try:
            return session, self.hub.terminals.get(session, params.get("terminalId"))
        except TerminalRefused as exc:
            action = Action("terminal", method, {"terminalId": params.get("terminalId")}, "acp")
            self.hub.gate.audit(session, action, "refused", exc.rule, str(exc))
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None

    async def _terminal_output(self, params: TerminalRequest) -> dict[str, Any]:
        _, terminal = self._own_terminal("terminal/output", params)
        return self.hub.terminals.output(terminal)

    async def _wait_for_terminal_exit(self, params: TerminalRequest) -> dict[str, Any]:
        session, terminal = self._own_terminal("terminal/wait_for_exit", params)
        with self.hub.serving(session):  # the agent waits on the command, not hangs
            return await self.hub.terminals.wait_for_exit(terminal)

    async def _kill_terminal(self, params: TerminalRequest) -> dict[str, Any]:
        _, terminal = self._own_terminal("terminal/kill", params)
        await self.hub.terminals.kill(terminal)
        return {}

    async def _release_terminal(self, params: TerminalRequest) -> dict[str, Any]:
        _, terminal = self._own_terminal("terminal/release", params)
        await self.hub.terminals.release(terminal)
        return {}

    # -- client tools ----------------------------------------------------------------------------
    async def _list_tools(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.hub.session_for_acp(self.conn, client_tools.session_of_call(params))
        if session is None:
            # request mode during session/new: the session being set up is the only candidate
            session = self.conn.setting_up
        if session is None:
            raise RpcError(INVALID_PARAMS, "tools/list names no session this agent is opening or owns")
        if session.channels and CLIENT_TOOLS not in session.channels:
            return {"tools": []}  # this session's tools travel over MCP: one channel, no duplicates
        ctx = self.hub.tool_context(session, CLIENT_TOOLS)
        tools = await self.hub.tools.list_tools(ctx)
        session.listed_tools = frozenset(t.name for t in tools)  # followed: a kernel that comes up is told
        return {"tools": [t.to_wire() for t in tools]}

    async def _call_tool(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        acp_sid = client_tools.session_of_call(params)
        session = self.hub.session_for_acp(self.conn, acp_sid)
        if session is None:
            raise RpcError(INVALID_PARAMS, f"tool call names session {acp_sid!r}, which this agent does not own")
        ids = call_ids(params.get("_meta"), client_tools.NAMESPACE)
        return await self.hub.gate.call_tool(
            session, name, client_tools.strip_meta(params), channel=CLIENT_TOOLS, ids=ids
        )
