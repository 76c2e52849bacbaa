"""Somebody is named, in the browser: two people share a notebook's session and each panel names the other.

Alice and Bob are two browsers on one JupyterLab whose identity provider (``tests/users.py`` ``NamedUsers``) gives
each its own person (a cookie says which, with a display name and a colour), as a JupyterHub share or
jupyter-collaboration would. In the user's order: alice switches the notebook to an agent that asks and prompts; bob
opens the notebook and sees her prompt marked with her name; he allows the card; alice's card says "Bob Dylan
allowed · HH:MM" and his says "You allowed"; then bob prompts and alice rejects, and each panel says so.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Lab, Ui, _agent, run_lab  # the browser tests' conftest (same folder)

from tests.users import USER_COOKIE

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
SCREENS = Path("/work/notes/screens")
TIME = r"\d\d:\d\d"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    settings = {"default_agent": "echo", "agents": {"perm": _agent("permission", title="Scripted: permission")}}
    people = {"identity_provider_class": "tests.users.NamedUsers"}
    with run_lab(tmp_path_factory.mktemp("names"), settings, server_app=people, keep_log="names-server.log") as lab:
        yield lab


@pytest.fixture
def bob(browser, lab: Lab, request: pytest.FixtureRequest) -> Iterator[Ui]:
    """Bob's browser: its own context, and the cookie that makes the test identity provider say it is bob."""
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    context.set_default_timeout(30_000)
    context.add_cookies([{"name": USER_COOKIE, "value": "bob", "url": lab.url}])
    try:
        yield Ui(context.new_page(), lab, request.node.name.removeprefix("test_") + "-bob")
    finally:
        context.close()


def keep(ui: Ui, label: str) -> None:
    """A screenshot of the panel, in the test's artifacts and in the notes."""
    path = ui.shot(label, full=False)
    SCREENS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENS / f"names-{label}.png")


def test_two_people_in_one_session_see_who_prompted_and_who_answered(ui: Ui, bob: Ui):
    alice = ui  # no cookie: the identity provider's default person is alice
    nb = alice.lab.notebook("shared.ipynb")
    alice.open_lab(nb)
    alice.wait_ready("echo")
    alice.pick_agent("perm")
    alice.send("alice asks to write")
    expect(alice.panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)")).to_be_visible(timeout=LONG)
    # her own prompt is not marked: the viewer's words stay as they always were
    expect(alice.panel.locator(".jp-ACP-user").first.locator(".jp-ACP-userBy")).to_have_count(0)

    bob.open_lab(nb)
    bob.wait_ready("perm")
    her_prompt = bob.panel.locator(".jp-ACP-user", has_text="alice asks to write")
    expect(her_prompt.locator(".jp-ACP-userBy")).to_have_text(re.compile(rf"^Alice Liddell · {TIME}$"), timeout=LONG)
    # the agent switch she made is named in his log too
    switch = bob.panel.locator(".jp-ACP-notice", has_text="The notebook's agent is now perm")
    expect(switch.locator(".jp-ACP-noticeBy")).to_contain_text("Alice Liddell")
    bob.panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)").get_by_role("button", name="Allow").click()
    expect(bob.panel.locator(".jp-ACP-permission.jp-mod-allowed .jp-ACP-permissionBy")).to_have_text(
        re.compile(rf"^You allowed · {TIME}$"), timeout=LONG
    )
    expect(alice.panel.locator(".jp-ACP-permission.jp-mod-allowed .jp-ACP-permissionBy")).to_have_text(
        re.compile(rf"^Bob Dylan allowed · {TIME}$"), timeout=LONG
    )
    expect(alice.panel.locator(".jp-ACP-message").last).to_have_text("permission: allow", timeout=LONG)

    # bob's turn: alice sees whose prompt it is, and answers his card
    bob.send("bob asks to write")
    his_prompt = alice.panel.locator(".jp-ACP-user", has_text="bob asks to write")
    expect(his_prompt.locator(".jp-ACP-userBy")).to_have_text(re.compile(rf"^Bob Dylan · {TIME}$"), timeout=LONG)
    expect(his_prompt.locator(".jp-ACP-userBy")).to_have_attribute("data-user", "bob")
    # his colour, from his identity, marks his name
    mark = his_prompt.locator(".jp-ACP-byMark")
    assert "collaborator-color3" in (mark.get_attribute("style") or "")
    expect(bob.panel.locator(".jp-ACP-user", has_text="bob asks to write").locator(".jp-ACP-userBy")).to_have_count(0)
    alice.panel.locator(".jp-ACP-permission:not(.jp-mod-resolved)").get_by_role("button", name="Reject").click()
    expect(bob.panel.locator(".jp-ACP-permission.jp-mod-rejected .jp-ACP-permissionBy")).to_have_text(
        re.compile(rf"^Alice Liddell rejected · {TIME}$"), timeout=LONG
    )
    expect(alice.panel.locator(".jp-ACP-permission.jp-mod-rejected .jp-ACP-permissionBy")).to_have_text(
        re.compile(rf"^You rejected · {TIME}$"), timeout=LONG
    )
    expect(bob.panel.locator(".jp-ACP-message").last).to_have_text("permission: reject", timeout=LONG)
    alice.widen_panel()
    bob.widen_panel()
    keep(alice, "alice-panel")
    keep(bob, "bob-panel")
