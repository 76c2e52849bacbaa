"""One current agent per notebook, in a real JupyterLab: ``%acp use echo`` run in a cell of the open notebook
switches the Agent panel
(and a second browser's panel on the same notebook) to echo's conversation, said in one line; the panel's picker
and the magic change one server-side fact, and a ``%%acp`` cell then lands in the conversation the panel shows."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 90_000
SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screens"
TOKEN = "browser-test-token"  # the lab fixture's (conftest.py)


def shot(ui, label: str) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    ui.page.screenshot(path=str(SCREENS / f"c3-{label}.png"))


def current_agent(lab, path: str) -> str:
    req = urllib.request.Request(
        f"{lab.url}jupyter-acp/notebooks/current-agent?path={path}", headers={"Authorization": f"token {TOKEN}"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())["agent"]


def test_acp_use_in_a_cell_switches_the_panel(ui, second_ui):
    nb = ui.lab.notebook(
        "current-agent.ipynb",
        ["%load_ext jupyter_acp", "%acp use echo", "%%acp\nhello from the cell"],
    )
    ui.open_lab(nb)
    ui.widen_panel()
    ui.wait_ready("echo")  # a notebook nobody chose an agent for: the server's default
    ui.pick_agent("perm")  # the picker changes the notebook's agent on the server
    assert current_agent(ui.lab, nb) == "perm"
    second_ui.open_lab(nb)  # another browser reads the same fact
    second_ui.wait_ready("perm")

    # run the cells: %acp use echo, then a %%acp cell naming no agent
    page = ui.page
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.click()
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    outputs = page.locator(".jp-NotebookPanel:visible .jp-Cell .jp-OutputArea-output")
    expect(outputs.filter(has_text="this notebook's agent is now 'echo'")).to_be_visible(timeout=LONG)

    ui.wait_ready("echo")  # the panel switched to echo's conversation
    panel = ui.panel
    line = panel.locator(".jp-ACP-notice", has_text="The notebook's agent is now echo")
    expect(line.last).to_contain_text("changed with %acp use in the notebook; it was perm", timeout=LONG)
    # the cell's prompt went to the conversation the panel shows
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("hello from the cell", timeout=LONG)
    assert current_agent(ui.lab, nb) == "echo"
    shot(ui, "01-acp-use-switched-the-panel")

    second_ui.wait_ready("echo")  # the second browser's panel followed too
    expect(second_ui.panel.locator(".jp-ACP-notice", has_text="The notebook's agent is now echo").last).to_be_visible()
    expect(second_ui.panel.locator(".jp-ACP-message").last).to_contain_text("hello from the cell", timeout=LONG)
    shot(second_ui, "02-second-browser-followed")
