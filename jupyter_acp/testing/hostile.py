"""A scriptable hostile ACP agent: each prompt is a list of actions, carried out as a prompt-injected agent would.

``python -m jupyter_acp.testing.hostile [--report FILE]``

The prompt's text is a JSON list of actions; each gets a result ``{"do": ..., "ok": ...}`` or
``{"do": ..., "error": {"code", "message", "data"}}``, sent back as one ``agent_message_chunk`` holding
the JSON list of results and appended to ``--report`` (one JSON line per action; actions done outside a
turn are only in the report). Actions:

  {"do": "fs_read", "path": P, "line"?: N, "limit"?: N}     fs/read_text_file
  {"do": "fs_write", "path": P, "content": C}               fs/write_text_file
  {"do": "tool", "name": N, "args": {...}, "meta": {...}}   a client tool over the client-tools convention
                                                            (``meta`` merged into the call's ``_meta``)
  {"do": "mcp", "name": N, "args": {...}, "meta": {...}}    a client tool over the session's HTTP MCP server
  {"do": "mcp_list"} / {"do": "tools_list"}                 the tool list over MCP / over the convention
  {"do": "update", "update": {...}}                         a raw session/update (tool_call, plan, ...)
  {"do": "permission", "toolCall": {...}, "options": [...]} session/request_permission; the outcome
  {"do": "flood", "n": N, "size": S}                        N message chunks of S bytes
  {"do": "later", "delay": S, "actions": [...]}             the actions again, S seconds after this turn ended
  {"do": "say", "text": T}                                  one message chunk
  {"do": "terminal", "method": M, "params": {...}, "as"?: V} ``terminal/M`` (create, output, wait_for_exit, kill,
                                                            release) with this session's id unless params name
                                                            one; ``as`` keeps the answer's terminalId as ``$V``
  {"do": "sleep", "seconds": S}                             wait (a command runs meanwhile)
  {"do": "elicit", "params": {...}}                         ``elicitation/create`` with this session's id unless params
                                                            name one (``"sessionId": null`` sends none); the answer
  {"do": "elicit_complete", "elicitationId": E}             the ``elicitation/complete`` notification
  {"do": "exit", "code"?: N}                                the agent process ends at once (a crash mid-request)

Strings ``"$V"`` anywhere in an action are replaced by what ``as`` kept (``$sid``: this session's id).

It acknowledges both client-tools discovery modes and HTTP MCP, so every channel can be tried. In request
discovery it asks ``_org.mini-me/tools/list`` at session/new and session/resume (``--no-resume``: it offers no
resume), reporting ``{"do": "listed", "reason": ..., "tools": [names]}``; the names also steer ``tool`` actions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from typing import Any

from ..protocol import client_tools
from ..protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcConnection, RpcError, serve_stdio
from .agents import mcp_roundtrip


class HostileAgent:
    def __init__(
        self, conn: JsonRpcConnection, report: str | None, resume: bool = True, plain_prompts: bool = False
    ) -> None:
        self.conn = conn
        self.report = report
        self.resume = resume
        #: advertise no prompt capabilities at all (text and resource links only)
        self.plain_prompts = plain_prompts
        self.discovery: str | None = None
        self.mcp: dict[str, list[Any]] = {}
        self.tools: dict[str, dict[str, Any]] = {}
        #: values kept by ``as`` (terminal ids), for ``$name`` in later actions
        self.vars: dict[str, Any] = {}

    def handle_notification(self, method: str, params: Any) -> None:
        return None

    async def handle_request(self, method: str, params: Any) -> Any:
        params = params if isinstance(params, dict) else {}
        if method in ("initialize", "session/new", "session/resume", "session/prompt"):
            self._write_report({"do": "received", "method": method, "params": params})
        if method == "initialize":
            meta = ((params.get("clientCapabilities") or {}).get("_meta") or {}).get(client_tools.NAMESPACE) or {}
            self.discovery = (meta.get(client_tools.CLIENT_TOOLS_KEY) or {}).get("discovery")
            return {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": False,
                    **({"sessionCapabilities": {"resume": {}}} if self.resume else {}),
                    "mcpCapabilities": {"http": True, "sse": False},
                    **({} if self.plain_prompts else {"promptCapabilities": {"embeddedContext": True}}),
                    "_meta": client_tools.agent_capability_meta(),
                },
                "agentInfo": {"name": "hostile", "version": "0"},
            }
        if method == "session/new":
            sid = "h_" + uuid.uuid4().hex[:12]
            self.mcp[sid] = params.get("mcpServers") or []
            await self._list(sid, "new")
            return {"sessionId": sid}
        if method == "session/resume" and self.resume:
            sid = str(params.get("sessionId"))
            self.mcp[sid] = params.get("mcpServers") or []
            await self._list(sid, "resume")
            return {}
        if method == "session/prompt":
            sid = params.get("sessionId")
            if sid not in self.mcp:
                raise RpcError(INVALID_PARAMS, f"unknown session {sid!r}")
            # the user's words: the last text block that is not the notebook preamble (a re-seed preface comes first)
            texts = [
                b.get("text", "")
                for b in params.get("prompt") or []
                if b.get("type") == "text" and not b.get("text", "").startswith("[Jupyter notebook context]")
            ]
            text = texts[-1] if texts else ""
            if len(texts) > 1:
                self._write_report({"do": "preface", "text": texts[0][:2000]})
            try:
                actions = json.loads(text)
            except ValueError:
                actions = [{"do": "say", "text": text}]
            results = await self.run(sid, actions if isinstance(actions, list) else [actions])
            await self._say(sid, json.dumps(results))
            return {"stopReason": "end_turn"}
        raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})

    async def _list(self, sid: str, reason: str) -> None:
        if self.discovery != client_tools.DISCOVERY_REQUEST:
            return
        try:
            answer = await self.conn.request(
                client_tools.TOOLS_LIST_METHOD,
                {"_meta": {client_tools.NAMESPACE: {"sessionId": sid, "reason": reason}}},
            )
            names = [t.get("name") for t in (answer or {}).get("tools") or []]
        except RpcError as exc:
            names = [f"error: {exc.message}"]
        self._write_report({"do": "listed", "reason": reason, "session": sid, "tools": names})

    async def _say(self, sid: str, text: str) -> None:
        await self.conn.notify(
            "session/update",
            {
                "sessionId": sid,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
            },
        )

    def _write_report(self, result: dict[str, Any]) -> None:
        if self.report:
            with open(self.report, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(result) + "\n")

    async def run(self, sid: str, actions: list[Any]) -> list[dict[str, Any]]:
        results = []
        for action in actions:
            if not isinstance(action, dict):
                continue
            result: dict[str, Any] = {"do": action.get("do")}
            try:
                result["ok"] = await self.one(sid, action)
            except RpcError as exc:
                result["error"] = {"code": exc.code, "message": exc.message, "data": exc.data}
            except Exception as exc:  # report, never die: the test reads what happened
                result["error"] = {"code": None, "message": f"{type(exc).__name__}: {exc}"}
            self._write_report(result)
            results.append(result)
        return results

    def _subst(self, value: Any, sid: str) -> Any:
        if isinstance(value, str) and value.startswith("$"):
            return sid if value == "$sid" else self.vars.get(value[1:], value)
        if isinstance(value, dict):
            return {k: self._subst(v, sid) for k, v in value.items()}
        if isinstance(value, list):
            return [self._subst(v, sid) for v in value]
        return value

    async def one(self, sid: str, a: dict[str, Any]) -> Any:
        a = self._subst(a, sid)
        do = a.get("do")
        if do == "terminal":
            answer = await self.conn.request(
                f"terminal/{a.get('method')}", {"sessionId": sid, **(a.get("params") or {})}
            )
            if a.get("as") and isinstance(answer, dict):
                self.vars[str(a["as"])] = answer.get("terminalId")
            return answer
        if do == "elicit":
            asked = {"sessionId": sid, **(a.get("params") or {})}
            if asked["sessionId"] is None:
                del asked["sessionId"]
            return await self.conn.request("elicitation/create", asked)
        if do == "elicit_complete":
            await self.conn.notify("elicitation/complete", {"elicitationId": a.get("elicitationId")})
            return "sent"
        if do == "exit":
            self._write_report({"do": "exit"})
            os._exit(int(a.get("code", 3)))
        if do == "sleep":
            await asyncio.sleep(float(a.get("seconds", 0.5)))
            return "slept"
        if do == "fs_read":
            params: dict[str, Any] = {"sessionId": sid, "path": a.get("path")}
            for key in ("line", "limit"):
                if key in a:
                    params[key] = a[key]
            return await self.conn.request("fs/read_text_file", params)
        if do == "fs_write":
            return await self.conn.request(
                "fs/write_text_file", {"sessionId": sid, "path": a.get("path"), "content": a.get("content", "")}
            )
        if do == "tools_list":
            return await self.conn.request(
                client_tools.TOOLS_LIST_METHOD, {"reason": "new", "_meta": client_tools.call_meta(sid)}
            )
        if do == "tool":
            name = str(a.get("name"))
            meta = client_tools.call_meta(sid)
            meta.update(a.get("meta") or {})
            params = {**(a.get("args") or {}), "_meta": meta}
            method = client_tools.TOOL_METHOD_PREFIX + name[len(client_tools.TOOL_NAME_PREFIX) :]
            return await self.conn.request(method, params)
        if do == "mcp":
            params = {"name": a.get("name"), "arguments": a.get("args") or {}}
            if a.get("meta"):
                params["_meta"] = a["meta"]
            message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
            return await asyncio.to_thread(mcp_roundtrip, self.mcp.get(sid, []), message)
        if do == "mcp_list":
            message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            return await asyncio.to_thread(mcp_roundtrip, self.mcp.get(sid, []), message)
        if do == "update":
            await self.conn.notify("session/update", {"sessionId": sid, "update": a.get("update") or {}})
            return "sent"
        if do == "permission":
            return await self.conn.request(
                "session/request_permission",
                {"sessionId": sid, "toolCall": a.get("toolCall") or {}, "options": a.get("options") or []},
            )
        if do == "flood":
            filler = "x" * int(a.get("size", 1024))
            for _ in range(int(a.get("n", 1))):
                await self._say(sid, filler)
            return "flooded"
        if do == "later":
            asyncio.get_running_loop().create_task(self._later(sid, float(a.get("delay", 0.5)), a.get("actions") or []))
            return "scheduled"
        if do == "say":
            await self._say(sid, str(a.get("text", "")))
            return "said"
        raise ValueError(f"unknown action {do!r}")

    async def _later(self, sid: str, delay: float, actions: list[Any]) -> None:
        await asyncio.sleep(delay)
        await self.run(sid, actions)
        self._write_report({"do": "later_done"})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jupyter_acp.testing.hostile")
    parser.add_argument("--report", default=None)
    parser.add_argument("--no-resume", action="store_true", help="offer no session/resume")
    parser.add_argument("--plain-prompts", action="store_true", help="advertise no promptCapabilities at all")
    args = parser.parse_args(argv)

    async def run() -> None:
        conn = await serve_stdio(
            lambda c: HostileAgent(c, args.report, resume=not args.no_resume, plain_prompts=args.plain_prompts),
            max_frame_bytes=64 * 1024 * 1024,
        )
        await conn.wait_closed()

    asyncio.run(run())


if __name__ == "__main__":
    main()
