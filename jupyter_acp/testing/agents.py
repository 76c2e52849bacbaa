"""Scripted ACP agents for tests and demos: each misbehaves (or behaves) in one known way.

``python -m jupyter_acp.testing.agents BEHAVIOUR [--chunks N] [--delay S] [--pid-file F] [--child]``

Behaviours:
  stream        answer with N numbered chunks ("0 1 2 ...") and honour session/cancel; with --paragraph P a blank
                line after every P chunks (paragraphs); with --answer TEXT that text, --chunks characters a chunk
  slow          like stream, with --delay seconds between chunks
  permission    ask session/request_permission (allow/reject) and say which option came back
  crash         send one chunk, then exit with code 3 after a line on stderr
  garbage       write a non-JSON line and a response to an id never sent, then answer normally
  big_frame     write one line of --size bytes, then answer normally
  flood_stderr  write --size bytes to stderr during session/new and the prompt, then answer
  hang          never answer a prompt and send nothing
  ignore_eof    ignore stdin EOF and SIGTERM (only the process-group SIGKILL ends it)
  needs_auth    advertise an auth method; session/new answers -32000
  login         advertise one auth method of each kind (``agent`` "login", ``env_var`` "api-key" naming
                SCRIPTED_API_KEY, ``terminal`` "terminal-login" with ``--do-login``, this one only when the client
                advertised ``auth.terminal``); session/new answers -32000 until ``authenticate`` "login" was
                called, SCRIPTED_API_KEY is set, or --login-file exists (``--do-login`` writes it and exits);
                it offers ``logout`` (``auth.logout``), after which session/new and prompts answer -32000 again
  exit_at_init  exit before answering initialize
  resumable     like stream, and advertise session/resume (accepts any earlier id)
  loadable      like stream, and advertise loadSession (replays one chunk per earlier prompt)
  bad_version   answer initialize with protocol version 99
  v2_draft      answer initialize as the v2 draft does (protocol version 2, ``info`` and ``capabilities``)
  no_version    answer initialize without a protocol version
  fs            prompt "read PATH" or "write PATH TEXT": call fs/* and report the answer or the error
  mcp_bench     prompt "bench N TOOL": N MCP tools/call of TOOL and N pings over the session's HTTP MCP
                server (one keep-alive connection); answers the timings in ms as JSON
  frames        on each prompt write the lines of --frames FILE raw to stdout, then answer "done"
  mcp_client    prompt "list" or "call TOOL {json args}": use the MCP server given in session/new
                (HTTP or stdio) and report the JSON answer; "preamble?" reports the prompt's first block
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from typing import Any

from ..channels import PREAMBLE_MARK
from ..protocol.jsonrpc import AUTH_REQUIRED, INVALID_PARAMS, METHOD_NOT_FOUND, JsonRpcConnection, RpcError, serve_stdio


class ScriptedAgent:
    def __init__(self, conn: JsonRpcConnection, args: argparse.Namespace) -> None:
        self.conn = conn
        self.args = args
        self.b = args.behaviour
        self.sessions: dict[str, list[str]] = {}
        self.cancelled: set[str] = set()
        self.sessions_mcp: dict[str, list[Any]] = {}

    # -- plumbing --------------------------------------------------------------------------------
    def _raw(self, data: bytes) -> None:
        self.conn._writer.write(data)  # deliberately bypasses the JSON encoder

    async def _update(self, sid: str, update: dict[str, Any]) -> None:
        await self.conn.notify("session/update", {"sessionId": sid, "update": update})

    async def _chunk(self, sid: str, text: str, kind: str = "agent_message_chunk") -> None:
        await self._update(sid, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})

    def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/cancel" and isinstance(params, dict):
            self.cancelled.add(str(params.get("sessionId")))

    async def handle_request(self, method: str, params: Any) -> Any:
        params = params if isinstance(params, dict) else {}
        handler = getattr(self, "on_" + method.replace("/", "_"), None)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})
        return await handler(params)

    # -- methods ---------------------------------------------------------------------------------
    async def on_initialize(self, params: dict[str, Any]) -> Any:
        if self.b == "bad_version":
            return {"protocolVersion": 99}
        if self.b == "v2_draft":
            return {"protocolVersion": 2, "info": {"name": "scripted-v2", "version": "0"}, "capabilities": {}}
        if self.b == "no_version":
            return {"agentCapabilities": {}, "agentInfo": {"name": "scripted-no-version", "version": "0"}}
        # embedded resources (the panel's selection) as most real agents take them; no images
        caps: dict[str, Any] = {"loadSession": self.b == "loadable", "promptCapabilities": {"embeddedContext": True}}
        if self.b == "resumable":
            caps["sessionCapabilities"] = {"resume": {}}
        result: dict[str, Any] = {
            "protocolVersion": 1,
            "agentCapabilities": caps,
            "agentInfo": {"name": f"scripted-{self.b}", "version": "0"},
        }
        if self.b == "needs_auth":
            result["authMethods"] = [{"id": "login", "name": "Log in", "description": "run `scripted login`"}]
        if self.b == "login":
            result["agentCapabilities"]["auth"] = {"logout": {}}
            caps = (params.get("clientCapabilities") or {}).get("auth") or {}
            methods: list[dict[str, Any]] = [
                {"id": "login", "name": "Log in with the agent", "description": "the agent logs you in itself"},
                {
                    "type": "env_var",
                    "id": "api-key",
                    "name": "Scripted API key",
                    "description": "a key for the scripted service",
                    "varName": "SCRIPTED_API_KEY",
                },
            ]
            if caps.get("terminal"):
                methods.append(
                    {"type": "terminal", "id": "terminal-login", "name": "Log in in a terminal", "args": ["--do-login"]}
                )
            result["authMethods"] = methods
        if self.b == "garbage":
            self._raw(b"this is not json\n")
            self._raw(b'{"jsonrpc":"2.0","id":4242,"result":{}}\n')
        return result

    async def on_authenticate(self, params: dict[str, Any]) -> Any:
        if self.b != "login" or params.get("methodId") != "login":
            raise RpcError(INVALID_PARAMS, f"no such login method {params.get('methodId')!r}")
        self.authed = True
        return {}

    async def on_logout(self, params: dict[str, Any]) -> Any:
        if self.b != "login":
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": "logout"})
        self.authed = False
        if self.args.login_file and os.path.exists(self.args.login_file):
            os.remove(self.args.login_file)
        return {}

    def _logged_in(self) -> bool:
        if getattr(self, "authed", False) or os.environ.get("SCRIPTED_API_KEY"):
            return True
        return bool(self.args.login_file) and os.path.exists(self.args.login_file)

    async def on_session_new(self, params: dict[str, Any]) -> Any:
        if self.b == "needs_auth" or (self.b == "login" and not self._logged_in()):
            raise RpcError(AUTH_REQUIRED, "Authentication required")
        if self.b == "flood_stderr":
            sys.stderr.write("e" * self.args.size + "\n")
            sys.stderr.flush()
        sid = "s_" + uuid.uuid4().hex[:12]
        self.sessions[sid] = []
        self.sessions_mcp[sid] = params.get("mcpServers") or []
        return {"sessionId": sid}

    async def on_session_resume(self, params: dict[str, Any]) -> Any:
        if self.b != "resumable":
            raise RpcError(METHOD_NOT_FOUND, "Method not found")
        self.sessions.setdefault(params["sessionId"], [])
        return {}

    async def on_session_load(self, params: dict[str, Any]) -> Any:
        if self.b != "loadable":
            raise RpcError(METHOD_NOT_FOUND, "Method not found")
        sid = params["sessionId"]
        self.sessions.setdefault(sid, [])
        await self._chunk(sid, "replayed history")  # must not reach the transcript twice
        return None

    async def on_session_prompt(self, params: dict[str, Any]) -> Any:
        sid = params.get("sessionId")
        if sid not in self.sessions:
            raise RpcError(INVALID_PARAMS, f"unknown session {sid!r}")
        if self.b == "login" and not self._logged_in():  # logged out since the session opened
            raise RpcError(AUTH_REQUIRED, "Authentication required")
        self.cancelled.discard(sid)
        texts = [b.get("text", "") for b in params.get("prompt") or [] if b.get("type") == "text"]
        # the user's words: the last text that is not the notebook preamble (a re-seed preface comes first)
        user = [t for t in texts if not t.startswith(PREAMBLE_MARK)]
        text = user[-1] if user else ""
        self.sessions[sid].append(text)
        b = self.b
        if b == "hang":
            await asyncio.Event().wait()
        if b == "crash":
            await self._chunk(sid, "about to crash")
            await self.conn._drain()
            sys.stderr.write("scripted agent: boom\n")
            sys.stderr.flush()
            os._exit(3)
        if b == "permission":
            answer = await self.conn.request(
                "session/request_permission",
                {
                    "sessionId": sid,
                    "toolCall": {
                        "toolCallId": "call_1",
                        "title": "Write answer.txt",
                        "kind": "edit",
                        "status": "pending",
                        "rawInput": {"path": "answer.txt"},
                    },
                    "options": [
                        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                    ],
                },
            )
            outcome = (answer or {}).get("outcome") or {}
            if outcome.get("outcome") == "cancelled" or sid in self.cancelled:
                return {"stopReason": "cancelled"}
            await self._chunk(sid, f"permission: {outcome.get('optionId')}")
            return {"stopReason": "end_turn"}
        if b == "fs":
            verb, _, rest = text.partition(" ")
            try:
                if verb == "read":
                    res = await self.conn.request("fs/read_text_file", {"sessionId": sid, "path": rest})
                    report = "ok: " + res.get("content", "")
                else:
                    path, _, content = rest.partition(" ")
                    await self.conn.request("fs/write_text_file", {"sessionId": sid, "path": path, "content": content})
                    report = "ok"
            except RpcError as exc:
                report = f"error {exc.code}: {exc.message}"
            await self._chunk(sid, report)
            return {"stopReason": "end_turn"}
        if b == "mcp_bench":
            _, n, tool = text.split()
            timings = await asyncio.to_thread(mcp_bench, self.sessions_mcp.get(sid, []), int(n), tool)
            await self._chunk(sid, json.dumps(timings))
            return {"stopReason": "end_turn"}
        if b == "frames":
            with open(self.args.frames, "rb") as fh:
                for line in fh.read().split(b"\n"):
                    self._raw(line + b"\n")
            await self.conn._drain()
            await self._chunk(sid, "done")
            return {"stopReason": "end_turn"}
        if b == "mcp_client":
            if text.startswith("/"):  # a slash command: report every text block, in order
                await self._chunk(sid, json.dumps([b.get("text", "") for b in params.get("prompt") or []]))
                return {"stopReason": "end_turn"}
            if text == "preamble?":
                blocks = [b for b in params.get("prompt") or [] if b.get("type") == "text"]
                found = [b["text"] for b in blocks if b.get("text", "").startswith(PREAMBLE_MARK)]
                where = "after" if found and blocks[-1]["text"] == found[0] else "before"
                await self._chunk(sid, f"{where}: {found[0]}" if found else "no preamble")
                return {"stopReason": "end_turn"}
            verb, _, rest = text.partition(" ")
            name, _, args = rest.partition(" ")
            if verb == "list":
                message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            else:
                message = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": json.loads(args or "{}")},
                }
            answer = await asyncio.to_thread(mcp_roundtrip, self.sessions_mcp.get(sid, []), message)
            await self._chunk(sid, json.dumps(answer))
            return {"stopReason": "end_turn"}
        if b == "big_frame":
            filler = "x" * self.args.size
            frame = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": sid,
                        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": filler}},
                    },
                }
            )
            self._raw(frame.encode() + b"\n")
        if b == "flood_stderr":
            sys.stderr.write("f" * self.args.size + "\n")
            sys.stderr.flush()
        if b == "login" and text == "key?":  # whether the key reached this process, never the key itself
            key = os.environ.get("SCRIPTED_API_KEY", "")
            await self._chunk(sid, f"key of {len(key)} characters" if key else "no key")
            return {"stopReason": "end_turn"}
        if b == "echo_prompt" or text.startswith("echo:"):
            await self._chunk(sid, text)
            return {"stopReason": "end_turn"}
        if self.args.answer:  # --answer TEXT: that text, --chunks characters a chunk
            step = max(1, self.args.chunks)
            for i in range(0, len(self.args.answer), step):
                if sid in self.cancelled:
                    return {"stopReason": "cancelled"}
                await self._chunk(sid, self.args.answer[i : i + step])
                if self.args.delay:
                    await asyncio.sleep(self.args.delay)
            return {"stopReason": "cancelled" if sid in self.cancelled else "end_turn"}
        for i in range(self.args.chunks):
            if sid in self.cancelled:
                return {"stopReason": "cancelled"}
            last = i == self.args.chunks - 1
            # --paragraph N: a blank line after every N chunks (an answer of paragraphs, not one long line)
            gap = "\n\n" if self.args.paragraph and (i + 1) % self.args.paragraph == 0 else " "
            await self._chunk(sid, f"{i}" if last else f"{i}{gap}")
            if self.args.delay:
                await asyncio.sleep(self.args.delay)
        return {"stopReason": "cancelled" if sid in self.cancelled else "end_turn"}


def mcp_roundtrip(servers: list[dict[str, Any]], message: dict[str, Any]) -> Any:
    """initialize + one request against the first MCP server of session/new, as an agent would."""
    import urllib.error
    import urllib.request

    if not servers:
        return {"error": "no MCP server was given in session/new"}
    server = servers[0]
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "scripted", "version": "0"},
        },
    }
    if server.get("type") == "http":
        headers = {h["name"]: h["value"] for h in server.get("headers", [])}
        headers["Content-Type"] = "application/json"
        out = []
        for msg in (init, message):
            req = urllib.request.Request(server["url"], data=json.dumps(msg).encode(), headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    out.append(json.loads(resp.read()))
            except urllib.error.HTTPError as exc:
                return {"http_status": exc.code}
        return out[-1]
    env = {**os.environ, **{e["name"]: e["value"] for e in server.get("env", [])}}
    proc = subprocess.Popen(
        [server["command"], *server.get("args", [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        lines = (json.dumps(init) + "\n" + json.dumps(message) + "\n").encode()
        raw, _ = proc.communicate(lines, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    answers = [json.loads(line) for line in raw.splitlines() if line.strip()]
    return answers[-1] if answers else {"error": "no answer from the stdio server"}


def mcp_bench(servers: list[dict[str, Any]], n: int, tool: str) -> dict[str, list[float]]:
    """Time N tools/call and N ping round trips on one keep-alive connection to the HTTP MCP server."""
    import http.client
    import time
    import urllib.parse

    server = next(s for s in servers if s.get("type") == "http")
    url = urllib.parse.urlparse(server["url"])
    headers = {h["name"]: h["value"] for h in server["headers"]}
    headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)

    def post(body: dict[str, Any]) -> None:
        conn.request("POST", url.path, body=json.dumps(body), headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200 or b'"isError":true' in data:
            raise RuntimeError(f"MCP call failed: {resp.status} {data[:200]!r}")

    out: dict[str, list[float]] = {"call": [], "ping": []}
    post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}})
    for i in range(n):
        t0 = time.perf_counter()
        post({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
        out["call"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        post({"jsonrpc": "2.0", "id": i, "method": "ping"})
        out["ping"].append((time.perf_counter() - t0) * 1000)
    conn.close()
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("behaviour")
    p.add_argument("--chunks", type=int, default=5)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--answer", default="", help="stream: answer this text, --chunks characters a chunk")
    p.add_argument("--paragraph", type=int, default=0, help="stream: a blank line after every N chunks (0: none)")
    p.add_argument("--workers", type=int, default=0, help="mcp_bench: threads calling at once (0: asyncio's default)")
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--pid-file", default="")
    p.add_argument("--frames", default="", help="file of raw lines for the frames behaviour")
    p.add_argument("--child", action="store_true", help="start a sleeping child in the same process group")
    p.add_argument("--login-file", default="", help="login behaviour: logged in while this file exists")
    p.add_argument("--do-login", action="store_true", help="login behaviour: write --login-file and exit")
    return p.parse_args(argv)


async def main_async(args: argparse.Namespace) -> None:
    if args.do_login:  # the terminal login method: what a real agent's `login` command does
        if args.login_file:
            with open(args.login_file, "w") as fh:
                fh.write("logged in\n")
        print("scripted agent: you are logged in; go back to the panel and press Retry")
        return
    if args.behaviour == "exit_at_init":
        sys.stderr.write("scripted agent: refusing to start\n")
        sys.exit(2)
    if args.pid_file:
        pids = [os.getpid()]
        if args.child:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            pids.append(child.pid)
        with open(args.pid_file, "w") as fh:
            fh.write(" ".join(map(str, pids)))
    if args.behaviour == "ignore_eof":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.workers:
        from concurrent.futures import ThreadPoolExecutor

        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(args.workers))
    conn = await serve_stdio(lambda c: ScriptedAgent(c, args), max_frame_bytes=64 * 1024 * 1024)
    await conn.wait_closed()
    if args.behaviour == "ignore_eof":
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    asyncio.run(main_async(parse_args(argv)))


def serve(agent_class: type[ScriptedAgent], argv: tuple[str, ...] = ("stream", "--chunks", "3")) -> None:
    """Serve a subclass (the browser tests' scene agents) on stdio, with ``argv``'s behaviour for what it leaves
    to this class."""
    args = parse_args(list(argv))

    async def run() -> None:
        conn = await serve_stdio(lambda c: agent_class(c, args))
        await conn.wait_closed()

    asyncio.run(run())


if __name__ == "__main__":
    main()
