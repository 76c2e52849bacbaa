"""Interop fixtures: one notebook scenario, agents isolated per test, permissions answered by kind.

The scenario: a prompt asks for the notebook's outline; the scripted model calls
``client_notebook_outline``, then ``client_read_cells`` on the outline's answer, then answers with the
cells it read.  Whatever the agent and the channel, the final answer must carry ``MARKER`` (a string
that exists only in a cell of the notebook) and the agent must have been served both calls.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_acp.testing.events import message_text

MARKER = "ZEBRA-MARKER-7731"
PROMPT = "Give me an outline of this notebook and read its cells."

#: the same rules for every provider (tool names are regexes: agents prefix MCP tools).  A tool result
#: reaches the model as the tool's text (the built-in agent) or, when there is one, as its
#: structuredContent (codex-acp and claude-agent-acp both show their model only that): the matches accept
#: both, and every tool's structuredContent says what its text says (tests/tools/test_structured.py).
SCENARIO_RULES: list[dict[str, Any]] = [
    {"match": "outline of this notebook", "tool": r"client_notebook_outline$", "times": 1},
    {
        "role": "tool",
        "match": r'notebook: census/|"cell_count"',
        "tool": r"client_read_cells$",
        "arguments": {"start": 0, "end": 10},
        "times": 1,
    },
    {"role": "tool", "match": r'--- cell|"source"', "text": "Here is the notebook. {last}"},
]

#: what the scripted model answers once it has read the cells (the last tool result, verbatim)
EXPECTED_CELLS = (
    f"--- cell 0 id=census-title markdown\n# Zebra census\n--- cell 1 id=census-count code\nzebras = 42  # {MARKER}"
)
EXPECTED_ANSWER = "Here is the notebook. " + EXPECTED_CELLS

#: permission options preferred, by kind (option ids differ per agent)
ALLOW_KINDS = ("allow_once", "allow_always")


def write_notebook(root: Path, path: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_markdown_cell("# Zebra census", id="census-title"))
    nb.cells.append(nbformat.v4.new_code_cell(f"zebras = 42  # {MARKER}", id="census-count"))
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(nbformat.writes(nb))
    return path


async def run_turn_answering_permissions(api, sid: str, text: str, timeout: float = 60.0) -> tuple[str, list[dict]]:
    """Prompt; answer every permission request through the HTTP API (by option kind) until the turn ends."""
    turn = await api.prompt(sid, text)
    answered: set[str] = set()
    deadline = time.monotonic() + timeout
    while True:
        events = await api.events(sid)
        for e in events:
            if e["type"] == "permission_request" and e["turn_id"] == turn and e["request_id"] not in answered:
                option = next((o for kind in ALLOW_KINDS for o in e["options"] if o.get("kind") == kind), None)
                assert option is not None, f"no allow option in {e['options']}"
                await api.call(
                    "POST", "sessions", sid, "permissions", e["request_id"], body={"option_id": option["optionId"]}
                )
                answered.add(e["request_id"])
        if any(e["type"] == "turn_ended" and e["turn_id"] == turn for e in events):
            return turn, events
        if time.monotonic() > deadline:
            raise AssertionError(f"turn did not end in {timeout}s; events: {json.dumps(events)[-4000:]}")
        await asyncio.sleep(0.05)


def turn_summary(events: list[dict], turn: str) -> dict[str, Any]:
    end = next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn)
    updates = [e["update"] for e in events if e["type"] == "session_update"]
    return {
        "end": end,
        "text": message_text(events, turn),
        "permissions": [e for e in events if e["type"] == "permission_request" and e["turn_id"] == turn],
        "tool_updates": [u for u in updates if u.get("sessionUpdate") in ("tool_call", "tool_call_update")],
    }


def processes_with_env(needle: str) -> list[int]:
    """Pids of live processes whose environment mentions ``needle`` (a per-test directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
            with open(f"/proc/{entry}/stat") as fh:
                if fh.read().split(") ")[1][0] == "Z":
                    continue
        except OSError:
            continue
        if needle.encode() in env:
            found.append(int(entry))
    return found


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().split(") ")[1].split()
        return f"{cmd} (ppid {fields[1]}, pgid {fields[2]})"
    except OSError:
        return "?"


_HOMES: list[Path] = []


@pytest.fixture
def agent_home(tmp_path_factory):
    """A throwaway HOME per test; once the server is cleaned up, no process may still run with it."""
    home = tmp_path_factory.mktemp("agent-home")
    _HOMES.append(home)
    return home


@pytest.fixture(autouse=True)
def jp_server_cleanup(jp_asyncio_loop):
    """pytest-jupyter's own clean-up (the server app's ``_cleanup``, which stops the extension), then the
    orphan check: pytest-jupyter's version is an autouse fixture that would be torn down after ours."""
    from jupyter_server.serverapp import ServerApp

    _HOMES.clear()
    yield
    app = ServerApp.instance()
    try:
        jp_asyncio_loop.run_until_complete(app._cleanup())
    except (RuntimeError, SystemExit) as e:
        print("ignoring cleanup error", e)
    if hasattr(app, "kernel_manager"):
        app.kernel_manager.context.destroy()
    ServerApp.clear_instance()
    left: dict[int, str] = {}
    for home in _HOMES:
        deadline = time.monotonic() + 10
        pids = processes_with_env(str(home))
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = processes_with_env(str(home))
        for pid in pids:  # ours (they carry this test's HOME): end them so one failure does not leak
            left[pid] = _describe(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert not left, f"agent processes outlived the server: {left}"


def isolated_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


def claude_offline(base: str) -> dict[str, str]:
    """claude-agent-acp's environment against a fake Anthropic server at ``base``, with nothing that calls home."""
    return {
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "IS_SANDBOX": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
