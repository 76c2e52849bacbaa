"""A hub admin's presets and controls, and a user's own agents kept apart from them.

A real server whose ``c.JupyterACP.agents`` is the admin's preset (``team``); the user enables ``codex`` (a stand-in
on PATH) from the panel's route; what the server loads at its next start is asked of the very function the start
calls (``_load_agent_specs``: the configuration and the user's file, merged). ``tests/hub`` does the same through a
real JupyterHub with real restarts. Each admin control refuses with its reason, naming the setting, and the GET
answers say what is fixed (``fixed_by_admin``) so that the panel can grey it.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import hostile, scripted

ADMIN_PRESET = {"team": {**scripted("stream"), "title": "Team agent (preset)"}}


@pytest.fixture
def acp_agents(tmp_path):
    return {
        **ADMIN_PRESET,
        "builtin": {"command": sys.executable, "args": ["-m", "jupyter_acp.agent"], "title": "Built-in"},
        "login": scripted("login", "--login-file", str(tmp_path / "logged-in")),
        "hostile": hostile(tmp_path),
    }


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "JUPYTER_ACP_MODEL", "JUPYTER_ACP_API_BASE", "SCRIPTED_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def app(jp_serverapp, caplog):
    app = jp_serverapp.web_app.settings["jupyter_acp"]
    app.log.addHandler(caplog.handler)  # the server's log does not reach the root logger
    yield app
    app.log.removeHandler(caplog.handler)


@pytest.fixture
def codex_on_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "codex-acp"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return exe


def restarted(app):
    """What the server's next start loads: the configuration (the admin's) and the user's own, merged."""
    app.agent_specs = app._load_agent_specs(app.user_agents)
    return app.agent_specs


def message(err: pytest.ExceptionInfo) -> str:
    return json.loads(err.value.response.body)["message"]


# -- the user's agents, apart from the admin's presets ---------------------------------------------------------------
async def test_an_agent_the_user_enabled_survives_the_admins_preset_at_the_next_start(
    api, app, codex_on_path, jp_config_dir, jp_data_dir
):
    answer = await api.call("POST", "agents", "enable", body={"name": "codex"})
    assert answer["stored"] == "stored on the server" and "path" not in answer
    # the user's config folder is not touched: an admin's config would replace what is written there
    assert not (jp_config_dir / "jupyter_server_config.d" / "jupyter_acp_agents.json").exists()
    kept = app.user_agents.path
    assert os.path.dirname(kept) == os.path.dirname(app.store_path)
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    specs = restarted(app)
    assert {"team", "codex", "builtin", "echo"} <= set(specs)  # the preset and the user's agent both
    listed = {a["name"]: a for a in await api.call("GET", "agents")}
    assert listed["codex"]["configured"] and listed["codex"]["origin"] == "user"
    assert listed["team"]["origin"] == "configuration"


async def test_a_users_switched_off_agent_stays_off_and_the_admins_entry_is_not_replaced(app, caplog):
    caplog.set_level(logging.INFO)
    app.user_agents.set("echo", None)
    app.user_agents.set("team", {"command": "/bin/false", "title": "mine"})  # a user cannot replace a preset
    specs = restarted(app)
    assert "echo" not in specs
    assert specs["team"].title == "Team agent (preset)"
    assert "set by the configuration, which wins" in caplog.text


async def test_agents_enabled_by_an_older_version_are_moved_once_and_the_log_says_so(app, jp_config_dir, caplog):
    # the extension's start (in its own thread) migrates what it finds: let it finish before the old file is written,
    # or a slow start moves it first and this call finds nothing
    user_agents = app.user_agents
    legacy = jp_config_dir / "jupyter_server_config.d" / "jupyter_acp_agents.json"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    entry = {"command": "codex-acp", "args": [], "title": "Codex (codex-acp)", "tool_channel": "mcp-http"}
    legacy.write_text(json.dumps({"JupyterACP": {"agents": {"codex": entry, "echo": None}}}))
    caplog.set_level(logging.INFO)
    assert user_agents.migrate(str(jp_config_dir)) == ["codex", "echo"]
    assert not legacy.exists() and legacy.with_name(legacy.name + ".migrated").exists()
    assert "moved from" in caplog.text and "codex, echo" in caplog.text
    specs = restarted(app)
    assert "codex" in specs and "echo" not in specs and "team" in specs
    assert app.user_agents.migrate(str(jp_config_dir)) == []  # once


