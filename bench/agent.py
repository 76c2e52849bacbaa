"""Benchmark of the built-in agent, as ratios against floors measured in the same run.

1. Start-up: spawn -> ``initialize`` -> ``session/new`` answered, for the built-in agent (model mode, so
   the lazy litellm import is what is tested) against a bare ACP SDK echo agent.  Goal: <= 1.5x.
2. Streaming: tokens/s of a long answer streamed from the fake model through the agent (litellm, the
   agent's loop, the ACP wire) against the same stream read raw from the fake model.  Goal: >= 0.9x.

``python bench/agent.py [--runs 5] [--tokens 2000]``; prints one line per figure and a JSON summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jupyter_acp.protocol.jsonrpc import JsonRpcConnection
from jupyter_acp.testing.fake_model import FakeModel

SDK_ECHO_AGENT = r"""
import asyncio, uuid
from acp import run_agent
from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse

class EchoAgent:
    def on_connect(self, conn):
        self.conn = conn
    async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kw):
        return InitializeResponse(protocol_version=protocol_version)
    async def new_session(self, cwd, mcp_servers=None, **kw):
        return NewSessionResponse(session_id=uuid.uuid4().hex)
    async def prompt(self, session_id, prompt, **kw):
        return PromptResponse(stop_reason="end_turn")

