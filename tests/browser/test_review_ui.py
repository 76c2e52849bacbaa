"""Review and rewind in the browser: the cells' agent marks, and a turn's review.

* A cell whose metadata carries ``jupyter_acp`` entries (written here with notebook/provenance.py's own helpers, as
  the server writes them) carries a quiet mark; hovering it says "Codex, turn 4: 'plot the residuals' (by alice)";
  "Open in the conversation" scrolls the panel to that turn; "Remove Agent Marks from This Notebook" (palette) strips
  the entries through the notebook's model, and the saved file has none.
* A turn's review: the footer's "Review N changes" opens a notebook diff of the turn in the main area, Keep / Discard
  per cell and for the whole turn, "Rewind to before this turn" says what was and was not restored and what no
  checkpoint undoes, "Undo rewind" restores the undo checkpoint, a refused rewind shows the server's reason; "Review
  after" is picked in the header; a turn that ends with a review in a notebook not on screen notifies. The review
  routes are answered by the page (Playwright's ``page.route``) with the exact shapes of the issue, so the panel is
  checked against the API as written while the server side is built apart; the turn itself is real (the built-in
  agent on the fake model edits a cell, the gate asks, the user allows).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from axe import assert_accessible, set_theme

from jupyter_acp.notebook import provenance
from jupyter_acp.testing.files import saved_notebook_sync

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


def _shot(ui: Any, node: Any, label: str) -> None:
    """A screenshot of one element (the review tab), beside the page's own (``ui.shot``)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ui.shots += 1
    node.screenshot(path=str(ARTIFACTS / f"{ui.name}-{ui.shots:02d}-{label}.png"))


def _wait_turn_end(lab: Any, sid: str) -> None:
    deadline = time.monotonic() + 60
    while lab.api(f"sessions/{sid}")["turn_id"] is not None:
        assert time.monotonic() < deadline, "the turn did not end"
        time.sleep(0.2)


def _entry(action: str, sid: str, turn_id: str, **kw: Any) -> provenance.AgentChange:
    return provenance.agent_change(
        action,  # type: ignore[arg-type]
        agent_name="codex",
        agent_version="0.4.1",
        conversation_id="conv-1",
        turn_id=turn_id,
        tool_call_id="call-1",
        prompt="plot the residuals",
        user="alice",
        session_id=sid,
        turn_number=4,
        at="2025-05-01T12:00:00Z",
        **kw,
    )


