"""The one gate in the sidebar: its controls are the user's, not the agent's.

* The agent writes the option labels, so a button labelled "Reject" could carry kind
  `allow_once`. The sidebar labels each button by its kind; the agent's wording is secondary text.
* "Always allow" is per tool and per notebook session, shown in the panel's header and revocable there.
* A refused action (an ``audit`` event) is a small line saying which rule refused; events the sidebar
  does not know never break it.
* A long history comes in pages: the stream replays the latest one, scrolling up loads the older
  ones ("Earlier messages…") and the conversation comes out whole and in order.
"""

from __future__ import annotations

import re
import sys

import pytest
from gate_agent import lab_with

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000


@pytest.fixture(scope="module")
def lab(tmp_path_factory, fake_model):
    """A lab with the scripted `gate` agent and the built-in one (the shared fixture has neither so),
    and short history pages (25 events) so that a reload replays only the latest page."""
    fs = {"command": sys.executable, "args": ["-m", "jupyter_acp.testing.agents", "fs"], "title": "Scripted: fs"}
    with lab_with(tmp_path_factory.mktemp("gate-lab"), fake_model, {"fs": fs}, replay_page_events=25) as lab:
        yield lab


def _session(lab, notebook: str, agent: str) -> dict:
    return next(s for s in lab.api(f"sessions?notebook={notebook}") if s["agent"] == agent)


def test_permission_buttons_are_labelled_by_kind_not_by_the_agent(ui):
    nb = ui.lab.notebook("swap.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    panel = ui.panel
    ui.send("ask")
    card = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)
    allow = card.locator('button[data-option-kind="allow_once"]')
    reject = card.locator('button[data-option-kind="reject_once"]')
    # the main label says what the button does; the agent's name for it is the small print
    expect(allow.locator(".jp-ACP-buttonLabel")).to_have_text("Allow once")
    expect(reject.locator(".jp-ACP-buttonLabel")).to_have_text("Reject")
    expect(allow.locator(".jp-ACP-optionAgentName")).to_contain_text("Reject")
    expect(reject.locator(".jp-ACP-optionAgentName")).to_contain_text("Allow")
    # styled by kind: the allowing button looks like an allow, whatever its name
    expect(allow).to_have_class(re.compile(r"\bjp-mod-allow\b"))
    expect(reject).to_have_class(re.compile(r"\bjp-mod-reject\b"))
    for b in card.locator("button").all():
        label = b.locator(".jp-ACP-buttonLabel").inner_text()
        kind = b.get_attribute("data-option-kind")
        assert label.startswith("Reject") == kind.startswith("reject"), (label, kind)
    # the accessible name starts with the kind's label, too
    expect(card.get_by_role("button", name="Allow once")).to_have_attribute("data-option-kind", "allow_once")
    ui.shot("swapped-labels", full=False)

    # the button the user reads as "Reject" rejects
    card.locator("button", has=ui.page.locator(".jp-ACP-buttonLabel", has_text="Reject")).click()
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("permission: named-allow", timeout=LONG)
    resolved = panel.locator(".jp-ACP-permission.jp-mod-resolved")
    expect(resolved).to_contain_text("Rejected")
    expect(resolved).to_have_class(re.compile(r"\bjp-mod-rejected\b"))


