"""Elicitation in the sidebar: an agent's form (from its JSON schema) is filled and submitted, a field the
server refuses says which one, the answered state is shown (and again after a reload); a URL question shows its
host and opens only on the user's click, and ``elicitation/complete`` closes it; Decline answers decline.

The hostile scripted agent (``jupyter_acp.testing.hostile``) asks: each prompt is its list of actions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from axe import assert_accessible
from gate_agent import lab_with

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
HERE = Path(__file__).resolve().parent
SCREENS = HERE.parents[1] / "test-artifacts" / "screens"

SCHEMA = {
    "type": "object",
    "properties": {
        "strategy": {
            "type": "string",
            "title": "Strategy",
            "oneOf": [{"const": "mean", "title": "Fill with the mean"}, {"const": "drop", "title": "Drop the rows"}],
        },
        "rows": {"type": "integer", "title": "Rows to check", "minimum": 1, "maximum": 100, "default": 10},
        "email": {"type": "string", "title": "Report to", "format": "email", "description": "who gets the summary"},
        "dry_run": {"type": "boolean", "title": "Dry run", "default": True},
        "columns": {
            "type": "array",
            "title": "Columns",
            "items": {"anyOf": [{"const": "price", "title": "Price"}, {"const": "qty", "title": "Quantity"}]},
            "default": ["price"],
        },
    },
    "required": ["strategy", "rows"],
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, fake_model):
    hostile = {"command": sys.executable, "args": ["-m", "jupyter_acp.testing.hostile"], "title": "Scripted: asks"}
    with lab_with(tmp_path_factory.mktemp("elicit-lab"), fake_model, {"asks": hostile}) as lab:
        yield lab


def ask(*actions: dict) -> str:
    return json.dumps(list(actions))


def test_form_url_and_decline(ui):
    SCREENS.mkdir(parents=True, exist_ok=True)
    nb = ui.lab.notebook("clean.ipynb", ["import pandas as pd"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("asks")
    ui.widen_panel(220)
    panel = ui.panel
    # the active cell goes with a prompt by default, as a last text block: the scripted agent reads the last
    # block as its actions, so leave the cell out
    include = panel.locator("button[aria-pressed=true]", has_text="Include:")
    if include.count():
        include.first.click()

    # -- a form from the schema: titles, required marks, defaults, a select of titled choices --------------
    message = "How should I handle the 12 missing values in `price`?"
    ui.send(ask({"do": "elicit", "params": {"mode": "form", "message": message, "requestedSchema": SCHEMA}}))
    card = panel.locator(".jp-ACP-elicitation:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)
    expect(card.locator(".jp-ACP-elicitMessage")).to_have_text(message)
    strategy = card.get_by_label("Strategy")
    assert strategy.evaluate("e => e.tagName") == "SELECT"
    assert strategy.locator("option").all_inner_texts() == ["Choose…", "Fill with the mean", "Drop the rows"]
    rows = card.get_by_label("Rows to check")
    expect(rows).to_have_value("10")
    assert rows.get_attribute("type") == "number" and rows.get_attribute("min") == "1"
    assert rows.get_attribute("max") == "100" and rows.get_attribute("aria-required") == "true"
    assert card.get_by_label("Report to").get_attribute("type") == "email"
    expect(card.get_by_label("Dry run")).to_be_checked()
    columns = card.get_by_role("group", name="Columns")
    expect(columns.get_by_label("Price")).to_be_checked()
    expect(columns.get_by_label("Quantity")).not_to_be_checked()
    expect(card.locator(".jp-ACP-elicitRequired")).to_have_count(2)
    card.screenshot(path=str(SCREENS / "c1-form.png"))
    assert_accessible(ui.page, "form waiting, light")

    # a required field left empty: said in the card, nothing sent
    card.get_by_role("button", name="Send these answers to the agent").click()
    expect(card.locator(".jp-ACP-elicitError")).to_have_text("Required: Strategy")
    # a value the schema refuses: the server's 400 names the field, the card stays
    strategy.select_option("drop")
    card.get_by_label("Report to").fill("not an address")
    card.get_by_role("button", name="Send these answers to the agent").click()
    error = card.locator(".jp-ACP-elicitError")
    expect(error).to_contain_text("'email'", timeout=LONG)
    card.screenshot(path=str(SCREENS / "c1-form-error.png"))
    assert_accessible(ui.page, "form with an error, light")
    card.get_by_label("Report to").fill("ana@example.org")
    card.get_by_label("Dry run").uncheck()
    columns.get_by_label("Quantity").check()
    card.get_by_label("Report to").press("Enter")  # Enter in a field submits, as in any form

    done = panel.locator(".jp-ACP-elicitation.jp-mod-resolved")
    expect(done).to_have_count(1, timeout=LONG)
    expect(done.locator(".jp-ACP-elicitResult")).to_contain_text("Submitted:")
    expect(done.locator(".jp-ACP-elicitAnswers")).to_contain_text("Drop the rows")
    expect(done.locator(".jp-ACP-elicitAnswers")).to_contain_text("ana@example.org")
    expect(done.locator(".jp-ACP-elicitAnswers")).to_contain_text("Price, Quantity")
    # what reached the agent: the content, typed as the schema says
    sent = {"strategy": "drop", "rows": 10, "email": "ana@example.org", "dry_run": False, "columns": ["price", "qty"]}
    expect(panel.locator(".jp-ACP-message").last).to_contain_text(json.dumps({"action": "accept", "content": sent}))
    done.screenshot(path=str(SCREENS / "c1-form-answered.png"))
    assert_accessible(ui.page, "form answered, light")

    # -- a URL: its host spelled out, opened only by the user's click; elicitation/complete closes it ------
    pages_before = len(ui.page.context.pages)
    ui.page.context.route("https://auth.example.com/**", lambda route: route.fulfill(body="signed in"))
    ui.send(
        ask(
            {
                "do": "elicit",
                "params": {
                    "mode": "url",
                    "message": "Sign in to the warehouse so I can read the sales table.",
                    "url": "https://auth.example.com/device?code=WXYZ",
                    "elicitationId": "e1",
                },
            },
            {"do": "sleep", "seconds": 0.5},
            {"do": "elicit_complete", "elicitationId": "e1"},
        )
    )
    card = panel.locator('.jp-ACP-elicitation[data-mode="url"]')
    expect(card).to_be_visible(timeout=LONG)
    expect(card.locator(".jp-ACP-elicitHost")).to_have_text("auth.example.com")
    link = card.get_by_role("link", name="Open auth.example.com")
    assert link.get_attribute("href") == "https://auth.example.com/device?code=WXYZ"
    assert link.get_attribute("target") == "_blank" and "noopener" in link.get_attribute("rel")
    ui.page.wait_for_timeout(500)
    assert len(ui.page.context.pages) == pages_before, "the URL opened without the user's click"
    card.screenshot(path=str(SCREENS / "c1-url.png"))
    assert_accessible(ui.page, "URL card waiting, light")
    with ui.page.context.expect_page() as popup:
        link.click()
    assert popup.value.url.startswith("https://auth.example.com/device")
    popup.value.close()
    expect(card.locator(".jp-ACP-elicitResult")).to_contain_text("the agent says this step is done", timeout=LONG)
    card.screenshot(path=str(SCREENS / "c1-url-done.png"))
    assert_accessible(ui.page, "URL card done, light")

    # -- Decline ---------------------------------------------------------------------------------------------
    ui.send(ask({"do": "elicit", "params": {"mode": "form", "message": "Overwrite df?", "requestedSchema": SCHEMA}}))
    card = panel.locator(".jp-ACP-elicitation:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)
    card.get_by_role("button", name="Tell the agent you decline").click()
    expect(panel.locator(".jp-ACP-elicitResult").last).to_have_text("Declined.", timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_contain_text('{"action": "decline"}', timeout=LONG)

    # -- replayed after a reload: every card in its answered state ------------------------------------------
    ui.page.reload()
    ui.page.wait_for_selector("#jupyter-acp-sidebar", state="attached", timeout=LONG)
    ui.show_panel()
    cards = panel.locator(".jp-ACP-elicitation")
    expect(cards).to_have_count(3, timeout=LONG)
    expect(panel.locator(".jp-ACP-elicitation:not(.jp-mod-resolved)")).to_have_count(0)
    expect(cards.nth(0).locator(".jp-ACP-elicitAnswers")).to_contain_text("Drop the rows")
    expect(cards.nth(1).locator(".jp-ACP-elicitResult")).to_contain_text("the agent says this step is done")
    expect(cards.nth(2).locator(".jp-ACP-elicitResult")).to_have_text("Declined.")
    ui.shot("elicitation-replayed", full=False)
    panel.screenshot(path=str(SCREENS / "c1-replayed.png"))

    # -- the dark theme: a question waiting, its fields and buttons readable ----------------------------------
    ui.page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    ui.page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=LONG)
    ui.send(ask({"do": "elicit", "params": {"mode": "form", "message": "Which columns?", "requestedSchema": SCHEMA}}))
    card = panel.locator(".jp-ACP-elicitation:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)
    card.screenshot(path=str(SCREENS / "c1-form-dark.png"))
    ui.page.wait_for_timeout(500)  # the theme's variables settle
    assert_accessible(ui.page, "form waiting with answered cards above, dark")
    card.get_by_role("button", name="Dismiss without an answer").click()
    expect(panel.locator(".jp-ACP-elicitResult").last).to_have_text("Cancelled.", timeout=LONG)
    ui.page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
