"""This project beside Jupyter AI, driving the same zero-cost ACP agent, against the agent driven directly.

    python bench/peers.py [--repeat 5] [--warm 30] [--idle 5] [--venv DIR]

Issue 16 compared the first answer, warm turns and memory with Jupyter AI 3.2 (jupyter-ai-acp-client 0.3.3);
this keeps that comparison true as both move. Jupyter AI is installed (pinned versions) into a throwaway virtual
environment (``--venv``, default under ``~/.cache/jupyter-acp-bench``, created once), so it never meets this
package's own dependencies. Both servers run the agent of this very file (``--agent``: a stdlib-only ACP agent
that answers each prompt with one chunk), Jupyter AI through a local persona (``.jupyter/personas/``).

Per path, medians of ``--repeat`` fresh servers:
- cold first answer: a fresh server (not timed while it starts), the first prompt of the first session until its
  answer (the agent's spawn included); the floor is the agent spawned and driven directly over its pipe;
- warm: ``--warm`` prompts back to back, each until the turn's end as a client sees it (ours: a prompt op on the
  session's WebSocket, as the panel sends it, until ``turn_ended`` there; Jupyter AI: its REST answer); "idle" the same after 1 s of quiet, ``--idle`` times;
- the server's RSS growth over 100 warm prompts, and Jupyter AI's empty answers (it returns whatever the
  ephemeral chat holds when the persona stops "processing").
Jupyter AI's chat WebSocket path (YChat over the collaboration room) is not driven here: only its REST route.
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
from pathlib import Path
from typing import Any

JAI_PINS = ["jupyter-ai==3.2.0", "jupyter-ai-acp-client==0.3.3"]
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

                async def until(kind: str, ws: Any = ws) -> None:
                    while True:
                        msg = await ws.read_message()
                        if msg is None:
                            raise RuntimeError("the session's stream closed")
                        frame = json.loads(msg)
                        if isinstance(frame, dict):  # the answer to an op (events come as arrays)
                            if not frame.get("ok"):
                                raise RuntimeError(f"the prompt was refused: {frame}")
                            continue
                        if any(e.get("type") == kind for e in frame):
                            return

                (await client.post(server.url("sessions", sid, "prompt"), json={"text": "hi"})).raise_for_status()
                await until("session_update")
                colds.append(time.perf_counter() - t0)
                await until("turn_ended")

                async def turn(ws: Any = ws) -> float:
                    """A warm prompt as the panel sends it: an op on the session's open WebSocket."""
                    t1 = time.perf_counter()
                    await ws.write_message(json.dumps({"op": "prompt", "ref": 1, "text": "hi"}))
                    await until("turn_ended")
                    return time.perf_counter() - t1

                warm.extend([await turn() for _ in range(args.warm)])
                for _ in range(args.idle):
                    await asyncio.sleep(1)
                    idle.append(await turn())
                before = rss_kib(server.proc.pid)  # type: ignore[union-attr]
                for _ in range(100):
                    await turn()
                growth.append(rss_kib(server.proc.pid) - before)  # type: ignore[union-attr]
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


def ensure_venv(path: Path) -> Path:
    python = path / "bin" / "python"
    marker = path / ".installed"
    if marker.exists() and marker.read_text() == " ".join(JAI_PINS):
        return python
    print(f"# installing {', '.join(JAI_PINS)} into {path} (once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *JAI_PINS], check=True)
    marker.write_text(" ".join(JAI_PINS))
    return python


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def jupyter_ai(args: argparse.Namespace, tmp: Path, python: Path) -> dict[str, Any]:
    import httpx

    root = tmp / "jai-root"
    (root / ".jupyter" / "personas").mkdir(parents=True)
    (root / ".jupyter" / "personas" / "zero_persona.py").write_text(textwrap.dedent(PERSONA.format(agent=AGENT)))
    colds, warm, idle, growth, empty, total = [], [], [], [], 0, 0
    token = "bench-peers"
    for i in range(args.repeat):
        port = free_port()
        data = tmp / f"jai-data{i}"
        data.mkdir()
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(data / "runtime"),
            "JUPYTER_DATA_DIR": str(data),
            "JUPYTER_CONFIG_DIR": str(data / "config"),
            "HOME": str(data),
        }
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = f"{python.parent}:{env.get('PATH', '')}"
        log = open(data / "server.log", "ab")
        proc = subprocess.Popen(
            [str(python), "-m", "jupyter_server", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
             f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={token}", "--allow-root"],
            env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=data,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"token {token}"}
        try:
            deadline = time.monotonic() + 120
            async with httpx.AsyncClient(headers=headers, timeout=180) as client:
                while True:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(
                            "Jupyter AI's server did not start: " + (data / "server.log").read_text()[-2000:]
                        )
                    try:
                        if (await client.get(f"{base}/api/status")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.1)

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
                warm.extend([await ask() for _ in range(args.warm)])
                for _ in range(args.idle):
                    await asyncio.sleep(1)
                    idle.append(await ask())
                before = rss_kib(proc.pid)
                for _ in range(100):
                    await ask()
                growth.append(rss_kib(proc.pid) - before)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {"cold": colds, "warm": warm, "idle": idle, "growth_kib": growth, "empty": empty, "total": total}


# -- the table ---------------------------------------------------------------------------------------------


def table(rows: list[tuple[str, dict[str, Any]]], floor_cold: float) -> str:
    med = statistics.median
    out = [
        "| path | cold first answer | warm (back to back) | warm, 1 s idle | RSS growth per 100 prompts |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows:
        cold = med(r["cold"])
        ratio = f" ({cold / floor_cold:.1f}x)" if name != "the agent driven directly (floor)" else ""
        growth = f"{med(r['growth_kib']):,.0f} KiB" if r.get("growth_kib") else "-"
        if r.get("total"):
            growth += f" ({r['empty']} of {r['total']} answers empty)"
        out.append(
            f"| {name} | {cold * 1000:.0f} ms{ratio} | {med(r['warm']) * 1000:.2f} ms | {med(r['idle']) * 1000:.2f} ms | {growth} |"
        )
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    python = None if args.skip_jupyter_ai else ensure_venv(Path(args.venv))
    rows: list[tuple[str, dict[str, Any]]] = []
    base = await floor(args)
    rows.append(("the agent driven directly (floor)", base))
    rows.append(("this project (first prompt over REST, then ops on the WebSocket)", await ours(args, tmp)))
    if python is not None:
        rows.append(("Jupyter AI 3.2, REST `/api/ai/message`", await jupyter_ai(args, tmp, python)))
    print(f"# {args.repeat} fresh servers per path, {args.warm} warm and {args.idle} idle prompts each; medians")
    print(table(rows, statistics.median(base["cold"])))


def main() -> None:
    if "--agent" in sys.argv:
        agent_main()
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--warm", type=int, default=30)
    p.add_argument("--idle", type=int, default=5)
    p.add_argument("--venv", default=str(Path.home() / ".cache" / "jupyter-acp-bench" / "jupyter-ai-3.2.0"))
    p.add_argument("--skip-jupyter-ai", action="store_true", help="only the floor and this project")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
