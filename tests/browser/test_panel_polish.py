"""The panel's rough edges, each in a real JupyterLab with a scripted agent, screenshots saved.

Stale states: a finished thought says "Thought"; after Esc no "still working" next to Send; a
rejected call's badge says "rejected"; notices name no internal turn ids; "Revert agent edits" goes once
it can no longer work. Code blocks, plots and tables in tool cards, errors (one line, an action, the raw text
under Details), the layout at 250 px and 1,100 px.
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

#: the built-in agent on a fake model of this module: "add a cell" inserts one (an edit to revert)
RULES = [
    {"tool": "insert_cell", "match": "add a cell", "arguments": {"source": "y = 1"}},
    {
        "tool": "edit_cell",
        "match": "make it two",
        "arguments": {"cell_id": "c1", "old_string": "x = 1", "new_string": "x = 2"},
    },
    {"role": "tool", "text": "Added a cell."},
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A lab with the scripted `polish` agent and the built-in agent on this module's fake model."""
    from jupyter_acp.testing.fake_model import FakeModel

    polish = {"command": sys.executable, "args": [str(HERE / "polish_agent.py")], "title": "Scripted: polish"}
    with FakeModel(RULES) as fm, lab_with(tmp_path_factory.mktemp("polish-lab"), fm, {"polish": polish}) as lab:
        yield lab


def idle(panel) -> None:
    """The turn is over: Send is back."""
    expect(panel.locator(".jp-ACP-send")).to_be_visible(timeout=LONG)


def test_stale_states(ui):
    nb = ui.lab.notebook("stale.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("polish")
    ui.widen_panel()
    panel = ui.panel
    status = panel.locator(".jp-ACP-status")

    # a thought followed by the answer is finished: "Thought", no spinner-like "Thinking…"
    ui.send("think")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("The answer is 42.", timeout=LONG)
    idle(panel)
    summary = panel.locator(".jp-ACP-thought summary").last
    expect(summary).to_have_text("Thought")
    expect(summary).not_to_have_class(re.compile("jp-mod-running"))

    # Enter while the agent works says so; after Esc the turn ends and that message goes with it
    ui.send("ponder")
    expect(panel.locator(".jp-ACP-thought summary").last).to_have_text("Thinking…", timeout=LONG)
    box = panel.get_by_label("Message to the agent")
    box.fill("another question")
    box.press("Enter")  # while the agent works, a prompt is queued, never refused
    expect(panel.locator(".jp-ACP-queued")).to_contain_text("another question")
    expect(status).not_to_contain_text("still working")
    ui.shot("queued")
    panel.locator(".jp-ACP-queuedRemove").click()
    box.press("Escape")
    idle(panel)
    expect(panel.locator(".jp-ACP-thought summary").last).to_have_text("Thought")
    ui.shot("after-escape")

    # a rejected call is "rejected", not "failed"
    box.fill("")
    ui.send("reject")
    card = panel.locator(".jp-ACP-tool").last
    card.locator(".jp-ACP-permissionOption[data-option-kind='reject_once']").click()
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("You rejected the edit", timeout=LONG)
    badge = card.locator(".jp-ACP-badge")
    expect(badge).to_have_text("rejected")
    expect(badge).to_have_class(re.compile("jp-mod-rejected"))
    ui.shot("rejected")

    # the built-in agent inserts a cell; "Revert agent edits" undoes it and then goes away; the notice
    # says what happened in words (no internal turn id)
    ui.pick_agent("builtin")
    ui.send("add a cell")
    cells = ui.page.locator(".jp-NotebookPanel:visible .jp-Cell")
    # the insertion is asked first
    panel.locator(".jp-ACP-permission:not(.jp-mod-resolved) [data-option-kind='allow_once']").click(timeout=LONG)
    expect(cells).to_have_count(2, timeout=LONG)
    idle(panel)
    end = panel.locator(".jp-ACP-turnEnd").last
    revert = end.locator(".jp-ACP-revert")
    expect(revert).to_be_visible(timeout=LONG)
    revert.click()
    expect(cells).to_have_count(1, timeout=LONG)
    notice = panel.locator(".jp-ACP-notice").last
    expect(notice).to_contain_text("Reverted the agent's edits", timeout=LONG)
    text = notice.inner_text()
    assert not re.search(r"\b[0-9a-f]{8,}\b", text), f"the notice shows an internal id: {text!r}"
    assert "change(s)" not in text, text
    expect(revert).to_have_count(0)
    ui.shot("reverted")


def test_code_blocks_read_like_jupyterlab_code(ui):
    nb = ui.lab.notebook("code.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("polish")
    panel, page = ui.panel, ui.page
    ui.send("code")
    answer = panel.locator(".jp-ACP-message").last
    expect(answer).to_contain_text("Second heading", timeout=LONG)
    blocks = answer.locator(".jp-ACP-code")
    expect(blocks).to_have_count(2)
    first = blocks.first
    # a header row: the language, then Copy / Insert below / Replace active cell (not over the code)
    expect(first.locator(".jp-ACP-codeLang")).to_have_text("python")
    expect(blocks.nth(1).locator(".jp-ACP-codeLang")).to_have_text("code")
    bar = first.locator(".jp-ACP-codeBar")
    for name in ("Copy code", "Insert as a cell below", "Replace the active cell's source with this code"):
        expect(bar.get_by_role("button", name=name)).to_be_visible()
    pre = first.locator("pre")
    assert bar.bounding_box()["y"] + bar.bounding_box()["height"] <= pre.bounding_box()["y"] + 1, (
        "the bar covers the code"
    )
    # no wrap (indentation kept), the long line scrolls sideways, the editor's background
    look = pre.evaluate(
        """p => { const s = getComputedStyle(p); const w = getComputedStyle(p.closest('.jp-ACP-code'));
                  const probe = document.createElement('div'); probe.style.background = 'var(--jp-cell-editor-background)';
                  document.body.appendChild(probe); const want = getComputedStyle(probe).backgroundColor; probe.remove();
                  return {ws: s.whiteSpace, ox: s.overflowX, scroll: p.scrollWidth > p.clientWidth + 20,
                          bg: w.backgroundColor, want}; }"""
    )
    assert look["ws"] == "pre" and look["ox"] == "auto" and look["scroll"], look
    assert look["bg"] == look["want"], look
    # headings at chat size: h1 at most 1.4 times the text
    sizes = answer.evaluate(
        "a => [a.querySelector('h1'), a.querySelector('p')].map(e => parseFloat(getComputedStyle(e).fontSize))"
    )
    assert sizes[0] <= sizes[1] * 1.4, sizes
    ui.widen_panel()
    ui.shot("code-block", full=False)
    assert_accessible(page, "code blocks, light")

    # Replace active cell puts the code in the active cell; Insert adds a cell below
    cells = page.locator(".jp-NotebookPanel:visible .jp-Cell")
    bar.get_by_role("button", name="Replace the active cell's source with this code").click()
    expect(cells.first).to_contain_text("def monthly_totals(df):")
    bar.get_by_role("button", name="Insert as a cell below").click()
    expect(cells).to_have_count(2)
    # the dark theme: the same block on the dark editor background (JupyterLab's CSS variables only)
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=LONG)
    page.wait_for_timeout(500)
    dark = first.evaluate("w => getComputedStyle(w).backgroundColor")
    assert dark != look["bg"], (dark, look["bg"])
    ui.shot("code-block-dark", full=False)
    assert_accessible(page, "code blocks, dark")
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=LONG)