def test_always_allow_is_shown_per_tool_and_revocable(ui, second_ui):
    nb = ui.lab.notebook("always.ipynb", ["x = 1"], ids=["cell-one"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("builtin")
    panel = ui.panel
    strip = panel.locator(".jp-ACP-policy")
    expect(strip).to_be_hidden()
    # another browser on the same notebook's session follows the policy live (policy_changed events)
    b = second_ui
    b.open_lab(nb)
    # bound to one of the notebook's sessions (the most recent one: which, depends on timing), then the built-in's
    b.page.wait_for_function("() => !!document.querySelector('#jupyter-acp-sidebar').dataset.agent", timeout=LONG)
    b.pick_agent("builtin")
    other = b.panel.locator(".jp-ACP-policy")
    expect(other).to_be_hidden()
    ui.send("make it 42")
    card = panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")
    expect(card).to_be_visible(timeout=LONG)
    card.locator('button[data-option-kind="allow_always"]').click()
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    # the header says what is always allowed, for this notebook's session
    expect(strip).to_be_visible(timeout=LONG)
    expect(strip).to_contain_text("Always allowed")
    chip = strip.locator('.jp-ACP-policyChip[data-tool="client_edit_cell"]')
    expect(chip).to_contain_text("Edit cell")
    sid = _session(ui.lab, nb, "builtin")["id"]
    assert ui.lab.api(f"sessions/{sid}")["always_allowed"] == ["client_edit_cell"]
    expect(other.locator('.jp-ACP-policyChip[data-tool="client_edit_cell"]')).to_be_visible(timeout=LONG)
    ui.shot("always-allowed", full=False)

    # a reload shows it again (the session says so)
    ui.page.reload()
    ui.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=LONG)
    ui.show_panel()
    ui.wait_ready("builtin")
    expect(panel.locator('.jp-ACP-policyChip[data-tool="client_edit_cell"]')).to_be_visible(timeout=LONG)

    # × revokes: the strip empties and the next edit asks again
    panel.get_by_role("button", name="Stop always allowing Edit cell").click()
    expect(panel.locator(".jp-ACP-policy")).to_be_hidden(timeout=LONG)
    assert ui.lab.api(f"sessions/{sid}")["always_allowed"] == []
    expect(other).to_be_hidden(timeout=LONG)
    ui.send("make it 43")
    expect(panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")).to_be_visible(timeout=LONG)
    panel.locator('.jp-ACP-permission:not(.jp-mod-resolved) button[data-option-kind="reject_once"]').click()
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)


def test_long_history_comes_in_pages_when_scrolled_up(ui):
    nb = ui.lab.notebook("long.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    panel = ui.panel
    for turn in range(3):
        ui.send(f"history {40 + turn}")
        expect(panel.locator(".jp-ACP-message").nth(turn)).to_contain_text(f"h{39 + turn}", timeout=LONG)
        expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    sid = _session(ui.lab, nb, "gate")["id"]
    # three turns of 40+ chunks: several pages of history even when a loaded machine joins some chunks in one flush
    assert ui.lab.api(f"sessions/{sid}")["last_seq"] > 75

    # a reload replays only the latest page (25 events): the start of the conversation is not there
    ui.page.reload()
    ui.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=LONG)
    ui.show_panel()
    ui.wait_ready("gate")
    log = panel.locator(".jp-ACP-log")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("h41", timeout=LONG)
    earlier = panel.locator(".jp-ACP-earlier")
    expect(earlier).to_be_visible()
    expect(earlier.get_by_role("button", name="Earlier messages")).to_be_visible()
    assert panel.locator(".jp-ACP-user").count() < 3
    # the latest is what shows: the log is at its bottom
    ui.page.wait_for_function("n => n.scrollHeight - n.scrollTop - n.clientHeight < 48", arg=log.element_handle())
    ui.shot("history-latest-page", full=False)

    # scrolling to the top loads the page before, above what was on screen (which stays in view)
    for _ in range(20):
        if not earlier.is_visible():
            break
        before = panel.locator(".jp-ACP-message p").count()
        log.evaluate("n => { n.scrollTop = 0; n.dispatchEvent(new Event('scroll')); }")
        ui.page.wait_for_function(
            "([n, c]) => n.querySelectorAll('.jp-ACP-message p').length > c"
            " || n.querySelector('.jp-ACP-earlier').hidden",
            arg=[log.element_handle(), before],
            timeout=LONG,
        )
        if earlier.is_visible():
            assert log.evaluate("n => n.scrollTop") > 0, "the reading position jumped to the top"
    expect(earlier).to_be_hidden()
    # the whole conversation, once, in order
    expect(panel.locator(".jp-ACP-user")).to_have_count(3)
    messages = panel.locator(".jp-ACP-message")
    expect(messages).to_have_count(3)
    for turn in range(3):
        # text content, not innerText: an answer scrolled out of view is not drawn (content-visibility), and its
        # innerText is empty
        paragraphs = messages.nth(turn).locator("p").all_text_contents()
        assert paragraphs == [f"h{i}" for i in range(40 + turn)], (turn, paragraphs[:5], len(paragraphs))


def test_a_refused_action_says_which_rule(ui):
    nb = ui.lab.notebook("refused.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    ui.pick_agent("fs")
    panel = ui.panel
    ui.send("read /etc/hostname")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("error", timeout=LONG)
    line = panel.locator(".jp-ACP-audit")
    expect(line).to_have_count(1, timeout=LONG)
    expect(line).to_contain_text("Refused: Read files")
    expect(line).to_contain_text("rule:")
    ui.shot("refused", full=False)
    # the conversation goes on; an allowed action is its own answer, not an audit line
    (ui.lab.root / "note.txt").write_text("hello")
    ui.send(f"read {ui.lab.root / 'note.txt'}")
    expect(panel.locator(".jp-ACP-message").last).to_have_text("ok: hello", timeout=LONG)
    expect(line).to_have_count(1)
