"""Set an agent up from the panel: the built-in agent's model and key, an agent's login, enabling an
agent found on PATH.  A real server, real agent subprocesses (the built-in agent against the fake model server, the
scripted ``login`` agent, the hostile agent offering terminal logins), a reader who may only read and a writer who
may not execute (neither changes where an agent sends data or what it runs).
"""

from __future__ import annotations

import asyncio
import glob
import json
import logging
import os
import shlex
import stat
import sys
import time

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_acp.http.agent_routes import terminal_command
from jupyter_acp.testing.events import message_text
from jupyter_acp.testing.fake_model import FakeModel

from .conftest import hostile, scripted
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


#: terminal logins a hostile agent offers, each hiding something in its arguments or variables (id -> what is named)
HIDDEN = {
    "ctrl-u": ({"args": ["login\x15touch F"]}, "U+0015"),
    "newline": ({"args": ["--help\ntouch F"]}, "U+000A"),
    "escape-in-env": ({"args": ["login"], "env": {"HINT": "\x1b]0;title\x07"}}, "U+001B"),
    "bidi": ({"args": ["login\u202etxt.exe"]}, "U+202E"),
    "odd-name": ({"args": ["login"], "env": {"X=1; touch F #": "v"}}, "'X=1; touch F #'"),
}


def login_methods(tmp_path) -> list[dict]:
    """The hostile agent's logins: one clean (it reports its pid, then waits), the others hiding something."""
    clean = {
        "type": "terminal",
        "id": "clean",
        "name": "Log in in a terminal",
        "args": ["--login-report", str(tmp_path / "login.jsonl")],
        "env": {"LOGIN_HINT": "from-the-agent"},
    }
    return [clean, *({"type": "terminal", "id": i, "name": "Log in", **m} for i, (m, _) in HIDDEN.items())]


@pytest.fixture
def acp_agents(tmp_path):
    return {
        # the built-in agent with no model: what a newcomer meets
        "builtin": {"command": sys.executable, "args": ["-m", "jupyter_acp.agent"], "title": "Built-in"},
        "login": scripted("login", "--login-file", str(tmp_path / "logged-in")),
        "hostile": hostile(tmp_path, "--auth-methods", json.dumps(login_methods(tmp_path))),
    }


@pytest.fixture(scope="module", autouse=True)
def litellm_catalog_read():
    """litellm's catalog read once for the module (a subprocess importing litellm: 10 s of CPU, past the 20 s of a
    test request on a busy machine), so each request below is timed on its own work; the server keeps the catalog
    for its life, and the panel's model form starts reading it before a Save needs it (``litellm_catalog.warm``)."""
    from jupyter_acp.catalog import litellm_catalog

    asyncio.run(litellm_catalog.catalog())


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
    assert answer["settings"]["OPENAI_API_KEY"] == "set"
    assert "'builtin' restarted" in answer["notice"] and "1 open conversation re-opens" in answer["notice"]
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


async def test_a_save_with_no_running_agent_restarts_nothing_and_the_next_prompt_uses_the_new_model(
    api, app, make_notebook, fake_model
):
    answer = await api.call(
        "POST",
        "agents",
        "builtin",
        "settings",
        body={"model": "openai/fake", "api_base": fake_model.url, "key_env": "OPENAI_API_KEY", "key": KEY},
    )
    assert "nothing restarted" in answer["notice"] and "next prompt" in answer["notice"], answer["notice"]
    assert "builtin" not in app.hub.connections or not app.hub.connections["builtin"].process
    s = await api.open(make_notebook("nb.ipynb"), "builtin")
    turn = await api.prompt(s["id"], "hello")
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    assert "Hello from the fake model" in message_text(events, turn)
    assert not any(e.get("phase") == "agent_reconfigured" for e in events)


