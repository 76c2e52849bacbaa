"""Issue 14: set an agent up from the panel: the built-in agent's model and key, an agent's login, enabling an
agent found on PATH.  A real server, real agent subprocesses (the built-in agent against the fake model server, the
scripted ``login`` agent), a reader who may only read.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shlex
import stat
import sys

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_acp.http.agent_routes import terminal_command
from jupyter_acp.testing.events import message_text
from jupyter_acp.testing.fake_model import FakeModel

from .conftest import scripted
from .users import USER_HEADER, HeaderUsers, ReaderOnlyReads

KEY = "sk-very-secret-0123456789"
ENV_KEY = "scripted-key-98765"


@pytest.fixture
def server_app_config():
    return {"identity_provider_class": HeaderUsers, "authorizer_class": ReaderOnlyReads}


@pytest.fixture
def fake_model():
    with FakeModel([{"match": "hello", "text": "Hello from the fake model"}]) as fm:
        yield fm


@pytest.fixture
def acp_agents(tmp_path):
    return {
        # the built-in agent with no model: what a newcomer meets
        "builtin": {"command": sys.executable, "args": ["-m", "jupyter_acp.agent"], "title": "Built-in"},
        "login": scripted("login", "--login-file", str(tmp_path / "logged-in")),
    }


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "JUPYTER_ACP_MODEL", "JUPYTER_ACP_API_BASE", "SCRIPTED_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def app(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_acp"]


def ended(events, turn):
    return next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn)


def everything_stored(app) -> str:
    """The transcript store's files, as bytes read back (the database and SQLite's side files)."""
    app.store.flush() if hasattr(app.store, "flush") else None
    out = b""
    for f in glob.glob(app.store_path + "*"):
        with open(f, "rb") as fh:
            out += fh.read()
    return out.decode("latin-1")


async def test_model_and_key_from_the_panel(api, app, make_notebook, fake_model, caplog):
    caplog.set_level(logging.DEBUG)
    s = await api.open(make_notebook("nb.ipynb"), "builtin")
    other = await api.open(make_notebook("other.ipynb"), "echo")
    turn = await api.prompt(other["id"], "echo: before")
    await api.wait_turn_end(other["id"], turn, timeout=60)
    echo_pid = app.hub.connections["echo"].process.pid
    before = await api.call("GET", "agents", "builtin", "settings")
    assert before["needs_model"] is True and before["settings"]["JUPYTER_ACP_MODEL"] == "unset"
    turn = await api.prompt(s["id"], "hello")
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    assert "No model is configured" in message_text(events, turn)

    answer = await api.call(
        "POST",
        "agents",
        "builtin",
        "settings",
        body={"model": "openai/fake", "api_base": fake_model.url, "key_env": "OPENAI_API_KEY", "key": KEY},
    )
    assert answer["needs_model"] is False and answer["model"] == "openai/fake"
    assert answer["settings"]["OPENAI_API_KEY"] == "set" and "restarted" in answer["notice"]
    assert KEY not in json.dumps(answer)

    # the private file: 0600 in a 0700 folder
    path = app.agent_settings.path
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700

    # only THAT agent's environment; the prompt is answered by the model at once
    assert app.agent_env(app.agent_specs["builtin"])["OPENAI_API_KEY"] == KEY
    assert "OPENAI_API_KEY" not in app.agent_env(app.agent_specs["login"])
    assert "OPENAI_API_KEY" not in app.agent_env(app.agent_specs["echo"])
    turn = await api.prompt(s["id"], "hello")
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    assert "Hello from the fake model" in message_text(events, turn)
    assert any(e.get("phase") == "agent_reconfigured" for e in events)
    # only that agent restarted: the echo agent's process is the same one, and it saw no notice
    assert app.hub.connections["echo"].process.pid == echo_pid and app.hub.connections["echo"].alive
    assert not any(e.get("phase") == "agent_reconfigured" for e in await api.events(other["id"]))

    # the key is nowhere else: events, transcripts, GET answers, the server's log
    assert KEY not in json.dumps(await api.events(s["id"]))
    assert KEY not in everything_stored(app)
    assert KEY not in json.dumps(await api.call("GET", "agents"))
    assert KEY not in json.dumps(await api.call("GET", "agents", "builtin", "settings"))
    assert KEY not in json.dumps(await api.call("GET", "agents", "builtin", "models"))
    assert KEY not in caplog.text


async def test_the_environment_wins(api, app, fake_model, monkeypatch):
    await api.call("POST", "agents", "builtin", "settings", body={"key_env": "OPENAI_API_KEY", "key": KEY})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    assert app.agent_env(app.agent_specs["builtin"])["OPENAI_API_KEY"] == "sk-from-the-environment"
    got = await api.call("GET", "agents", "builtin", "settings")
    assert got["settings"]["OPENAI_API_KEY"] == "from environment"
    answer = await api.call("POST", "agents", "builtin", "settings", body={"key_env": "OPENAI_API_KEY", "key": "x2"})
    assert "the environment wins" in answer["notice"]


async def test_model_suggestions_follow_the_keys_present(api):
    empty = await api.call("GET", "agents", "builtin", "models")
    assert "OPENAI_API_KEY" in empty["key_vars"] and not any(m.startswith("openai/") for m in empty["suggestions"])
    await api.call("POST", "agents", "builtin", "settings", body={"key_env": "OPENAI_API_KEY", "key": KEY})
    full = await api.call("GET", "agents", "builtin", "models")
    assert "OPENAI_API_KEY" in full["present"]
    assert any(m.startswith("openai/gpt") for m in full["suggestions"])


@pytest.mark.parametrize(
    "body, rule",
    [
        ({"key_env": "PATH", "key": "/tmp/evil"}, "not a provider key variable litellm knows"),
        ({"key_env": "LD_PRELOAD", "key": "/tmp/evil.so"}, "not a provider key variable litellm knows"),
        ({"key": KEY}, "a key needs key_env"),
        ({"api_base": "file:///etc/passwd"}, "http:// or https://"),
        ({"env": {"LD_PRELOAD": "/tmp/evil.so"}}, "does not ask for"),
        ({"command": "/bin/sh"}, "command: Extra inputs are not permitted"),
    ],
)
async def test_refused_settings_name_the_rule(api, app, body, rule):
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "agents", "builtin", "settings", body=body)
    assert err.value.code == 400
    assert rule in json.loads(err.value.response.body)["message"]
    assert app.agent_settings.values("builtin") == {}


async def test_login_agent_methods_and_authenticate(api, make_notebook, app):
    s = await api.open(make_notebook("nb.ipynb"), "login")
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn, timeout=30)
    assert ended(events, turn)["error_kind"] == "needs_login"
    got = await api.call("GET", "agents", "login", "settings")
    kinds = {m["id"]: m["kind"] for m in got["auth_methods"]}
    assert kinds["login"] == "agent" and kinds["api-key"] == "env_var"
    env_method = next(m for m in got["auth_methods"] if m["kind"] == "env_var")
    assert env_method["vars"] == ["SCRIPTED_API_KEY"] and got["settings"]["SCRIPTED_API_KEY"] == "unset"
    if app.serverapp.terminals_enabled:  # advertised auth.terminal: the agent offers its terminal login
        term = next(m for m in got["auth_methods"] if m["kind"] == "terminal")
        assert "--do-login" in term["command"] and "login-file" in term["command"]
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "agents", "login", "authenticate", body={"methodId": "api-key"})
    assert err.value.code == 400 and "only 'agent' methods" in json.loads(err.value.response.body)["message"]
    answer = await api.call("POST", "agents", "login", "authenticate", body={"methodId": "login"})
    assert answer["authenticated"] is True and answer["state"] == "ready"
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn, timeout=30)
    assert "error" not in ended(events, turn) and message_text(events, turn) == "0 1 2 3 4"


async def test_login_by_env_var_reaches_only_that_agent(api, make_notebook, app, caplog):
    caplog.set_level(logging.DEBUG)
    s = await api.open(make_notebook("nb.ipynb"), "login")
    turn = await api.prompt(s["id"], "go")
    await api.wait_turn_end(s["id"], turn, timeout=30)
    with pytest.raises(HTTPClientError) as err:  # a variable the agent did not ask for
        await api.call("POST", "agents", "login", "settings", body={"env": {"OPENAI_API_KEY": ENV_KEY}})
    assert err.value.code == 400 and "does not ask for" in json.loads(err.value.response.body)["message"]
    answer = await api.call("POST", "agents", "login", "settings", body={"env": {"SCRIPTED_API_KEY": ENV_KEY}})
    assert answer["settings"]["SCRIPTED_API_KEY"] == "set" and ENV_KEY not in json.dumps(answer)
    turn = await api.prompt(s["id"], "key?")
    events = await api.wait_turn_end(s["id"], turn, timeout=30)
    assert message_text(events, turn) == f"key of {len(ENV_KEY)} characters"
    for other in ("builtin", "echo"):
        assert "SCRIPTED_API_KEY" not in app.agent_env(app.agent_specs[other])
    assert ENV_KEY not in json.dumps(await api.events(s["id"]))
    assert ENV_KEY not in everything_stored(app)
    assert ENV_KEY not in caplog.text


@pytest.fixture
def codex_on_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "codex-acp"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return exe


async def test_enable_a_detected_agent(api, app, codex_on_path, jp_config_dir):
    listed = {a["name"]: a for a in await api.call("GET", "agents")}
    assert listed["codex"]["configured"] is False
    answer = await api.call("POST", "agents", "enable", body={"name": "codex"})
    path = answer["path"]
    assert path == str(jp_config_dir / "jupyter_server_config.d" / "jupyter_acp_agents.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path) as fh:
        written = json.load(fh)
    assert written["JupyterACP"]["agents"]["codex"]["command"] == "codex-acp"
    listed = {a["name"]: a for a in await api.call("GET", "agents")}
    assert listed["codex"]["configured"] is True  # usable at once, no restart
    assert "codex" in app.agent_specs


@pytest.mark.parametrize(
    "body, status, rule",
    [
        ({"name": "codex", "command": "/bin/sh"}, 400, "never a command"),
        ({"name": "evil", "args": ["-c", "id"]}, 400, "never a command"),
        ({"name": "/bin/sh"}, 400, "only a detected agent can be enabled"),
        ({"name": "gemini"}, 400, "was not found on PATH"),
        ({"name": "echo"}, 409, "already configured"),
    ],
)
async def test_enable_refuses_commands_and_undetected_agents(
    api, app, codex_on_path, jp_config_dir, body, status, rule
):
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "agents", "enable", body=body)
    assert err.value.code == status
    assert rule in json.loads(err.value.response.body)["message"]
    assert not (jp_config_dir / "jupyter_server_config.d" / "jupyter_acp_agents.json").exists()
    assert "codex" not in app.agent_specs


ROUTES = [
    ("POST", ("agents", "builtin", "settings"), {"model": "openai/fake"}),
    ("POST", ("agents", "login", "authenticate"), {"methodId": "login"}),
    ("POST", ("agents", "enable"), {"name": "codex"}),
]


@pytest.mark.parametrize("method, parts, body", ROUTES)
async def test_a_reader_cannot_change_anything(jp_fetch, app, codex_on_path, method, parts, body):
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("jupyter-acp", *parts, method=method, body=json.dumps(body), headers={USER_HEADER: "reader"})
    assert err.value.code == 403
    assert app.agent_settings.values("builtin") == {} and "codex" not in app.agent_specs
    # reading is allowed
    got = await jp_fetch("jupyter-acp", "agents", "builtin", "settings", headers={USER_HEADER: "reader"})
    assert json.loads(got.body)["name"] == "builtin"


async def test_enabling_needs_execute(jp_fetch, app, codex_on_path):
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(
            "jupyter-acp",
            "agents",
            "enable",
            method="POST",
            body=json.dumps({"name": "codex"}),
            headers={USER_HEADER: "writer"},
        )
    assert err.value.code == 403 and "codex" not in app.agent_specs


def test_a_terminal_login_line_is_the_agents_command_quoted():
    """An agent's terminal login method cannot smuggle shell syntax into the line the panel types in a terminal."""
    hostile = {
        "type": "terminal",
        "id": "t",
        "args": ["login", "; touch /tmp/pwned", "$(id)"],
        "env": {"X=1; touch /tmp/pwned #": "v", "TOKEN_DIR": "`id` $HOME", "OK": "1"},
    }
    line = terminal_command(["/usr/bin/agent", "--acp"], hostile)
    words = shlex.split(line)
    assert words == ["TOKEN_DIR=`id` $HOME", "OK=1", "/usr/bin/agent", "--acp", "login", "; touch /tmp/pwned", "$(id)"]
    assert "X=1" not in line
