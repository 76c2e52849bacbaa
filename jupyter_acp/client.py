"""What the extension answers when an agent calls its client.

``session/update`` notifications are recorded inline, in arrival order, before anything else
runs; requests (permissions, files, client tools) each run in their own task.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from . import convention
from .acp.wire import INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, RpcError
from .paths import PathError, confine

if TYPE_CHECKING:  # pragma: no cover
    from .acp.connection import AgentConnection
    from .hub import NotebookSession, SessionHub

log = logging.getLogger(__name__)

MAX_READ_BYTES = 8 * 1024 * 1024


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
            if session.turn is not None:
                session.turn.touch()
            self.hub.emit(session, "session_update", update=update)
            self._track_session_state(session, update)
            return
        if method.startswith("_"):
            log.debug("extension notification %s ignored", method)
            return
        log.debug("notification %s ignored", method)

    def _track_session_state(self, session: NotebookSession, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
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
        if method == "fs/read_text_file":
            return self._read_text_file(params)
        if method == "fs/write_text_file":
            return self._write_text_file(params)
        if method == convention.TOOLS_LIST_METHOD:
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
    def _confined(self, params: dict[str, Any]) -> str:
        self._session(params.get("sessionId"))
        try:
            return confine(self.hub.serverapp.root_dir, params.get("path"))  # type: ignore[arg-type]
        except PathError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None

    def _read_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        path = self._confined(params)
        if not os.path.isfile(path):
            raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {params.get('path')}")
        if os.path.getsize(path) > MAX_READ_BYTES:
            raise RpcError(INVALID_PARAMS, f"{params.get('path')} is larger than {MAX_READ_BYTES} bytes")
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            end = start + limit if isinstance(limit, int) and limit >= 0 else None
            text = "".join(lines[start:end])
        return {"content": text}

    def _write_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        raw = params.get("path")
        if isinstance(raw, str) and raw.lower().endswith(".ipynb"):
            raise RpcError(
                INVALID_PARAMS,
                "writing .ipynb files directly is refused: it would fight the open notebook. "
                "Use the notebook tools (client_insert_cell, client_edit_cell, client_delete_cells) instead.",
            )
        path = self._confined(params)
        content = params.get("content")
        if not isinstance(content, str):
            raise RpcError(INVALID_PARAMS, "content must be a string")
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
            confine(self.hub.serverapp.root_dir, parent)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(content)
        return {}

    # -- client tools ----------------------------------------------------------------------------
    async def _list_tools(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.hub.session_for_acp(self.conn, convention.session_of_call(params))
        if session is None:
            # request mode during session/new: the session being set up is the only candidate
            session = self.conn.setting_up
        if session is None:
            raise RpcError(INVALID_PARAMS, "tools/list names no session this agent is opening or owns")
        ctx = self.hub.tool_context(session, "client-tools")
        return {"tools": [t.to_wire() for t in await self.hub.tools.list_tools(ctx)]}

    async def _call_tool(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        acp_sid = convention.session_of_call(params)
        session = self.hub.session_for_acp(self.conn, acp_sid)
        if session is None:
            raise RpcError(INVALID_PARAMS, f"tool call names session {acp_sid!r}, which this agent does not own")
        meta = (params.get("_meta") or {}).get(convention.NAMESPACE) or {}
        ctx = self.hub.tool_context(session, "client-tools", meta.get("toolCallId"))
        self.hub.count_tool_call(session)
        with self.hub.serving(session):
            return await self.hub.tools.call(ctx, name, convention.strip_meta(params))