async def test_a_save_during_a_running_turn_lets_it_end_and_later_prompts_go_with_the_new_model(
    api, app, make_notebook, fake_model
):
    """A turn streaming when the model is changed is not cut: the agent restarts once it has ended, and a prompt
    sent meanwhile (another notebook's) waits for that restart and goes to the new model."""
    from jupyter_acp.testing.fake_model import message_text as said_in

    fake_model.rules.insert(0, {"match": "slow", "text": "one two three four five six seven eight", "delay": 0.4})
    await api.call(
        "POST",
        "agents",
        "builtin",
        "settings",
        body={"model": "openai/fake", "api_base": fake_model.url, "key_env": "OPENAI_API_KEY", "key": KEY},
    )
    s = await api.open(make_notebook("nb.ipynb"), "builtin")
    other = await api.open(make_notebook("other.ipynb"), "builtin")
    turn = await api.prompt(s["id"], "hello")
    await api.wait_turn_end(s["id"], turn, timeout=60)
    pid = app.hub.connections["builtin"].process.pid
    slow = await api.prompt(s["id"], "a slow story")
    await api.wait_for(s["id"], lambda evs: "one" in message_text(evs, slow), timeout=60)

    answer = await api.call("POST", "agents", "builtin", "settings", body={"model": "openai/fake2"})
    assert "restarts with its new settings when its 1 running turn ends" in answer["notice"], answer["notice"]
    assert app.hub.connections["builtin"].alive and app.hub.connections["builtin"].process.pid == pid
    waiting = await api.prompt(other["id"], "hello from the other notebook")

    events = await api.wait_turn_end(s["id"], slow, timeout=60)
    assert "error" not in ended(events, slow), ended(events, slow)
    assert message_text(events, slow) == "one two three four five six seven eight"
    events = await api.wait_turn_end(other["id"], waiting, timeout=90)
    assert "Hello from the fake model" in message_text(events, waiting)
    assert any(e.get("phase") == "agent_restart_waits" for e in events)  # it said what it waited for
    models = {said_in(r["messages"][-1]): r["model"] for r in fake_model.requests}

    assert models["a slow story"] == "fake" and models["hello from the other notebook"] == "fake2", models
    assert app.hub.connections["builtin"].process.pid != pid
    turn = await api.prompt(s["id"], "hello")
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    assert any(e.get("phase") == "agent_reconfigured" for e in await api.events(s["id"]))
    assert fake_model.requests[-1]["model"] == "fake2"


async def test_a_save_restarts_only_the_agent_whose_environment_it_changes(api, app, make_notebook, fake_model):
    """The built-in agent runs a conversation; the ``login`` agent's key is saved: only ``login`` restarts, and the
    built-in agent's process and conversation go on untouched."""
    await api.call(
        "POST",
        "agents",
        "builtin",
        "settings",
        body={"model": "openai/fake", "api_base": fake_model.url, "key_env": "OPENAI_API_KEY", "key": KEY},
    )
    s = await api.open(make_notebook("nb.ipynb"), "builtin")
    turn = await api.prompt(s["id"], "hello")
    await api.wait_turn_end(s["id"], turn, timeout=60)
    login = await api.open(make_notebook("login.ipynb"), "login")
    turn = await api.prompt(login["id"], "go")
    await api.wait_turn_end(login["id"], turn, timeout=30)
    builtin_pid, login_pid = (app.hub.connections[a].process.pid for a in ("builtin", "login"))

    answer = await api.call("POST", "agents", "login", "settings", body={"env": {"SCRIPTED_API_KEY": ENV_KEY}})
    assert "'login' restarted" in answer["notice"], answer["notice"]
    assert app.hub.connections["builtin"].alive and app.hub.connections["builtin"].process.pid == builtin_pid
    assert not any(e.get("phase") == "agent_reconfigured" for e in await api.events(s["id"]))
    turn = await api.prompt(s["id"], "hello")
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    assert "Hello from the fake model" in message_text(events, turn)
    assert not any(e.get("phase") in ("agent_reconfigured", "session_loaded", "session_resumed") for e in events)
    turn = await api.prompt(login["id"], "key?")
    events = await api.wait_turn_end(login["id"], turn, timeout=30)
    assert message_text(events, turn) == f"key of {len(ENV_KEY)} characters"
    assert app.hub.connections["login"].process.pid != login_pid