async def test_the_agent_settings_answer_never_names_the_file_holding_the_keys(api, app, jp_data_dir):
    app.agent_settings.update("builtin", {"OPENAI_API_KEY": "sk-secret"})  # a key kept: the file exists
    for name in ("builtin", "login"):
        answer = await api.call("GET", "agents", name, "settings")
        text = json.dumps(answer)
        assert app.agent_settings.path not in text and str(jp_data_dir) not in text and "agent_settings" not in text
        assert answer["stored"] == "stored on the server"


# -- the admin's controls, each refusing with its reason -------------------------------------------------------------
@pytest.fixture
def acp_config(request):
    return getattr(request, "param", {})


@pytest.mark.parametrize("acp_config", [{"allowed_user_agents": ["claude"]}], indirect=True)
async def test_enabling_an_agent_the_admin_does_not_allow_is_refused_and_shown_greyed(
    api, app, codex_on_path, acp_config
):
    listed = {a["name"]: a for a in await api.call("GET", "agents")}
    assert "c.JupyterACP.allowed_user_agents" in listed["codex"]["fixed_by_admin"]
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "agents", "enable", body={"name": "codex"})
    assert err.value.code == 403
    assert "c.JupyterACP.allowed_user_agents" in message(err) and "'claude'" in message(err)
    assert "codex" not in app.agent_specs and not os.path.exists(app.user_agents.path)


@pytest.mark.parametrize("acp_config", [{"allowed_user_agents": []}], indirect=True)
@pytest.mark.parametrize(
    "parts, body",
    [
        (("agents", "login", "authenticate"), {"methodId": "login"}),
        (("agents", "login", "login-terminal"), {"methodId": "terminal-login"}),
        (("agents", "login", "settings"), {"env": {"SCRIPTED_API_KEY": "mine"}}),
    ],
    ids=["authenticate", "login-terminal", "login-variable"],
)
async def test_logging_in_to_an_agent_the_admin_does_not_allow_is_refused(api, app, acp_config, parts, body):
    await app.hub.connection("login").ensure_started()
    described = await api.call("GET", "agents", "login", "settings")
    assert "allowed_user_agents" in described["fixed_by_admin"]["login"]
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", *parts, body=body)
    assert err.value.code == 403 and "c.JupyterACP.allowed_user_agents" in message(err)
    assert app.agent_settings.values("login") == {}


@pytest.mark.parametrize("acp_config", [{"allowed_user_agents": []}], indirect=True)
async def test_a_user_file_naming_an_agent_the_admin_does_not_allow_is_left_out(app, acp_config, caplog):
    app.user_agents.set("echo", None)
    app.user_agents.set("mine", scripted("stream"))
    specs = restarted(app)
    assert "echo" in specs and "mine" not in specs
    assert "c.JupyterACP.allowed_user_agents" in caplog.text


@pytest.mark.parametrize("acp_config", [{"builtin_model_form": False}], indirect=True)
@pytest.mark.parametrize(
    "body", [{"model": "openai/mine"}, {"api_base": "http://127.0.0.1:9/v1"}], ids=["model", "api_base"]
)
async def test_a_model_the_admin_fixed_is_shown_greyed_and_cannot_be_changed(api, app, acp_config, body, monkeypatch):
    monkeypatch.setenv("JUPYTER_ACP_MODEL", "openai/the-hubs-proxy-model")
    described = await api.call("GET", "agents", "builtin", "settings")
    assert described["model"] == "openai/the-hubs-proxy-model"
    assert "c.JupyterACP.builtin_model_form = False" in described["fixed_by_admin"]["model"]
    assert "api_base" in described["fixed_by_admin"]
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "agents", "builtin", "settings", body=body)
    assert err.value.code == 403 and "c.JupyterACP.builtin_model_form" in message(err)
    assert app.agent_settings.values("builtin") == {}


