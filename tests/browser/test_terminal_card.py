"""Client terminals in the sidebar: the agent's command is asked for (the command and its folder on the card),
runs in a real Jupyter terminal, streams into the tool card that embeds it, and "Open terminal" opens that very
terminal in JupyterLab while it runs. After it ends the card keeps the output and its exit.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path

import pytest
from axe import assert_accessible, set_theme
from gate_agent import lab_with

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
HERE = Path(__file__).resolve().parent
SCREENS = HERE.parents[1] / "test-artifacts" / "screens"


@pytest.fixture(scope="module")
def lab(tmp_path_factory, fake_model):
    term = {"command": sys.executable, "args": [str(HERE / "terminal_agent.py")], "title": "Scripted: terminal"}
    with lab_with(tmp_path_factory.mktemp("terminal-lab"), fake_model, {"term": term}) as lab:
        yield lab


def running_terminals(lab) -> list[str]:
    from conftest import TOKEN

    req = urllib.request.Request(f"{lab.url}api/terminals", headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return [t["name"] for t in json.loads(resp.read())]


def test_terminal_card_streams_and_opens_the_terminal(ui):
    nb = ui.lab.notebook("tests.ipynb", ["import pandas as pd"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("term")
    ui.widen_panel(220)
    panel = ui.panel
    ui.send("run the tests")

    # the client's gate asks first: the command and where it runs, before anything runs
    card = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)
    asking = panel.locator(".jp-ACP-tool:has(.jp-ACP-permission:not(.jp-mod-resolved))")
    expect(asking).to_contain_text("Run for i in 1 2 3")
    expect(asking).to_contain_text("in " + str(ui.lab.root))
    assert running_terminals(ui.lab) == [], "the command started before the user allowed it"
    SCREENS.mkdir(parents=True, exist_ok=True)
    asking.screenshot(path=str(SCREENS / "b2-terminal-permission.png"))
    assert_accessible(ui.page, "terminal command asking permission, light")
    card.locator('button[data-option-kind="allow_once"]').click()

    # the agent's tool card embeds the terminal: its output arrives while it runs
    box = panel.locator('.jp-ACP-tool[data-tool-call-id="call_tests"] .jp-ACP-terminal')
    expect(box).to_be_visible(timeout=LONG)
    expect(box.locator(".jp-ACP-terminalStatus")).to_have_text("running", timeout=LONG)
    output = box.locator(".jp-ACP-terminalOutput")
    expect(output).to_contain_text("test_month_2 PASSED", timeout=LONG)
    assert "10 passed" not in output.inner_text(), "the output came only at the end, not live"
    style = output.evaluate("e => { const s = getComputedStyle(e); return [s.fontFamily, s.maxHeight, s.overflowY]; }")
    assert "mono" in style[0].lower() and style[1].endswith("px") and style[2] == "auto", style
    panel.locator('.jp-ACP-tool[data-tool-call-id="call_tests"]').screenshot(path=str(SCREENS / "b2-terminal-live.png"))
    assert_accessible(ui.page, "terminal card running, light")

    # "Open terminal" opens that very terminal in JupyterLab (by its name), while the command runs
    names = running_terminals(ui.lab)
    assert len(names) == 1
    open_button = box.get_by_role("button", name=re.compile("Open Jupyter terminal"))
    expect(open_button).to_be_enabled()
    open_button.click()
    tab = ui.page.locator(".lm-TabBar-tab", has_text=f"Terminal {names[0]}")
    expect(tab).to_be_visible(timeout=LONG)
    expect(ui.page.locator(".jp-Terminal:visible")).to_be_visible(timeout=LONG)
    assert running_terminals(ui.lab) == names, "opening it started another terminal"
    ui.shot("terminal-open")

    # the end: exit 0, the output kept, the terminal gone and the button off
    expect(box.locator(".jp-ACP-terminalStatus")).to_have_text("exit 0", timeout=LONG)
    expect(output).to_contain_text("10 passed in 6.02s")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("exit code 0", timeout=LONG)
    expect(box.get_by_role("button", name=re.compile("terminal is gone"))).to_be_disabled()
    assert running_terminals(ui.lab) == []
    ui.show_panel()
    panel.locator('.jp-ACP-tool[data-tool-call-id="call_tests"]').screenshot(path=str(SCREENS / "b2-terminal-done.png"))
    assert_accessible(ui.page, "terminal card ended, light")
    set_theme(ui.page, dark=True)
    ui.show_panel()
    assert_accessible(ui.page, "terminal card ended, dark")
    set_theme(ui.page, dark=False)
