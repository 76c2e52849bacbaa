"""Keyboard and accessibility of the panel, in a real JupyterLab with the scripted
``badges`` agent; screenshots in ``test-artifacts/screens/b3-*.png``.

* Palette commands with default shortcuts: open the panel and focus its input (Accel+Shift+A, from the
  notebook, with the sidebar collapsed), allow / reject the pending request (Alt+Shift+A / Alt+Shift+R,
  shown on the card's buttons), stop (Alt+Shift+S), new conversation (Alt+Shift+N).
* Focus rings drawn outside the button, in a colour that is not the button's own.
* axe-core (the labextension's devDependency) over the panel with a conversation, the usage meter, a
  tool card and a permission card, light and dark: no serious or critical violation inside the panel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from axe import axe_violations
from gate_agent import lab_with

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCREENS = REPO / "test-artifacts" / "screens"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from jupyter_acp.testing.fake_model import FakeModel

    badges = {"command": sys.executable, "args": [str(HERE / "badges_agent.py")], "title": "Scripted: badges"}
    with FakeModel([]) as fm, lab_with(tmp_path_factory.mktemp("keyboard-lab"), fm, {"badges": badges}) as lab:
        yield lab


def shot(ui, label: str, panel_only: bool = False) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    (ui.panel if panel_only else ui.page).screenshot(path=str(SCREENS / f"b3-{label}.png"))


def ask(ui) -> None:
    ui.send("ask")
    expect(ui.panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")).to_be_visible(timeout=LONG)


def last_answer(ui, text: str) -> None:
    expect(ui.panel.locator(".jp-ACP-message").last).to_contain_text(text, timeout=LONG)
    expect(ui.panel.locator(".jp-ACP-send")).to_be_visible(timeout=LONG)


def test_keyboard_commands_and_accessibility(ui):
    nb = ui.lab.notebook("keys.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("badges")
    page, panel = ui.page, ui.panel
    box = panel.get_by_label("Message to the agent")

    # from the notebook, the sidebar collapsed: Accel+Shift+A opens the panel with the cursor in its input
    page.evaluate("window.jupyterapp.shell.collapseRight()")
    expect(panel).to_be_hidden()
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.click()
    page.keyboard.press("Control+Shift+A")
    expect(panel).to_be_visible()
    expect(box).to_be_focused()

    # the usage meter, a tool card and a permission card; the card's buttons show their shortcuts
    ui.send("usage")
    last_answer(ui, "Counted.")
    expect(panel.locator(".jp-ACP-usage [role=meter]")).to_have_attribute("aria-valuenow", "27")
    ask(ui)
    card = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")
    allow = card.locator("button[data-option-kind=allow_once]")
    reject = card.locator("button[data-option-kind=reject_once]")
    expect(allow).to_have_attribute("data-shortcut", "Alt+Shift+A")
    expect(reject).to_have_attribute("data-shortcut", "Alt+Shift+R")
    assert allow.evaluate("b => getComputedStyle(b, '::after').content") == '"Alt+Shift+A"'
    expect(allow).to_have_attribute("aria-keyshortcuts", "Alt+Shift+A")
    expect(panel.locator(".jp-ACP-tool", has_text="Read cell c1")).to_have_count(1)
    # at the default 250 px the hints fit: short labels, each button at most two lines, nothing past the edge
    shape = card.evaluate(
        """c => { const row = c.querySelector('.jp-ACP-permissionOptions');
                  const bs = [...row.querySelectorAll('button')];
                  const line = parseFloat(getComputedStyle(bs[0]).lineHeight) || 18;
                  return {over: row.scrollWidth - row.clientWidth, line, width: row.clientWidth,
                          heights: bs.map(b => b.getBoundingClientRect().height),
                          labels: bs.map(b => b.textContent)}; }"""
    )
    assert shape["over"] <= 1, shape
    assert all(h < 2 * shape["line"] + 10 for h in shape["heights"]), shape
    assert shape["labels"] == ["Allow once", "Reject"], shape

    # the focus ring is outside the button, and not the button's own colour
    box.focus()
    for _ in range(12):
        if page.evaluate("() => document.activeElement?.dataset?.optionKind === 'allow_once'"):
            break
        page.keyboard.press("Shift+Tab")
    ring = allow.evaluate(
        """b => { const s = getComputedStyle(b); return {visible: b.matches(':focus-visible'),
            style: s.outlineStyle, width: parseFloat(s.outlineWidth), offset: parseFloat(s.outlineOffset),
            color: s.outlineColor, background: s.backgroundColor}; }"""
    )
    assert ring["visible"], ring
    assert ring["style"] == "solid" and ring["width"] >= 2 and ring["offset"] >= 2, ring
    assert ring["color"] != ring["background"], ring
    shot(ui, "focus-ring-allow", panel_only=True)

    # the axe scan: a conversation, a tool card and a permission card, light theme
    violations = axe_violations(page)
    assert not violations, "axe (light):\n" + json.dumps(violations, indent=1)
    shot(ui, "permission-card-light", panel_only=True)

    # Alt+Shift+R from the input rejects; Alt+Shift+A allows the next one
    box.focus()
    page.keyboard.press("Alt+Shift+R")
    last_answer(ui, "permission: reject")
    ask(ui)
    box.focus()
    page.keyboard.press("Alt+Shift+A")
    last_answer(ui, "permission: allow")
    expect(box).to_have_value("")  # the shortcut typed nothing into the input

    # with nothing pending the command says so
    page.keyboard.press("Alt+Shift+A")
    expect(panel.locator(".jp-ACP-status")).to_contain_text("No permission request is waiting")

    # Alt+Shift+S stops a running turn; Alt+Shift+N starts a new conversation
    ui.send("work")
    expect(panel.locator(".jp-ACP-stop")).to_be_visible(timeout=LONG)
    box.focus()
    page.keyboard.press("Alt+Shift+S")
    expect(panel.locator(".jp-ACP-send")).to_be_visible(timeout=LONG)
    page.keyboard.press("Alt+Shift+N")
    expect(panel.locator(".jp-ACP-notice").last).to_contain_text("new conversation", timeout=LONG)

    # the palette lists the commands with their shortcuts
    page.keyboard.press("Control+Shift+C")
    palette = page.locator("#command-palette")
    palette.locator("input").fill("Agent Request")
    item = palette.locator(".lm-CommandPalette-item", has_text="Allow the Pending Agent Request Once")
    expect(item).to_be_visible()
    expect(item).to_contain_text("Alt+Shift+A")
    expect(palette.locator(".lm-CommandPalette-item", has_text="Reject the Pending Agent Request")).to_be_visible()
    palette.locator("input").fill("Agent")
    expect(
        palette.locator(".lm-CommandPalette-item", has_text="Open the Agent Panel and Focus Its Input")
    ).to_be_visible()
    expect(palette.locator(".lm-CommandPalette-item", has_text="New Agent Conversation")).to_be_visible()
    expect(palette.locator(".lm-CommandPalette-item", has_text="Stop the Agent")).to_be_visible()
    shot(ui, "palette")
    page.keyboard.press("Escape")

    # dark theme: the same scan over a permission card
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=LONG)
    ui.show_panel()
    ask(ui)
    page.wait_for_timeout(500)  # the theme's variables settle
    violations = axe_violations(page)
    shot(ui, "permission-card-dark", panel_only=True)
    assert not violations, "axe (dark):\n" + json.dumps(violations, indent=1)
    panel.locator(".jp-ACP-permission:not(.jp-mod-resolved) button[data-option-kind=reject_once]").click()
    last_answer(ui, "permission: reject")
