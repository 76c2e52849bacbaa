"""The agent's ACP side: sessions, limits, prompts, cancel, load/resume, modes and the model option.

Built on ``jupyter_acp.protocol.jsonrpc`` (raw JSON frames, a task per incoming request so the agent can ask
the client for tools and permissions while it serves a prompt).  The rules are Moltis's (see
``limits.py``): a session operation holds a slot (at most 4 at once, one per session); updates are
sent, in order, before the response that ends the request; a cancel always wins.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from typing import Any, cast

from .._version import __version__
from ..protocol import client_tools
from ..protocol.jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    ConnectionClosed,
    JsonRpcConnection,
    RpcError,
    serve_stdio,
)
from . import limits
from .history import HistoryStore
from .limits import invalid
from .setup import SessionSetup
from .state import MODE_IDS, MODES, NO_MODEL_MESSAGE, LitellmLoader, Session, Turn, UpdateBudgetExceeded
from .usage import vision_default

__all__ = ["MODES", "NO_MODEL_MESSAGE", "BuiltinAgent", "Session", "Turn", "UpdateBudgetExceeded", "run"]

log = logging.getLogger("jupyter_acp.agent")


class BuiltinAgent(SessionSetup):
    def __init__(self, conn: JsonRpcConnection, args: argparse.Namespace) -> None:
        self.conn = conn
        self.args = args
        self.echo = bool(args.echo)
        self.sessions: dict[str, Session] = {}
        self.in_flight: set[str] = set()
        self._setup_ids = 0
        self.client_caps: dict[str, Any] = {}
        self.client_tools: dict[str, Any] = {}  # the org.mini-me clientTools entry
        self.store = HistoryStore(getattr(args, "state_dir", None) or None)
        self.litellm = LitellmLoader()
        self.closing = False

    # -- helpers ---------------------------------------------------------------------------------
    def _begin(self, key: str, what: str) -> None:
        if key in self.in_flight:
            raise invalid(f"session {key} already has an active {what}")
        cap = getattr(self.args, "max_concurrent", None) or limits.MAX_CONCURRENT_OPERATIONS
        if len(self.in_flight) >= cap:
            raise invalid(f"too many concurrent session operations (limit {cap})")
        self.in_flight.add(key)

    def _session(self, params: dict[str, Any]) -> Session:
        sid = params.get("sessionId")
        sess = self.sessions.get(sid) if isinstance(sid, str) else None
        if sess is None:
            raise invalid(f"unknown session id {sid!r}"[:200])
        return sess

    def takes_images(self) -> bool:
        """``promptCapabilities.image``: echo always (it describes them); a model when it supports vision."""
        if self.echo:
            return True
        if not self.args.model:
            return False
        return vision_default(getattr(self.args, "vision", "auto"), self.args.model)

    def model_options(self, current: str) -> list[str]:
        opts: list[str] = []
        for m in [self.args.model, *(getattr(self.args, "models", "") or "").split(","), current]:
            m = (m or "").strip()
            if m and m not in opts:
                opts.append(m)
        return opts

    def config_options(self, sess: Session) -> list[dict[str, Any]]:
        opts = self.model_options(sess.model)
        if not opts:
            return []
        return [
            {
                "id": "model",
                "name": "Model",
                "description": "The litellm model this session talks to",
                "category": "model",
                "type": "select",
                "currentValue": sess.model,
                "options": [{"value": m, "name": m} for m in opts],
            }
        ]

    def session_state(self, sess: Session) -> dict[str, Any]:
        out: dict[str, Any] = {"modes": {"currentModeId": sess.mode, "availableModes": MODES}}
        cfg = self.config_options(sess)
        if cfg:
            out["configOptions"] = cfg
        return out

    async def send_update(self, sess: Session, update: dict[str, Any], turn: Turn | None = None) -> None:
        params = {"sessionId": sess.id, "update": update}
        if turn is not None:
            content = update.get("content")
            if (
                len(update) == 2
                and isinstance(content, dict)
                and len(content) == 2
                and isinstance(content.get("text"), str)
            ):
                # a text chunk (the hot path): its JSON size without serialising the whole frame twice
                size = len(json.dumps(content["text"], ensure_ascii=False).encode("utf-8")) + len(sess.id) + 140
            else:
                size = len(json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) + 40
            if turn.sent_bytes + size > limits.MAX_TURN_UPDATE_BYTES:
                turn.limit_exceeded = True
                raise UpdateBudgetExceeded()
            turn.sent_bytes += size
        await self.conn.notify("session/update", params)

    async def say(self, sess: Session, kind: str, text: str, turn: Turn | None = None) -> None:
        await self.send_update(sess, {"sessionUpdate": kind, "content": {"type": "text", "text": text}}, turn)

    # -- dispatch --------------------------------------------------------------------------------
    def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/cancel" and isinstance(params, dict):
            sess = self.sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
            if sess is None:
                return  # harmless
            sess.cancelled = True
            if sess.turn_task is not None and not sess.turn_task.done():
                sess.turn_task.cancel()
        # unknown notifications are ignored

    async def handle_request(self, method: str, params: Any) -> Any:
        params = params if isinstance(params, dict) else {}
        handler = {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/prompt": self.prompt,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
            "session/close": self.close_session,
        }.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})
        return await handler(params)

    # -- initialize ------------------------------------------------------------------------------
    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        self.client_caps = cast(
            dict[str, Any],
            params.get("clientCapabilities") if isinstance(params.get("clientCapabilities"), dict) else {},
        )
        meta: Any = self.client_caps.get("_meta") if isinstance(self.client_caps.get("_meta"), dict) else {}
        entry = (meta.get(client_tools.NAMESPACE) or {}) if isinstance(meta.get(client_tools.NAMESPACE), dict) else {}
        ct = entry.get(client_tools.CLIENT_TOOLS_KEY)
        self.client_tools = ct if isinstance(ct, dict) else {}
        caps: dict[str, Any] = {
            "loadSession": not self.echo,
            "promptCapabilities": {"embeddedContext": True, "image": self.takes_images()},
        }
        # echo sessions close too: a client past its session cap closes the least recently used one
        caps["sessionCapabilities"] = {"close": {}} if self.echo else {"resume": {}, "close": {}}
        if not self.echo:
            caps["mcpCapabilities"] = {"http": True, "sse": False}
            caps["_meta"] = client_tools.agent_capability_meta()
        return {
            "protocolVersion": 1 if not isinstance(asked, int) or asked >= 1 else asked,
            "agentCapabilities": caps,
            "agentInfo": {"name": "jupyter-acp-agent", "title": "Jupyter ACP built-in agent", "version": __version__},
            "authMethods": [],
        }

    async def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}  # the client is the local parent process that started us

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        sess = self._session(params)
        mode = params.get("modeId")
        if mode not in MODE_IDS:
            raise invalid(f"unknown mode {mode!r}"[:100])
        sess.mode = str(mode)
        self._save_meta(sess)
        await self.send_update(sess, {"sessionUpdate": "current_mode_update", "currentModeId": sess.mode})
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        sess = self._session(params)
        if params.get("configId") != "model":
            raise invalid("unknown config option")
        value = params.get("value")
        if not isinstance(value, str) or value not in self.model_options(sess.model):
            raise invalid("unknown model")
        sess.model = value
        sess.model_picked = True
        self._save_meta(sess)
        return {"configOptions": self.config_options(sess)}

    def _save_meta(self, sess: Session) -> None:
        if self.echo:
            return
        try:
            self.store.save_meta(sess.id, sess.meta())
        except OSError as exc:
            log.warning("could not save session settings: %s", type(exc).__name__)

    # -- prompts ---------------------------------------------------------------------------------
    async def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        sess = self._session(params)
        images: list[dict[str, Any]] = []
        accept = images if self.takes_images() else None
        if self.echo:
            text = limits.prompt_text(params.get("prompt"), joiner=" ", text_only=True, images=accept)
            text = " ".join([text, *(f"[image: {im['mimeType']}, {im['bytes']} bytes]" for im in images)]).strip()
        else:
            text = limits.prompt_text(params.get("prompt"), images=accept)
        self._begin(sess.id, "prompt")
        sess.cancelled = False  # a cancel sent before this turn must not leak into it
        turn = Turn()
        if self.echo:
            task = asyncio.ensure_future(self._echo(sess, turn, text))
        elif not sess.model:
            task = asyncio.ensure_future(self._no_model(sess, turn, text))
        else:
            from .llm_turn import run_turn

            task = asyncio.ensure_future(run_turn(self, sess, turn, text, images))
        sess.turn_task = task
        try:
            await asyncio.wait({task})
        finally:
            if not task.done():
                task.cancel()
            sess.turn_task = None
            self.in_flight.discard(sess.id)
        if turn.limit_exceeded:
            raise RpcError(INTERNAL_ERROR, f"turn updates exceed {limits.MAX_TURN_UPDATE_BYTES} bytes")
        if sess.cancelled or task.cancelled():
            return {"stopReason": "cancelled"}
        exc = task.exception()
        if isinstance(exc, ConnectionClosed):
            return {"stopReason": "cancelled"}
        if exc is not None:
            raise RpcError(INTERNAL_ERROR, f"turn failed: {exc}"[:2000])
        return {"stopReason": task.result()}

    async def _no_model(self, sess: Session, turn: Turn, text: str) -> str:
        await self.say(sess, "agent_message_chunk", NO_MODEL_MESSAGE, turn)
        return "end_turn"

    async def _echo(self, sess: Session, turn: Turn, text: str) -> str:
        await self.say(sess, "agent_thought_chunk", "Echoing your prompt.", turn)
        delay = float(getattr(self.args, "echo_delay", 0) or 0)
        words = text.split(" ")
        for i, word in enumerate(words):
            if sess.cancelled:
                return "cancelled"
            try:
                await self.say(sess, "agent_message_chunk", word if i == 0 else " " + word, turn)
            except UpdateBudgetExceeded:
                return "cancelled"  # limit_exceeded is set: the answer is internal_error
            await asyncio.sleep(delay)
        return "end_turn"

    # -- shutdown --------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        self.closing = True
        for sess in self.sessions.values():
            if sess.turn_task is not None and not sess.turn_task.done():
                sess.turn_task.cancel()
        closers = [mc.close(5.0) for sess in self.sessions.values() for mc in sess.mcp]
        if closers:
            try:
                await asyncio.wait_for(asyncio.gather(*closers, return_exceptions=True), 10)
            except TimeoutError:
                log.warning("MCP servers did not stop within 10 s")


async def run(args: argparse.Namespace) -> None:
    """Serve ACP on the process's stdin and (the saved) stdout until the client closes the pipe."""
    import sys

    holder: dict[str, JsonRpcConnection] = {}

    def on_bad_frame(text: str) -> None:
        # never log the frame itself: it may carry a prompt or a secret
        if "frame limit" in text:
            log.error("an incoming frame exceeded %d bytes: closing the connection", limits.MAX_FRAME_BYTES)
            conn = holder.get("conn")
            if conn is not None:
                conn.close("frame over the limit")
        else:
            log.warning("skipped a malformed incoming line")

    wire_out = getattr(args, "wire_out", None)
    saved = sys.stdout
    if wire_out is not None:
        sys.stdout = wire_out  # serve_stdio writes to sys.stdout; everything else keeps going to stderr
    try:
        agent_box: dict[str, BuiltinAgent] = {}

        def make(c: JsonRpcConnection) -> BuiltinAgent:
            agent_box["agent"] = BuiltinAgent(c, args)
            return agent_box["agent"]

        conn = await serve_stdio(make, max_frame_bytes=limits.MAX_FRAME_BYTES, on_bad_frame=on_bad_frame)
    finally:
        sys.stdout = saved
    holder["conn"] = conn
    await conn.wait_closed()
    log.info("connection closed (%s): shutting down", conn.close_reason)
    await agent_box["agent"].shutdown()
