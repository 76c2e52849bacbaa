"""The whole task through every kind of agent: read cell c1, replace its source, run c0 and c1, say what c1
printed.  codex-acp (fake OpenAI Responses), claude-agent-acp (fake Anthropic Messages) and the built-in
agent (fake chat completions) each run it against a real server, a real kernel and the same script.

Two things are checked beyond the answer:

- **the model saw the output.**  codex-acp and claude-agent-acp hand their model only a tool result's
  ``structuredContent`` when there is one: the fake provider must have been sent a tool result holding
  what c1 printed (``PRINTED-42``, which exists nowhere before the run), and the scripted model only
  answers "c1 printed PRINTED-42" when it saw it;
- **asked once per change.**  One permission card for the edit and one for the run, whoever asks (the
  agent, or our gate when the agent does not): a call the user already allowed when the agent asked is
  not asked again.  The reads are asked only where the agent itself asks for every MCP call (claude).
"""

from __future__ import annotations

import json
import re
import sys

import nbformat
import pytest

from jupyter_acp.testing.fake_model import FakeModel
from jupyter_acp.testing.fake_providers import FakeAnthropic, FakeResponses, codex_config

from . import npm_agents
from .conftest import isolated_env, run_turn_answering_permissions, turn_summary

pytestmark = pytest.mark.timeout(300)

TASK = "Read cell c1, replace its source, run c0 and c1, and tell me what c1 printed."
NEW_SOURCE = 'print(f"PRINTED-{base * 2}")'
PRINTED = "PRINTED-42"  # only the run of c0 then c1 makes it

#: one script for every provider; tool names are regexes (agents prefix MCP tools).  A tool result is
#: matched in whatever shape the agent hands its model (the text, or structuredContent as JSON).
RULES = [
    {"match": "tell me what c1 printed", "tool": r"client_read_cells$", "arguments": {"cell_ids": ["c1"]}, "times": 1},
    {
        "role": "tool",
        "match": r"print\(\W*old",
        "tool": r"client_edit_cell$",
        "arguments": {"cell_id": "c1", "source": NEW_SOURCE},
        "times": 1,
    },
    {
        "role": "tool",
        "match": r"PRINTED-\{base",
        "tool": r"client_execute_cells$",
        "arguments": {"cell_ids": ["c0", "c1"]},
        "times": 1,
    },
    {"role": "tool", "match": PRINTED, "text": f"c1 printed {PRINTED}."},
]

AGENTS = ["builtin", "codex", "claude"]
NPM = {"codex": npm_agents.CODEX, "claude": npm_agents.CLAUDE}
#: permission cards the agent itself shows for the read (not a change): claude asks for every MCP call
READ_CARDS = {"builtin": 0, "codex": 0, "claude": 1}


def installed(name: str) -> str:
    import os

    try:
        return str(npm_agents.install(NPM[name]))
    except npm_agents.InstallError as exc:
        if os.environ.get("JUPYTER_ACP_INTEROP_REQUIRED"):
            raise
        pytest.skip(f"{NPM[name].spec} could not be installed: {exc}")


@pytest.fixture(params=AGENTS)
def agent_name(request):
    return request.param


@pytest.fixture
def fake(agent_name):
    cls = {"builtin": FakeModel, "codex": FakeResponses, "claude": FakeAnthropic}[agent_name]
    with cls(RULES) as server:
        yield server


@pytest.fixture
def acp_agents(agent_name, fake, agent_home):
    env = isolated_env(agent_home)
    if agent_name == "builtin":
        env.update(
            {
                "JUPYTER_ACP_MODEL": "openai/fake",
                "JUPYTER_ACP_API_BASE": fake.url,
                "OPENAI_API_KEY": "sk-fake",
                "JUPYTER_ACP_AGENT_STATE_DIR": str(agent_home / "state"),
            }
        )
        return {
            "builtin": {
                "command": sys.executable,
                "args": ["-m", "jupyter_acp.agent"],
                "env": env,
                "tool_channel": "client-tools",
            }
        }
    exe = installed(agent_name)
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
                "IS_SANDBOX": "1",
                "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
        )
    return {agent_name: {"command": exe, "env": env, "tool_channel": "mcp-http", "title": NPM[agent_name].spec}}


def card_kind(card: dict) -> str:
    """Which call a permission card is about, from what it shows (tool names, titles, arguments)."""
    shown = json.dumps({k: card.get(k) for k in ("tool_call",)})
    if re.search(r"edit_cell|Edit cell", shown):
        return "edit"
    if re.search(r"execute_cells|Run (cells|\d+ cell)", shown):
        return "run"
    if re.search(r"read_cells|Read cells", shown):
        return "read"
    return "other"


async def test_the_whole_task(agent_name, api, jp_root_dir, jp_fetch, fake):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("base = 21", id="c0"), nbformat.v4.new_code_cell('print("old")', id="c1")]
    (jp_root_dir / "task").mkdir()
    (jp_root_dir / "task" / "nb.ipynb").write_text(nbformat.writes(nb))
    path = "task/nb.ipynb"
    body = {"path": path, "name": "nb.ipynb", "type": "notebook", "kernel": {"name": "python3"}}
    await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))

    s = await api.open(path, agent_name)
    turn, events = await run_turn_answering_permissions(api, s["id"], TASK, timeout=180)
    got = turn_summary(events, turn)
    cards = [card_kind(p) for p in got["permissions"]]
    debug = (
        f"end={got['end']}\ntext={got['text']!r}\ncards={cards} "
        f"{[(p['source'], (p.get('tool_call') or {}).get('title')) for p in got['permissions']]}\n"
        f"tool results the model saw={json.dumps(fake.tool_results())[-3000:]}"
    )
    assert got["end"].get("stop_reason") == "end_turn", debug
    # the model was sent what c1 printed, in the tool result it received, and said it
    assert any(PRINTED in r for r in fake.tool_results()), debug
    assert f"c1 printed {PRINTED}." in got["text"], debug
    assert [c.source for c in nbformat.read(jp_root_dir / path, as_version=4).cells][1] == NEW_SOURCE
    # asked once per change
    assert cards.count("edit") == 1 and cards.count("run") == 1, debug
    assert cards.count("read") == READ_CARDS[agent_name] and "other" not in cards, debug