@pytest.mark.parametrize("acp_config", [{"user_provider_keys": False}], indirect=True)
@pytest.mark.parametrize(
    "parts, body",
    [
        (("agents", "builtin", "settings"), {"key_env": "OPENAI_API_KEY", "key": "sk-mine"}),
        (("agents", "login", "settings"), {"env": {"SCRIPTED_API_KEY": "mine"}}),
    ],
    ids=["model-form-key", "login-variable"],
)
async def test_provider_keys_the_admin_keeps_in_the_environment_cannot_be_stored(api, app, acp_config, parts, body):
    await app.hub.connection("login").ensure_started()
    described = await api.call("GET", "agents", parts[1], "settings")
    assert "c.JupyterACP.user_provider_keys = False" in described["fixed_by_admin"]["key"]
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", *parts, body=body)
    assert err.value.code == 403 and "c.JupyterACP.user_provider_keys" in message(err)
    assert app.agent_settings.values(parts[1]) == {}


async def test_values_stored_before_the_admin_fixed_them_are_not_used(app):
    app.agent_settings.update("builtin", {"OPENAI_API_KEY": "sk-stored", "JUPYTER_ACP_MODEL": "openai/stored"})
    spec = app.agent_specs["builtin"]
    assert app.agent_env(spec)["OPENAI_API_KEY"] == "sk-stored"
    app.user_provider_keys = False
    env = app.agent_env(spec)
    assert "OPENAI_API_KEY" not in env and env["JUPYTER_ACP_MODEL"] == "openai/stored"
    app.builtin_model_form = False
    assert "JUPYTER_ACP_MODEL" not in app.agent_env(spec)


@pytest.mark.parametrize("acp_config", [{"user_policies": ["ask", "deny"]}], indirect=True)
async def test_always_allow_is_refused_when_the_admin_does_not_let_users_pick_auto(api, app, make_notebook, acp_config):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    options = [
        {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "once", "name": "Allow", "kind": "allow_once"},
    ]
    script = [{"do": "permission", "toolCall": {"toolCallId": "c1", "title": "Write x"}, "options": options}]
    turn = await api.prompt(s["id"], json.dumps(script))
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    request = next(e for e in events if e["type"] == "permission_request")
    shown = {o["optionId"]: o for o in request["options"]}
    assert "c.JupyterACP.user_policies" in shown["always"]["fixed_by_admin"]
    assert "fixed_by_admin" not in shown["once"]
    info = await api.call("GET", "sessions", s["id"])
    assert "c.JupyterACP.user_policies" in info["fixed_by_admin"]["options"]["allow_always"]
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "permissions", request["request_id"], body={"option_id": "always"})
    assert err.value.code == 403 and "'Always allow'" in message(err) and "c.JupyterACP.user_policies" in message(err)
    # answering once still works
    await api.call("POST", "sessions", s["id"], "permissions", request["request_id"], body={"option_id": "once"})
    await api.wait_turn_end(s["id"], turn)


@pytest.mark.parametrize("acp_config", [{"user_policies": ["ask"]}], indirect=True)
async def test_a_mode_that_acts_without_asking_is_refused_when_the_admin_forbids_auto(
    api, app, make_notebook, acp_config
):
    s = await api.open(make_notebook("nb.ipynb"), "builtin")
    await api.wait_for(s["id"], lambda evs: any(e["type"] == "session_ready" for e in evs))
    info = await api.call("GET", "sessions", s["id"])
    assert "auto" in {m["id"] for m in info["modes"]["availableModes"]}
    assert "c.JupyterACP.auto_modes" in info["fixed_by_admin"]["modes"]["auto"]
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "mode", body={"mode_id": "auto"})
    assert err.value.code == 403 and "c.JupyterACP.user_policies" in message(err)
    await api.call("POST", "sessions", s["id"], "mode", body={"mode_id": "ask"})  # back to asking: never refused