def test_agent_cells_carry_a_mark_that_names_the_turn_and_remove_agent_marks_strips_them(ui):
    lab = ui.lab
    name = "marked.ipynb"
    lab.notebook(name, ["import pandas as pd", "resid = y - model.predict(X)", "x = 1"], ids=["c-a", "c-b", "c-c"])
    # a real turn of the notebook's conversation, for "Open in the conversation" to scroll to
    sid = lab.api("sessions", {"notebook": name})["id"]
    turn_id = lab.api(f"sessions/{sid}/prompt", {"prompt": [{"type": "text", "text": "plot the residuals"}]})["turn_id"]
    _wait_turn_end(lab, sid)
    # the entries, as the server writes them (its own helpers): an edit by codex; an insert then bob's own edit
    path = lab.root / name
    nb = saved_notebook_sync(path)
    provenance.add_to_cell(nb.cells[0], _entry("edited", sid, turn_id))
    provenance.add_to_cell(nb.cells[1], _entry("inserted", sid, turn_id))
    provenance.add_to_cell(nb.cells[1], provenance.user_edit("bob", at="2025-05-01T12:03:10Z"))
    nbformat.write(nb, path)

    ui.open_lab(name)
    ui.wait_ready("echo")
    page = ui.page
    marks = page.locator(".jp-NotebookPanel:visible .jp-Cell .jp-ACP-provMark")
    expect(marks).to_have_count(2, timeout=LONG)
    assert page.locator(".jp-NotebookPanel:visible .jp-Cell").nth(2).locator(".jp-ACP-provMark").count() == 0
    marks.nth(0).hover()
    pop = page.locator(".jp-ACP-provPopover")
    expect(pop).to_be_visible()
    expect(pop.locator(".jp-ACP-provText")).to_have_text("Codex, turn 4: 'plot the residuals' (by alice)")
    expect(pop.locator(".jp-ACP-provDetail")).to_have_text("edited this cell at 2025-05-01 12:00 UTC")
    ui.shot("mark-popover")
    assert_accessible(page, "mark popover", root=".jp-ACP-provPopover", min_contrast=3)
    marks.nth(1).hover()
    expect(page.locator(".jp-ACP-provPopover")).to_have_count(1)  # one popover at a time
    expect(page.locator(".jp-ACP-provPopover .jp-ACP-provDetail")).to_contain_text("edited since by bob")
    expect(marks.nth(1)).to_have_class(re.compile(r"\bjp-mod-editedSince\b"))

    # "Open in the conversation": the panel shows that turn's prompt, scrolled to and highlighted
    page.locator(".jp-ACP-provPopover").get_by_role("button", name=re.compile("^Open in the conversation")).click()
    prompt = ui.panel.locator(f'[data-kind="user"][data-turn="{turn_id}"]')
    expect(prompt).to_have_class(re.compile(r"\bjp-ACP-highlighted\b"), timeout=LONG)
    expect(prompt).to_be_in_viewport()

    # "Show the change": the turn's review opens at this cell (the changes route answered here, in the shape)
    changes = {
        "turn_id": turn_id,
        "changes": [
            {
                "cell_id": "c-b",
                "change": "added",
                "before": None,
                "after": {"cell_type": "code", "source": "resid = y - model.predict(X)"},
                "outputs_changed": False,
            },
            {
                "cell_id": "c-a",
                "change": "modified",
                "before": {"cell_type": "code", "source": "import pandas"},
                "after": {"cell_type": "code", "source": "import pandas as pd"},
                "outputs_changed": False,
            },
        ],
        "checkpoint": None,
    }
    page.route(
        re.compile(rf".*/jupyter-acp/sessions/{sid}/turns/{turn_id}/changes(\?.*)?$"),
        lambda route, _: route.fulfill(content_type="application/json", body=json.dumps(changes)),
    )
    marks.nth(0).hover()
    page.locator(".jp-ACP-provPopover").get_by_role("button", name=re.compile("^Show the change")).click()
    focused = page.locator('.jp-ACP-review .jp-ACP-reviewCell.jp-mod-focused[data-cell-id="c-a"]')
    expect(focused).to_be_visible(timeout=LONG)
    expect(page.locator(".jp-ACP-review .jp-ACP-reviewTitle")).to_have_text("Review: “plot the residuals”")
    expect(page.locator(".jp-ACP-review .jp-ACP-reviewCheckpoint")).to_contain_text("No checkpoint")
    ui.shot("show-the-change")
    page.locator(".jp-NotebookPanel .jp-Cell").first.click()  # back to the notebook

    # the palette's "Remove Agent Marks from This Notebook": the marks go, and the saved file has no entries
    page.locator(".jp-NotebookPanel:visible .jp-Cell").nth(2).click()
    page.keyboard.press("Control+Shift+C")
    palette = page.locator(".lm-CommandPalette-input")
    palette.fill("Remove Agent Marks")
    page.locator(".lm-CommandPalette-item", has_text="Remove Agent Marks from This Notebook").click()
    expect(marks).to_have_count(0, timeout=LONG)
    expect(page.locator(".jp-toast-message", has_text="Removed the agent marks of 2 cells")).to_be_visible()
    page.locator(".jp-NotebookPanel:visible .jp-Cell").nth(2).click()
    page.keyboard.press("Control+s")
    saved = saved_notebook_sync(
        path, until=lambda nb: not any("jupyter_acp" in c.metadata for c in nb.cells), timeout=30
    )
    assert [c.source for c in saved.cells][0] == "import pandas as pd"


