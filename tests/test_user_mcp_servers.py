"""The user's own MCP servers reach every agent: ``c.JupyterACP.mcp_servers`` and the per-user
``<data dir>/jupyter_acp/mcp_settings.json`` (Jupyter AI's shape), passed in ``session/new`` beside the notebook's own
server.  Real MCP servers (the ``mcp`` SDK's, ``tests/agent/mcp_server.py``, over stdio and HTTP), reached by the
built-in agent on a fake model; what each agent is given (HTTP only where advertised, stdio with the basics of the
agent's environment and never its provider keys) read from a recording agent's report."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jupyter_acp.catalog.mcp_servers import UserMcpServers, check_entries
from jupyter_acp.testing.fake_model import FakeModel

from .conftest import hostile, message_text

MCP_SERVER = str(Path(__file__).parent / "agent" / "mcp_server.py")
RULES = [
    {"match": "stdio sum", "tool": r"^adder__add$", "arguments": {"a": 2, "b": 3}, "times": 1},
    {"match": "http sum", "tool": r"^adder-http__add$", "arguments": {"a": 20, "b": 22}, "times": 1},
    {"match": "env please", "tool": r"^adder__env_keys$", "arguments": {}, "times": 1},
    {"role": "tool", "text": "Tool said: {last}"},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_mcp():
    """The test MCP server over Streamable HTTP on 127.0.0.1 (a subprocess of its own)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, MCP_SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the HTTP MCP server did not start")
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def fake_model():
    with FakeModel(RULES) as fm:
        yield fm


@pytest.fixture
def private_dir(jp_data_dir) -> Path:
    """The extension's private folder (the store's, see tests/conftest.py), where mcp_settings.json lives."""
    folder = jp_data_dir / "acp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def acp_config():
    return {
        "mcp_servers": [
            {
                "name": "adder",
                "command": Path(sys.executable).name,  # resolved on the agent's PATH
                "args": [MCP_SERVER, "stdio"],
                "env": [{"name": "MY_MCP_VAR", "value": "set-by-the-entry"}],
            },
            {"name": "jupyter", "command": "true"},  # the notebook's own server's name: skipped
            {"type": "http", "name": "bad-url", "url": "file:///etc/passwd"},  # skipped
        ]
    }


@pytest.fixture
def acp_agents(fake_model, tmp_path):
    env = {"JUPYTER_ACP_MODEL": "openai/fake", "JUPYTER_ACP_API_BASE": fake_model.url, "OPENAI_API_KEY": "sk-fake"}
    env["JUPYTER_ACP_AGENT_MODE"] = "auto"  # its MCP tools run without asking (--mcp-permission auto)
    (tmp_path / "stdio").mkdir()
    return {
        "model": {
            "command": sys.executable,
            "args": ["-m", "jupyter_acp.agent", "--mcp-permission", "auto"],
            "env": env,
            "tool_channel": "client-tools",
        },
        "recorder": hostile(tmp_path, tool_channel="mcp-http"),
        "stdio-only": hostile(tmp_path / "stdio", "--no-mcp-http", tool_channel="mcp-stdio"),
    }


def write_settings(folder: Path, servers: list[dict], mode: int = 0o600) -> Path:
    path = folder / "mcp_settings.json"
    path.write_text(json.dumps({"mcp_servers": servers}))
    path.chmod(mode)
    return path


async def ask(api, sid: str, text: str) -> str:
    turn = await api.prompt(sid, text)
    return message_text(await api.wait_turn_end(sid, turn, timeout=60), turn)


async def test_the_users_mcp_servers_reach_the_built_in_agent(api, make_notebook, private_dir, http_mcp):
    write_settings(private_dir, [{"type": "http", "name": "adder-http", "url": http_mcp}])
    s = await api.open(make_notebook("nb.ipynb"), "model")
    assert "Tool said: 5" in await ask(api, s["id"], "stdio sum please")
    assert "Tool said: 42" in await ask(api, s["id"], "http sum please")
    keys = (await ask(api, s["id"], "env please")).removeprefix("Tool said: ").split(",")
    assert "PATH" in keys and "MY_MCP_VAR" in keys
    # the agent's provider settings stay the agent's: the user's MCP server gets the basics and its own env
    assert not {"OPENAI_API_KEY", "JUPYTER_ACP_MODEL", "JUPYTER_ACP_API_BASE"} & set(keys)


async def test_http_servers_go_only_to_agents_that_advertise_http(
    api, make_notebook, private_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-key-for-the-agent-only")
    settings = write_settings(
        private_dir, [{"type": "http", "name": "corp", "url": "https://mcp.example.com/mcp"}], mode=0o644
    )
    await api.open(make_notebook("a.ipynb"), "recorder")
    await api.open(make_notebook("b.ipynb"), "stdio-only")

    async def sent(path: Path) -> list[dict]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists():
                got = [json.loads(x) for x in path.read_text().splitlines()]
                new = [r for r in got if r.get("method") == "session/new"]
                if new:
                    return new[0]["params"]["mcpServers"]
            await asyncio.sleep(0.1)
        raise AssertionError(f"no session/new in {path}")

    with_http = {e["name"]: e for e in await sent(tmp_path / "report.jsonl")}
    stdio_only = {e["name"]: e for e in await sent(tmp_path / "stdio" / "report.jsonl")}
    assert set(with_http) == {"jupyter", "adder", "corp"}  # the notebook's own, then the user's
    assert set(stdio_only) == {"jupyter", "adder"}  # no HTTP server to an agent that did not advertise it
    assert with_http["jupyter"]["type"] == "http" and "type" not in stdio_only["jupyter"]  # ours untouched
    adder = stdio_only["adder"]
    assert os.path.isabs(adder["command"]) and adder["args"] == [MCP_SERVER, "stdio"]
    env = {p["name"]: p["value"] for p in adder["env"]}
    assert env["MY_MCP_VAR"] == "set-by-the-entry" and "PATH" in env
    assert "OPENAI_API_KEY" not in env
    # the file holds tokens: made private when it was not
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600


def test_bad_entries_are_skipped_with_the_rule(tmp_path, caplog):
    entries = check_entries(
        {
            "mcp_servers": [
                {"name": "ok", "command": "true", "env": {"A": "1"}},
                {"name": "jupyter", "command": "true"},
                {"name": "no-command"},
                {"type": "ws", "name": "odd", "url": "ws://x"},
                "not an object",
            ]
        },
        "a test",
    )
    assert entries == [{"name": "ok", "command": "true", "args": [], "env": [{"name": "A", "value": "1"}]}]
    text = caplog.text
    assert "notebook's own MCP server" in text and "needs a command" in text and "types ACP knows" in text
    servers = UserMcpServers([{"name": "gone", "command": "no-such-command-anywhere"}], str(tmp_path))
    assert servers.for_agent({"http": True}, {"PATH": str(tmp_path)}) == []
    assert "not on the agent's PATH" in caplog.text
