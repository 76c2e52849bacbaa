"""This project beside Jupyter AI, driving the same zero-cost ACP agent, against the agent driven directly.

    python bench/peers.py [--repeat 5] [--warm 30] [--idle 5] [--venv DIR] [--venv-rtc DIR]
                          [--paths floor,ours,jai-rest,jai-chat[,jai-ychat]]

The first answer, warm turns and memory, compared with Jupyter AI 3.2 (jupyter-ai-acp-client 0.3.3), the other
way to drive an ACP agent from Jupyter: this keeps that comparison true as both move. Jupyter AI is installed
(pinned versions) into a throwaway virtual
environment (``--venv``, default under ``~/.cache/jupyter-acp-bench``, created once), so it never meets this
package's own dependencies. Both servers run the agent of this very file (``--agent``: a stdlib-only ACP agent
that answers each prompt with one chunk), Jupyter AI through a local persona (``.jupyter/personas/``).

The rows (``--paths`` picks them and their order):
- ``floor``: the agent spawned and driven directly over its pipe;
- ``ours``: this project, the first prompt over REST, then prompt ops on the session's WebSocket, as the panel;
- ``jai-rest``: Jupyter AI's REST route ``POST /api/ai/message/<persona>`` (its best case: one ephemeral chat);
- ``jai-chat``: Jupyter AI as a JupyterLab chat tab drives it. With the pinned install no RTC provider is active
  (Jupyter AI 3.2 made real-time collaboration optional; jupyter-collaboration is not among its dependencies), so
  the chat runs over jupyterlab-chat's own JSON WebSocket ``/api/chat/ws/<path>`` (one ``.chat`` file per server),
  not over a YChat collaboration room. The client opens the chat, waits for the persona to register as a chat
  user, announces the persona picker's selection (the ``persona_selected`` event, as the chat input does), then
  sends each message with ``metadata.to_persona`` (Jupyter AI 3.2 routes on that, not on an @-mention in the body)
  and waits for the persona's answer message to arrive in the chat and its typing indicator to go off;
- ``jai-ychat`` (not run unless named): the same with real-time collaboration on, jupyter-collaboration installed
  beside the pins in a second venv (``--venv-rtc``): the ``.chat`` file is then a YChat document in a collaboration
  room, joined with pycrdt over y-websocket; the message is appended to its ``messages`` array (see ``YChatClient``).
  A new chat routes no message until the room's first save (``document_save_delay``, 1 s), so this client waits
  for that before its first message, and the cold figure includes the wait (printed apart).

Per path, medians of ``--repeat`` fresh servers (each started, and not timed, before its row's clock starts):
- cold first answer: the first prompt of the first session until its answer, the agent's spawn included (ours:
  from the session's creation to the first chunk on its WebSocket; REST: the request; chat: from opening the chat
  to the persona's answer in it); the floor is spawn, initialize, session/new, prompt, first chunk;
- warm: ``--warm`` prompts back to back, each until the turn's end as a client sees it (ours: ``turn_ended`` on
  the WebSocket; REST: its answer; chat: the persona's answer message in the chat, which Jupyter AI writes after
  it has already cleared its typing indicator; YChat: the answer in the local copy of the document); "idle" the
  same after 1 s of quiet, ``--idle`` times. Both Jupyter AI chat paths write several small WebSocket frames per
  turn without TCP_NODELAY, so back-to-back turns there mostly measure Nagle's algorithm meeting delayed ACKs
  (about 40 ms; with TCP_NODELAY forced on its handlers a warm turn took 3 ms on the chat WebSocket, 6 ms on YChat);
  a browser's socket very likely meets the same kernel ACK timer (not measured here);
- the server's RSS growth over 100 warm prompts, and Jupyter AI's empty answers (REST returns whatever the
  ephemeral chat holds when the persona stops "processing"; on the chat path the count is of turns whose typing
  indicator went off before the answer was in the chat).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

JAI_PINS = ["jupyter-ai==3.2.0", "jupyter-ai-acp-client==0.3.3"]
# the same with real-time collaboration on: jupyterlab-chat then serves chats as YChat documents in collaboration rooms
JAI_RTC_PINS = [*JAI_PINS, "jupyter-collaboration==5.0.4"]
HERE = Path(__file__).resolve()
AGENT = [sys.executable, str(HERE), "--agent"]


# -- the zero-cost agent (run as a subprocess by every path) ----------------------------------------


def agent_main() -> None:
    """An ACP agent with no work: one answer chunk per prompt. Stdlib only, blocking IO, one line per message."""
    out = sys.stdout

    def send(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    n = 0
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None or rid is None:
            continue  # answers to our (never sent) requests, notifications such as session/cancel
        if method == "initialize":
            result: Any = {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False, "promptCapabilities": {}},
                "authMethods": [],
                "agentInfo": {"name": "zero", "version": "1"},
            }
        elif method == "session/new":
            n += 1
            result = {"sessionId": f"zero-{os.getpid()}-{n}"}
        elif method == "session/prompt":
            update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}}
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": params.get("sessionId"), "update": update},
                }
            )
            result = {"stopReason": "end_turn"}
        elif method in ("session/set_mode", "session/set_config_option", "authenticate"):
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})


# -- the floor: the agent driven directly -------------------------------------------------------------


class Direct:
    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.next_id = 0

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *AGENT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )

    async def request(self, method: str, params: dict[str, Any]) -> tuple[Any, float | None]:
        """(result, perf_counter of the first session/update seen before it)."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        rid = self.next_id
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n"
        )
        await self.proc.stdin.drain()
        first = None
        while True:
            msg = json.loads(await self.proc.stdout.readline())
            if msg.get("method") == "session/update" and first is None:
                first = time.perf_counter()
            if msg.get("id") == rid:
                return msg.get("result"), first

    async def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            await self.proc.wait()