# -- the review, against the routes as the issue writes them -----------------------------------------------
BEFORE_PLOT = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot(df['x'], df['y'])\nplt.show()\n"
AFTER_PLOT = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.scatter(df['x'], df['resid'])\nplt.show()\n"
CHANGES = [
    {
        "cell_id": "cell-one",
        "change": "modified",
        "before": {"cell_type": "code", "source": "x = 1"},
        "after": {"cell_type": "code", "source": "x = 42"},
        "outputs_changed": False,
    },
    {
        "cell_id": "cell-plot",
        "change": "modified",
        "before": {"cell_type": "code", "source": BEFORE_PLOT},
        "after": {"cell_type": "code", "source": AFTER_PLOT},
        "outputs_changed": True,
    },
    {
        "cell_id": "cell-df",
        "change": "modified",
        "before": {"cell_type": "code", "source": 'df = load()\n"""the raw\ntable"""'},
        "after": {
            "cell_type": "code",
            "source": "df = load()\ndf['resid'] = df['y'] - df['fit']\n\"\"\"the raw\ntable\"\"\"",
        },
        "outputs_changed": True,
    },
    {
        "cell_id": "cell-new",
        "change": "added",
        "before": None,
        "after": {"cell_type": "markdown", "source": "## Residuals\nThe fit **misses** the tail."},
        "outputs_changed": False,
    },
]
#: the server's own words for what no checkpoint undoes (jupyter_acp/sessions/review/service.py)
NEVER_RESTORED = [
    "files the code wrote, changed or deleted",
    "network calls and what they changed elsewhere (a database, an API, a message sent)",
    "GPU memory and the state of devices",
    "open connections, files and handles (sockets, database cursors, threads)",
    "variables the checkpoint skipped, each listed with its reason",
    "a kernel restarted since the checkpoint (the namespace is saved inside the kernel process)",
    "what terminals ran",
]
CHECKPOINT = {
    "id": "cp-turn",
    "kernel": {
        "saved": ["df", "model", "X", "y"],
        "skipped": [{"name": "conn", "reason": "a sqlite3.Connection does not pickle"}],
        "bytes": 104_857_600,
    },
}


class ReviewRoutes:
    """The review routes, answered in the page with the issue's shapes; what the panel sent is kept."""

    def __init__(self) -> None:
        self.changes = [dict(c) for c in CHANGES]
        self.calls: list[tuple[str, str, Any]] = []
        self.decided: list[dict[str, str]] = []
        self.rewinds = 0
        self.policy: str | None = None

    def left(self, turn_id: str) -> dict[str, Any]:
        return {
            "turn_id": turn_id,
            "changes": self.changes,
            "checkpoint": CHECKPOINT,
            "decided": self.decided,
            "running": False,
        }

    def handle(self, route: Any, request: Any) -> None:
        url = request.url.split("?")[0]
        body = json.loads(request.post_data) if request.post_data else None
        tail = url.split("/jupyter-acp/")[1]
        self.calls.append((request.method, tail, body))
        m = re.match(r"sessions/([^/]+)/turns/([^/]+)/(changes|review|rewind)$", tail)
        status, answer = 200, None
        if m and m.group(3) == "changes":
            answer = self.left(m.group(2))
        elif m and m.group(3) == "review":
            decided = [c for c in self.changes if body.get("cell_id") in (None, c["cell_id"])]
            self.changes = [c for c in self.changes if c not in decided]
            self.decided += [{"cell_id": c["cell_id"], "decision": body["decision"]} for c in decided]
            answer = {**self.left(m.group(2)), "decision": body["decision"], "applied": [c["cell_id"] for c in decided]}
        elif m and m.group(3) == "rewind":
            self.rewinds += 1
            if self.rewinds > 1:
                status, answer = 409, {"message": "nothing to rewind: this turn was rewound already (undo it first)"}
            else:
                answer = {
                    "turn_id": m.group(2),
                    "checkpoint_id": "cp-turn",
                    "restored_cells": ["cell-one", "cell-plot", "cell-df", "cell-new"],
                    "kernel": {
                        "restored": ["df", "model", "X", "y"],
                        "not_restored": [{"name": "conn", "reason": "a sqlite3.Connection does not pickle"}],
                        "removed": ["resid"],
                    },
                    "undo_checkpoint": "cp-undo",
                    "never_restored": NEVER_RESTORED,
                }
        elif tail.endswith("/checkpoints/cp-undo/restore"):
            answer = {
                "turn_id": "t",
                "checkpoint_id": "cp-undo",
                "restored_cells": ["cell-one", "cell-plot", "cell-df", "cell-new"],
                "kernel": {"restored": ["df", "model", "X", "y"], "not_restored": [], "removed": []},
                "undo_checkpoint": "cp-redo",
                "never_restored": NEVER_RESTORED,
            }
        elif tail.endswith("/policy"):
            self.policy = body["policy"]
            answer = {"id": tail.split("/")[1], "policy": self.policy}
        else:
            route.fallback()
            return
        route.fulfill(status=status, content_type="application/json", body=json.dumps(answer))


