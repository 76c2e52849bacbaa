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
  {"do": "concurrent", "n": N, "action": A}                 N copies of action A sent at once; the answer counts them:
                                                            ``{"ok": K, "refused": {rule: count}, "messages": {rule:
                                                            the first message}, "chars": characters answered}``
  {"do": "say", "text": T}                                  one message chunk
  {"do": "terminal", "method": M, "params": {...}, "as"?: V} ``terminal/M`` (create, output, wait_for_exit, kill,
                                                            release) with this session's id unless params name
                                                            one; ``as`` keeps the answer's terminalId as ``$V``
  {"do": "sleep", "seconds": S}                             wait (a command runs meanwhile)
  {"do": "elicit", "params": {...}}                         ``elicitation/create`` with this session's id unless params
                                                            name one (``"sessionId": null`` sends none); the answer
  {"do": "elicit_complete", "elicitationId": E}             the ``elicitation/complete`` notification
  {"do": "exit", "code"?: N}                                the agent process ends at once (a crash mid-request)
  {"do": "withdraw", "method": M, "params": {...}, "after": S}  request M, then ``$/cancel_request`` for it after S
                                                            seconds; the answer the client still owes (-32800)

Every request of the client's session and login methods is reported as ``{"do": "received", "method", "params"}``;
a request of the client's the client withdrew (``$/cancel_request``) as ``{"do": "cancelled", "method"}``.
``--capabilities JSON`` adds to ``agentCapabilities`` (``sessionCapabilities.delete``, ``auth.logout``, ...);
``--config-options JSON`` are session/new's ``configOptions`` (boolean ones only to a client that opted in, as ACP
says); ``--refuse METHOD`` answers that method with an error.

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
import time
import uuid
from typing import Any

from ..protocol import client_tools
from ..protocol.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcConnection, RpcError, serve_stdio
from .agents import mcp_roundtrip


class HostileAgent:
    def __init__(
        self,
        conn: JsonRpcConnection,
        report: str | None,
        resume: bool = True,
        plain_prompts: bool = False,
        auth_methods: list[Any] | None = None,
        mcp_http: bool = True,
        capabilities: dict[str, Any] | None = None,
        config_options: list[Any] | None = None,
        refuse: list[str] | None = None,
    ) -> None:
        self.conn = conn
        #: added to ``agentCapabilities`` (a section's keys merged)
        self.capabilities = capabilities or {}
        #: session/new's ``configOptions``; boolean ones only if the client opted in (``session.configOptions``)
        self.config_options = config_options or []
        self.booleans = False
        #: methods answered with an error (a failing session/delete, logout, ...)
        self.refuse = set(refuse or [])
        #: advertise HTTP MCP (``--no-mcp-http``: an agent that takes stdio MCP servers only)
        self.mcp_http = mcp_http
        #: the ``authMethods`` offered at initialize
        self.auth_methods = auth_methods or []
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
        try:
            return await self._handle_request(method, params)
        except asyncio.CancelledError:
            self._write_report({"do": "cancelled", "method": method})
            raise

    async def _handle_request(self, method: str, params: Any) -> Any:
        params = params if isinstance(params, dict) else {}
        if method in REPORTED:
            self._write_report({"do": "received", "method": method, "params": params})
        if method in self.refuse:
            raise RpcError(-32603, f"{method} refused by the test agent (--refuse)")
        if method == "initialize":
            client = params.get("clientCapabilities") or {}
            meta = (client.get("_meta") or {}).get(client_tools.NAMESPACE) or {}
            self.discovery = (meta.get(client_tools.CLIENT_TOOLS_KEY) or {}).get("discovery")
            self.booleans = ((client.get("session") or {}).get("configOptions") or {}).get("boolean") is not None
            caps: dict[str, Any] = {
                "loadSession": False,
                **({"sessionCapabilities": {"resume": {}}} if self.resume else {}),
                "mcpCapabilities": {"http": self.mcp_http, "sse": False},
                **({} if self.plain_prompts else {"promptCapabilities": {"embeddedContext": True}}),
                "_meta": client_tools.agent_capability_meta(),
            }
            for key, value in self.capabilities.items():
                merged = caps.get(key)
                caps[key] = {**merged, **value} if isinstance(merged, dict) and isinstance(value, dict) else value
            return {
                "protocolVersion": 1,
                "agentCapabilities": caps,
                "agentInfo": {"name": "hostile", "version": "0"},
                **({"authMethods": self.auth_methods} if self.auth_methods else {}),
            }
        if method == "session/new":
            sid = "h_" + uuid.uuid4().hex[:12]
            self.mcp[sid] = params.get("mcpServers") or []
            await self._list(sid, "new")
            options = [o for o in self.config_options if self.booleans or o.get("type") != "boolean"]
            return {"sessionId": sid, **({"configOptions": options} if options else {})}
        if method == "session/fork":  # unstable: a copy of the session, under a new id
            sid = "h_" + uuid.uuid4().hex[:12]
            self.mcp[sid] = params.get("mcpServers") or []
            return {"sessionId": sid}
        if method in ("session/delete", "logout", "session/close"):
            return {}
        if method == "session/set_config_option":
            options = [
                {**o, "currentValue": params.get("value")} if o.get("id") == params.get("configId") else o
                for o in self.config_options
            ]
            return {"configOptions": options}
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

    async def _one_result(self, sid: str, action: dict[str, Any]) -> dict[str, Any]:
        try:
            return {"ok": await self.one(sid, action)}
        except RpcError as exc:
            return {"error": {"code": exc.code, "message": exc.message, "data": exc.data}}
        except Exception as exc:
            return {"error": {"code": None, "message": f"{type(exc).__name__}: {exc}"}}

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
        if do == "withdraw":
            pending = self.conn.start_request(str(a.get("method")), a.get("params") or {})
            await asyncio.sleep(float(a.get("after", 0.5)))
            self.conn.withdraw(pending)
            return await asyncio.wait_for(pending, 10)
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
        if do == "concurrent":
            copies = [dict(a.get("action") or {}) for _ in range(int(a.get("n", 1)))]
            return _tally(await asyncio.gather(*(self._one_result(sid, c) for c in copies)))
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