async def floor(args: argparse.Namespace) -> dict[str, Any]:
    colds, warm, idle = [], [], []
    prompt = [{"type": "text", "text": "hi"}]
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        agent = Direct()
        await agent.start()
        await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        sid = (await agent.request("session/new", {"cwd": os.getcwd(), "mcpServers": []}))[0]["sessionId"]
        _, first = await agent.request("session/prompt", {"sessionId": sid, "prompt": prompt})
        colds.append(first - t0)  # type: ignore[operator]
        for _ in range(args.warm):
            t1 = time.perf_counter()
            await agent.request("session/prompt", {"sessionId": sid, "prompt": prompt})
            warm.append(time.perf_counter() - t1)
        for _ in range(args.idle):
            await asyncio.sleep(1)
            t1 = time.perf_counter()
            await agent.request("session/prompt", {"sessionId": sid, "prompt": prompt})
            idle.append(time.perf_counter() - t1)
        await agent.stop()
    return {"cold": colds, "warm": warm, "idle": idle}


# -- this project ---------------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def warm_idle_growth(
    turn: Any, pid: int, args: argparse.Namespace, warm: list[float], idle: list[float], growth: list[int]
) -> None:
    """The same three measures on every server path: ``--warm`` turns back to back, ``--idle`` turns each after
    1 s of quiet, and the server's RSS growth over 100 more (``turn`` answers a turn's seconds)."""
    warm.extend([await turn() for _ in range(args.warm)])
    for _ in range(args.idle):
        await asyncio.sleep(1)
        idle.append(await turn())
    before = rss_kib(pid)
    for _ in range(100):
        await turn()
    growth.append(rss_kib(pid) - before)


