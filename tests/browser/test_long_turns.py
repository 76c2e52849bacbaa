"""Long turns in the panel (the user leaves the agent working), in a real JupyterLab with a scripted agent and the
built-in agent on a
fake model; screenshots in ``test-artifacts/screens/c2-*.png``.

* a sticky plan strip above the input ("2 of 3 · current step", expands to the whole plan);
* a footer on the running turn (elapsed time ticking, Stop) and on the ended turn (its duration);
* Enter while the agent works queues the prompt (a queued bubble with "Send now (stop current)" and "Remove"),
  kept over a reload, sent when the turn ends; "Send now" stops the turn and sends it;
* cells the agent edited are marked in the notebook; Undo reverts that cell alone; typing in a cell clears its mark.
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

RULES = [
    {"tool": "insert_cell", "match": "add a cell", "arguments": {"source": "y = 1"}},
    {
        "tool": "edit_cell",
        "match": "make it two",
        "arguments": {"cell_id": "c1", "old_string": "x = 1", "new_string": "x = 2"},
    },
    {"role": "tool", "text": "Done."},
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A lab with the scripted `long` agent and the built-in agent on this module's fake model."""
    from jupyter_acp.testing.fake_model import FakeModel

    long = {"command": sys.executable, "args": [str(HERE / "long_turns_agent.py")], "title": "Scripted: long turns"}
    with FakeModel(RULES) as fm, lab_with(tmp_path_factory.mktemp("long-lab"), fm, {"long": long}) as lab:
        yield lab


def shot(ui, label: str) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    ui.page.screenshot(path=str(SCREENS / f"c2-{label}.png"))


def idle(panel) -> None:
    expect(panel.locator(".jp-ACP-send")).to_be_visible(timeout=LONG)


