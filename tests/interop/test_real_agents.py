"""Real third-party ACP agents, installed from the npm registry, against fake model servers, offline.

codex-acp talks to a fake OpenAI Responses API, claude-agent-acp to a fake Anthropic Messages API;
both are agents of a real Jupyter server, and both reach the notebook only through the loopback MCP
host: the scripted model calls ``client_notebook_outline`` then ``client_read_cells`` (whatever prefix
the agent gives MCP tools), the agent asks permission for each call with its own option ids (answered
here by option kind, through the HTTP API), and the final answer carries a string found only in a cell.

Quirks tolerated (see real-agents.md): extra text (codex's "Model metadata ... not found"), tool-call
ids that do not line up between ``tool_call``, its updates and the permission request, probes of
``/.well-known/*`` and ``GET /mcp``, agents that ignore stdin EOF (the server ends their process group).
"""

from __future__ import annotations

import json
import os

import pytest

from jupyter_acp.testing.fake_providers import (
    FakeAnthropic,
    FakeResponses,
    codex_config,
)
from jupyter_acp.testing.files import saved_notebook

from . import npm_agents
from .conftest import (
    MARKER,
    PROMPT,
    SCENARIO_RULES,
    isolated_env,
    run_turn_answering_permissions,
    turn_summary,
    write_notebook,
)

AGENTS = {"codex": npm_agents.CODEX, "claude": npm_agents.CLAUDE}


def installed(name: str) -> str:
    try:
        return str(npm_agents.install(AGENTS[name]))
    except npm_agents.InstallError as exc:
        if os.environ.get("JUPYTER_ACP_INTEROP_REQUIRED"):
            raise
        pytest.skip(f"{AGENTS[name].spec} could not be installed: {exc}")


@pytest.fixture(params=list(AGENTS))
def agent_name(request):
    return request.param


INSERTED = "print('inserted by the agent')"
EDIT_RULES = [
    {"match": "add a cell", "tool": r"client_insert_cell$", "arguments": {"source": INSERTED}, "times": 1},
    {"role": "tool", "text": "Inserted. {last}"},
]
ECHOED = "TERMINAL-OK-4242"
BASH_RULES = [
    {
        "match": "run echo",
        "tool": r"^Bash$",
        "arguments": {"command": f"echo {ECHOED}", "description": "Echo"},
        "times": 1,
    },
    {"role": "tool", "text": "Ran it."},
]
#: the script of each test
RULES = {
    "test_real_agent_reads_the_notebook_over_mcp": SCENARIO_RULES,
    "test_real_agent_edits_the_notebook_after_permission": EDIT_RULES,
    "test_claudes_own_terminal_sends_its_output_for_the_card": BASH_RULES,
}

#: permission cards the user sees for the two read-only calls: none. codex-acp 0.16 does not ask for MCP tools
#: annotated ``readOnlyHint`` (it asks for every other one, see the edit test); claude-agent-acp asks for every MCP
#: call, and the client answers those for the user (a read under the default policy: ``sessions/gate/own_tools.py``)
READ_PERMISSIONS = {"codex": 0, "claude": 0}


@pytest.fixture
def fake(agent_name, request):
    cls = FakeResponses if agent_name == "codex" else FakeAnthropic
    with cls(RULES[request.node.originalname]) as server:
        yield server