async def ours(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import httpx
    import nbformat
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    from jupyter_acp.testing.server import ServerProcess

    root = tmp / "ours-root"
    root.mkdir()
    (root / "a.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    agents = {"zero": {"command": AGENT[0], "args": AGENT[1:]}}
    colds, warm, idle, growth = [], [], [], []
    for i in range(args.repeat):
        server = ServerProcess(root, tmp / f"ours-data{i}", agents=agents)
        server.start()
        try:
            async with httpx.AsyncClient(headers=server.headers, timeout=30) as client:
                await client.get(server.url("agents"))  # the connection is open before the clock starts
                t0 = time.perf_counter()
                resp = await client.post(server.url("sessions"), json={"notebook": "a.ipynb", "agent": "zero"})
                resp.raise_for_status()
                sid = resp.json()["id"]
                ws_url = f"ws://127.0.0.1:{server.port}/jupyter-acp/sessions/{sid}/stream?after=0"
                ws = await websocket_connect(HTTPRequest(ws_url, headers=server.headers))

                async def until(kind: str, ws: Any = ws) -> set[str]:
                    """Read frames until one holds an event of ``kind``; the event types of that frame (a quick
                    turn's answer and its ``turn_ended`` may share one)."""
                    while True:
                        msg = await asyncio.wait_for(ws.read_message(), 60)
                        if msg is None:
                            raise RuntimeError("the session's stream closed")
                        frame = json.loads(msg)
                        if isinstance(frame, dict):  # the answer to an op (events come as arrays)
                            if not frame.get("ok"):
                                raise RuntimeError(f"the prompt was refused: {frame}")
                            continue
                        kinds = {e.get("type") for e in frame}
                        if kind in kinds:
                            return kinds

                (await client.post(server.url("sessions", sid, "prompt"), json={"text": "hi"})).raise_for_status()
                kinds = await until("session_update")
                colds.append(time.perf_counter() - t0)
                if "turn_ended" not in kinds:
                    await until("turn_ended")

                async def turn(ws: Any = ws) -> float:
                    """A warm prompt as the panel sends it: an op on the session's open WebSocket."""
                    t1 = time.perf_counter()
                    await ws.write_message(json.dumps({"op": "prompt", "ref": 1, "text": "hi"}))
                    await until("turn_ended")
                    return time.perf_counter() - t1

                await warm_idle_growth(turn, server.proc.pid, args, warm, idle, growth)  # type: ignore[union-attr]
                ws.close()
        finally:
            server.stop()
    return {"cold": colds, "warm": warm, "idle": idle, "growth_kib": growth}


# -- Jupyter AI -----------------------------------------------------------------------------------------

PERSONA = """
import os
from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_persona_manager import PersonaDefaults

import jupyter_ai_acp_client

AVATAR = os.path.join(os.path.dirname(jupyter_ai_acp_client.__file__), "static", "codex.svg")


class ZeroPersona(BaseAcpPersona):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, executable={agent!r}, **kwargs)

    @property
    def defaults(self):
        return PersonaDefaults(name="Zero", description="zero-cost ACP agent", avatar_path=AVATAR, system_prompt="unused")
"""


def ensure_venv(path: Path, pins: list[str] = JAI_PINS) -> Path:
    python = path / "bin" / "python"
    marker = path / ".installed"
    if marker.exists() and marker.read_text() == " ".join(pins):
        return python
    print(f"# installing {', '.join(pins)} into {path} (once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True)
    marker.write_text(" ".join(pins))
    return python


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JaiServer:
    """One fresh Jupyter AI server (``jupyter_server`` of the throwaway venv) on a free port, with the local persona."""

    token = "bench-peers"

    def __init__(self, tmp: Path, python: Path, tag: str) -> None:
        self.root = tmp / f"jai-root-{tag}"
        if not self.root.exists():
            (self.root / ".jupyter" / "personas").mkdir(parents=True)
            (self.root / ".jupyter" / "personas" / "zero_persona.py").write_text(
                textwrap.dedent(PERSONA.format(agent=AGENT))
            )
        self.data = tmp / f"jai-data-{tag}"
        self.data.mkdir()
        self.python = python
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.headers = {"Authorization": f"token {self.token}"}
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self, client: Any) -> None:
        """Start the server and wait until ``/api/status`` answers (not timed by any row)."""
        import httpx

        data = self.data
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(data / "runtime"),
            "JUPYTER_DATA_DIR": str(data),
            "JUPYTER_CONFIG_DIR": str(data / "config"),
            "HOME": str(data),
        }
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = f"{self.python.parent}:{env.get('PATH', '')}"
        log = open(data / "server.log", "ab")
        self.proc = subprocess.Popen(
            [str(self.python), "-m", "jupyter_server", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
             f"--ServerApp.root_dir={self.root}", f"--IdentityProvider.token={self.token}", "--allow-root"],
            env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=data,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Jupyter AI's server did not start: {self.log_tail()}")
            try:
                if (await client.get(f"{self.base}/api/status")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)

    def log_tail(self, n: int = 2000) -> str:
        return (self.data / "server.log").read_text(errors="replace")[-n:]

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def jupyter_ai(args: argparse.Namespace, tmp: Path, python: Path) -> dict[str, Any]:
    """Jupyter AI's REST route ``POST /api/ai/message/<persona>`` (an ephemeral chat per server)."""
    import httpx

    colds, warm, idle, growth, empty, total = [], [], [], [], 0, 0
    for i in range(args.repeat):
        server = JaiServer(tmp, python, f"rest{i}")
        try:
            async with httpx.AsyncClient(headers=server.headers, timeout=180) as client:
                await server.start(client)
                base = server.base

                async def ask(base: str = base) -> float:
                    nonlocal empty, total
                    t1 = time.perf_counter()
                    resp = await client.post(f"{base}/api/ai/message/Zero", json={"message": "hi"})
                    resp.raise_for_status()
                    took = time.perf_counter() - t1
                    total += 1
                    if "ok" not in resp.json().get("response", ""):
                        empty += 1
                    return took

                colds.append(await ask())
                assert server.proc is not None
                await warm_idle_growth(ask, server.proc.pid, args, warm, idle, growth)
        finally:
            server.stop()
    return {"cold": colds, "warm": warm, "idle": idle, "growth_kib": growth, "empty": empty, "total": total}


PERSONA_SELECTED = "https://schema.jupyter.org/jupyter_ai_persona_manager/persona_selected/v1"


class ChatClient:
    """A chat tab of JupyterLab on Jupyter AI 3.2's chat WebSocket ``/api/chat/ws/<path>`` (RTC off, the default).

    The frames are jupyterlab-chat's ``ws_messages`` (``{"type": "client"|"server", "action": ...}``): the server
    opens with ``connection`` (chat id, history, users), then sends ``message`` (a new or updated message, whole),
    ``users`` (personas register themselves as users when the chat opens) and ``writing`` (a persona's typing
    indicator, cleared when its turn ends). A message is sent as ``{"action": "send", "body", "metadata"}``; Jupyter
    AI 3.2 routes it by ``metadata["to_persona"]`` (the persona picker of the chat input stamps it on every message),
    not by an @-mention in the body.
    """

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.chat_id = ""
        self.users: dict[str, dict[str, Any]] = {}
        self.bodies: dict[str, str] = {}  # message id -> last body seen

    async def frame(self, timeout: float = 60) -> dict[str, Any]:
        msg = await asyncio.wait_for(self.ws.read_message(), timeout)
        if msg is None:
            raise RuntimeError("Jupyter AI closed the chat WebSocket")
        frame = json.loads(msg)
        action = frame.get("action")
        if action == "connection":
            self.chat_id = frame["id"]
            self.users.update(frame.get("users") or {})
            for m in frame.get("messages") or []:
                self.bodies[m["id"]] = m.get("body", "")
        elif action == "users":
            self.users.update(frame.get("users") or {})
        return frame

    async def persona(self, name: str) -> str:
        """The persona's user id, once it has registered itself in this chat."""
        while True:
            for uid, user in self.users.items():
                if user.get("bot") and name in (user.get("name"), user.get("display_name"), user.get("username")):
                    return uid
            await self.frame()

    async def turn(self, persona: str, text: str = "hi") -> tuple[float, float, float]:
        """Send one message to ``persona``, as the chat input does; wait until both its answer is in the chat and it
        has stopped writing. Returns perf_counter times: (sent, answer seen, stopped writing seen)."""
        sent = time.perf_counter()
        await self.ws.write_message(
            json.dumps(
                {"type": "client", "action": "send", "id": uuid.uuid4().hex, "body": text,
                 "metadata": {"to_persona": persona}}
            )
        )  # fmt: skip
        answered: float | None = None
        stopped: float | None = None
        while answered is None or stopped is None:
            frame = await self.frame()
            action = frame.get("action")
            if action == "message":
                m = frame["message"]
                if m.get("sender") != persona:
                    continue
                body, before = m.get("body", ""), self.bodies.get(m["id"], "")
                self.bodies[m["id"]] = body
                if answered is None and body != before and "ok" in body:
                    answered = time.perf_counter()
            elif action == "writing" and (frame.get("user") or {}).get("username") == persona:
                if stopped is None and not frame.get("state"):
                    stopped = time.perf_counter()
        assert answered is not None and stopped is not None
        return sent, answered, stopped


async def jupyter_ai_chat(args: argparse.Namespace, tmp: Path, python: Path) -> dict[str, Any]:
    """Jupyter AI through its chat WebSocket, as a JupyterLab chat tab drives it (see ``ChatClient``)."""
    import httpx
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    colds, warm, idle, growth, stops, early, total = [], [], [], [], [], 0, 0
    for i in range(args.repeat):
        server = JaiServer(tmp, python, f"chat{i}")
        try:
            async with httpx.AsyncClient(headers=server.headers, timeout=180) as client:
                await server.start(client)
                # the clock starts when the user opens the chat (the persona list, its agent spawn and session
                # come after), as ours starts when the panel creates the session
                t0 = time.perf_counter()
                ws_url = f"ws://127.0.0.1:{server.port}/api/chat/ws/bench.chat"
                ws = await websocket_connect(HTTPRequest(ws_url, headers=server.headers))
                chat = ChatClient(ws)
                persona = await chat.persona("Zero")
                # the chat input's persona picker announces its selection (Jupyter AI then prepares the persona)
                (
                    await client.post(
                        f"{server.base}/api/events",
                        json={
                            "schema_id": PERSONA_SELECTED,
                            "version": "1",
                            "data": {"chat_id": chat.chat_id, "persona_id": persona},
                        },
                    )
                ).raise_for_status()
                _, answered, stopped = await chat.turn(persona)
                colds.append(answered - t0)
                total, early = total + 1, early + (stopped < answered)

                async def one(chat: ChatClient = chat, persona: str = persona) -> float:
                    nonlocal total, early
                    sent, answered, stopped = await chat.turn(persona)
                    total, early = total + 1, early + (stopped < answered)
                    stops.append(stopped - sent)
                    return answered - sent

                assert server.proc is not None
                await warm_idle_growth(one, server.proc.pid, args, warm, idle, growth)
                ws.close()
        except (TimeoutError, RuntimeError) as exc:
            raise RuntimeError(f"Jupyter AI's chat path failed ({exc!r}); server log: {server.log_tail()}") from exc
        finally:
            server.stop()
    return {"cold": colds, "warm": warm, "idle": idle, "growth_kib": growth, "stops": stops,
            "early": early, "total": total}  # fmt: skip


class YChatClient:
    """A JupyterLab chat tab on Jupyter AI with real-time collaboration on: the ``.chat`` file is a YChat document
    (pycrdt: ``messages`` an array of maps with ``id``, ``body``, ``sender``, ``time``, ``raw_time``, ``type``,
    ``metadata``; ``users`` and ``metadata`` maps) in the collaboration room ``text:chat:<file id>``, kept in sync
    over y-websocket. The persona's typing indicator lives in awareness and is not read here."""

    me = "bench-user"

    def __init__(self) -> None:
        from pycrdt import Array, Doc, Map

        self.doc: Any = Doc()
        self.messages: Any = self.doc.get("messages", type=Array)
        self.users: Any = self.doc.get("users", type=Map)
        self.metadata: Any = self.doc.get("metadata", type=Map)
        self.state: Any = self.doc.get("state", type=Map)
        self.changed = asyncio.Event()
        self.doc.observe(lambda _event: self.changed.set())
        self.answered: set[str] = set()

    async def wait_for(self, predicate: Any, timeout: float = 60) -> Any:
        """The first truthy ``predicate()``, evaluated after each change of the local copy of the document."""
        deadline = time.monotonic() + timeout
        while not (found := predicate()):
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), max(0.001, deadline - time.monotonic()))
        return found

    def persona_id(self, name: str) -> str | None:
        for uid, user in self.users.items():
            if dict(user).get("bot") and dict(user).get("name") == name:
                return str(uid)
        return None

    def new_answer(self, persona: str) -> str | None:
        for k in range(len(self.messages) - 1, -1, -1):
            m = self.messages[k]
            if m.get("sender") == persona and "ok" in str(m.get("body", "")) and str(m.get("id")) not in self.answered:
                return str(m.get("id"))
        return None

    async def turn(self, persona: str, text: str = "hi") -> float:
        """Append a message for ``persona`` as the chat input does; seconds until its answer is in the document."""
        from pycrdt import Map

        sent = time.perf_counter()
        self.messages.append(
            Map(
                {"type": "msg", "id": uuid.uuid4().hex, "body": text, "sender": self.me, "time": time.time(),
                 "raw_time": True, "metadata": {"to_persona": persona}}
            )
        )  # fmt: skip
        self.answered.add(await self.wait_for(lambda: self.new_answer(persona)))
        return time.perf_counter() - sent


