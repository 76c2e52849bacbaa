"""Session set-up of the built-in agent: new, load, resume and close, and gathering a session's tools."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any, cast

from ..protocol import client_tools
from ..protocol.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, ConnectionClosed, RpcError
from . import limits
from .history import SessionNotFound, history_to_updates
from .limits import invalid
from .state import MODE_IDS, Session
from .tools import McpConnection, Tool, client_tools_from, plan_tool

if TYPE_CHECKING:  # pragma: no cover
    import argparse

    from ..protocol.jsonrpc import JsonRpcConnection
    from .history import HistoryStore
    from .state import LitellmLoader, Turn

log = logging.getLogger("jupyter_acp.agent")


class SessionSetup:
    """The session/new, load, resume and close handlers (a mixin of ``BuiltinAgent``)."""

    if TYPE_CHECKING:  # pragma: no cover - provided by BuiltinAgent
        conn: JsonRpcConnection
        args: argparse.Namespace
        echo: bool
        sessions: dict[str, Session]
        in_flight: set[str]
        _setup_ids: int
        client_tools: dict[str, Any]
        store: HistoryStore
        litellm: LitellmLoader

        def _begin(self, key: str, what: str) -> None: ...
        def _session(self, params: dict[str, Any]) -> Session: ...
        def session_state(self, sess: Session) -> dict[str, Any]: ...
        async def send_update(self, sess: Session, update: dict[str, Any], turn: Turn | None = None) -> None: ...

    # -- session set-up --------------------------------------------------------------------------
    async def _tools_for(self, sess: Session, specs: list[limits.McpServerSpec], reason: str) -> None:
        """Gather the session's tools: client tools (meta or request mode), MCP servers, the plan tool."""
        timeout = float(self.args.tool_timeout)
        tools: list[Tool] = [plan_tool()]
        discovery = self.client_tools.get("discovery")

        async def client_list() -> list[Tool]:
            if discovery == client_tools.DISCOVERY_META:
                return client_tools_from(self.client_tools.get("tools"), self.conn, timeout)
            if discovery == client_tools.DISCOVERY_REQUEST:
                try:
                    res = await self.conn.request(
                        client_tools.TOOLS_LIST_METHOD,
                        {"cwd": sess.cwd, "_meta": {client_tools.NAMESPACE: {"sessionId": sess.id, "reason": reason}}},
                        timeout=30,
                    )
                except (TimeoutError, RpcError) as exc:
                    log.warning("client tool list request failed: %s", type(exc).__name__)
                    return []
                return client_tools_from(
                    (res or {}).get("tools") if isinstance(res, dict) else None, self.conn, timeout
                )
            return []

        async def connect(spec: limits.McpServerSpec) -> McpConnection | None:
            mc = McpConnection(spec, sess.cwd)
            try:
                await mc.start(float(self.args.mcp_start_timeout))
            except Exception as exc:
                log.warning("MCP server %r did not start: %s", spec.name, type(exc).__name__)
                return None
            return mc

        results = await asyncio.gather(client_list(), *(connect(s) for s in specs))
        tools.extend(cast(list[Tool], results[0]))
        for mc in cast(list[McpConnection | None], results[1:]):
            if mc is not None:
                sess.mcp.append(mc)
                tools.extend(mc.as_tools(trust_annotations=self.args.trust_mcp_annotations, call_timeout=timeout))
        for t in tools:
            if t.name in sess.tools:
                log.warning("skipped a duplicate tool name")
                continue
            sess.tools[t.name] = t

    def _start_warmup(self) -> None:
        if not self.echo and self.args.model:
            # after the answer in hand has been written (it is written in this same loop step)
            asyncio.get_running_loop().call_soon(self.litellm.start)

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        if len(self.sessions) >= limits.MAX_SESSIONS:
            raise invalid(f"too many sessions (limit {limits.MAX_SESSIONS})")
        self._setup_ids += 1
        key = f"setup-{self._setup_ids}"
        self._begin(key, "set-up")
        try:
            cwd = limits.check_cwd(params.get("cwd"))
            specs = [] if self.echo else limits.check_mcp_servers(params.get("mcpServers"))
            sid = limits.SESSION_PREFIX + uuid.uuid4().hex
            if not limits.is_session_id(sid):  # our bug, not the client's
                raise RpcError(INTERNAL_ERROR, "minted a session id outside the acp: namespace")
            sess = Session(id=sid, cwd=cwd, mode=self.args.mode, model=self.args.model)
            if self.echo:
                self.sessions[sid] = sess
                return {"sessionId": sid}
            try:
                self.store.create(sid, sess.meta())
            except OSError as exc:
                raise RpcError(INTERNAL_ERROR, f"failed to create session: {exc.strerror or exc}") from None
            await self._tools_for(sess, specs, "new")
            if len(self.sessions) >= limits.MAX_SESSIONS:
                await self._discard(sess)
                raise invalid(f"too many sessions (limit {limits.MAX_SESSIONS})")
            self.sessions[sid] = sess
            return {"sessionId": sid, **self.session_state(sess)}
        finally:
            self.in_flight.discard(key)
            self._start_warmup()

    async def _discard(self, sess: Session) -> None:
        for mc in sess.mcp:
            await mc.close()
        sess.mcp.clear()

    async def _reopen(self, params: dict[str, Any], reason: str) -> tuple[Session, list[dict[str, Any]]]:
        if self.echo:
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": f"session/{reason}"})
        sid = params.get("sessionId")
        if not limits.is_session_id(sid):
            raise invalid("session id is outside the acp: namespace")
        assert isinstance(sid, str)
        if sid not in self.sessions and len(self.sessions) >= limits.MAX_SESSIONS:
            raise invalid(f"too many sessions (limit {limits.MAX_SESSIONS})")
        self._begin(sid, "operation")
        try:
            cwd = limits.check_cwd(params.get("cwd"))
            specs = limits.check_mcp_servers(params.get("mcpServers"))
            try:
                meta, messages = self.store.load(sid)
            except SessionNotFound:
                raise invalid(f"unknown session id {sid}") from None
            except (OSError, ValueError) as exc:
                raise RpcError(INTERNAL_ERROR, f"cannot read session history: {type(exc).__name__}") from None
            # the replay budget applies to what load sends back (its tail), never to resuming
            updates = history_to_updates(messages) if reason == "load" else []
            old = self.sessions.pop(sid, None)
            if old is not None:
                await self._discard(old)
            mode = meta.get("mode") if meta.get("mode") in MODE_IDS else self.args.mode
            # a model picked for this conversation stays; otherwise the agent's own (its settings may have changed
            # since: the panel's model form restarts the agent with the new one)
            picked = bool(meta.get("model_picked")) and bool(meta.get("model"))
            sess = Session(
                id=sid,
                cwd=cwd,
                mode=cast(str, mode),
                model=str(meta["model"]) if picked else self.args.model,
                model_picked=picked,
                messages=messages,
                cost=float(meta.get("cost") or 0) if isinstance(meta.get("cost"), (int, float)) else 0.0,
            )
            if cwd != meta.get("cwd"):
                self.store.save_meta(sid, sess.meta())
            await self._tools_for(sess, specs, reason)
            return sess, updates
        except BaseException:
            self.in_flight.discard(sid)
            raise

    async def load_session(self, params: dict[str, Any]) -> dict[str, Any]:
        sess, updates = await self._reopen(params, "load")
        try:
            try:
                for u in updates:
                    await self.send_update(sess, u)
            except ConnectionClosed:
                await self._discard(sess)
                raise RpcError(INTERNAL_ERROR, "client went away during replay") from None
            self.sessions[sess.id] = sess
            return self.session_state(sess)
        finally:
            self.in_flight.discard(sess.id)
            self._start_warmup()

    async def resume_session(self, params: dict[str, Any]) -> dict[str, Any]:
        sess, _ = await self._reopen(params, "resume")
        try:
            self.sessions[sess.id] = sess
            return self.session_state(sess)
        finally:
            self.in_flight.discard(sess.id)
            self._start_warmup()

    async def close_session(self, params: dict[str, Any]) -> dict[str, Any]:
        sess = self._session(params)
        if sess.turn_task is not None and not sess.turn_task.done():
            sess.cancelled = True
            sess.turn_task.cancel()
        self.sessions.pop(sess.id, None)
        await self._discard(sess)
        return {}