#: the client's requests the report records with their params
REPORTED = (
    "initialize",
    "session/new",
    "session/resume",
    "session/load",
    "session/prompt",
    "session/delete",
    "session/close",
    "session/fork",
    "session/set_config_option",
    "logout",
)


def _tally(results: list[dict[str, Any]]) -> dict[str, Any]:
    """What N answers came to, without their bodies (N reads of a big file would be N times its size)."""
    out: dict[str, Any] = {"ok": 0, "refused": {}, "messages": {}, "chars": 0}
    for result in results:
        if "ok" in result:
            out["ok"] += 1
            out["chars"] += len(json.dumps(result["ok"]))
            continue
        error = result["error"]
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        rule = str(data.get("rule") or error.get("code"))
        out["refused"][rule] = out["refused"].get(rule, 0) + 1
        out["messages"].setdefault(rule, error.get("message"))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jupyter_acp.testing.hostile")
    parser.add_argument("--report", default=None)
    parser.add_argument("--no-resume", action="store_true", help="offer no session/resume")
    parser.add_argument("--plain-prompts", action="store_true", help="advertise no promptCapabilities at all")
    parser.add_argument("--auth-methods", default="", help="JSON list: the authMethods offered at initialize")
    parser.add_argument("--login-report", default="", help="be the login command: report the pid here, then wait")
    parser.add_argument("--no-mcp-http", action="store_true", help="advertise no HTTP MCP (stdio servers only)")
    parser.add_argument("--capabilities", default="", help="JSON object added to agentCapabilities")
    parser.add_argument("--config-options", default="", help="JSON list: session/new's configOptions")
    parser.add_argument("--refuse", action="append", default=[], help="answer this method with an error")
    args = parser.parse_args(argv)
    if args.login_report:
        with open(args.login_report, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"do": "login", "pid": os.getpid()}) + "\n")
        time.sleep(60)
        return
    methods = json.loads(args.auth_methods) if args.auth_methods else []

    async def run() -> None:
        conn = await serve_stdio(
            lambda c: HostileAgent(
                c,
                args.report,
                resume=not args.no_resume,
                plain_prompts=args.plain_prompts,
                auth_methods=methods,
                mcp_http=not args.no_mcp_http,
                capabilities=json.loads(args.capabilities) if args.capabilities else None,
                config_options=json.loads(args.config_options) if args.config_options else None,
                refuse=args.refuse,
            ),
            max_frame_bytes=64 * 1024 * 1024,
        )
        await conn.wait_closed()

    asyncio.run(run())


if __name__ == "__main__":
    main()