async def jupyter_ai_ychat(args: argparse.Namespace, tmp: Path, python: Path) -> dict[str, Any]:
    """Jupyter AI 3.2 with jupyter-collaboration in its venv (``--venv-rtc``), as a JupyterLab chat tab drives it
    there (see ``YChatClient``): open a collaboration session for the ``.chat`` file, join its room, wait for the
    persona in ``users``, announce the picker's selection, append messages, time until each answer is in the
    document."""
    import httpx
    from httpx_ws import aconnect_ws
    from pycrdt import Provider
    from pycrdt.websocket.websocket import HttpxWebsocket

    colds, warm, idle, growth, ready = [], [], [], [], []
    for i in range(args.repeat):
        server = JaiServer(tmp, python, f"ychat{i}")
        (server.root / "bench.chat").write_text("")
        try:
            async with httpx.AsyncClient(headers=server.headers, timeout=180) as client:
                await server.start(client)
                t0 = time.perf_counter()  # the user opens the chat
                resp = await client.put(
                    f"{server.base}/api/collaboration/session/bench.chat", json={"format": "text", "type": "chat"}
                )
                resp.raise_for_status()
                session = resp.json()
                room = f"{session['format']}:{session['type']}:{session['fileId']}"
                url = f"{server.base}/api/collaboration/room/{room}?sessionId={session['sessionId']}"
                chat = YChatClient()
                ws: Any
                async with aconnect_ws(url, client) as ws, Provider(chat.doc, HttpxWebsocket(ws, room)):
                    persona = await chat.wait_for(lambda chat=chat: chat.persona_id("Zero"))
                    chat_id = await chat.wait_for(lambda chat=chat: chat.metadata.get("id"))
                    chat.users[chat.me] = {"username": chat.me, "name": "Bench", "display_name": "Bench"}
                    # jupyterlab-chat's YChat starts "dirty" and its message observer (the router's) skips every
                    # message while it is: a message sent before the room's first save (document_save_delay, 1 s,
                    # after the first change) is never answered. Wait for it, as a user would have to.
                    await chat.wait_for(lambda chat=chat: chat.state.get("dirty") is False)
                    ready.append(time.perf_counter() - t0)
                    (
                        await client.post(
                            f"{server.base}/api/events",
                            json={
                                "schema_id": PERSONA_SELECTED,
                                "version": "1",
                                "data": {"chat_id": chat_id, "persona_id": persona},
                            },
                        )
                    ).raise_for_status()
                    await chat.turn(persona)
                    colds.append(time.perf_counter() - t0)
                    assert server.proc is not None

                    async def one(chat: Any = chat, persona: str = persona) -> float:
                        return await chat.turn(persona)

                    await warm_idle_growth(one, server.proc.pid, args, warm, idle, growth)
        except (TimeoutError, RuntimeError, ExceptionGroup) as exc:  # the provider's task group wraps ours
            raise RuntimeError(f"Jupyter AI's YChat path failed ({exc!r}); server log: {server.log_tail()}") from exc
        finally:
            server.stop()
    return {"cold": colds, "warm": warm, "idle": idle, "growth_kib": growth, "ready": ready}


