"""A hub admin in control: the single-user image fixes what its users may change, and each refusal says why.

The hub of ``conftest.py`` (one for this module) with the admin's controls in the image's config: users may enable
or log in to ``claude`` only, the built-in agent's model and endpoint are the hub's (its fake model server standing
for a LiteLLM proxy, the key in the hub's environment), no provider key is kept from the panel, and users may not
pick the policy ``auto`` (no "Always allow", no mode that acts without asking). The API answers each refusal with
the setting that made it and says ``fixed_by_admin``; the panel shows those controls greyed with the reason.
"""

from __future__ import annotations

import json
import time

import pytest

from jupyter_acp.protocol.transcript import message_text

from .conftest import Person

# the module's hub starts in the first test's set-up (13 s in CI, 50 s on a loaded machine), counted in its time
pytestmark = pytest.mark.timeout(300)

ADMIN_CONFIG = """
c.JupyterACP.allowed_user_agents = ["claude"]
c.JupyterACP.builtin_model_form = False
c.JupyterACP.user_provider_keys = False
c.JupyterACP.user_policies = ["ask", "deny"]
"""


def message(resp) -> str:
    return resp.json()["message"]


def wait_for(hub, sid: str, token: str, predicate, timeout: float = 90) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        events = hub.acp("alice", "GET", f"sessions/{sid}/events?after=0", token=token).json()
        if predicate(events):
            return events
        assert time.monotonic() < deadline, json.dumps(events)[-2000:]
        time.sleep(0.2)


def test_each_admin_control_refuses_with_the_setting_that_made_it(hub):
    token = hub.token("alice")
    # which agents users may enable or log in to
    listed = {a["name"]: a for a in hub.acp("alice", "GET", "agents", token=token).json()}
    assert "c.JupyterACP.allowed_user_agents" in listed["codex"]["fixed_by_admin"]
    refused = hub.acp("alice", "POST", "agents/enable", {"name": "codex"}, token=token)
    assert refused.status_code == 403 and "c.JupyterACP.allowed_user_agents" in message(refused)
    refused = hub.acp("alice", "POST", "agents/team/authenticate", {"methodId": "login"}, token=token)
    assert refused.status_code == 403 and "c.JupyterACP.allowed_user_agents" in message(refused)
    # the model and endpoint, and the keys: the hub's
    described = hub.acp("alice", "GET", "agents/builtin/settings", token=token).json()
    assert described["model"] == "openai/fake" and described["needs_model"] is False
    assert "c.JupyterACP.builtin_model_form = False" in described["fixed_by_admin"]["model"]
    assert "c.JupyterACP.user_provider_keys = False" in described["fixed_by_admin"]["key"]
    assert described["stored"] == "stored on the server" and str(hub.base) not in json.dumps(described)
    for body, setting in (
        ({"model": "openai/mine"}, "c.JupyterACP.builtin_model_form"),
        ({"api_base": "http://127.0.0.1:9/v1"}, "c.JupyterACP.builtin_model_form"),
        ({"key_env": "OPENAI_API_KEY", "key": "sk-mine"}, "c.JupyterACP.user_provider_keys"),
    ):
        refused = hub.acp("alice", "POST", "agents/builtin/settings", body, token=token)
        assert refused.status_code == 403 and setting in message(refused), refused.text
    # the policy values users may pick: no mode that acts without asking, no "Always allow"
    nb = hub.notebook("alice", "controls.ipynb", ["x = 1"], ids=["cell-one"])
    s = hub.acp("alice", "POST", "sessions", {"notebook": nb, "agent": "builtin"}, token=token).json()
    wait_for(hub, s["id"], token, lambda evs: any(e["type"] == "session_ready" for e in evs))
    info = hub.acp("alice", "GET", f"sessions/{s['id']}", token=token).json()
    assert "auto" in info["fixed_by_admin"]["modes"]
    assert hub.acp("alice", "POST", f"sessions/{s['id']}/mode", {"mode_id": "ask"}, token=token).status_code == 200
    refused = hub.acp("alice", "POST", f"sessions/{s['id']}/mode", {"mode_id": "auto"}, token=token)
    assert refused.status_code == 403 and "c.JupyterACP.user_policies" in message(refused)
    turn = hub.acp("alice", "POST", f"sessions/{s['id']}/prompt", {"text": "make it 42"}, token=token).json()
    events = wait_for(hub, s["id"], token, lambda evs: any(e["type"] == "permission_request" for e in evs))
    request = next(e for e in events if e["type"] == "permission_request")
    always = next(o for o in request["options"] if o["kind"] == "allow_always")
    assert "c.JupyterACP.user_policies" in always["fixed_by_admin"]
    answer = f"sessions/{s['id']}/permissions/{request['request_id']}"
    refused = hub.acp("alice", "POST", answer, {"option_id": always["optionId"]}, token=token)
    assert refused.status_code == 403 and "'Always allow'" in message(refused)
    assert hub.acp("alice", "POST", answer, {"option_id": "allow_once"}, token=token).status_code == 200
    events = hub.wait_turn("alice", s["id"], turn["turn_id"], token)
    # the answer's words as the panel shows them (a loaded machine streams them in several chunks)
    assert "the cell now reads x = 42" in message_text(events, turn["turn_id"])


def test_alice_sees_what_the_admin_fixed_greyed_with_the_reason(hub, browser):
    nb = hub.notebook("alice", "greyed.ipynb", ["x = 1"], ids=["cell-one"])
    alice = Person(browser, hub, "alice", "admin-fixed")
    try:
        alice.login()
        alice.open("alice", nb)
        # the agent picker: codex is found on PATH, listed, and greyed with the admin's reason
        codex = alice.panel.locator("option[value='enable:codex']")
        codex.wait_for(state="attached", timeout=60_000)
        assert codex.is_disabled() and "not allowed by your admin" in codex.inner_text()
        assert "c.JupyterACP.allowed_user_agents" in (codex.get_attribute("title") or "")
        alice.pick("builtin")
        # "Always allow" on the gate's card: greyed, the reason beside the buttons; Allow once still works
        alice.send("make it 42")
        always = alice.panel.locator(".jp-ACP-permissionOption[data-option-kind='allow_always']").last
        always.wait_for(timeout=90_000)
        assert always.is_disabled()
        alice.panel.locator(".jp-ACP-permissionFixed", has_text="c.JupyterACP.user_policies").last.wait_for()
        alice.shot("01-always-allow-greyed")
        alice.panel.locator(".jp-ACP-permissionOption[data-option-kind='allow_once']").last.click()
        alice.page.locator(".jp-Cell", has_text="x = 42").first.wait_for(timeout=60_000)
        # the model form, opened from a refused key: the hub's model shown, every field greyed, the reasons said
        alice.send("refuse my key")
        alice.panel.get_by_role("button", name="Change the model or key").last.click(timeout=90_000)
        card = alice.panel.locator(".jp-ACP-setup")
        card.get_by_label("Model", exact=True).wait_for()
        assert card.get_by_label("Model", exact=True).input_value() == "openai/fake"
        for field in ("Model", "Key variable", "API key", "API base URL"):
            assert card.get_by_label(field, exact=True).is_disabled(), field
        assert card.locator(".jp-ACP-setupSave").is_disabled()
        fixed = card.locator(".jp-ACP-setupFixed")
        assert fixed.count() == 2
        assert "c.JupyterACP.builtin_model_form = False" in fixed.nth(0).inner_text()
        assert "c.JupyterACP.user_provider_keys = False" in fixed.nth(1).inner_text()
        alice.shot("02-model-form-greyed")
    finally:
        alice.close()