def test_a_turns_review_diffs_the_notebook_keeps_discards_rewinds_and_undoes(ui):
    lab = ui.lab
    nb = lab.notebook("review.ipynb", ["x = 1"], ids=["cell-one"])
    routes = ReviewRoutes()
    pattern = re.compile(
        r".*/jupyter-acp/sessions/[^/]+/(turns/[^/]+/(changes|review|rewind)|checkpoints/[^/]+/restore|policy)(\?.*)?$"
    )
    ui.page.route(pattern, routes.handle)
    # the event stream as the server sends it, with `review: {changes: 4, after: true}` in turn_ended once `inject` is on
    # (what the server says of a turn run under "Review after")
    inject = {"on": False}

    def stream(ws: Any) -> None:
        server = ws.connect_to_server()

        def down(message: str | bytes) -> None:
            # the mocked routes stand for the server's review: the real server's own word on a turn (its turn changed
            # one cell) is taken out, so the panel asks the mocked changes route; once `inject` is on, the turn ends
            # as one run under Review after does
            if isinstance(message, str) and '"turn_ended"' in message:
                frame = json.loads(message)
                for e in frame if isinstance(frame, list) else [frame]:
                    if e.get("type") == "turn_ended":
                        e.pop("review", None)
                        if inject["on"]:
                            e["review"] = {"changes": 4, "checkpoint": "cp-turn", "after": True}
                message = json.dumps(frame)
            ws.send(message)

        server.on_message(down)

    ui.page.route_web_socket(re.compile(r".*/jupyter-acp/sessions/[^/]+/stream.*"), stream)
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.widen_panel(220)
    ui.pick_agent("builtin")
    panel = ui.panel

    # "Review after" is picked in the header, next to the agent's Mode
    picker = panel.get_by_label("Permission policy for changes")
    expect(picker).to_be_visible()
    expect(picker).to_have_value("")
    expect(picker.locator("option")).to_have_text(["Ask each time", "Review after"])
    picker.select_option("review")
    expect(picker).to_have_value("review")
    assert ("POST", routes.calls[-1][1], {"policy": "review"}) == routes.calls[-1]
    assert re.match(r"sessions/[^/]+/policy$", routes.calls[-1][1])

    # a real turn edits a cell (the gate asks: the server has no review policy yet); its footer offers the review
    ui.send("make it 42")
    card = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)
    card.locator('button[data-option-kind="allow_once"]').click()
    footer = panel.get_by_role("button", name=re.compile(r"^Review 4 changes"))
    expect(footer).to_be_visible(timeout=LONG)
    turn_id = footer.get_attribute("data-turn")
    # the count came from the changes route (the server said nothing of a review): asked once, for this turn
    assert any(c[0] == "GET" and c[1].endswith(f"/turns/{turn_id}/changes") for c in routes.calls)
    assert not ui.page.locator(".jp-ACP-review").count(), "a turn not run under Review after opens no review by itself"
    ui.shot("footer", full=False)

    # the review: one card per cell, source as JupyterLab code, changed words marked, outputs noted
    footer.click()
    ui.page.evaluate("window.jupyterapp.commands.execute('application:toggle-left-area')")  # room for the diff
    review = ui.page.locator(".jp-ACP-review")
    expect(review).to_be_visible(timeout=LONG)
    expect(review.locator(".jp-ACP-reviewTitle")).to_have_text("Review: “make it 42”")
    expect(review.locator(".jp-ACP-reviewSummary")).to_have_text(
        "4 changes: 3 modified, 1 added, outputs of 2 cells changed"
    )
    expect(review.locator(".jp-ACP-reviewCheckpoint")).to_contain_text(
        "the cells and 4 kernel variables (105 MB), 1 variable not saved"
    )
    cards = review.locator(".jp-ACP-reviewCell")
    expect(cards).to_have_count(4)
    plot = review.locator('.jp-ACP-reviewCell[data-cell-id="cell-plot"]')
    expect(plot.locator(".jp-ACP-reviewOutputs")).to_have_text("Outputs changed")
    expect(plot.locator(".jp-ACP-reviewLine.jp-mod-del")).to_have_count(1)
    expect(plot.locator(".jp-ACP-reviewLine.jp-mod-add")).to_have_count(1)
    expect(plot.locator(".jp-ACP-reviewLine.jp-mod-del .jp-ACP-reviewWord")).to_have_text(["plot", "y"])
    expect(plot.locator(".jp-ACP-reviewLine.jp-mod-add .jp-ACP-reviewWord")).to_have_text(["scatter", "resid"])
    expect(plot.locator(".jp-ACP-reviewLine.jp-mod-add .jp-ACP-reviewNo").nth(1)).to_have_text("3")
    # syntax colours from JupyterLab's highlighter: "import" is a token span of its own
    expect(plot.locator(".jp-ACP-reviewLine").first.locator(".jp-ACP-reviewCode span").first).to_have_text(
        "import", timeout=LONG
    )
    added = review.locator('.jp-ACP-reviewCell[data-cell-id="cell-new"]')
    expect(added.locator(".jp-ACP-reviewBadge")).to_have_text("Added")
    expect(added.locator(".jp-ACP-reviewLine.jp-mod-add")).to_have_count(2)
    ui.shot("review")
    _shot(ui, review, "review-tab")
    # no serious axe violation in the review, light and dark (the diff's colours under the syntax colours too)
    assert_accessible(ui.page, "review", root=".jp-ACP-review")
    set_theme(ui.page, dark=True)
    assert_accessible(ui.page, "review, dark", root=".jp-ACP-review")
    _shot(ui, review, "review-dark")
    set_theme(ui.page, dark=False)

    # Discard one cell, then Keep all: each decision is posted as the issue writes it
    review.locator('.jp-ACP-reviewCell[data-cell-id="cell-df"]').get_by_role(
        "button", name=re.compile("^Discard:")
    ).click()
    expect(review.locator('.jp-ACP-reviewCell[data-cell-id="cell-df"] .jp-ACP-reviewDecision')).to_have_text(
        "Discarded"
    )
    assert routes.calls[-1] == ("POST", f"{routes.calls[-1][1]}", {"decision": "discard", "cell_id": "cell-df"})
    assert routes.calls[-1][1].endswith(f"/turns/{turn_id}/review")
    review.get_by_role("button", name=re.compile("^Keep all:")).click()
    expect(review.locator(".jp-ACP-reviewSummary")).to_have_text("Nothing left to review (3 kept, 1 discarded)")
    assert routes.calls[-1][2] == {"decision": "keep"}
    # the panel's footer follows: nothing left to review
    expect(panel.get_by_role("button", name=re.compile(r"^Review \d+ change"))).to_have_count(0)

    # Rewind: what was restored, what was not and why, what no checkpoint undoes; then Undo rewind
    review.get_by_role("button", name=re.compile("^Rewind to before this turn")).click()
    report = review.locator(".jp-ACP-reviewReport")
    expect(report).to_contain_text("Rewound to before this turn.")
    expect(report.locator(".jp-ACP-reviewRestored")).to_contain_text("4 cells put back as before the turn")
    expect(report.locator(".jp-ACP-reviewRestored")).to_contain_text("kernel variables: df, model, X, y")
    expect(report.locator(".jp-ACP-reviewRestored")).to_contain_text("variables created since, removed: resid")
    expect(report.locator(".jp-ACP-reviewNotRestored")).to_have_text("conn: a sqlite3.Connection does not pickle")
    expect(report.locator(".jp-ACP-reviewNever li")).to_have_text(NEVER_RESTORED)  # the server's own words
    _shot(ui, review, "rewound")
    review.get_by_role("button", name=re.compile("^Undo rewind")).click()
    expect(report).to_contain_text("Rewind undone")
    expect(report.locator(".jp-ACP-reviewRestored")).to_contain_text("4 cells put back as they were before the rewind")
    assert routes.calls[-2][:2] == ("POST", f"{routes.calls[-2][1]}") and routes.calls[-2][1].endswith(
        "/checkpoints/cp-undo/restore"
    )
    expect(review.get_by_role("button", name=re.compile("^Undo rewind"))).to_have_count(0)

    # a refused rewind says the server's reason
    review.get_by_role("button", name=re.compile("^Rewind to before this turn")).click()
    expect(review.get_by_role("alert")).to_have_text(
        "Could not rewind to before this turn: nothing to rewind: this turn was rewound already (undo it first)"
    )
    _shot(ui, review, "refused")

    # the palette has the command; it opens the latest turn's review (the same tab)
    ui.page.keyboard.press("Control+Shift+C")
    ui.page.locator(".lm-CommandPalette-input").fill("Review the Agent")
    expect(ui.page.locator(".lm-CommandPalette-item", has_text="Review the Agent's Last Turn")).to_be_visible()
    ui.page.keyboard.press("Escape")

    # a turn run under "Review after" ends with its review open, without a click (its turn_ended says review)
    routes.changes, routes.decided = [dict(c) for c in CHANGES], []
    inject["on"] = True
    ui.send("make it 43")
    card = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)  # the server on this branch still asks
    card.locator('button[data-option-kind="allow_once"]').click()
    second = ui.page.locator(f'.jp-ACP-review:not([data-turn="{turn_id}"])')
    expect(second).to_be_visible(timeout=LONG)
    expect(second.locator(".jp-ACP-reviewTitle")).to_have_text("Review: “make it 43”")
    expect(second.locator(".jp-ACP-reviewCell")).to_have_count(4)
    expect(panel.get_by_role("button", name=re.compile(r"^Review 4 changes"))).to_have_count(1)
    ui.shot("review-after")


