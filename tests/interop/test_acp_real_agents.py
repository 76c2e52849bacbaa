"""ACP's account and conversation methods against the real agents that offer them, offline, through a real server.

- **codex-acp logs out** (``auth.logout``): codex is logged in the way ``codex login --with-api-key`` leaves it
  (``$CODEX_HOME/auth.json``) and talks to its own OpenAI provider, pointed at a fake Responses server with
  ``openai_base_url``.  ``POST agents/codex/logout`` reaches codex's own ``logout``, which deletes that file (only
  codex does), and the next prompt of the same notebook is refused by codex with ``auth_required`` before any model
  request: the turn ends ``needs_login`` and the agent's card asks for a login, although ``OPENAI_API_KEY`` is still
  in the agent's environment (codex reads its login from its store, not from that variable).  With a custom
  provider instead (``codex_config``'s ``fake``, no OpenAI auth), codex-acp 0.16.0 does not check its login at all
  and the prompt after the logout still answers: its auth check covers its built-in ``openai`` provider only.
- **claude-agent-acp forks** (unstable ``sessionCapabilities.fork``): after two turns, ``POST sessions/{id}/fork``
  at the last turn uses claude's own ``session/fork`` (the notice says the agent forked its session, and the fork
  is resumed, a new agent session id); the next prompt answers in the fork, and the model is sent the earlier
  turns from claude's own copy, not our transcript as a preface.  The history lists both conversations.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from jupyter_acp.testing.events import message_text
from jupyter_acp.testing.fake_providers import FakeAnthropic, FakeResponses, codex_config

from . import npm_agents
from .conftest import claude_offline, isolated_env, run_turn_answering_permissions

# each test is well under a minute here (codex about 10 s, claude about 10 s): the bound catches a hang
pytestmark = pytest.mark.timeout(120)

RULES = [
    {"match": "first question", "text": "FIRST-ANSWER-1"},
    {"match": "second question", "text": "SECOND-ANSWER-2"},
    {"match": "after the logout", "text": "AFTER-LOGOUT-3"},
    {"match": "in the fork", "text": "FORKED-ANSWER-4"},
]
#: what our own re-seeding puts before a prompt (sessions/connections/turns.py): a fork by the agent needs none
RESEED_PREFACE = "Earlier in this conversation"


def installed(agent: npm_agents.NpmAgent) -> str:
    try:
        return str(npm_agents.install(agent))
    except npm_agents.InstallError as exc:
        if os.environ.get("JUPYTER_ACP_INTEROP_REQUIRED"):
            raise
        pytest.skip(f"{agent.spec} could not be installed: {exc}")


def ready(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "session_ready"]


class TestCodexLogout:
    @pytest.fixture
    def fake(self):
        with FakeResponses(RULES) as server:
            yield server

    @pytest.fixture
    def codex_home(self, agent_home):
        return agent_home / "codex"

    @pytest.fixture
    def acp_agents(self, fake, agent_home, codex_home):
        exe = installed(npm_agents.CODEX)
        env = isolated_env(agent_home)
        codex_home.mkdir()
        # codex's built-in OpenAI provider (the one its login is for), at the fake server
        config = codex_config(fake.url).replace(
            'model_provider = "fake"', f'model_provider = "openai"\nopenai_base_url = "{fake.url}"'
        )
        (codex_home / "config.toml").write_text(config)
        # logged in with an API key, as `codex login --with-api-key` leaves it
        (codex_home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": "sk-fake"}))
        env.update({"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "sk-fake", "RUST_LOG": "warn"})
        return {"codex": {"command": exe, "env": env, "tool_channel": "mcp-http", "title": npm_agents.CODEX.spec}}

    async def test_logging_codex_out_reaches_its_own_logout_and_its_next_prompt_asks_for_a_login(
        self, api, make_notebook, fake, codex_home
    ):
        started = time.monotonic()
        s = await api.open(make_notebook("nb.ipynb"), "codex")
        first, events = await run_turn_answering_permissions(api, s["id"], "first question", timeout=60)
        end = next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == first)
        assert end.get("stop_reason") == "end_turn", end
        assert "FIRST-ANSWER-1" in message_text(events, first)
        card = await api.call("GET", "agents", "codex", "settings")
        assert card["logout"] is True and card["state"] == "ready", card  # codex advertises auth.logout
        assert (codex_home / "auth.json").exists()
        asked = len(fake.requests)

        answer = await api.call("POST", "agents", "codex", "logout")
        assert answer["logged_out"] is True, answer
        # codex's own logout ran: it deleted the login it keeps (nothing of ours touches that file)
        assert not (codex_home / "auth.json").exists()
        events = await api.events(s["id"])
        assert [e["phase"] for e in events if e.get("phase") == "agent_logged_out"] == ["agent_logged_out"]

        # what codex then does: refuses the next prompt with auth_required, asking nothing of the model, though
        # OPENAI_API_KEY is still in its environment
        after, events = await run_turn_answering_permissions(api, s["id"], "after the logout", timeout=60)
        end = next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == after)
        debug = json.dumps(end)
        print(f"codex after logout: {debug}\n{time.monotonic() - started:.1f} s")
        assert end.get("error_kind") == "needs_login", debug
        assert "needs you to log in" in end["error"] and "Use OPENAI_API_KEY" in end["error"], debug
        assert "AFTER-LOGOUT-3" not in message_text(events, after)
        assert len(fake.requests) == asked
        card = await api.call("GET", "agents", "codex", "settings")
        assert card["state"] == "needs_login", card  # the panel shows the login card


class TestClaudeFork:
    @pytest.fixture
    def fake(self):
        with FakeAnthropic(RULES) as server:
            yield server

    @pytest.fixture
    def acp_agents(self, fake, agent_home):
        exe = installed(npm_agents.CLAUDE)
        env = isolated_env(agent_home)
        env.update(claude_offline(fake.base))
        return {"claude": {"command": exe, "env": env, "tool_channel": "mcp-http", "title": npm_agents.CLAUDE.spec}}

    async def test_forking_at_the_last_turn_uses_claudes_own_fork_and_the_fork_answers(self, api, make_notebook, fake):
        started = time.monotonic()
        s = await api.open(make_notebook("nb.ipynb"), "claude")
        first, _ = await run_turn_answering_permissions(api, s["id"], "first question", timeout=60)
        second, events = await run_turn_answering_permissions(api, s["id"], "second question", timeout=60)
        assert "FIRST-ANSWER-1" in message_text(events, first) and "SECOND-ANSWER-2" in message_text(events, second)
        (original,) = ready(events)

        await api.call("POST", "sessions", s["id"], "fork", body={"turn_id": second})
        forked, events = await run_turn_answering_permissions(api, s["id"], "in the fork", timeout=60)
        notice = next(e for e in events if e.get("phase") == "conversation_forked")
        resumed = ready(events)[-1]  # the fork's, after the notice
        debug = f"notice={notice}\nready={resumed}\ntext={message_text(events, forked)!r}"
        print(f"claude fork: {debug}\n{time.monotonic() - started:.1f} s")
        # claude's own session/fork: the agent forked, and the fork (a new agent session) was resumed
        assert "agent 'claude' forked its session" in notice["text"], debug
        assert (
            resumed["seq"] > notice["seq"]
            and resumed["how"] == "resumed"
            and resumed["acp_session_id"] != original["acp_session_id"]
        ), debug
        assert "FORKED-ANSWER-4" in message_text(events, forked), debug
        # the model got the earlier turns from claude's copy of the conversation, not from our transcript
        sent = [json.dumps(r) for r in fake.requests if "in the fork" in json.dumps(r)]
        assert sent and all("SECOND-ANSWER-2" in r and RESEED_PREFACE not in r for r in sent), sent[-1:]
        # both conversations are in the history: the fork (current, the two turns copied and its own) and the earlier
        convs = await api.call("GET", "sessions", s["id"], "conversations")
        listed = [(c["title"], c["turns"], c["current"]) for c in convs if c["kind"] == "ours"]
        assert listed == [("Fork of first question", 3, True), ("first question", 2, False)], convs
