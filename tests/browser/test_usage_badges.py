"""The panel's context meter (usage) and work in other notebooks, in a real
JupyterLab with the scripted ``badges`` agent; screenshots in ``test-artifacts/screens/b3-*.png``.

* The agent's ``usage_update`` shows in the header as "used / size" with the cost, a tooltip with the
  numbers, and comes back from the history after a reload.
* A permission pending in a notebook the panel does not show puts a count on the Agent icon and on that
  notebook's tab, and a JupyterLab notification whose Allow answers it (the agent goes on) and whose
  Open shows the right conversation. A running turn elsewhere shows a dot.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from axe import assert_accessible, set_theme
from gate_agent import lab_with

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
HERE = Path(__file__).resolve().parent
SCREENS = HERE.parents[1] / "test-artifacts" / "screens"

PENDING = re.compile("jp-mod-acpPending")
RUNNING = re.compile("jp-mod-acpRunning")
ICON_TAB = ".jp-SideBar .lm-TabBar-tab[data-id='jupyter-acp-sidebar']"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from jupyter_acp.testing.fake_model import FakeModel

    badges = {"command": sys.executable, "args": [str(HERE / "badges_agent.py")], "title": "Scripted: badges"}
    with FakeModel([]) as fm, lab_with(tmp_path_factory.mktemp("badges-lab"), fm, {"badges": badges}) as lab:
        yield lab


def shot(ui, label: str, panel_only: bool = False) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    (ui.panel if panel_only else ui.page).screenshot(path=str(SCREENS / f"b3-{label}.png"))


def notebook_tab(ui, name: str):
    return ui.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=name)


def test_usage_meter(ui):
    nb = ui.lab.notebook("usage.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("badges")
    ui.widen_panel()
    meter = ui.panel.locator(".jp-ACP-usage")
    expect(meter).to_be_hidden()  # no report yet: no meter
    ui.send("usage")
    expect(ui.panel.locator(".jp-ACP-message").last).to_contain_text("Counted.", timeout=LONG)
    expect(meter).to_be_visible()
    expect(meter.locator(".jp-ACP-usageLabel")).to_have_text("53k / 200k")
    expect(meter.locator(".jp-ACP-usageCost")).to_have_text("$0.045")
    tooltip = meter.get_attribute("title") or ""
    assert "53,000 of 200,000 tokens used (27%)" in tooltip
    assert "0.045 USD" in tooltip
    bar = meter.locator("[role=meter]")
    expect(bar).to_have_attribute("aria-valuenow", "27")
    shot(ui, "usage-meter", panel_only=True)
    assert_accessible(ui.page, "usage meter, light")
    set_theme(ui.page, dark=True)
    ui.show_panel()
    assert_accessible(ui.page, "usage meter, dark")
    set_theme(ui.page, dark=False)

    # the history replays the usage: a reload shows the same meter
    ui.open_lab(nb)
    ui.wait_ready("badges")
    expect(ui.panel.locator(".jp-ACP-usageLabel")).to_have_text("53k / 200k", timeout=LONG)


def test_work_in_other_notebooks(ui):
    a = ui.lab.notebook("alpha.ipynb", ["x = 1"], ids=["c1"])
    b = ui.lab.notebook("beta.ipynb", ["y = 1"], ids=["c1"])
    ui.open_lab(a)
    ui.wait_ready("gate")
    ui.pick_agent("badges")
    ui.send("ask")
    panel = ui.panel
    expect(panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")).to_be_visible(timeout=LONG)
    toasts = ui.page.locator(".Toastify__toast", has_text="asks to run")
    # shown in the panel: a badge on the tab, but no toast on top of the card
    expect(notebook_tab(ui, "alpha.ipynb")).to_have_attribute("data-acp-badge", "1", timeout=15_000)
    expect(toasts).to_have_count(0)

    # another notebook in front: the request is no longer shown
    ui.open_notebook(b)
    ui.wait_ready("gate")
    expect(panel.locator(".jp-ACP-permission")).to_have_count(0)
    expect(notebook_tab(ui, "alpha.ipynb")).to_have_attribute("data-acp-badge", "1")
    expect(notebook_tab(ui, "alpha.ipynb")).to_have_class(PENDING)
    expect(notebook_tab(ui, "beta.ipynb")).not_to_have_class(PENDING)
    icon = ui.page.locator(ICON_TAB)
    expect(icon).to_have_attribute("data-acp-badge", "1")
    expect(icon).to_have_attribute("title", re.compile("1 permission request waiting"))
    toast = toasts.first
    expect(toast).to_be_visible(timeout=15_000)
    expect(toast).to_contain_text("alpha.ipynb")
    expect(toast).to_contain_text("Edit cell c1")
    shot(ui, "background-badge-notification")
    assert_accessible(
        ui.page, "another notebook's request in a notification, light", root=".Toastify__toast", min_contrast=2
    )
    assert_accessible(ui.page, "the panel while another notebook waits, light", min_contrast=5)  # a new conversation

    # Allow in the notification answers it: the agent goes on, the badges go
    toast.get_by_role("button", name="Allow once").click()
    expect(notebook_tab(ui, "alpha.ipynb")).not_to_have_attribute("data-acp-badge", "1", timeout=15_000)
    expect(icon).not_to_have_class(PENDING)
    sessions = ui.lab.api("sessions?notebook=alpha.ipynb")
    alpha = next(s for s in sessions if s["agent"] == "badges")
    events = ui.lab.api(f"sessions/{alpha['id']}/events?after=0")
    texts = "".join(
        e["update"]["content"].get("text", "")
        for e in events
        if e["type"] == "session_update" and e["update"].get("sessionUpdate") == "agent_message_chunk"
    )
    assert "permission: allow" in texts

    # a second request; Open shows its conversation with the card
    ui.open_notebook(a)
    ui.wait_ready("badges")
    ui.send("ask")
    expect(panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")).to_be_visible(timeout=LONG)
    ui.open_notebook(b)
    ui.wait_ready("gate")
    toast = toasts.first
    expect(toast).to_be_visible(timeout=15_000)
    toast.get_by_role("button", name="Open").click()
    ui.wait_ready("badges")
    card = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)
    expect(ui.page.locator(".jp-NotebookPanel:visible")).to_have_count(1)
    assert ui.page.evaluate("window.jupyterapp.shell.currentWidget.context.path") == a
    card.get_by_role("button", name="Reject").click()
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("permission: reject", timeout=LONG)

    # a turn running in another notebook: a dot (no count) on its tab and on the icon
    ui.send("work")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("Working on it", timeout=LONG)
    ui.open_notebook(b)
    expect(notebook_tab(ui, "alpha.ipynb")).to_have_class(RUNNING, timeout=15_000)
    expect(notebook_tab(ui, "alpha.ipynb")).to_have_attribute("data-acp-badge", "")
    expect(icon).to_have_class(RUNNING)
    ui.page.evaluate("window.jupyterapp.shell.collapseRight()")  # the panel collapsed: the icon still says so
    shot(ui, "background-running-dot")
    ui.lab.api(f"sessions/{alpha['id']}/cancel", {})
    expect(notebook_tab(ui, "alpha.ipynb")).not_to_have_class(RUNNING, timeout=15_000)