async def test_a_save_the_environment_overrides_keeps_the_agent_running(api, app, make_notebook, monkeypatch):
    """The server's environment wins over the panel's key: saving one changes nothing the agent runs with, so its
    process and conversation are left alone, and the answer says nothing restarted."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    s = await api.open(make_notebook("nb.ipynb"), "builtin")
    turn = await api.prompt(s["id"], "hello")
    await api.wait_turn_end(s["id"], turn, timeout=60)
    pid = app.hub.connections["builtin"].process.pid
    answer = await api.call("POST", "agents", "builtin", "settings", body={"key_env": "OPENAI_API_KEY", "key": KEY})
    assert answer["changed"] == ["OPENAI_API_KEY"]
    assert "nothing restarted" in answer["notice"] and "the environment wins" in answer["notice"], answer["notice"]
    assert app.hub.connections["builtin"].alive and app.hub.connections["builtin"].process.pid == pid
    assert not any(e.get("phase") == "agent_reconfigured" for e in await api.events(s["id"]))


async def test_a_save_naming_a_well_known_key_variable_does_not_wait_for_litellms_catalog(api, app, monkeypatch):
    """The first-run form's Save waited 10-20 s for litellm's catalog (imported in a subprocess) to check the key's
    variable; a well-known provider's variable is checked at once, and every one of them is a variable the live
    catalog knows (so the rule "only provider key variables litellm knows" holds as before)."""
    from jupyter_acp.catalog import litellm_catalog

    live = litellm_catalog.key_vars(await litellm_catalog.catalog())
    assert live, "litellm's catalog was not read: the well-known variables cannot be checked against it"
    assert litellm_catalog.WELL_KNOWN_KEYS <= live, sorted(litellm_catalog.WELL_KNOWN_KEYS - live)

    async def not_read(*args, **kwargs):
        raise AssertionError("the Save waited for litellm's catalog")

    monkeypatch.setattr(litellm_catalog, "_cache", None)  # as on a server's first Save
    monkeypatch.setattr(litellm_catalog, "catalog", not_read)
    started = time.monotonic()
    answer = await api.call("POST", "agents", "builtin", "settings", body={"key_env": "ANTHROPIC_API_KEY", "key": KEY})
    assert answer["settings"]["ANTHROPIC_API_KEY"] == "set" and time.monotonic() - started < 5


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
    assert answer["stored"] == "stored on the server"
    path = app.user_agents.path  # the user's own agents, apart from the configuration (tests/test_admin_controls.py)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path) as fh:
        written = json.load(fh)
    assert written["agents"]["codex"]["command"] == "codex-acp"
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
    assert not os.path.exists(app.user_agents.path)
    assert "codex" not in app.agent_specs


ROUTES = [
    ("POST", ("agents", "builtin", "settings"), {"model": "openai/fake"}),
    ("POST", ("agents", "login", "authenticate"), {"methodId": "login"}),
    ("POST", ("agents", "hostile", "login-terminal"), {"methodId": "clean"}),
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


#: every change of where an agent sends data or what runs, as a writer (read + write) tries it
SETUP_CHANGES = [
    (("agents", "builtin", "settings"), {"api_base": "http://collaborator.example/v1"}),
    (("agents", "builtin", "settings"), {"model": "openai/another-model"}),
    (("agents", "builtin", "settings"), {"key_env": "OPENAI_API_KEY", "key": "sk-the-collaborators"}),
    (("agents", "login", "settings"), {"env": {"SCRIPTED_API_KEY": "the-collaborators"}}),
    (("agents", "login", "authenticate"), {"methodId": "login"}),
    (("agents", "hostile", "login-terminal"), {"methodId": "clean"}),
    (("agents", "enable"), {"name": "codex"}),
]


@pytest.fixture
def terminals(jp_serverapp):
    """The server's terminal manager; the terminals a test left are ended after it."""
    manager = jp_serverapp.web_app.settings["terminal_manager"]
    before = set(manager.terminals)
    yield manager
    for name in set(manager.terminals) - before:
        manager.terminals[name].kill()


@pytest.mark.parametrize("parts, body", SETUP_CHANGES, ids=lambda v: "/".join(v) if isinstance(v, tuple) else None)
async def test_a_writer_cannot_change_where_an_agent_sends_data_or_what_it_runs(
    jp_fetch, app, codex_on_path, terminals, parts, body
):
    pid = None
    if parts[1] in ("login", "hostile"):  # started, so that their login methods are known
        await app.hub.connection(parts[1]).ensure_started()
        pid = app.hub.connections[parts[1]].process.pid

    async def post(user: str):
        return await jp_fetch("jupyter-acp", *parts, method="POST", body=json.dumps(body), headers={USER_HEADER: user})

    with pytest.raises(HTTPClientError) as err:
        await post("writer")
    assert err.value.code == 403
    message = json.loads(err.value.response.body)["message"]
    assert "needs 'execute' on resource 'jupyter_acp'" in message and "rule:" in message and "'writer'" in message
    assert "ask the server's owner" in message
    assert app.agent_settings.values("builtin") == {} and app.agent_settings.values("login") == {}
    assert "codex" not in app.agent_specs and not terminals.terminals
    if pid is not None:  # not restarted with new settings
        assert app.hub.connections[parts[1]].process.pid == pid
    # the owner still can
    answer = await post("owner")
    assert answer.code in (200, 201), answer.body