def test_a_turn_that_ends_with_a_review_in_another_notebook_notifies(ui):
    """The session list shows a turn of another notebook end; its ``turn_ended`` says ``review: {changes: 2}``."""
    lab = ui.lab
    nb = lab.notebook("here.ipynb", ["x = 1"])
    state = {"polls": 0}

    def sessions(route: Any, request: Any) -> None:
        if request.method != "GET":
            route.fallback()
            return
        state["polls"] += 1
        running = "t-bg" if state["polls"] <= 2 else None
        info = {
            "id": "bg",
            "notebook": "other/analysis.ipynb",
            "agent": "codex",
            "turn_id": running,
            "state": "ready",
            "last_seq": 9,
        }
        route.fulfill(content_type="application/json", body=json.dumps([info]))

    events = [
        {
            "seq": 7,
            "type": "turn_started",
            "turn_id": "t-bg",
            "prompt": [{"type": "text", "text": "clean the outliers"}],
        },
        {"seq": 9, "type": "turn_ended", "turn_id": "t-bg", "stop_reason": "end_turn", "review": {"changes": 2}},
    ]
    routes = ReviewRoutes()
    routes.changes = routes.changes[:2]
    ui.page.route(re.compile(r".*/jupyter-acp/sessions(\?.*)?$"), sessions)
    ui.page.route(
        re.compile(r".*/jupyter-acp/sessions/bg(\?.*)?$"),
        lambda r, q: r.fulfill(content_type="application/json", body=json.dumps({"id": "bg", "last_seq": 9})),
    )
    ui.page.route(
        re.compile(r".*/jupyter-acp/sessions/bg/events(\?.*)?$"),
        lambda r, q: r.fulfill(content_type="application/json", body=json.dumps(events)),
    )
    ui.page.route(re.compile(r".*/jupyter-acp/sessions/bg/turns/t-bg/changes(\?.*)?$"), routes.handle)
    ui.open_lab(nb)
    toast = ui.page.locator(".Toastify__toast", has_text="Codex finished in analysis.ipynb: review 2 changes")
    expect(toast).to_be_visible(timeout=LONG)
    ui.shot("notification")
    toast.get_by_role("button", name="Review").click()
    review = ui.page.locator('.jp-ACP-review[data-session="bg"]')
    expect(review).to_be_visible(timeout=LONG)
    expect(review.locator(".jp-ACP-reviewTitle")).to_have_text("Review: “clean the outliers”")
    expect(review.locator(".jp-ACP-reviewCell")).to_have_count(2)