def test_plots_and_tables_render_in_the_tool_card(ui):
    nb = ui.lab.notebook("plot.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("polish")
    panel = ui.panel
    ui.send("plot")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("See the chart above.", timeout=LONG)
    card = panel.locator(".jp-ACP-tool").last
    # the plot (an image block of the tool's result) shows without opening the card, within a height cap
    img = card.locator(".jp-ACP-toolVisible img.jp-ACP-toolImage")
    expect(img).to_have_count(1)
    expect(img).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    size = img.evaluate("i => ({h: i.getBoundingClientRect().height, nat: i.naturalHeight})")
    assert size["nat"] == 480 and 50 < size["h"] <= 320, size
    # the HTML table through JupyterLab's (sanitized) HTML renderer
    table = card.locator(".jp-ACP-toolHtml .jp-RenderedHTMLCommon table")
    expect(table).to_be_visible()
    expect(table).to_contain_text("2024-02")
    ui.widen_panel()
    ui.shot("plot-in-card", full=False)
    img.click()
    expect(img).to_have_class(re.compile("jp-mod-full"))


def test_errors_say_what_to_do_with_the_raw_text_under_details(ui):
    nb = ui.lab.notebook("error.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("polish")
    panel = ui.panel
    ui.send("error please")
    err = panel.locator(".jp-ACP-turnEnd.jp-mod-error").last
    expect(err).to_be_visible(timeout=LONG)
    title = err.locator(".jp-ACP-errorTitle")
    # one line that says what happened and what to do; the provider's exception text is not up front
    expect(title).to_have_text(re.compile("refused the agent's API key.*Retry"))
    shown = err.inner_text()
    assert "litellm" not in shown and "-32603" not in shown, shown
    words = title.inner_text()
    assert "\n" not in words.strip() and len(words) <= 120, words  # one line of words, not a stack
    # the raw text under Details
    details = err.locator("details.jp-ACP-errorDetails")
    expect(details.locator(".jp-ACP-errorText")).not_to_be_visible()
    details.locator("summary").click()
    expect(details.locator(".jp-ACP-errorText")).to_contain_text("litellm.AuthenticationError")
    ui.widen_panel()
    ui.shot("error", full=False)
    assert_accessible(ui.page, "error card with its details open, light")
    set_theme(ui.page, dark=True)
    ui.show_panel()
    assert_accessible(ui.page, "error card with its details open, dark")
    set_theme(ui.page, dark=False)
    # an action: Retry sends the same prompt again (a new turn, which fails the same way here)
    err.get_by_role("button", name=re.compile("again")).click()
    expect(panel.locator(".jp-ACP-user")).to_have_count(2, timeout=LONG)
    expect(panel.locator(".jp-ACP-user").last).to_contain_text("error please")
    expect(panel.locator(".jp-ACP-turnEnd.jp-mod-error")).to_have_count(2, timeout=LONG)
    # only the latest failure offers Retry
    expect(
        panel.locator(".jp-ACP-turnEnd.jp-mod-error").first.get_by_role("button", name=re.compile("again"))
    ).to_have_count(0)


def test_layout_at_250_and_1100_px(ui):
    nb = ui.lab.notebook("layout.ipynb", ["x = 1", ""], ids=["c1", "c2"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("builtin")
    panel, page = ui.panel, ui.page
    assert 230 <= panel.bounding_box()["width"] <= 270, panel.bounding_box()  # JupyterLab's default sidebar
    # a picker with one choice (one model here) is not shown; the mode's two are
    expect(panel.get_by_label("Agent mode")).to_be_visible()
    expect(panel.get_by_label("Model", exact=True)).to_have_count(0)
    # the placeholder fits in two lines of the input (the full wording is its tooltip)
    box = panel.get_by_label("Message to the agent")
    fit = box.evaluate(
        """t => { const c = document.createElement('canvas').getContext('2d'); const s = getComputedStyle(t);
                  c.font = `${s.fontSize} ${s.fontFamily}`;
                  return {w: c.measureText(t.placeholder).width,
                          inner: t.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)}; }"""
    )
    assert fit["w"] <= 2 * fit["inner"] * 0.9, fit
    # "Include" attaches only a cell with something in it, and its tooltip previews what goes
    cells = page.locator(".jp-NotebookPanel:visible .jp-Cell")
    cells.nth(1).click()
    chip = panel.locator(".jp-ACP-chip:not(.jp-ACP-imageChip)")
    expect(chip).to_have_class(re.compile("jp-mod-empty"))
    expect(chip).not_to_contain_text("Cell 2")
    cells.nth(0).click()
    expect(chip).to_contain_text("Include: Cell 1")
    expect(chip).to_have_attribute("title", re.compile("x = 1"))

    # the client's permission card at 250 px: short labels, none wrapped, nothing past the card's edge
    ui.send("make it two")
    card = panel.locator(".jp-ACP-permission").last
    expect(card.locator(".jp-ACP-permissionOption").first).to_be_visible(timeout=LONG)
    shape = card.evaluate(
        """c => { const row = c.querySelector('.jp-ACP-permissionOptions');
                  const bs = [...row.querySelectorAll('button')];
                  const line = parseFloat(getComputedStyle(bs[0]).lineHeight) || 18;
                  return {over: row.scrollWidth - row.clientWidth, line,
                          heights: bs.map(b => b.getBoundingClientRect().height),
                          labels: bs.map(b => b.textContent)}; }"""
    )
    assert shape["over"] <= 1, shape
    assert all(h < 2 * shape["line"] + 10 for h in shape["heights"]), shape
    assert all(len(t) <= 14 for t in shape["labels"]), shape
    ui.shot("narrow-250", full=False)
    card.locator(".jp-ACP-permissionOption[data-option-kind='reject_once']").click()
    expect(panel.locator(".jp-ACP-send")).to_be_visible(timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_be_visible(timeout=LONG)
    # one card for the call: the client's gate asked on the agent's own card, which reads "rejected"
    expect(panel.locator(".jp-ACP-tool .jp-ACP-badge")).to_have_text(["rejected"])

    # at 1,100 px the conversation is a column of about 75 characters, centred
    page.set_viewport_size({"width": 1900, "height": 860})
    # the split handle moves once the new viewport is laid out: drag again until it took (a loaded machine is slow)
    width = panel.bounding_box()["width"]
    for _ in range(5):
        page.wait_for_timeout(300)
        ui.widen_panel(by=max(0, 1100 - int(width)))
        width = panel.bounding_box()["width"]
        if width >= 1000:
            break
    assert width >= 1000, width
    msg = panel.locator(".jp-ACP-message").last.bounding_box()
    assert msg["width"] <= 780, msg
    left = msg["x"] - panel.bounding_box()["x"]
    assert left >= 100, (msg, width)
    ui.shot("wide-1100", full=False)


def test_code_block_buttons_are_one_tab_stop_and_the_language_shows_whole_in_a_narrow_panel(ui):
    nb = ui.lab.notebook("codekeys.ipynb", ["x = 1"], ids=["c1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("polish")
    panel, page = ui.panel, ui.page
    for n in (1, 2):  # two answers: four code blocks, twelve buttons
        ui.send("code")
        expect(panel.locator(".jp-ACP-message:has-text('Second heading')")).to_have_count(n, timeout=LONG)
        idle(panel)
    buttons = panel.locator(".jp-ACP-log .jp-ACP-codeButton")
    expect(buttons).to_have_count(12)
    # Shift+Tab from the input up through the conversation meets the code buttons once
    panel.get_by_label("Message to the agent").focus()
    stops = []
    for _ in range(60):
        page.keyboard.press("Shift+Tab")
        where = page.evaluate(
            "() => { const a = document.activeElement;"
            " return {code: a.matches('.jp-ACP-codeButton'), log: !!a.closest('.jp-ACP-log'),"
            " name: a.getAttribute('aria-label') || a.tagName}; }"
        )
        if stops and not where["log"]:
            break
        if where["log"]:
            stops.append(where)
    assert sum(1 for s in stops if s["code"]) == 1, stops
    # inside, the arrows move among them (Home, End too); the one left focused is the stop next time
    stop = next(s for s in stops if s["code"])
    assert stop["name"] == "Copy code", stop
    buttons.nth(9).focus()
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Insert as a cell below"
    page.keyboard.press("Home")
    assert page.evaluate("document.activeElement === document.querySelector('.jp-ACP-log .jp-ACP-codeButton')")
    page.keyboard.press("End")
    assert (
        page.evaluate("document.activeElement.getAttribute('aria-label')")
        == "Replace the active cell's source with this code"
    )
    assert (
        panel.evaluate(
            "p => [...p.querySelectorAll('.jp-ACP-log .jp-ACP-codeButton')].filter(b => b.tabIndex >= 0).length"
        )
        == 1
    )

    # a narrow sidebar (about 280 px): the language's name whole, the buttons as icons keep their names
    box = panel.bounding_box()
    x, y = box["x"] - 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + (box["width"] - 280) / 2, y)
    page.mouse.move(x + box["width"] - 280, y)
    page.mouse.up()
    page.wait_for_timeout(300)
    assert panel.bounding_box()["width"] < 320, panel.bounding_box()
    lang = panel.locator(".jp-ACP-codeLang").first
    expect(lang).to_have_text("python")
    whole = lang.evaluate("n => n.scrollWidth <= n.clientWidth + 1 && n.getBoundingClientRect().width > 0")
    assert whole, lang.evaluate("n => [n.scrollWidth, n.clientWidth]")
    expect(panel.locator(".jp-ACP-codeBar").first.get_by_role("button", name="Copy code")).to_be_visible()
    ui.shot("code-block-narrow", full=False)


def test_toasts_leave_the_input_and_send_uncovered(ui):
    nb = ui.lab.notebook("toasts.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    panel, page = ui.panel, ui.page
    page.evaluate(
        "window.jupyterapp.commands.execute('apputils:notify', {message: 'A notebook elsewhere asks something',"
        " type: 'warning', options: {autoClose: false, actions: [{label: 'Open'}]}})"
    )
    toast = page.locator(".jp-toastContainer .Toastify__toast").first
    expect(toast).to_be_visible(timeout=LONG)
    page.wait_for_timeout(800)  # the toast slides in
    t = toast.bounding_box()
    for target in (panel.get_by_label("Message to the agent"), panel.locator(".jp-ACP-send")):
        b = target.bounding_box()
        apart = t["x"] + t["width"] <= b["x"] or b["x"] + b["width"] <= t["x"] or t["y"] + t["height"] <= b["y"]
        assert apart, f"the toast {t} covers {b}"
    ui.shot("toast-beside-panel")
