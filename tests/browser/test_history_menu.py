"""The history menu: a notebook's earlier conversations listed in the panel's header, one opened
read-only with the panel's renderers, resumed (the echo agent is given its history), deleted after a
confirmation."""

from __future__ import annotations

from pathlib import Path

import pytest
from axe import assert_accessible, set_theme

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screens"


def shot(ui, label: str, full: bool = False) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    target = ui.page if full else ui.panel
    target.screenshot(path=str(SCREENS / f"b5-{label}.png"))


def test_history_menu_lists_opens_resumes_and_deletes(ui, second_ui):
    nb = ui.lab.notebook("history.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.widen_panel()
    panel = ui.panel
    ui.send("tell me about apples")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("apples", timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    panel.get_by_role("button", name="New conversation (the agent forgets this one)").click()
    expect(panel.locator(".jp-ACP-notice").last).to_contain_text("new conversation", timeout=LONG)
    ui.send("now pears please")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("pears", timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)

    # the menu: newest first, the current one marked
    history = panel.get_by_role("button", name="Earlier conversations of this notebook")
    history.click()
    menu = panel.locator(".jp-ACP-historyMenu")
    items = menu.locator(".jp-ACP-historyItem")
    expect(items).to_have_count(2, timeout=LONG)
    expect(items.nth(0)).to_contain_text("now pears please")
    expect(items.nth(0)).to_contain_text("current")
    expect(items.nth(1)).to_contain_text("tell me about apples")
    expect(items.nth(1)).to_contain_text("echo · 1 turn")
    shot(ui, "menu")
    assert_accessible(ui.page, "history menu, light")

    # opened read-only: a banner, the earlier answer rendered, no prompt box
    items.nth(1).locator(".jp-ACP-historyOpen").click()
    archive = panel.locator(".jp-ACP-archive")
    expect(archive).to_be_visible()
    expect(archive.locator(".jp-ACP-archiveBanner")).to_contain_text("Earlier conversation")
    expect(archive.locator(".jp-ACP-message").last).to_contain_text("apples", timeout=LONG)
    expect(archive.locator(".jp-ACP-message")).not_to_contain_text("pears")
    expect(panel.get_by_label("Message to the agent")).to_be_hidden()
    expect(menu).to_be_hidden()
    shot(ui, "read-only")
    assert_accessible(ui.page, "read-only conversation, light")
    archive.get_by_role("button", name="Back to the current conversation").click()
    expect(archive).to_be_hidden()
    expect(panel.get_by_label("Message to the agent")).to_be_visible()

    # a second browser on the same notebook shows the current conversation (and follows a resume below)
    b = second_ui
    b.open_lab(nb)
    b.wait_ready("echo")
    other = b.panel.locator(".jp-ACP-body .jp-ACP-message")
    expect(other.filter(has_text="pears")).to_have_count(1, timeout=LONG)
    expect(other.filter(has_text="apples")).to_have_count(0)

    # resumed: the panel shows it (and only it) again, and the agent (which cannot reload it) is given its history
    history.click()
    items.nth(1).get_by_role("button", name="Make it the current conversation again").click()
    expect(menu).to_be_hidden()
    live = panel.locator(".jp-ACP-body .jp-ACP-message")
    expect(live.filter(has_text="apples")).to_have_count(1, timeout=LONG)
    expect(live.filter(has_text="pears")).to_have_count(0)
    expect(other.filter(has_text="apples")).to_have_count(1, timeout=LONG)
    expect(other.filter(has_text="pears")).to_have_count(0)
    ui.wait_ready("echo")
    ui.send("which fruit")
    expect(live.last).to_contain_text("User: tell me about apples", timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    shot(ui, "resumed")

    # deleted after a confirmation: gone from the menu and from the server
    history.click()
    expect(items).to_have_count(2, timeout=LONG)
    expect(items.nth(0)).to_contain_text("tell me about apples")
    expect(items.nth(0)).to_contain_text("current")
    pears = items.filter(has_text="now pears please")
    pears.get_by_role("button", name="Delete this conversation", exact=True).click()
    expect(pears.locator(".jp-ACP-historyConfirm")).to_have_text("Delete it for good?")
    shot(ui, "delete-confirm")
    assert_accessible(ui.page, "history menu asking to confirm a delete, light")
    pears.get_by_role("button", name="Delete this conversation and its history").click()
    expect(items).to_have_count(1, timeout=LONG)
    expect(items.nth(0)).to_contain_text("tell me about apples")
    sid = next(s for s in ui.lab.api(f"sessions?notebook={nb}") if s["agent"] == "echo")["id"]
    assert [c["title"] for c in ui.lab.api(f"sessions/{sid}/conversations")] == ["tell me about apples"]
    shot(ui, "after-delete")

    # the dark theme: the menu and a read-only conversation
    set_theme(ui.page, dark=True)
    ui.show_panel()
    panel.get_by_role("button", name="New conversation (the agent forgets this one)").click()
    expect(panel.locator(".jp-ACP-notice").last).to_contain_text("new conversation", timeout=LONG)
    history.click()
    expect(items).to_have_count(2, timeout=LONG)
    assert_accessible(ui.page, "history menu, dark")
    items.filter(has_text="tell me about apples").locator(".jp-ACP-historyOpen").click()
    expect(archive).to_be_visible()
    expect(archive.locator(".jp-ACP-message").last).to_contain_text("apples", timeout=LONG)
    assert_accessible(ui.page, "read-only conversation, dark")
    shot(ui, "read-only-dark")
    archive.get_by_role("button", name="Back to the current conversation").click()
    set_theme(ui.page, dark=False)


def test_fork_from_here_starts_a_new_conversation_listed_in_the_history(ui):
    """ "Fork from here" on a turn's end: the panel shows the new conversation afresh, holding what was said up to that
    turn and no further, and the history lists both."""
    nb = ui.lab.notebook("fork.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.widen_panel()
    panel = ui.panel
    for words in ("first about plums", "second about figs"):
        ui.send(words)
        expect(panel.locator(".jp-ACP-message").last).to_contain_text(words.split()[-1], timeout=LONG)
        expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    panel.locator(".jp-ACP-turnEnd").first.get_by_role("button", name="Fork from here").click()
    expect(panel.locator(".jp-ACP-notice").last).to_contain_text("forked after that turn", timeout=LONG)
    expect(panel.locator(".jp-ACP-message", has_text="plums").first).to_be_visible()
    expect(panel.locator(".jp-ACP-message", has_text="figs")).to_have_count(0)
    shot(ui, "forked")
    assert_accessible(ui.page, "forked conversation, light")
    panel.get_by_role("button", name="Earlier conversations of this notebook").click()
    items = panel.locator(".jp-ACP-historyMenu .jp-ACP-historyItem")
    expect(items).to_have_count(2, timeout=LONG)
    expect(items.nth(0)).to_contain_text("current")
    expect(items.nth(0)).to_contain_text("1 turn")
    expect(items.nth(1)).to_contain_text("2 turns")