def test_plan_strip_footer_queue_and_send_now(ui):
    nb = ui.lab.notebook("long.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("long")
    ui.widen_panel()
    panel = ui.panel

    ui.send("plan 60")
    strip = panel.locator(".jp-ACP-planStrip")
    expect(strip).to_be_visible(timeout=LONG)
    expect(strip).to_contain_text("2 of 3")
    expect(strip).to_contain_text("Fit the model")
    toggle = strip.locator(".jp-ACP-planStripToggle")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(strip.locator(".jp-ACP-planEntry")).to_have_count(3)
    expect(toggle).to_have_attribute("aria-expanded", "true")

    # the running turn's footer: a ticking clock and Stop
    footer = panel.locator(".jp-ACP-runningFooter")
    expect(footer).to_be_visible()
    clock = footer.locator(".jp-ACP-turnElapsed")
    expect(clock).to_have_text(re.compile(r"^Working · \d+ s$"))
    before = clock.inner_text()
    expect(clock).not_to_have_text(before, timeout=5000)
    expect(footer.locator(".jp-ACP-footerStop")).to_be_visible()

    # Enter while the agent works: queued, not refused
    ui.send("first queued")
    ui.send("second queued")
    queued = panel.locator(".jp-ACP-queued")
    expect(queued).to_have_count(2)
    expect(queued.first).to_contain_text("first queued")
    expect(queued.first.locator(".jp-ACP-queuedSendNow")).to_have_text("Send now (stop current)")
    expect(panel.locator(".jp-ACP-status")).not_to_contain_text("still working")
    queued.nth(1).locator(".jp-ACP-queuedRemove").click()
    expect(queued).to_have_count(1)
    expect(panel.get_by_label("Message to the agent")).to_have_value("")
    shot(ui, "plan-strip-footer-queued")
    assert_accessible(ui.page, "plan strip open, running footer, queued prompt, light")
    set_theme(ui.page, dark=True)
    ui.show_panel()
    assert_accessible(ui.page, "plan strip open, running footer, queued prompt, dark")
    set_theme(ui.page, dark=False)

    # a reload loses nothing: the queued prompt is still there, the turn still runs
    ui.page.reload()
    ui.page.wait_for_selector("#jupyter-acp-sidebar", state="attached", timeout=60_000)
    ui.show_panel()
    ui.wait_ready("long")
    expect(panel.locator(".jp-ACP-queued")).to_have_count(1, timeout=LONG)
    expect(panel.locator(".jp-ACP-runningFooter")).to_be_visible(timeout=LONG)
    expect(panel.locator(".jp-ACP-planStrip")).to_contain_text("2 of 3")

    # "Send now (stop current)": the running turn stops, then the queued prompt is sent
    panel.locator(".jp-ACP-queuedSendNow").click()
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("You said: first queued", timeout=LONG)
    expect(panel.locator(".jp-ACP-queued")).to_have_count(0)
    idle(panel)
    stopped = panel.locator(".jp-ACP-turnEnd").first
    expect(stopped).to_contain_text("Stopped")
    expect(stopped).to_contain_text(re.compile(r"Took \d+ s"))
    expect(panel.locator(".jp-ACP-runningFooter")).to_be_hidden()
    shot(ui, "sent-now-ended-footer")
    assert_accessible(ui.page, "stopped turn's footer, light")


def test_queued_prompt_goes_when_the_turn_ends(ui):
    nb = ui.lab.notebook("queue.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("long")
    panel = ui.panel
    ui.send("plan 3")
    expect(panel.locator(".jp-ACP-planStrip")).to_contain_text("2 of 3", timeout=LONG)
    ui.send("after the plan")
    expect(panel.locator(".jp-ACP-queued")).to_have_count(1)
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("You said: after the plan", timeout=LONG)
    expect(panel.locator(".jp-ACP-queued")).to_have_count(0)
    # the plan is done: the strip goes; the first turn's end says how long it took
    expect(panel.locator(".jp-ACP-planStrip")).to_be_hidden()
    expect(panel.locator(".jp-ACP-turnEnd").first).to_contain_text(re.compile(r"Took [34] s"))
    idle(panel)


#: the agent-edit mark of the first marked cell (scanned on its own: the rest of the cell is JupyterLab's)
MARK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.jp-ACP-agentEdited .jp-ACP-cellMark"


def test_agent_edited_cells_are_marked_with_undo_per_cell(ui):
    nb = ui.lab.notebook("marks.ipynb", ["x = 1", "z = 3"], ids=["c1", "c2"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("builtin")
    ui.widen_panel()
    panel = ui.panel
    page = ui.page
    cells = page.locator(".jp-NotebookPanel:visible .jp-Cell")
    marked = re.compile(r"\bjp-ACP-agentEdited\b")

    ui.send("make it two")
    panel.locator(".jp-ACP-permissionOption[data-option-kind='allow_once']").first.click(timeout=LONG)
    expect(cells.first).to_contain_text("x = 2", timeout=LONG)
    expect(cells.first).to_have_class(marked, timeout=LONG)
    expect(cells.nth(1)).not_to_have_class(marked)
    idle(panel)
    ui.send("add a cell")
    # an insertion asks too: allowed, it lands marked
    panel.locator(".jp-ACP-permission:not(.jp-mod-resolved) [data-option-kind='allow_once']").click(timeout=LONG)
    expect(cells).to_have_count(3, timeout=LONG)
    expect(cells.nth(2)).to_have_class(marked, timeout=LONG)
    idle(panel)
    expect(cells.first.locator(".jp-ACP-cellMark")).to_contain_text("Agent edit")
    shot(ui, "cell-marks")
    assert_accessible(page, "panel after agent edits, light")
    assert_accessible(page, "a cell's agent-edit mark, light", root=MARK, min_contrast=1)
    theme = "t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})"
    page.evaluate(theme, "JupyterLab Dark")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=LONG)
    page.wait_for_timeout(500)
    shot(ui, "cell-marks-dark")
    assert_accessible(page, "panel after agent edits, dark")
    assert_accessible(page, "a cell's agent-edit mark, dark", root=MARK, min_contrast=1)
    page.evaluate(theme, "JupyterLab Light")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=LONG)

    # Undo on one cell: only its agent edit goes; the inserted cell stays marked
    cells.first.locator(".jp-ACP-cellUndo").click()
    expect(cells.first).to_contain_text("x = 1", timeout=LONG)
    expect(cells.first).not_to_have_class(marked)
    expect(cells).to_have_count(3)
    expect(cells.nth(2)).to_have_class(marked)
    notice = panel.locator(".jp-ACP-notice").last
    expect(notice).to_contain_text("Reverted the agent's edits of one cell (1 change)", timeout=LONG)

    # the user types in the inserted cell: it is theirs now, the mark goes (and stays gone)
    cells.nth(2).locator(".cm-content").click()
    page.keyboard.press("End")
    page.keyboard.type("  # mine")
    expect(cells.nth(2)).not_to_have_class(marked)
    expect(cells.nth(2)).to_contain_text("y = 1  # mine")
    shot(ui, "cell-undo-and-typed")
    page.wait_for_timeout(1500)
    expect(cells.nth(2)).not_to_have_class(marked)
