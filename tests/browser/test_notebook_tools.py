"""The built-in agent on the fake model edits the open notebook: insertion, revert, approve and reject."""

from __future__ import annotations

import re

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 90_000


def test_agent_edits_the_notebook(ui):
    nb = ui.lab.notebook("tools.ipynb", ["x = 1"], ids=["cell-one"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("builtin")
    ui.widen_panel()
    panel, page = ui.panel, ui.page
    cells = page.locator(".jp-NotebookPanel:visible .jp-Cell")
    expect(cells).to_have_count(1)

    # an insertion is a change of the notebook: asked with the cell on the card, then it shows up at once
    ui.send("add a greeting cell")
    ask = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)").last
    expect(ask).to_contain_text("hello from the agent", timeout=LONG)
    expect(cells).to_have_count(1)
    ask.locator("button[data-option-kind='allow_once']").click()
    expect(cells).to_have_count(2, timeout=LONG)
    expect(cells.nth(1)).to_contain_text("hello from the agent")
    card = panel.locator(".jp-ACP-tool").last
    expect(card).to_have_attribute("data-status", "completed", timeout=LONG)
    answer = panel.locator(".jp-ACP-message").last
    expect(answer).to_contain_text("I added a cell", timeout=LONG)
    # code blocks in answers get copy and insert buttons
    expect(answer.get_by_role("button", name="Copy code")).to_be_attached()
    expect(answer.get_by_role("button", name="Insert as a cell below")).to_be_attached()
    end = panel.locator(".jp-ACP-turnEnd").last
    expect(end).to_contain_text("tool call", timeout=LONG)
    revert = end.get_by_role("button", name="Undo the agent's edits of this turn (your own edits stay)")
    expect(revert).to_be_visible(timeout=LONG)
    card.locator(".jp-ACP-toolHead").click()  # arguments and output on demand
    expect(card.locator(".jp-ACP-toolDetails")).to_contain_text("hello from the agent")
    ui.shot("inserted")

    # "Revert agent edits" takes the agent's cell out again
    revert.click()
    expect(cells).to_have_count(1, timeout=LONG)
    expect(panel.locator(".jp-ACP-notice").last).to_contain_text(re.compile("reverted", re.IGNORECASE), timeout=LONG)

    # "insert as a cell below" on a code block of the answer
    answer.locator(".jp-ACP-code").first.hover()
    answer.get_by_role("button", name="Insert as a cell below").click()
    expect(cells).to_have_count(2, timeout=LONG)
    expect(cells.nth(1)).to_contain_text("hello from the agent")
    page.evaluate("window.jupyterapp.commands.execute('notebook:delete-cell')")
    expect(cells).to_have_count(1, timeout=LONG)

    # an edit is gated by the client: approve it and the cell changes
    ui.send("make it 42 please")
    ask = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)").last
    expect(ask).to_be_visible(timeout=LONG)
    ui.shot("edit-asking")
    ask.locator("button[data-option-kind='allow_once']").click()
    expect(cells.first).to_contain_text("x = 42", timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("Done", timeout=LONG)

    # reject the next one: nothing changes
    ui.send("now make it 43")
    ask = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)").last
    expect(ask).to_be_visible(timeout=LONG)
    ask.locator("button[data-option-kind='reject_once']").click()
    expect(panel.locator(".jp-ACP-permission.jp-mod-rejected").last).to_be_visible(timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("rejected", timeout=LONG)
    expect(cells.first).to_contain_text("x = 42")
    expect(cells.first).not_to_contain_text("x = 43")
    ui.shot("edit-rejected")
    # the same conversation in the dark theme (JupyterLab's CSS variables only)
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=LONG)
    page.wait_for_timeout(500)
    ui.shot("dark")
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=LONG)


def test_agent_reads_the_selection_from_the_tab(ui):
    nb = ui.lab.notebook("select.ipynb", ["alpha = 1\nbeta_value = 2"], ids=["sel-cell"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.pick_agent("builtin")
    page, panel = ui.page, ui.panel
    editor = page.locator(".jp-NotebookPanel:visible .jp-Cell .cm-content").first
    editor.click()
    page.keyboard.press("Control+a")  # the whole cell's text
    ui.send("what did I select?")
    answer = panel.locator(".jp-ACP-message").last
    # the server asked this tab (frontend bridge: focus + getSelection) and the agent got the text
    expect(answer).to_contain_text("From your tab", timeout=LONG)
    expect(answer).to_contain_text("beta_value = 2")
    expect(answer).to_contain_text("sel-cell")
