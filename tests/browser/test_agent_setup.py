"""Setting agents up, in a real JupyterLab: the built-in agent's model set from the panel, the login card (an agent's own
login, a key variable, a terminal login), and enabling an agent found on PATH from the picker.

A server of its own (this module's ``lab``): the built-in agent WITHOUT a model, three scripted ``login`` agents (one
per login method tried), and a fake ``codex-acp`` on PATH.  The fake model server is the session's.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from axe import assert_accessible, set_theme
from conftest import REPO, SCRIPTED, Lab, run_lab  # the browser tests' conftest (same folder)

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
SCREENS = REPO / "test-artifacts" / "screens"
KEY = "sk-browser-secret-4242"


def shot(ui: Any, label: str) -> Path:
    SCREENS.mkdir(parents=True, exist_ok=True)
    path = SCREENS / f"b4-{label}.png"
    ui.page.screenshot(path=str(path))
    return path


def _login_agent(base: Path, name: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [*SCRIPTED, "login", "--login-file", str(base / f"{name}.logged-in")],
        "title": f"Scripted login ({name})",
    }


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, fake_model: Any) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("setup-lab")
    bin_dir = base / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex-acp"  # "found on this machine"; never started by these tests
    codex.write_text("#!/bin/sh\nexit 0\n")
    codex.chmod(0o755)
    settings = {
        "default_agent": "echo",
        "agents": {
            "builtin": {"command": sys.executable, "args": ["-m", "jupyter_acp.agent"], "title": "Built-in agent"},
            "login-agent": _login_agent(base, "agent"),
            "login-key": _login_agent(base, "key"),
            "login-terminal": _login_agent(base, "terminal"),
        },
    }
    with run_lab(
        base,
        settings,
        store="jupyter_acp/transcripts.sqlite",
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        drop_env=("JUPYTER_ACP_MODEL", "JUPYTER_ACP_API_BASE", "OPENAI_API_KEY", "SCRIPTED_API_KEY"),
        keep_log="agent-setup-server.log",
    ) as lab:
        yield lab
    assert KEY not in lab.log.read_text(errors="replace"), "the key reached the server's log"


def test_the_first_prompt_waits_for_the_model_form_and_goes_when_it_is_saved(ui, fake_model):
    nb = ui.lab.notebook("first-run.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.widen_panel(200)
    ui.pick_agent("builtin")
    card = ui.panel.locator(".jp-ACP-setup")
    expect(card).to_contain_text("Choose a model for the built-in agent", timeout=LONG)
    try:
        # the user asks first: the prompt waits in the form, the agent is not asked to answer without a model
        ui.send("hello first run")
        expect(card.locator(".jp-ACP-setupHeld")).to_contain_text("hello first run")
        expect(ui.panel.get_by_label("Message to the agent")).to_have_value("")
        card.get_by_label("Model", exact=True).fill("openai/fake")
        card.get_by_label("API key", exact=True).fill(KEY)
        card.get_by_label("API base URL").fill(fake_model.url)
        # the suggestions arriving rebuild the card: what was typed stays
        expect(
            card.get_by_label("Key variable", exact=True).locator("option[value='ANTHROPIC_API_KEY']")
        ).to_be_attached(timeout=LONG)
        expect(card.get_by_label("Model", exact=True)).to_have_value("openai/fake")
        expect(card.get_by_label("API base URL")).to_have_value(fake_model.url)
        shot(ui, "first-run-form")
        save = card.get_by_role("button", name="Save and restart the agent")
        save.click()
        # while it saves, the fields keep what was typed (read in one look: the card may go as soon as it saved)
        state = ui.page.evaluate(
            "() => { const c = document.querySelector('#jupyter-acp-sidebar .jp-ACP-setup');"
            " const saving = !!c && [...c.querySelectorAll('button')].some(b => b.textContent.includes('Saving'));"
            " const input = c && c.querySelector('[aria-label=\"Model\"]');"
            " return { saving, model: input ? input.value : null }; }"
        )
        if state["saving"]:
            assert state["model"] == "openai/fake", state
        # the Save says what it restarted: the built-in agent, started with no model when the notebook picked it
        expect(ui.panel.get_by_text("'builtin' restarted with its new settings")).to_be_visible(timeout=LONG)
        # Save sent the prompt: the model answers it, once, and nobody was told that no model is configured
        answer = ui.panel.locator(".jp-ACP-message").last
        expect(answer).to_contain_text("You said: hello first run", timeout=LONG)
        expect(card).to_be_hidden()
        expect(ui.panel.locator(".jp-ACP-user")).to_have_count(1)
        assert "No model is configured" not in ui.panel.locator(".jp-ACP-log").inner_text()
        shot(ui, "first-run-answered")
    finally:
        # the next test sets the model up from scratch
        ui.lab.api("agents/builtin/settings", {"model": "", "api_base": ""})


def test_model_form_sets_the_builtin_agent_up(ui, fake_model):
    nb = ui.lab.notebook("model.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.widen_panel(200)
    ui.pick_agent("builtin")
    card = ui.panel.locator(".jp-ACP-setup")
    expect(card).to_be_visible(timeout=LONG)
    expect(card).to_contain_text("Choose a model for the built-in agent")
    # suggestions arrive from litellm's list (read by the server in a subprocess): the key variables fill in
    key_var = card.get_by_label("Key variable", exact=True)
    expect(key_var.locator("option[value='ANTHROPIC_API_KEY']")).to_be_attached(timeout=LONG)
    card.get_by_label("Model", exact=True).fill("openai/fake")
    expect(key_var).to_have_value("OPENAI_API_KEY")
    card.get_by_label("API key", exact=True).fill(KEY)
    card.get_by_label("API base URL").fill(fake_model.url)
    shot(ui, "model-form")
    assert_accessible(ui.page, "model set-up form, light")
    card.get_by_role("button", name="Save and restart the agent").click()
    expect(card).to_be_hidden(timeout=LONG)
    # the prompt goes at once, to the model
    ui.send("hello model")
    answer = ui.panel.locator(".jp-ACP-message").last
    expect(answer).to_contain_text("You said: hello model", timeout=LONG)
    shot(ui, "model-answered")
    settings = ui.lab.api("agents/builtin/settings")
    assert settings["settings"]["OPENAI_API_KEY"] == "set" and KEY not in json.dumps(settings)

    # the provider refuses the key: the error offers the form again, with the model filled in
    fake_model.rules.insert(0, {"match": "refuse my key", "status": 401, "text": "Incorrect API key provided"})
    ui.send("refuse my key")
    err = ui.panel.locator(".jp-ACP-turnEnd.jp-mod-error").last
    expect(err).to_contain_text("refused the agent's API key", timeout=LONG)
    fake_model.rules.pop(0)  # the session's fake model: leave it as the other modules know it
    err.get_by_role("button", name="Change the model or key").click()
    expect(card).to_be_visible()
    expect(card).to_contain_text("The built-in agent's model and key")
    expect(card.get_by_label("Model", exact=True)).to_have_value("openai/fake")
    expect(card.get_by_label("Key variable", exact=True)).to_contain_text("OPENAI_API_KEY (set)")
    shot(ui, "model-change")
    assert_accessible(ui.page, "model form again after a refused key, light")
    card.get_by_role("button", name="Close").click()
    expect(card).to_be_hidden()
    assert KEY not in ui.panel.inner_html()
    assert settings["stored"] == "stored on the server"  # never the path of the file holding the keys
    stored = ui.lab.data_dir / "jupyter_acp" / "agent_settings.json"  # next to the store (JupyterACP.store_path)
    assert oct(stored.stat().st_mode & 0o777) == "0o600"


def test_login_card_agent_method(ui):
    nb = ui.lab.notebook("login-agent.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.widen_panel(200)
    ui.panel.get_by_label("Agent for this notebook").select_option("login-agent")
    card = ui.panel.locator(".jp-ACP-setup .jp-ACP-loginCard")
    expect(card).to_be_visible(timeout=LONG)
    expect(card.locator(".jp-ACP-loginMethod")).to_have_count(3)  # agent, env_var, terminal (auth.terminal)
    ui.send("go")
    err = ui.panel.locator(".jp-ACP-turnEnd.jp-mod-error").last
    expect(err).to_have_attribute("data-error-kind", "needs_login", timeout=LONG)
    shot(ui, "login-card")
    assert_accessible(ui.page, "login card, light")
    set_theme(ui.page, dark=True)
    ui.show_panel()
    assert_accessible(ui.page, "login card, dark")
    set_theme(ui.page, dark=False)
    card.locator(".jp-ACP-loginMethod[data-kind='agent']").get_by_role("button", name="Log in").click()
    # logged in, the prompt is sent again and answered
    expect(ui.panel.locator(".jp-ACP-message").last).to_have_text("0 1 2 3 4", timeout=LONG)
    expect(card).to_be_hidden()
    shot(ui, "login-done")

    # the agent offers ACP logout: one line, asked twice; its next prompt brings the login card back
    setup = ui.panel.locator(".jp-ACP-setup")
    setup.get_by_role("button", name="Log out of login-agent").click()
    expect(setup).to_contain_text("Log out of login-agent?")
    assert_accessible(ui.page, "log out asked, light")
    shot(ui, "logout-asked")
    setup.get_by_role("button", name="Log out", exact=True).click()
    expect(ui.page.get_by_text("Logged out of login-agent")).to_be_visible(timeout=LONG)
    ui.send("go again")
    err = ui.panel.locator(".jp-ACP-turnEnd.jp-mod-error").last
    expect(err).to_have_attribute("data-error-kind", "needs_login", timeout=LONG)
    expect(card).to_be_visible(timeout=LONG)


def test_login_card_key_variable(ui):
    nb = ui.lab.notebook("login-key.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.panel.get_by_label("Agent for this notebook").select_option("login-key")
    card = ui.panel.locator(".jp-ACP-setup .jp-ACP-loginCard")
    expect(card).to_be_visible(timeout=LONG)
    ui.send("key?")
    expect(ui.panel.locator(".jp-ACP-turnEnd.jp-mod-error").last).to_be_visible(timeout=LONG)
    row = card.locator(".jp-ACP-loginMethod[data-kind='env_var']")
    row.get_by_label("SCRIPTED_API_KEY").fill(KEY)
    row.get_by_role("button", name="Save and restart").click()
    expect(ui.panel.locator(".jp-ACP-message").last).to_have_text(f"key of {len(KEY)} characters", timeout=LONG)
    assert KEY not in ui.panel.inner_html()
    assert ui.lab.api("agents/login-key/settings")["settings"]["SCRIPTED_API_KEY"] == "set"
    assert "SCRIPTED_API_KEY" not in ui.lab.api("agents/login-agent/settings")["settings"] or (
        ui.lab.api("agents/login-agent/settings")["settings"]["SCRIPTED_API_KEY"] == "unset"
    )


def test_login_card_terminal(ui):
    nb = ui.lab.notebook("login-terminal.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.panel.get_by_label("Agent for this notebook").select_option("login-terminal")
    card = ui.panel.locator(".jp-ACP-setup .jp-ACP-loginCard")
    expect(card).to_be_visible(timeout=LONG)
    ui.send("go")
    expect(ui.panel.locator(".jp-ACP-turnEnd.jp-mod-error").last).to_be_visible(timeout=LONG)
    row = card.locator(".jp-ACP-loginMethod[data-kind='terminal']")
    expect(row.locator(".jp-ACP-loginCommand")).to_contain_text("--do-login")
    row.get_by_role("button", name="Open a terminal").click()
    expect(ui.page.locator(".jp-Terminal").first).to_be_visible(timeout=LONG)
    logged = Path(str(ui.lab.root.parent / "terminal.logged-in"))
    deadline = time.monotonic() + 30
    while not logged.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert logged.exists(), "the terminal did not run the agent's login command"
    shot(ui, "login-terminal")
    ui.show_panel()
    row.get_by_role("button", name="Retry").click()
    expect(ui.panel.locator(".jp-ACP-message").last).to_have_text("0 1 2 3 4", timeout=LONG)


def test_enable_an_agent_found_on_path(ui):
    nb = ui.lab.notebook("enable.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.widen_panel(200)
    picker = ui.panel.get_by_label("Agent for this notebook")
    expect(picker.locator("option[value='enable:codex']")).to_be_attached(timeout=LONG)
    picker.select_option("enable:codex")
    dialog = ui.page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Enable Codex", timeout=LONG)
    shot(ui, "enable-dialog")
    dialog.get_by_role("button", name="Enable").click()
    note = ui.panel.locator(".jp-ACP-enabledNote")
    written = ui.lab.data_dir / "jupyter_acp" / "user_agents.json"  # the user's own agents, next to the store
    expect(note).to_contain_text("kept on the server", timeout=LONG)
    expect(picker.locator("option[value='codex']")).to_be_attached()
    expect(picker).to_have_value("echo")  # enabling does not switch this notebook's agent
    shot(ui, "enabled")
    assert oct(written.stat().st_mode & 0o777) == "0o600"
    assert json.loads(written.read_text())["agents"]["codex"]["command"] == "codex-acp"
    assert not (ui.lab.config_dir / "jupyter_server_config.d" / "jupyter_acp_agents.json").exists()