def hidden_message(err: HTTPClientError) -> str:
    return json.loads(err.response.body)["message"]


@pytest.mark.parametrize("method_id", list(HIDDEN))
async def test_a_terminal_login_hiding_characters_is_refused(api, app, terminals, tmp_path, method_id):
    """A login whose arguments or variables hold control or invisible characters (Ctrl-U, a newline, an escape
    sequence, a right-to-left override) or a variable that is no name: the card says why, the route refuses it,
    nothing runs."""
    await app.hub.connection("hostile").ensure_started()
    got = await api.call("GET", "agents", "hostile", "settings")
    shown = next(m for m in got["auth_methods"] if m["id"] == method_id)
    what = HIDDEN[method_id][1]
    assert shown["kind"] == "terminal" and what in shown["refused"] and "rule:" in shown["refused"]
    assert not any(ch in shown["command"] for ch in "\x15\n\x1b\u202e"), "the card shows what it hides, escaped"
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "agents", "hostile", "login-terminal", body={"methodId": method_id})
    assert err.value.code == 400
    message = hidden_message(err.value)
    assert what in message and "rule:" in message and method_id in message
    assert not terminals.terminals, "no terminal was started"
    clean = next(m for m in got["auth_methods"] if m["id"] == "clean")
    assert "refused" not in clean and "--login-report" in clean["command"]


async def test_a_terminal_login_runs_the_agents_argv_with_its_curated_environment(
    api, app, jp_serverapp, terminals, tmp_path, monkeypatch
):
    """The login terminal is started from the argument list (the agent's command and the method's args, never a
    line typed into a shell) with the agent's own environment: no server token, nothing the agent would not get."""
    token = jp_serverapp.identity_provider.token
    assert token
    monkeypatch.setenv("JUPYTER_TOKEN", token)
    monkeypatch.setenv("UNRELATED_SECRET", "not-for-agents")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-passes")
    answer = await api.call("POST", "agents", "hostile", "login-terminal", body={"methodId": "clean"})
    name = answer["name"]
    assert name in terminals.terminals
    report = tmp_path / "login.jsonl"
    deadline = time.monotonic() + 30
    while not report.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    pid = json.loads(report.read_text().splitlines()[-1])["pid"]
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        argv = [a.decode() for a in fh.read().split(b"\0")[:-1]]
    assert argv == [*app.agent_specs["hostile"].argv, "--login-report", str(report)]
    with open(f"/proc/{pid}/environ", "rb") as fh:
        environ = dict(kv.decode().split("=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
    assert not any(token in v for v in environ.values()), "the server token reached the login command"
    assert "JUPYTER_TOKEN" not in environ and "UNRELATED_SECRET" not in environ
    assert environ["OPENAI_API_KEY"] == "sk-passes" and environ["LOGIN_HINT"] == "from-the-agent"
    assert environ["PATH"] == os.environ["PATH"]
    # asked again while it runs: the same terminal, not a second one
    again = await api.call("POST", "agents", "hostile", "login-terminal", body={"methodId": "clean"})
    assert again["name"] == name and len(terminals.terminals) == 1


def test_a_terminal_login_line_is_the_agents_command_quoted():
    """What the card shows of a terminal login: the agent's command and the method's args and variables, each word
    quoted as a shell would need it (the user may copy it), control characters escaped."""
    method = {"type": "terminal", "id": "t", "args": ["login", "; touch /tmp/pwned", "$(id)"], "env": {"OK": "1 2"}}
    line = terminal_command(["/usr/bin/agent", "--acp"], method)
    assert shlex.split(line) == ["OK=1 2", "/usr/bin/agent", "--acp", "login", "; touch /tmp/pwned", "$(id)"]
    shown = terminal_command(["/usr/bin/agent"], {"args": ["a\x15b"]})
    assert "\x15" not in shown and "\\x15" in shown
