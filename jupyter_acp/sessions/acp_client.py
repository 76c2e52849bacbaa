"""What the extension answers when an agent calls its client.

``session/update`` notifications are recorded inline, in arrival order, before anything else
runs; requests (permissions, files, client tools) each run in their own task.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shlex
from typing import TYPE_CHECKING, Any, cast

from ..channels import CLIENT_TOOLS
from ..protocol import client_tools
from ..protocol.client_tools import call_ids
from ..protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, RpcError
from ..tools.files import FileRefused
from ..tools.host import Action, Refused
from .elicitations import COMPLETE as ELICITATION_COMPLETE
from .elicitations import METHOD as ELICITATION_CREATE
from .gate import FS_READ, FS_WRITE, TERMINAL_CREATE, TERMINAL_METHODS
from .terminals import TerminalRefused

if TYPE_CHECKING:  # pragma: no cover
    from ..acp.connection import AgentConnection
    from .hub import NotebookSession, SessionHub

log = logging.getLogger(__name__)


async def _now(fn: Any, *args: Any) -> Any:
    """A synchronous step as the gate's ``run`` (it awaits what it runs)."""
    return fn(*args)


class ClientEndpoint:
    """The client side's request and notification handler for one agent connection."""

    def __init__(self, hub: SessionHub, conn: AgentConnection) -> None:
        self.hub = hub
        self.conn = conn

    # -- notifications ---------------------------------------------------------------------------
    def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/update" and isinstance(params, dict):
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
            return
        if method == ELICITATION_COMPLETE:
            self.hub.complete_elicitation((self.conn.name, self.conn.generation), params)
            return
        if method.startswith("_"):
            log.debug("extension notification %s ignored", method)
            return
        log.debug("notification %s ignored", method)

    def _track_session_state(self, session: NotebookSession, kind: str, update: dict[str, Any]) -> None:
        if kind == "current_mode_update" and session.modes is not None:
            mode = update.get("currentModeId") or update.get("modeId")
            if mode:
                session.modes = {**session.modes, "currentModeId": mode}
        elif kind == "config_option_update" and isinstance(update.get("configOptions"), list):
            session.config_options = update["configOptions"]

    # -- requests --------------------------------------------------------------------------------
    async def handle_request(self, method: str, params: Any) -> Any:
        if not isinstance(params, dict):
            params = {}
        if method == "session/request_permission":
            session = self._session(params.get("sessionId"))
            tool_call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
            options = [o for o in params.get("options") or [] if isinstance(o, dict) and o.get("optionId")]
            if not options:
                raise RpcError(INVALID_PARAMS, "request_permission needs at least one option")
            outcome = await self.hub.ask_permission(session, tool_call, options)
            return {"outcome": outcome}
        if method == ELICITATION_CREATE:
            session = self._session(params.get("sessionId"))  # one of this agent's sessions, during its turn
            return await self.hub.ask_elicitation(session, (self.conn.name, self.conn.generation), params)
        if method == FS_READ:
            return await self._read_text_file(params)
        if method == FS_WRITE:
            return await self._write_text_file(params)
        if method == TERMINAL_CREATE:
            return await self._create_terminal(params)
        if method in TERMINAL_METHODS:
            return await self._terminal(method, params)
        if method == client_tools.TOOLS_LIST_METHOD:
            return await self._list_tools(params)
        tool = self.hub.tools.by_method(method)
        if tool is not None:
            return await self._call_tool(tool.name, params)
        raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})

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

    async def _read_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params.get("sessionId"))
        rules = self.hub.file_rules()
        path = params.get("path")
        action = Action(FS_READ, FS_READ, {"path": path}, "acp")
        try:
            rules.resolve(path)  # refused paths never reach the user as a question
            text = await self.hub.gate.perform(
                session,
                action,
                lambda: asyncio.to_thread(rules.read, path, params.get("line"), params.get("limit")),
                title=f"Read {path}",
                kind="read",
                destructive=False,
                preview=str(path),
            )
        except FileRefused as exc:
            self.hub.gate.audit(session, action, "refused", exc.rule, str(exc))
            raise self._refused(exc) from None
        except Refused as exc:
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        return {"content": text}

    async def _write_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
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
            diff = {"type": "diff", "path": str(path), "oldText": old, "newText": content}
            await self.hub.gate.perform(
                session,
                action,
                lambda: asyncio.to_thread(rules.write, cast(str, path), real, content),
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
    async def _create_terminal(self, params: dict[str, Any]) -> dict[str, Any]:
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
            line = shlex.join([plan["command"], *plan["args"]]) if plan["args"] else plan["command"]
            preview = f"$ {line}\nin {plan['cwd']}"
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

    async def _terminal(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """``terminal/output|wait_for_exit|kill|release``: only on this session's own terminals."""
        session = self._session(params.get("sessionId"))
        terminals = self.hub.terminals
        try:
            terminal = terminals.get(session, params.get("terminalId"))
        except TerminalRefused as exc:
            action = Action("terminal", method, {"terminalId": params.get("terminalId")}, "acp")
            self.hub.gate.audit(session, action, "refused", exc.rule, str(exc))
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        if method == "terminal/output":
            return terminals.output(terminal)
        if method == "terminal/wait_for_exit":
            with self.hub.serving(session):  # the agent waits on the command, not hangs
                return await terminals.wait_for_exit(terminal)
        if method == "terminal/kill":
            await terminals.kill(terminal)
            return {}
        await terminals.release(terminal)
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
