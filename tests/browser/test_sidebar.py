"""The sidebar chat in a real JupyterLab: streaming, permissions, stop, history, following notebooks."""

from __future__ import annotations

import re

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000


def test_send_prompt_streams_the_answer(ui):
    nb = ui.lab.notebook("stream.ipynb", ["x = 41", "y = x + 1"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.send("hello from the sidebar with **markdown**")
    panel = ui.panel
    expect(panel.locator(".jp-ACP-user").last).to_contain_text("hello from the sidebar")
    # the active cell went with the prompt, as an attachment chip
    expect(panel.locator(".jp-ACP-user .jp-ACP-attachment").last).to_contain_text("cell")
    answer = panel.locator(".jp-ACP-message").last
    expect(answer).to_contain_text("hello from the sidebar with", timeout=LONG)
    # rendered through rendermime: the markdown became <strong>
    expect(answer.locator("strong")).to_have_text("markdown", timeout=LONG)
    # thoughts are collapsed
    thought = panel.locator(".jp-ACP-thought details").last
    expect(thought).to_be_attached()
    assert thought.get_attribute("open") is None
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    ui.shot("answer")


def test_permission_allow_then_reject(ui):
    nb = ui.lab.notebook("perm.ipynb", ["print('hi')"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("perm")
    panel = ui.panel

    ui.send("write the answer file")
    card = panel.locator(".jp-ACP-tool").last
    expect(card.locator(".jp-ACP-toolTitle")).to_have_text("Write answer.txt", timeout=LONG)
    allow = card.get_by_role("button", name="Allow")
    expect(allow).to_be_visible()
    expect(card.get_by_role("button", name="Reject")).to_be_visible()
    expect(panel.locator(".jp-ACP-status")).to_contain_text("Waiting for your answer")
    ui.shot("asking")
    allow.focus()
    ui.page.keyboard.press("Enter")  # keyboard accessible
    expect(panel.locator(".jp-ACP-message").last).to_have_text("permission: allow", timeout=LONG)
    expect(card.locator(".jp-ACP-permission.jp-mod-allowed")).to_contain_text("Allowed: Allow")

    ui.send("and again")
    card = panel.locator(".jp-ACP-tool").first
    card2 = panel.locator(".jp-ACP-tool").last
    expect(card2.locator(".jp-ACP-permission:not(.jp-mod-resolved)")).to_be_visible(timeout=LONG)
    # the agent reuses its tool call id in the new turn: a new card, the first one keeps its answer
    expect(panel.locator(".jp-ACP-tool")).to_have_count(2)
    expect(card.locator(".jp-ACP-permission")).to_have_count(1)
    card2.get_by_role("button", name="Reject").click()
    expect(panel.locator(".jp-ACP-message").last).to_have_text("permission: reject", timeout=LONG)
    expect(card2.locator(".jp-ACP-permission.jp-mod-rejected")).to_contain_text("Rejected: Reject")
    ui.shot("resolved")


def test_stop_a_slow_turn(ui):
    nb = ui.lab.notebook("slow.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("slow")
    panel = ui.panel
    ui.send("count slowly")
    answer = panel.locator(".jp-ACP-message").last
    expect(answer).to_contain_text(re.compile(r"\b3\b"), timeout=LONG)
    stop = panel.get_by_role("button", name="Stop the agent", exact=True)
    expect(stop).to_be_visible()
    ui.shot("running")
    stop.click()
    expect(panel.locator(".jp-ACP-turnEnd").last).to_contain_text("Stopped", timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible()
    assert "79" not in answer.inner_text()
    ui.shot("stopped")


def test_reload_replays_the_history(ui):
    nb = ui.lab.notebook("reload.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.send("remember this sentence")
    panel = ui.panel
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("remember this sentence", timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    ui.page.reload()
    ui.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=LONG)
    ui.show_panel()
    ui.widen_panel()
    expect(panel.locator(".jp-ACP-user")).to_have_count(1, timeout=LONG)
    expect(panel.locator(".jp-ACP-user")).to_contain_text("remember this sentence")
    expect(panel.locator(".jp-ACP-message")).to_contain_text("remember this sentence")
    # Up recalls the last prompt
    box = panel.get_by_label("Message to the agent")
    box.click()
    box.press("ArrowUp")
    expect(box).to_have_value("remember this sentence")
    # a new conversation: the history stays readable above a divider
    panel.get_by_role("button", name="New conversation (the agent forgets this one)").click()
    expect(panel.locator(".jp-ACP-divider")).to_contain_text("new conversation", timeout=LONG)
    expect(panel.locator(".jp-ACP-user")).to_have_count(1)
    ui.shot("new-conversation")


def test_switching_notebooks_switches_conversations(ui):
    a = ui.lab.notebook("alpha.ipynb", ["a = 1"])
    b = ui.lab.notebook("beta.ipynb", ["b = 2"])
    ui.open_lab(a)
    ui.wait_ready("echo")
    panel = ui.panel
    expect(panel.locator(".jp-ACP-title")).to_have_text("alpha.ipynb")
    ui.send("alpha question")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("alpha question", timeout=LONG)

    panel.get_by_label("Message to the agent").fill("an unsent alpha draft")
    ui.open_notebook(b)
    expect(panel.locator(".jp-ACP-title")).to_have_text("beta.ipynb", timeout=LONG)
    expect(panel.get_by_label("Message to the agent")).to_have_value("")
    ui.wait_ready("echo")
    expect(panel.locator(".jp-ACP-user")).to_have_count(0)
    expect(panel.locator(".jp-ACP-hint")).to_contain_text("Ask about this notebook")
    ui.shot("beta-new")
    ui.send("beta question")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("beta question", timeout=LONG)

    ui.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="alpha.ipynb").click()
    expect(panel.locator(".jp-ACP-title")).to_have_text("alpha.ipynb", timeout=LONG)
    expect(panel.locator(".jp-ACP-user")).to_have_count(1)
    expect(panel.locator(".jp-ACP-log")).to_contain_text("alpha question")
    expect(panel.locator(".jp-ACP-log")).not_to_contain_text("beta question")
    expect(panel.get_by_label("Message to the agent")).to_have_value("an unsent alpha draft")
    ui.shot("alpha")

    # with no notebook open, a short explanation instead of a dead panel
    ui.page.evaluate("window.jupyterapp.commands.execute('application:close-all')")
    expect(panel.locator(".jp-ACP-empty")).to_contain_text("No notebook in focus", timeout=LONG)
    ui.shot("empty")


def test_needs_login_says_how(ui):
    nb = ui.lab.notebook("login.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.panel.get_by_label("Agent for this notebook").select_option("login")
    status = ui.panel.locator(".jp-ACP-status")
    expect(status).to_contain_text("The agent needs you to log in", timeout=LONG)
    expect(status).to_contain_text("scripted login")
    ui.send("hello?")
    err = ui.panel.locator(".jp-ACP-turnEnd.jp-mod-error").last
    expect(err).to_have_attribute("data-error-kind", "needs_login", timeout=LONG)
    expect(err).to_contain_text("log in")
    ui.shot("needs-login")


def test_crash_shows_the_log_tail(ui):
    nb = ui.lab.notebook("crash.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("crash")
    ui.send("please crash")
    panel = ui.panel
    err = panel.locator(".jp-ACP-turnEnd.jp-mod-error").last
    expect(err).to_contain_text("The agent crashed", timeout=LONG)
    expect(err).to_contain_text("boom")
    expect(panel.locator(".jp-ACP-status")).to_contain_text("next prompt restarts it")
    ui.shot("crashed")


def test_at_name_attaches_a_kernel_variable(ui):
    nb = ui.lab.notebook("vars.ipynb", ["answer_value = 41 + 1"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    page, panel = ui.page, ui.panel
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=LONG)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    expect(page.locator(".jp-NotebookPanel .jp-InputPrompt").first).to_contain_text("[1]", timeout=LONG)
    box = panel.get_by_label("Message to the agent")
    box.click()
    box.press_sequentially("what is @answer_v")
    option = panel.get_by_role("option", name="@answer_value")
    expect(option).to_be_visible(timeout=LONG)
    ui.shot("completion")
    box.press("Tab")
    expect(box).to_have_value("what is @answer_value ")
    box.press("Enter")
    expect(panel.locator(".jp-ACP-user .jp-ACP-attachment", has_text="@answer_value")).to_be_visible(timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("what is @answer_value", timeout=LONG)
    # the summary comes from the kernel's inspector: bounded, with the value
    sid = ui.lab.api("sessions?notebook=vars.ipynb")[0]["id"]
    started = [e for e in ui.lab.api(f"sessions/{sid}/events?after=0") if e["type"] == "turn_started"]
    blocks = [
        b
        for b in started[-1]["prompt"]
        if b.get("type") == "resource" and b["resource"].get("title") == "@answer_value"
    ]
    assert blocks and "42" in blocks[0]["resource"]["text"], started[-1]["prompt"]


def test_second_browser_sees_and_answers_the_same_conversation(ui, second_ui):
    nb = ui.lab.notebook("shared.ipynb")
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("perm")
    ui.send("write it from tab A")
    expect(ui.panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")).to_be_visible(timeout=LONG)

    b = second_ui
    b.open_lab(nb)
    b.pick_agent("perm")
    # the other browser replays the history, including the pending question, and answers it
    expect(b.panel.locator(".jp-ACP-user")).to_contain_text("write it from tab A", timeout=LONG)
    b.panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)").get_by_role("button", name="Allow").click()
    expect(b.panel.locator(".jp-ACP-message").last).to_have_text("permission: allow", timeout=LONG)
    # the first browser sees the answer given in the second
    expect(ui.panel.locator(".jp-ACP-permission.jp-mod-allowed")).to_contain_text("Allowed: Allow", timeout=LONG)
    expect(ui.panel.locator(".jp-ACP-message").last).to_have_text("permission: allow", timeout=LONG)
