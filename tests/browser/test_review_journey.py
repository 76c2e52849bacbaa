"""Review and rewind, the user's whole journey in the browser, against the real server (no mocked route).

JupyterLab opens a notebook with a real kernel; the user runs its first cell (``df``), uses the panel at once, picks
"Review after" and asks the agent (the built-in agent on a fake model) to refactor: it edits three cells, inserts
one and runs code that changes ``df``, without a card; the turn ends with its review open on the four changes; the
user discards one and keeps three, rewinds the turn (cells and ``df``, read in the kernel itself, as before) and
undoes the rewind (as after). The agent's cells carry their marks and popover; a second browser (a reload) sees
them; "Remove Agent Marks from This Notebook" strips them. The same with codex-acp (fake OpenAI Responses; skipped
when it cannot be installed, unless JUPYTER_ACP_INTEROP_REQUIRED is set). Screenshots go to ``/work/notes/screens/journey-*``
when that folder's parent exists (the project's notes), else to test-artifacts/browser.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ARTIFACTS, TOKEN, Lab, Ui, run_lab  # the browser tests' conftest (same folder)

expect = pytest.importorskip("playwright.sync_api").expect

pytestmark = pytest.mark.timeout(300)  # the server and the kernel start inside it (cold: ~30 s on two busy cores)

LONG = 60_000
PROMPT = "refactor the constants and scale df"
SETUP = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})"
CELLS = [SETUP, "x = 1", "y = 2", "z = 3"]
IDS = ["c0", "c1", "c2", "c3"]
AFTER = [SETUP, "x = 10", "y = 2", "z = 30", "total = x + y + z"]  # c2's edit discarded
DF_BEFORE = [1, 2, 3]
DF_AFTER = [100, 200, 300, 7]
NOTES = Path("/work/notes")
SCREENS = NOTES / "screens" if NOTES.is_dir() else ARTIFACTS


def _call(tool: str, arguments: dict[str, Any], role: str = "tool", match: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"tool": tool, "arguments": arguments, "times": 1, "role": role}
    if match:
        rule["match"] = match
    return rule


#: the turn, as tests/tools/test_review.py scripts it: three edits, one insert, one run that changes df
RULES = [
    _call("client_edit_cell$", {"cell_id": "c1", "old_string": "x = 1", "new_string": "x = 10"}, "user", "refactor"),
    _call("client_edit_cell$", {"cell_id": "c2", "old_string": "y = 2", "new_string": "y = 20"}),
    _call("client_replace_in_cell$", {"cell_id": "c3", "old": "z = 3", "new": "z = 30"}),
    _call("client_insert_cell$", {"source": "total = x + y + z", "after_cell_id": "c3"}),
    _call("client_execute_code$", {"code": "df['a'] = df['a'] * 100\ndf.loc[3] = [7]"}),
    {"role": "tool", "text": "Done: three cells edited, one inserted, df scaled."},
]


def _codex(fake_url: str, home: Path) -> dict[str, Any]:
    """codex-acp (installed once per machine by tests/interop/npm_agents.py) on the fake OpenAI Responses server;
    skipped with the reason when it cannot be installed, unless ``JUPYTER_ACP_INTEROP_REQUIRED`` is set."""
    from jupyter_acp.testing.fake_providers import codex_config
    from tests.interop import npm_agents

    try:
        exe = npm_agents.install(npm_agents.CODEX)
    except npm_agents.InstallError as exc:
        if os.environ.get("JUPYTER_ACP_INTEROP_REQUIRED"):
            raise
        pytest.skip(f"{npm_agents.CODEX.spec} could not be installed: {exc}")
    (home / "codex").mkdir(parents=True)
    (home / "codex" / "config.toml").write_text(codex_config(fake_url))
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "CODEX_HOME": str(home / "codex"),
        "OPENAI_API_KEY": "sk-fake",
        "RUST_LOG": "warn",
    }
    return {"command": str(exe), "env": env, "tool_channel": "mcp-http", "title": npm_agents.CODEX.spec}


@pytest.fixture(scope="module", params=["builtin", "codex"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, chromium: Any) -> Iterator[Lab]:
    """This module's own server and fake model (the session's fake model answers other prompts its own way), with
    the agent of the parameter as the default: the built-in agent (its default mode: ask) or codex-acp."""
    from jupyter_acp.testing.fake_model import FakeModel
    from jupyter_acp.testing.fake_providers import FakeResponses

    agent = request.param
    base = tmp_path_factory.mktemp(f"journey-{agent}")
    with (FakeModel if agent == "builtin" else FakeResponses)(RULES) as fm:
        if agent == "builtin":
            entry = {**fm.agent_entry(), "title": "Built-in (fake model)"}
        else:
            entry = _codex(fm.url, base / "home")
        settings = {"default_agent": agent, "agents": {agent: entry}}
        with run_lab(base, settings, keep_log=f"journey-{agent}-server.log") as lab:
            lab.fake_model = fm  # type: ignore[attr-defined]
            lab.agent = agent  # type: ignore[attr-defined]
            yield lab


class Kernel:
    """The notebook's kernel, read through its own connection file (as any second client would)."""

    def __init__(self, lab: Lab, notebook: str) -> None:
        self.lab = lab
        self.notebook = notebook

    def start(self) -> None:
        """The notebook's kernel started as a script would (``POST api/sessions``), before any page opens it."""
        body = {"path": self.notebook, "type": "notebook", "name": self.notebook, "kernel": {"name": "python3"}}
        req = urllib.request.Request(
            f"{self.lab.url}api/sessions",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60):
            pass  # Jupyter may call it "starting" until a client connects: the page does

    def kernel_id(self) -> str:
        req = urllib.request.Request(f"{self.lab.url}api/sessions", headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            sessions = json.loads(resp.read())
        return next(s["kernel"]["id"] for s in sessions if s["path"] == self.notebook)

    def value(self, expression: str) -> Any:
        from jupyter_client import BlockingKernelClient

        client = BlockingKernelClient()
        client.load_connection_file(str(self.lab.config_dir.parent / "runtime" / f"kernel-{self.kernel_id()}.json"))
        client.start_channels()
        try:
            client.wait_for_ready(timeout=30)
            reply = client.execute_interactive(
                "", user_expressions={"v": f"__import__('json').dumps({expression})"}, timeout=30, store_history=False
            )
            out = reply["content"]["user_expressions"]["v"]
            assert out["status"] == "ok", out
            return json.loads(eval(out["data"]["text/plain"]))  # a repr of the JSON string
        finally:
            client.stop_channels()


def _shot(ui: Ui, label: str, node: Any = None) -> Path:
    SCREENS.mkdir(parents=True, exist_ok=True)
    ui.shots += 1
    path = SCREENS / f"journey-{ui.lab.agent}-{ui.shots:02d}-{label}.png"  # type: ignore[attr-defined]
    (node or ui.page).screenshot(path=str(path))
    return path


def _sources(ui: Ui) -> list[str]:
    """The cells as the user's notebook (its shared model) holds them."""
    return ui.page.evaluate(
        "() => Array.from(window.jupyterapp.shell.widgets('main'))"
        ".find(w => w.context && w.context.path === 'journey.ipynb')"
        ".content.model.sharedModel.cells.map(c => c.getSource())"
    )


def _wait_sources(ui: Ui, expected: list[str]) -> None:
    deadline = time.monotonic() + 30
    while (seen := _sources(ui)) != expected:
        assert time.monotonic() < deadline, f"the notebook shows {seen}, not {expected}"
        time.sleep(0.2)


def _wait_value(kernel: Kernel, expression: str, expected: Any) -> None:
    deadline = time.monotonic() + 30
    while (seen := kernel.value(expression)) != expected:
        assert time.monotonic() < deadline, f"{expression} is {seen} in the kernel, not {expected}"
        time.sleep(0.3)


def test_a_user_lets_the_agent_work_reviews_the_turn_rewinds_it_and_undoes_the_rewind(ui: Ui, lab: Lab, chromium):
    started = time.monotonic()
    name = lab.notebook("journey.ipynb", CELLS, ids=IDS)
    kernel = Kernel(lab, name)
    page, panel = ui.page, ui.panel

    if lab.agent == "codex":  # type: ignore[attr-defined]
        # codex's MCP tool list is fixed when its session starts (listChanged false): started before the page's
        # kernel is up, as the panel starts it at once, it never gets the kernel tools and cannot run code (seen
        # here: the run rule skipped, a review of cells only). So its notebook's kernel is started first.
        kernel.start()
    # JupyterLab opens the notebook with a real kernel; the user runs the first cell: df exists in the kernel
    ui.open_lab(name)
    ui.widen_panel(220)
    ui.wait_ready(lab.agent)  # type: ignore[attr-defined]  # the panel settled (it takes the focus once, as it opens)
    # a run sent before the page's kernel connection is up is dropped: the user waits for "Idle" too
    page.wait_for_function(
        "() => { const w = Array.from(window.jupyterapp.shell.widgets('main'))"
        ".find(w => w.context && w.context.path === 'journey.ipynb');"
        " const k = w && w.sessionContext.session && w.sessionContext.session.kernel;"
        " return k && k.connectionStatus === 'connected' && k.status === 'idle'; }",
        timeout=LONG,
    )
    page.locator(".jp-NotebookPanel:visible .jp-Cell .jp-InputArea-editor").first.click()
    page.keyboard.press("Shift+Enter")
    expect(page.locator(".jp-NotebookPanel:visible .jp-InputPrompt").first).to_have_text("[1]:", timeout=LONG)
    assert kernel.value("df['a'].tolist()") == DF_BEFORE

    # the panel at once: "Review after", then the prompt
    picker = panel.get_by_label("Permission policy for changes")
    picker.select_option("review")
    expect(picker).to_have_value("review")
    _shot(ui, "review-after-picked")
    sent, sent_at = time.monotonic(), time.time()
    ui.send(PROMPT)

    # the turn ends with its review open, the four changes in it; no card was asked
    review = page.locator(".jp-ACP-review")
    expect(review).to_be_visible(timeout=LONG)
    assert panel.locator(".jp-ACP-permission").count() == 0, "Review after asks no card"
    expect(review.locator(".jp-ACP-reviewTitle")).to_have_text(f"Review: “{PROMPT}”")
    cards = review.locator(".jp-ACP-reviewCell")
    expect(cards).to_have_count(4, timeout=LONG)
    expect(review.locator(".jp-ACP-reviewSummary")).to_have_text("4 changes: 3 modified, 1 added")
    expect(review.locator(".jp-ACP-reviewCheckpoint")).to_contain_text("kernel variable")
    turn_id = review.get_attribute("data-turn")
    spans = lab.fake_model.spans  # type: ignore[attr-defined]
    print(
        f"journey: the turn took {time.monotonic() - sent:.1f}s, its first model request {spans[0][0] - sent_at:.1f}s in, the last {spans[-1][1] - sent_at:.1f}s in"
    )
    _wait_sources(ui, [SETUP, "x = 10", "y = 20", "z = 30", "total = x + y + z"])
    assert kernel.value("df['a'].tolist()") == DF_AFTER
    expect(panel.get_by_role("button", name=re.compile(r"^Review 4 changes"))).to_be_visible()
    _shot(ui, "turn-ended-review-open")
    _shot(ui, "review-tab", review)

    # discard one (c2), keep the three others
    review.locator('.jp-ACP-reviewCell[data-cell-id="c2"]').get_by_role("button", name=re.compile("^Discard:")).click()
    expect(review.locator('.jp-ACP-reviewCell[data-cell-id="c2"] .jp-ACP-reviewDecision')).to_have_text("Discarded")
    _wait_sources(ui, [SETUP, "x = 10", "y = 2", "z = 30", "total = x + y + z"])
    review.get_by_role("button", name=re.compile("^Keep all:")).click()
    expect(review.locator(".jp-ACP-reviewSummary")).to_have_text("Nothing left to review (3 kept, 1 discarded)")
    expect(panel.get_by_role("button", name=re.compile(r"^Review \d+ change"))).to_have_count(0)
    _shot(ui, "discarded-one-kept-three", review)

    # rewind the turn: the cells and df (in the kernel) as before
    review.get_by_role("button", name=re.compile("^Rewind to before this turn")).click()
    report = review.locator(".jp-ACP-reviewReport")
    expect(report).to_contain_text("Rewound to before this turn.", timeout=LONG)
    expect(report.locator(".jp-ACP-reviewRestored")).to_contain_text("df")
    _wait_sources(ui, CELLS)
    _wait_value(kernel, "df['a'].tolist()", DF_BEFORE)
    _shot(ui, "rewound")
    _shot(ui, "rewound-report", review)

    # undo the rewind: as after
    review.get_by_role("button", name=re.compile("^Undo rewind")).click()
    expect(report).to_contain_text("Rewind undone", timeout=LONG)
    _wait_sources(ui, AFTER)
    _wait_value(kernel, "df['a'].tolist()", DF_AFTER)
    _shot(ui, "rewind-undone", review)

    # the agent's cells carry a mark; its popover names the turn and offers the conversation and the change
    page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:open', {path: 'journey.ipynb'}); }")
    marks = page.locator(".jp-NotebookPanel:visible .jp-Cell .jp-ACP-provMark")
    expect(marks).to_have_count(3, timeout=LONG)  # c1, c3 and the inserted cell (c2's edit was discarded)
    marked = [
        c.get_attribute("data-cell-id") or str(i)
        for i, c in enumerate(page.locator(".jp-NotebookPanel:visible .jp-Cell").all())
        if c.locator(".jp-ACP-provMark").count()
    ]
    assert len(marked) == 3, marked
    marks.first.hover()
    pop = page.locator(".jp-ACP-provPopover")
    expect(pop).to_be_visible()
    expect(pop.locator(".jp-ACP-provText")).to_contain_text(f"turn 1: '{PROMPT}'")
    expect(pop.get_by_role("button", name=re.compile("^Open in the conversation"))).to_be_visible()
    expect(pop.get_by_role("button", name=re.compile("^Show the change"))).to_be_visible()
    box, area = pop.bounding_box(), page.locator(".jp-NotebookPanel:visible .jp-WindowedPanel-outer").bounding_box()
    assert box and area and box["x"] + box["width"] <= area["x"] + area["width"], (box, area)  # not clipped
    _shot(ui, "mark-popover")
    pop.get_by_role("button", name=re.compile("^Open in the conversation")).click()
    prompt = panel.locator(f'[data-kind="user"][data-turn="{turn_id}"]')
    expect(prompt).to_have_class(re.compile(r"\bjp-ACP-highlighted\b"), timeout=LONG)
    marks.first.hover()
    page.locator(".jp-ACP-provPopover").get_by_role("button", name=re.compile("^Show the change")).click()
    # the turn's changes are all decided: the review says so of the cell the user came from
    expect(page.locator(".jp-ACP-review")).to_contain_text(
        "The change of the cell you came from is not waiting for review in this turn (kept or discarded already).",
        timeout=LONG,
    )
    _shot(ui, "show-the-change")
    page.locator(".jp-NotebookPanel .jp-Cell").first.click()
    page.keyboard.press("Control+s")
    took = time.monotonic() - started

    # a second browser (a reload): the marks are still there; "Remove Agent Marks" strips them
    context = chromium.new_context(viewport={"width": 1400, "height": 860})
    context.set_default_timeout(30_000)
    try:
        other = Ui(context.new_page(), lab, "journey-second")
        other.shots = ui.shots
        other.open_lab(name)
        page2 = other.page
        marks2 = page2.locator(".jp-NotebookPanel:visible .jp-Cell .jp-ACP-provMark")
        expect(marks2).to_have_count(3, timeout=LONG)
        _shot(other, "second-browser-marks")
        page2.locator(".jp-NotebookPanel:visible .jp-Cell").first.click()
        page2.keyboard.press("Control+Shift+C")
        page2.locator(".lm-CommandPalette-input").fill("Remove Agent Marks")
        page2.locator(".lm-CommandPalette-item", has_text="Remove Agent Marks from This Notebook").click()
        expect(marks2).to_have_count(0, timeout=LONG)
        _shot(other, "marks-removed")
    finally:
        context.close()
    print(f"journey: {took:.1f}s to the marks, {time.monotonic() - started:.1f}s in all")
