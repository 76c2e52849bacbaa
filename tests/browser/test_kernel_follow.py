"""The tools follow the kernel in the user's order of events: the agent session is up before the kernel, and still
runs cells.

The notebook's built-in agent session is warmed up while the notebook has no kernel (its tool list then says "no
kernel"); the notebook is opened in JupyterLab, which starts the kernel, and the user asks at once to run a cell.
"""

from __future__ import annotations

import time

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 90_000


def test_agent_runs_a_cell_although_its_session_started_before_the_kernel(ui):
    nb = ui.lab.notebook("follow.ipynb", ["print('41 + 1 =', 41 + 1)"], ids=["cell-run"])
    # the session warms up first, with no kernel anywhere (as when the panel opens before JupyterLab starts one)
    session = ui.lab.api("sessions", {"notebook": nb, "agent": "builtin"})
    deadline = time.monotonic() + 60
    while ui.lab.api(f"sessions/{session['id']}")["state"] != "ready":
        assert time.monotonic() < deadline, "the built-in agent did not start"
        time.sleep(0.2)
    ui.open_lab(nb)
    ui.pick_agent("builtin")
    ui.widen_panel()
    panel, page = ui.panel, ui.page
    ui.send("run the first cell and tell me what it printed")
    ask = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)").last
    expect(ask).to_be_visible(timeout=LONG)
    ui.shot("run-asking")
    ask.locator("button[data-option-kind='allow_once']").click()
    # the cell ran in the notebook's kernel: its output is in the notebook, and the model saw it
    output = page.locator(".jp-NotebookPanel:visible .jp-Cell").first.locator(".jp-OutputArea-output")
    expect(output).to_contain_text("41 + 1 = 42", timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("It printed", timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("42", timeout=LONG)
    ui.shot("ran")