asyncio.run(run_agent(EchoAgent()))
"""

INIT = {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}


class Client:
    def __init__(self) -> None:
        self.chunks = 0
        self.text: list[str] = []

    def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/update" and params["update"].get("sessionUpdate") == "agent_message_chunk":
            self.chunks += 1
            self.text.append(params["update"]["content"]["text"])

    def tokens(self) -> int:
        return len("".join(self.text).split())

    async def handle_request(self, method: str, params: Any) -> Any:
        return {"outcome": {"outcome": "cancelled"}}


async def spawn(argv: list[str], env: dict[str, str]) -> tuple[asyncio.subprocess.Process, JsonRpcConnection, Client]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, **env},
        limit=1 << 24,
    )
    client = Client()
    conn = JsonRpcConnection(proc.stdout, proc.stdin, client, name="bench")  # type: ignore[arg-type]
    conn.start()
    return proc, conn, client


async def stop(proc: asyncio.subprocess.Process, conn: JsonRpcConnection) -> None:
    conn.close()
    try:
        await asyncio.wait_for(proc.wait(), 20)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def startup(argv: list[str], env: dict[str, str], cwd: str) -> float:
    t0 = time.perf_counter()
    proc, conn, _ = await spawn(argv, env)
    await conn.request("initialize", INIT, timeout=60)
    await conn.request("session/new", {"cwd": cwd, "mcpServers": []}, timeout=60)
    elapsed = time.perf_counter() - t0
    await stop(proc, conn)
    return elapsed


async def raw_stream(model: FakeModel) -> tuple[int, float]:
    """Tokens and seconds for the bench answer read straight from the fake model (SSE parsed)."""
    import aiohttp

    body = {"model": "fake", "stream": True, "messages": [{"role": "user", "content": "bench"}]}
    tokens = 0
    async with aiohttp.ClientSession() as http:
        t0 = time.perf_counter()
        async with http.post(model.url + "/chat/completions", json=body) as resp:
            async for line in resp.content:
                if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                    chunk = json.loads(line[6:])
                    if chunk["choices"][0]["delta"].get("content"):
                        tokens += 1
        return tokens, time.perf_counter() - t0


async def main(runs: int, n_tokens: int, pace: float) -> dict[str, Any]:
    text = " ".join(f"t{i}" for i in range(n_tokens))  # litellm refuses a model repeating one chunk
    model = await FakeModel([{"match": "^bench", "text": text}]).start()
    state = tempfile.mkdtemp(prefix="bench-agent-")
    env = {"JUPYTER_ACP_AGENT_STATE_DIR": state, "OPENAI_API_KEY": "sk-bench"}
    ours = [sys.executable, "-m", "jupyter_acp.agent", "--model", "openai/fake", "--api-base", model.url]
    floor = [sys.executable, "-c", SDK_ECHO_AGENT]

    # 1. start-up, alternating so both see the same machine load
    ours_t: list[float] = []
    floor_t: list[float] = []
    await startup(floor, env, state)  # warm the OS file cache for both
    await startup(ours, env, state)
    for _ in range(runs):
        floor_t.append(await startup(floor, env, state))
        ours_t.append(await startup(ours, env, state))
    start_ratio = statistics.median(ours_t) / statistics.median(floor_t)
    print(
        f"start-up (spawn -> initialize -> session/new): agent {statistics.median(ours_t) * 1000:.0f} ms, "
        f"ACP SDK echo agent {statistics.median(floor_t) * 1000:.0f} ms, ratio {start_ratio:.2f}x (goal <= 1.5x)"
    )

    # 2. streaming tokens/s: unpaced (the fake model as fast as it can), then paced like a (very fast) model
    proc, conn, client = await spawn(ours, env)
    await conn.request("initialize", INIT, timeout=60)
    stream: dict[str, Any] = {}
    for label, delay in (("unpaced", 0.0), ("paced", pace)):
        model.rules[0]["delay"] = delay
        sid = (await conn.request("session/new", {"cwd": state, "mcpServers": []}, timeout=60))["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "bench"}]}
        await conn.request("session/prompt", prompt, timeout=300)  # warm-up (litellm import, connection pool)
        await raw_stream(model)
        raw_rates: list[float] = []
        agent_rates: list[float] = []
        updates: list[int] = []
        for _ in range(runs):
            tokens, secs = await raw_stream(model)
            raw_rates.append(tokens / secs)
            # a fresh session each time, so the history stays small
            prompt["sessionId"] = (await conn.request("session/new", {"cwd": state, "mcpServers": []}, timeout=60))[
                "sessionId"
            ]
            client.chunks, client.text = 0, []
            t0 = time.perf_counter()
            await conn.request("session/prompt", prompt, timeout=300)
            secs = time.perf_counter() - t0
            agent_rates.append(client.tokens() / secs)
            updates.append(client.chunks)
        ratio = statistics.median(agent_rates) / statistics.median(raw_rates)
        stream[label] = (
            statistics.median(agent_rates),
            statistics.median(raw_rates),
            ratio,
            statistics.median(updates),
        )
        what = "as fast as the fake model serves" if not delay else f"fake model paced at {delay * 1000:g} ms per token"
        print(
            f"streaming, {what}: through the agent {stream[label][0]:.0f} tokens/s "
            f"({stream[label][3]:.0f} updates for {n_tokens} tokens), fake model raw {stream[label][1]:.0f} tokens/s, "
            f"ratio {ratio:.2f}x (goal >= 0.9x)"
        )
    await stop(proc, conn)
    # litellm alone, in this process, on the unpaced stream: the ceiling any litellm-based agent has
    model.rules[0]["delay"] = 0.0
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    lite: list[float] = []
    for _ in range(runs + 1):
        n, t0 = 0, time.perf_counter()
        resp = await litellm.acompletion(
            model="openai/fake",
            api_base=model.url,
            api_key="sk-bench",
            stream=True,
            messages=[{"role": "user", "content": "bench"}],
        )
        async for chunk in resp:
            if chunk.choices and chunk.choices[0].delta.content:
                n += 1
        lite.append(n / (time.perf_counter() - t0))
    lite_rate = statistics.median(lite[1:])
    print(
        f"litellm alone (no agent, no ACP), unpaced: {lite_rate:.0f} tokens/s; the agent reaches "
        f"{stream['unpaced'][0] / lite_rate:.2f}x of it"
    )
    stream["litellm_alone"] = (lite_rate, stream["unpaced"][1], lite_rate / stream["unpaced"][1], 0)
    await model.stop()
    summary = {
        "startup_agent_ms": round(statistics.median(ours_t) * 1000, 1),
        "startup_sdk_echo_ms": round(statistics.median(floor_t) * 1000, 1),
        "startup_ratio": round(start_ratio, 2),
        **{f"stream_{k}_agent_tokens_per_s": round(v[0]) for k, v in stream.items()},
        **{f"stream_{k}_raw_tokens_per_s": round(v[1]) for k, v in stream.items()},
        **{f"stream_{k}_ratio": round(v[2], 2) for k, v in stream.items()},
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--pace-ms", type=float, default=2.0, help="per-token delay of the paced run (2 ms: 500 tokens/s)")
    a = p.parse_args()
    asyncio.run(main(a.runs, a.tokens, a.pace_ms / 1000))
