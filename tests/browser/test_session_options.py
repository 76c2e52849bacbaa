"""The agent's mode and session options as pickers in the sidebar's header.

The built-in agent (on the fake model) offers its modes ask/auto and a "model" select with two
models. A switch goes through the API, sticks in the agent's session, reaches every watcher as a
`session_config` event, and survives a reload (the stream replays it); a refused one says so.
"""

from __future__ import annotations

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000


def _session(lab, notebook: str, agent: str) -> dict:
    return next(s for s in lab.api(f"sessions?notebook={notebook}") if s["agent"] == agent)


def test_switch_mode_and_model_and_they_stick(ui, second_ui, fake_model):
    nb = ui.lab.notebook("options.ipynb", ["import pandas as pd\ndf = pd.read_csv('sales.csv')", "df.plot()"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    panel = ui.panel
    # the echo agent offers no options: no pickers
    expect(panel.locator(".jp-ACP-options")).to_be_hidden()
    ui.pick_agent("models")
    mode = panel.get_by_label("Agent mode")
    model = panel.get_by_label("Model", exact=True)
    expect(mode).to_have_value("ask", timeout=LONG)
    expect(model).to_have_value("openai/fake")
    assert [o.get_attribute("value") for o in mode.locator("option").all()] == ["ask", "auto"]
    assert model.locator("option").all_inner_texts() == ["openai/fake", "openai/fake-large"]

    # a second browser on the same notebook follows the switches live (session_config events)
    b = second_ui
    b.open_lab(nb)
    b.pick_agent("models")
    expect(b.panel.get_by_label("Agent mode")).to_have_value("ask", timeout=LONG)

    mode.select_option("auto")
    model.select_option("openai/fake-large")
    expect(mode).to_have_value("auto", timeout=LONG)
    expect(model).to_have_value("openai/fake-large", timeout=LONG)
    expect(mode).to_be_enabled(timeout=LONG)
    expect(model).to_be_enabled(timeout=LONG)
    sid = _session(ui.lab, nb, "models")["id"]
    info = ui.lab.api(f"sessions/{sid}")
    assert info["modes"]["currentModeId"] == "auto"
    assert [o["currentValue"] for o in info["config_options"] if o["id"] == "model"] == ["openai/fake-large"]
    expect(b.panel.get_by_label("Agent mode")).to_have_value("auto", timeout=LONG)
    expect(b.panel.get_by_label("Model", exact=True)).to_have_value("openai/fake-large", timeout=LONG)
    # each switch is a line in the conversation, in both browsers: the agent works differently from here
    for log in (panel, b.panel):
        expect(log.locator(".jp-ACP-notice", has_text="Mode set to Auto")).to_have_count(1, timeout=LONG)
        expect(log.locator(".jp-ACP-notice", has_text="Model set to openai/fake-large")).to_have_count(1, timeout=LONG)

    # the next prompt talks to the chosen model
    ui.send("what does this notebook do?")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("monthly totals", timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    assert fake_model.requests[-1]["model"] == "fake-large"

    # a reload replays the events: the pickers come back as they were
    ui.page.reload()
    ui.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=LONG)
    ui.show_panel()
    ui.wait_ready("models")
    expect(panel.get_by_label("Agent mode")).to_have_value("auto", timeout=LONG)
    expect(panel.get_by_label("Model", exact=True)).to_have_value("openai/fake-large")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("monthly totals")
    ui.widen_panel()
    ui.shot("pickers")
    ui.shot("pickers-panel", full=False)

    # while a turn runs the mode can change, the model waits for the turn's end
    ui.send("take your time")
    expect(panel.get_by_role("button", name="Stop the agent", exact=True)).to_be_visible(timeout=LONG)
    expect(panel.get_by_label("Model", exact=True)).to_be_disabled(timeout=LONG)
    expect(panel.get_by_label("Agent mode")).to_be_enabled()
    panel.get_by_label("Agent mode").select_option("ask")
    expect(panel.get_by_label("Agent mode")).to_have_value("ask", timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    expect(panel.get_by_label("Model", exact=True)).to_be_enabled()
    assert ui.lab.api(f"sessions/{sid}")["modes"]["currentModeId"] == "ask"


def test_a_refused_switch_says_so_and_keeps_the_value(ui):
    nb = ui.lab.notebook("refused.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("models")
    panel = ui.panel
    model = panel.get_by_label("Model", exact=True)
    expect(model).to_have_value("openai/fake", timeout=LONG)
    # a value the agent does not offer (as if its list changed under us): the server refuses it
    model.evaluate(
        "s => { const o = document.createElement('option'); o.value = o.textContent = 'openai/gone'; s.appendChild(o); }"
    )
    model.select_option("openai/gone")
    alert = panel.locator(".jp-ACP-optionsError")
    expect(alert).to_be_visible(timeout=LONG)
    expect(alert).to_have_attribute("role", "alert")
    expect(alert).to_contain_text("Could not set Model to “openai/gone”")
    expect(alert).to_contain_text("It stays “openai/fake”")
    expect(model).to_have_value("openai/fake")
    sid = _session(ui.lab, nb, "models")["id"]
    assert [o["currentValue"] for o in ui.lab.api(f"sessions/{sid}")["config_options"]] == ["openai/fake"]
    ui.widen_panel()
    ui.shot("refused", full=False)
    # dismissed by hand, or by the next switch that works
    panel.get_by_role("button", name="Dismiss").click()
    expect(alert).to_be_hidden()
    model.evaluate(
        "s => { const o = document.createElement('option'); o.value = o.textContent = 'openai/gone'; s.appendChild(o); }"
    )
    model.select_option("openai/gone")
    expect(alert).to_be_visible(timeout=LONG)
    panel.get_by_label("Agent mode").select_option("auto")
    expect(alert).to_be_hidden(timeout=LONG)
    expect(panel.get_by_label("Agent mode")).to_have_value("auto", timeout=LONG)


def test_every_kind_of_option_toggles_groups_and_the_agents_own_changes(ui):
    nb = ui.lab.notebook("kinds.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("options")
    panel = ui.panel
    # a config option of category "mode" supersedes the session's modes (ACP): one mode picker
    mode = panel.get_by_label("Session mode")
    expect(mode).to_have_value("code", timeout=LONG)
    expect(panel.get_by_label("Agent mode")).to_have_count(0)
    # grouped options become optgroups
    model = panel.get_by_label("Model", exact=True)
    assert model.locator("optgroup").evaluate_all("gs => gs.map(g => g.label)") == ["Fast", "Smart"]
    # a boolean is JupyterLab's switch
    thinking = panel.get_by_role("switch", name="Extended thinking")
    expect(thinking).to_have_attribute("aria-checked", "false")
    thinking.click()
    expect(thinking).to_have_attribute("aria-checked", "true", timeout=LONG)
    model.select_option("large")
    expect(model).to_have_value("large", timeout=LONG)
    sid = _session(ui.lab, nb, "options")["id"]
    values = {o["id"]: o["currentValue"] for o in ui.lab.api(f"sessions/{sid}")["config_options"]}
    assert values == {"mode": "code", "model": "large", "thinking": True}
    ui.widen_panel()
    ui.shot("kinds", full=False)
    # the agent's refusal comes back in its own words
    model.select_option("refuse")
    expect(panel.locator(".jp-ACP-optionsError")).to_contain_text("not available on your plan", timeout=LONG)
    expect(panel.locator(".jp-ACP-optionsError")).to_contain_text("It stays “Large”")
    expect(model).to_have_value("large")
    # the agent changes its own options mid-turn (config_option_update): the pickers follow
    ui.send("switch yourself")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("I switched to planning", timeout=LONG)
    expect(mode).to_have_value("plan", timeout=LONG)
    expect(thinking).to_have_attribute("aria-checked", "false")
    ui.page.reload()
    ui.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=LONG)
    ui.show_panel()
    ui.wait_ready("options")
    expect(panel.get_by_label("Session mode")).to_have_value("plan", timeout=LONG)
    expect(panel.get_by_label("Model", exact=True)).to_have_value("large")
    expect(panel.get_by_role("switch", name="Extended thinking")).to_have_attribute("aria-checked", "false")
