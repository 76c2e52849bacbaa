"""The notebook tools lent in-band: MCP over the ACP connection itself (unstable), to an agent on the ACP SDK.

The agent (``sdk_mcp_acp_agent.py``) advertises ``mcpCapabilities.acp``; it gets an ``"acp"`` server in
``session/new`` (no URL, no bearer, no shim), connects with ``mcp/connect``, reads and edits cells with
``mcp/message``; the edit asks the user through the one gate, as on every channel, and every call is audited with
channel ``mcp-acp``.  Ids it was never given, or a connection it closed, are refused.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_acp.channels import CLIENT_TOOLS, MCP_ACP, MCP_HTTP, MCP_STDIO, choose_channels
from jupyter_acp.testing.files import saved_notebook

from .conftest import message_text
from .test_gate import kinds, notebook

AGENT = str(Path(__file__).with_name("sdk_mcp_acp_agent.py"))


@pytest.fixture
def acp_agents():
    entry = {"command": sys.executable, "args": [AGENT], "title": "SDK agent (MCP over ACP)"}
    return {"inband": entry, "forced": {**entry, "tool_channel": "mcp-acp"}}


async def turn(api, sid: str, text: str, answer: str | None = None, timeout: float = 30) -> tuple[Any, list]:
    """Prompt; answer the gate's card with the option of kind ``answer``; the agent's JSON answer and the events."""
    turn_id = await api.prompt(sid, text)
    answered: set[str] = set()
    deadline = time.monotonic() + timeout
    while True:
        events = await api.events(sid)
        mine = [e for e in events if e.get("turn_id") == turn_id or e["type"] in ("audit", "permission_resolved")]
        for ev in mine:
            if ev["type"] == "permission_request" and ev["request_id"] not in answered and answer:
                answered.add(ev["request_id"])
                option = kinds(ev["options"])[answer]
                await api.call("POST", "sessions", sid, "permissions", ev["request_id"], body={"option_id": option})
        if any(e["type"] == "turn_ended" and e["turn_id"] == turn_id for e in events):
            return json.loads(message_text(events, turn_id)), events
        if time.monotonic() > deadline:
            raise AssertionError(f"turn did not end: {json.dumps(events)[-2000:]}")
        await asyncio.sleep(0.05)


async def test_an_agent_that_speaks_mcp_over_acp_reads_and_edits_through_the_gate(api, jp_root_dir):
    path = notebook(jp_root_dir, "nb.ipynb", ["x = 'ZEBRA-31'"])
    s = await api.open(path, "inband")
    servers, _ = await turn(api, s["id"], "servers?")
    assert len(servers) == 1 and len(servers[0]) == 32  # one acp server (parsed by the SDK's schema): a fresh id

    names, _ = await turn(api, s["id"], "list")
    assert {"client_read_cells", "client_insert_cell"} <= set(names)

    read, events = await turn(api, s["id"], 'call client_read_cells {"start": 0, "end": 5}')
    assert not read.get("isError"), read
    assert "ZEBRA-31" in read["content"][0]["text"]
    assert not [e for e in events if e["type"] == "permission_request"]  # reading asks nothing (policy: auto)

    edit_args = {"cell_id": "c0", "old_string": "ZEBRA-31", "new_string": "ZEBRA-32"}
    edit, events = await turn(api, s["id"], f"call client_edit_cell {json.dumps(edit_args)}", answer="allow_once")
    assert not edit.get("isError"), edit
    cards = [e for e in events if e["type"] == "permission_request"]
    assert len(cards) == 1 and cards[0]["source"] == "client"  # the gate asked, as on every channel
    audit = [e for e in events if e["type"] == "audit" and e["action"] == "client_edit_cell"]
    assert audit and audit[-1]["channel"] == MCP_ACP and audit[-1]["decision"] == "allowed"
    edited = await saved_notebook(jp_root_dir / path, until=lambda nb: nb.cells[0].source == "x = 'ZEBRA-32'")
    assert edited.cells[0].source == "x = 'ZEBRA-32'"

    again = {"cell_id": "c0", "old_string": "ZEBRA-32", "new_string": "ZEBRA-33"}
    rejected, _ = await turn(api, s["id"], f"call client_edit_cell {json.dumps(again)}", answer="reject_once")
    assert rejected.get("isError")
    assert (await saved_notebook(jp_root_dir / path)).cells[0].source == "x = 'ZEBRA-32'"


async def test_ids_never_lent_and_closed_connections_are_refused(api, jp_root_dir):
    s = await api.open(notebook(jp_root_dir, "nb.ipynb", ["1"]), "forced")
    forged, _ = await turn(api, s["id"], "forged")
    assert "error" in forged and "is lent on this connection" in forged["error"]["message"]
    stale, _ = await turn(api, s["id"], "stale")
    assert "error" in stale and "unknown or closed MCP connection" in stale["error"]["message"]


async def test_a_reopened_session_withdraws_its_earlier_server_id(api, jp_root_dir):
    s = await api.open(notebook(jp_root_dir, "nb.ipynb", ["1"]), "inband")
    first, _ = await turn(api, s["id"], "servers?")
    await api.call("POST", "sessions", s["id"], "reset")
    second, _ = await turn(api, s["id"], "servers?")
    assert first != second
    old, _ = await turn(api, s["id"], f"connect {first[0]}")
    assert "error" in old and "only the latest for its session" in old["error"]["message"]
    assert (await turn(api, s["id"], f"connect {second[0]}"))[0] == "connected"


class _Conn:
    def __init__(self, mcp: dict[str, Any], modes: list[str] | None = None) -> None:
        self.mcp_capabilities = mcp
        self.client_tools_modes = modes or []


def test_auto_prefers_mcp_over_acp_and_the_setting_forces_it():
    assert choose_channels("auto", "request", _Conn({"acp": True, "http": True})) == {MCP_ACP}
    assert choose_channels("auto", "request", _Conn({"http": True})) == {MCP_HTTP}
    assert choose_channels("auto", "request", _Conn({})) == {MCP_STDIO}
    assert choose_channels("mcp-acp", "request", _Conn({})) == {MCP_ACP}
    assert choose_channels("both", "request", _Conn({"acp": True})) == {CLIENT_TOOLS, MCP_ACP}
    assert choose_channels("auto", "request", _Conn({"acp": True}, ["request"])) == {CLIENT_TOOLS}