@pytest.fixture
def acp_agents(agent_name, fake, agent_home):
    exe = installed(agent_name)
    env = isolated_env(agent_home)
    if agent_name == "codex":
        codex_home = agent_home / "codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(codex_config(fake.url))
        env.update({"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "sk-fake", "RUST_LOG": "warn"})
    else:
        env.update(
            {
                "ANTHROPIC_BASE_URL": fake.base,
                "ANTHROPIC_API_KEY": "sk-ant-fake",
                "IS_SANDBOX": "1",  # as root, session/new fails ("Query closed before response received") without it
                "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
        )
    return {agent_name: {"command": exe, "env": env, "tool_channel": "mcp-http", "title": AGENTS[agent_name].spec}}


async def test_real_agent_reads_the_notebook_over_mcp(agent_name, api, jp_root_dir, fake):
    path = write_notebook(jp_root_dir, "census/zebras.ipynb")
    s = await api.open(path, agent_name)
    try:
        turn, events = await run_turn_answering_permissions(api, s["id"], PROMPT, timeout=60)
    except AssertionError:
        print("model paths:", fake.paths)
        print("requests:", json.dumps(fake.requests)[-3000:])
        raise
    got = turn_summary(events, turn)
    debug = f"end={got['end']}\ntext={got['text']!r}\npaths={fake.paths}\nevents={json.dumps(events)[-3000:]}"
    assert got["end"].get("stop_reason") == "end_turn", debug
    assert got["end"].get("tool_calls_served") == 2, debug
    assert MARKER in got["text"], debug
    assert len(got["permissions"]) == READ_PERMISSIONS[agent_name], debug
    assert all(p["source"] == "agent" for p in got["permissions"])


async def test_real_agent_edits_the_notebook_after_permission(agent_name, api, jp_root_dir, fake):
    """The agent asks before an edit, with its own option ids; allowed (by kind) through the HTTP API, the
    cell lands in the notebook, and the client's own gate does not ask a second time for that call."""

    path = write_notebook(jp_root_dir, "census/zebras.ipynb")
    s = await api.open(path, agent_name)
    turn, events = await run_turn_answering_permissions(api, s["id"], "Please add a cell that prints something.")
    got = turn_summary(events, turn)
    debug = f"end={got['end']}\ntext={got['text']!r}\npermissions={got['permissions']}\npaths={fake.paths}"
    assert got["end"].get("stop_reason") == "end_turn", debug
    assert got["end"].get("tool_calls_served") == 1, debug
    assert [p["source"] for p in got["permissions"]] == ["agent"], debug
    kinds = {o["kind"] for o in got["permissions"][0]["options"]}
    assert {"allow_once", "reject_once"} <= kinds or {"allow_always", "reject_once"} <= kinds, debug
    resolved = [e for e in events if e["type"] == "permission_resolved"]
    assert resolved and resolved[0].get("option_id"), debug
    assert "Inserted." in got["text"], debug
    nb = await saved_notebook(jp_root_dir / path, until=lambda nb: nb.cells and nb.cells[-1].source == INSERTED)
    assert [c.source for c in nb.cells][-1] == INSERTED


@pytest.mark.parametrize("agent_name", ["claude"])
async def test_claudes_own_terminal_sends_its_output_for_the_card(agent_name, api, jp_root_dir, fake):
    """The client advertises ``_meta.terminal_output``: claude-agent-acp's own Bash then reports its command as a
    terminal (``terminal_info``), its output (``terminal_output``) and its exit (``terminal_exit``), which the panel
    shows as it shows the client's terminals; without it, the output came as a markdown code block."""
    path = write_notebook(jp_root_dir, "census/zebras.ipynb")
    s = await api.open(path, agent_name)
    turn, events = await run_turn_answering_permissions(api, s["id"], "Please run echo for me.", timeout=90)
    got = turn_summary(events, turn)
    debug = f"end={got['end']}\nupdates={json.dumps(got['tool_updates'])[-3000:]}\npaths={fake.paths}"
    assert got["end"].get("stop_reason") == "end_turn", debug
    metas = [u.get("_meta") or {} for u in got["tool_updates"]]
    terminal = next((m["terminal_info"]["terminal_id"] for m in metas if "terminal_info" in m), None)
    assert terminal, debug
    output = "".join(m["terminal_output"]["data"] for m in metas if "terminal_output" in m)
    assert ECHOED in output, debug
    assert any(m.get("terminal_exit", {}).get("exit_code") == 0 for m in metas), debug
    assert any({"type": "terminal", "terminalId": terminal} in (u.get("content") or []) for u in got["tool_updates"])