# -- the table ---------------------------------------------------------------------------------------------


FLOOR = "the agent driven directly (floor)"
PATHS = {
    "floor": FLOOR,
    "ours": "this project (first prompt over REST, then ops on the WebSocket)",
    "jai-rest": "Jupyter AI 3.2, REST `/api/ai/message`",
    "jai-chat": "Jupyter AI 3.2, chat WebSocket `/api/chat/ws`",
    "jai-ychat": "Jupyter AI 3.2 + jupyter-collaboration, YChat in a collaboration room",
}
DEFAULT_PATHS = "floor,ours,jai-rest,jai-chat"


def table(rows: list[tuple[str, dict[str, Any]]], floor_cold: float | None) -> str:
    med = statistics.median
    out = [
        "| path | cold first answer | warm (back to back) | warm, 1 s idle | RSS growth per 100 prompts |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows:
        cold = med(r["cold"])
        ratio = f" ({cold / floor_cold:.1f}x)" if name != FLOOR and floor_cold else ""
        growth = f"{med(r['growth_kib']):,.0f} KiB" if r.get("growth_kib") else "-"
        if "empty" in r:
            growth += f" ({r['empty']} of {r['total']} answers empty)"
        if "early" in r:
            growth += f" ({r['early']} of {r['total']} turns stopped writing before their answer was in the chat)"
        warm, idle = (f"{med(r[k]) * 1000:.2f} ms" if r[k] else "-" for k in ("warm", "idle"))
        out.append(f"| {name} | {cold * 1000:.0f} ms{ratio} | {warm} | {idle} | {growth} |")
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> None:
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        raise SystemExit(f"--paths: unknown {', '.join(unknown)}; choose among {', '.join(PATHS)}")
    if args.skip_jupyter_ai:
        paths = [p for p in paths if not p.startswith("jai-")]
    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    python = ensure_venv(Path(args.venv)) if any(p in ("jai-rest", "jai-chat") for p in paths) else None
    rtc_python = ensure_venv(Path(args.venv_rtc), JAI_RTC_PINS) if "jai-ychat" in paths else None
    rows: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        print(f"# running {path}: {PATHS[path]}", file=sys.stderr, flush=True)
        if path == "floor":
            r = await floor(args)
        elif path == "ours":
            r = await ours(args, tmp)
        elif path == "jai-rest":
            assert python is not None
            r = await jupyter_ai(args, tmp, python)
        elif path == "jai-chat":
            assert python is not None
            r = await jupyter_ai_chat(args, tmp, python)
        else:
            assert rtc_python is not None
            r = await jupyter_ai_ychat(args, tmp, rtc_python)
        rows.append((PATHS[path], r))
    base = dict(rows).get(FLOOR)
    print(f"# {args.repeat} fresh servers per path, {args.warm} warm and {args.idle} idle prompts each; medians")
    print(table(rows, statistics.median(base["cold"]) if base else None))
    ychat = dict(rows).get(PATHS["jai-ychat"])
    if ychat:
        print(
            "# Jupyter AI YChat: of its cold first answer, waiting until the new chat's first save made it route "
            f"messages at all: {statistics.median(ychat['ready']) * 1000:.0f} ms (median)"
        )
    chat = dict(rows).get(PATHS["jai-chat"])
    if chat and chat["stops"]:
        print(
            "# Jupyter AI chat WebSocket: the persona's typing indicator went off "
            f"{statistics.median(chat['stops']) * 1000:.2f} ms after a warm message was sent (median of all)"
        )


def main() -> None:
    if "--agent" in sys.argv:
        agent_main()
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--warm", type=int, default=30)
    p.add_argument("--idle", type=int, default=5)
    p.add_argument("--venv", default=str(Path.home() / ".cache" / "jupyter-acp-bench" / "jupyter-ai-3.2.0"))
    p.add_argument("--venv-rtc", default=str(Path.home() / ".cache" / "jupyter-acp-bench" / "jupyter-ai-3.2.0-rtc"))
    p.add_argument("--paths", default=DEFAULT_PATHS, help=f"the rows to run, in order, among {', '.join(PATHS)}")
    p.add_argument("--skip-jupyter-ai", action="store_true", help="leave out the jai-* paths")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
