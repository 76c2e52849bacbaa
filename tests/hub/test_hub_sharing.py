"""Deployed as a university or a company would: a real JupyterHub, alice's server and what others may do on it.

The hub of ``conftest.py`` (one for this module). Alice uses her server through the hub's login and the hub's API;
bob is refused everywhere on it until she shares it: read only (he watches, he cannot act), then access, read and
write without execute (he prompts, he cannot change alice's agent settings). Alice's two named servers share one
data dir; the admin's preset and the agent alice enabled are both there after a restart. Every port is on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
import websocket

from jupyter_acp.protocol.transcript import message_text
from tests.browser.axe import assert_accessible, set_theme

from .conftest import FULL_SHARE, READ_SHARE, Person, descendants_of

# the module's hub starts in the first test's set-up (13 s in CI, 50 s on a loaded machine), counted in its time
pytestmark = pytest.mark.timeout(300)

SID = "0" * 32


def ws_connect(hub, owner: str, path: str, token: str):
    """A WebSocket to a route of ``owner``'s server through the proxy, or the HTTP status that refused it."""
    try:
        return websocket.create_connection(
            hub.ws_url(owner, path), header=[f"Authorization: token {token}"], timeout=30
        )
    except websocket.WebSocketBadStatusException as exc:
        return exc.status_code


def read_frames(ws, predicate, timeout: float = 60) -> list:
    """Events from a stream socket until ``predicate(events)``; answers to ops are kept too."""
    events: list = []
    deadline = time.monotonic() + timeout
    while not predicate(events):
        ws.settimeout(max(0.1, deadline - time.monotonic()))
        data = json.loads(ws.recv())
        events.extend(data if isinstance(data, list) else [data])
        assert time.monotonic() < deadline, f"timed out: {json.dumps(events)[-2000:]}"
    return events


def ended(turn: str):
    return lambda evs: any(e.get("type") == "turn_ended" and e.get("turn_id") == turn for e in evs)


def every_route() -> list[tuple[str, str]]:
    """Every (method, path) of the extension's user and kernel routes, their parameters filled with samples."""
    from tornado import web

    from jupyter_acp.http import kernel_routes
    from jupyter_acp.http.user_routes import handlers

    samples = {"session_id": SID, "request_id": "r1", "name": "echo", "cid": "c1", "eid": "e1", "kernel_id": "k" * 8}
    out = []
    for pattern, cls, *_ in [*handlers(), *kernel_routes.handlers()]:
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)(\{[^}]*\})?", lambda m: samples.get(m.group(1), "x"), pattern)
        path = path.replace("\\", "").lstrip("/").removeprefix("jupyter-acp/")
        for method in ("get", "post", "put", "delete", "patch"):
            if getattr(cls, method) is not getattr(web.RequestHandler, method):
                out.append((method.upper(), path))
    return out


# -- alice on her own server ------------------------------------------------------------------------------------------
def test_alice_logs_in_through_the_hub_and_allows_the_agents_edit(hub, browser):
    nb = hub.notebook("alice", "journey.ipynb", ["x = 1"], ids=["cell-one"])
    alice = Person(browser, hub, "alice", "alice-journey")
    try:
        alice.login()
        alice.open("alice", nb)
        alice.pick("builtin")
        alice.send("make it 42")
        allow = alice.panel.locator(".jp-ACP-permissionOption[data-option-kind='allow_once']").last
        allow.wait_for(timeout=90_000)
        alice.shot("01-asked")
        allow.click()
        alice.page.locator(".jp-Cell", has_text="x = 42").first.wait_for(timeout=60_000)
        alice.panel.get_by_text("the cell now reads x = 42").first.wait_for(timeout=60_000)
        alice.shot("02-edited")
        alice.page.reload()
        alice.wait_panel()
        alice.panel.get_by_text("the cell now reads x = 42").first.wait_for(timeout=60_000)  # history kept
        assert not [e for e in alice.errors if "jupyter-acp" in e or "ACP" in e]
    finally:
        alice.close()


def test_the_api_with_a_hub_token_through_the_proxy(hub):
    token = hub.token("alice")
    listed = {a["name"] for a in hub.acp("alice", "GET", "agents", token=token).json()}
    assert {"team", "builtin", "echo"} <= listed
    nb = hub.notebook("alice", "api.ipynb")
    s = hub.acp("alice", "POST", "sessions", {"notebook": nb, "agent": "echo"}, token=token).json()
    ws = ws_connect(hub, "alice", f"sessions/{s['id']}/stream?after=0", token)
    assert not isinstance(ws, int), ws
    turn = hub.acp("alice", "POST", f"sessions/{s['id']}/prompt", {"text": "echo through the hub"}, token=token)
    assert turn.status_code == 202, turn.text
    events = read_frames(ws, ended(turn.json()["turn_id"]))
    assert "echo through the hub" in message_text(events, turn.json()["turn_id"])
    ws.close()


def test_nothing_the_hub_started_listens_beyond_127_0_0_1(hub):
    pids = {hub.proc.pid, *descendants_of(hub.proc.pid)}
    listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    ours = [line for line in listening if any(f"pid={pid}," in line for pid in pids)]
    assert ours, listening
    for line in ours:
        local = line.split()[3]
        assert local.startswith("127.0.0.1:"), line


# -- bob ----------------------------------------------------------------------------------------------------------
def test_bob_without_access_is_refused_by_every_route_and_both_sockets(hub):
    hub.unshare("alice", "bob")
    token = hub.token("bob")
    routes = every_route()
    assert len(routes) >= 30
    answered = {
        (m, p): hub.acp("alice", m, p, {} if m in ("POST", "PUT", "PATCH") else None, token=token).status_code
        for m, p in routes
    }
    assert set(answered.values()) == {403}, {k: v for k, v in answered.items() if v != 403}
    assert ws_connect(hub, "alice", f"sessions/{SID}/stream", token) == 403
    assert ws_connect(hub, "alice", "frontend/ws", token) == 403


def test_a_read_only_share_lets_bob_watch_but_not_act(hub, browser):
    nb = hub.notebook("alice", "shared-read.ipynb", ["y = 2"])
    alice = hub.token("alice")
    s = hub.acp("alice", "POST", "sessions", {"notebook": nb, "agent": "echo"}, token=alice).json()
    hub.share("alice", "bob", READ_SHARE)
    bob = hub.token("bob")
    # he reads: the agents, the session, its events, its stream
    assert hub.acp("alice", "GET", "agents", token=bob).status_code == 200
    assert hub.acp("alice", "GET", f"sessions/{s['id']}", token=bob).status_code == 200
    ws = ws_connect(hub, "alice", f"sessions/{s['id']}/stream?after=0", bob)
    assert not isinstance(ws, int), ws
    turn = hub.acp("alice", "POST", f"sessions/{s['id']}/prompt", {"text": "alice asks, bob watches"}, token=alice)
    watched = read_frames(ws, ended(turn.json()["turn_id"]))
    assert "alice asks, bob watches" in message_text(watched, turn.json()["turn_id"])
    # he cannot act: a prompt, an op on the stream, the tab bridge, the agents' set-up
    refused = hub.acp("alice", "POST", f"sessions/{s['id']}/prompt", {"text": "bob's words"}, token=bob)
    assert refused.status_code == 403
    ws.send(json.dumps({"op": "prompt", "ref": "b1", "text": "bob's words over the socket"}))
    answer = read_frames(ws, lambda evs: any(e.get("ref") == "b1" for e in evs))
    op = next(e for e in answer if e.get("ref") == "b1")
    assert op["ok"] is False and op["status"] == 403 and "write" in op["error"]
    ws.close()
    assert ws_connect(hub, "alice", "frontend/ws", bob) == 403
    for path, body in (("agents/builtin/settings", {"model": "openai/bobs"}), ("agents/enable", {"name": "codex"})):
        assert hub.acp("alice", "POST", path, body, token=bob).status_code == 403
    events = hub.acp("alice", "GET", f"sessions/{s['id']}/events?after=0", token=alice).json()
    assert "bob's words" not in json.dumps(events)

    hub.unshare("alice", "bob")

    # the same in his browser, with the share as a group's role (a browser gets no custom scope of a share: conftest)
    hub.join("alice-readers", "bob")
    person = Person(browser, hub, "bob", "bob-read-only")
    try:
        person.login()
        # jupyter-collaboration opens a document for those who may write it only (its room needs PUT): a reader's
        # notebook tab stays "Loading"; the panel binds to the notebook's path and watches its conversation
        person.open("alice", nb, cells=False)
        person.panel.get_by_text("alice asks, bob watches").first.wait_for(timeout=60_000)
        box = person.panel.get_by_label("Message to the agent")
        assert box.is_disabled() and (box.get_attribute("placeholder") or "").startswith("Read only")
        assert person.panel.get_by_label("Agent for this notebook").is_disabled()
        assert person.panel.locator(".jp-ACP-send").is_disabled()
        loading = person.page.get_by_role("button", name="Continue waiting")
        if loading.count():
            loading.click()
        # what he sees live: alice's next turn
        turn = hub.acp("alice", "POST", f"sessions/{s['id']}/prompt", {"text": "alice again, live"}, token=alice)
        assert turn.status_code == 202
        person.panel.get_by_text("alice again, live").first.wait_for(timeout=60_000)
        person.shot("01-watching")
        # the reader's view (its greyed controls and their reasons included) passes axe, light and dark
        assert_accessible(person.page, "reader view, light", min_contrast=5)
        set_theme(person.page, dark=True)
        assert_accessible(person.page, "reader view, dark", min_contrast=5)
    finally:
        person.close()
        hub.leave("alice-readers", "bob")


def test_a_full_share_lets_bob_prompt_but_not_change_alices_agent_settings(hub):
    nb = hub.notebook("alice", "shared-full.ipynb")
    alice = hub.token("alice")
    s = hub.acp("alice", "POST", "sessions", {"notebook": nb, "agent": "echo"}, token=alice).json()
    hub.share("alice", "bob", FULL_SHARE)
    bob = hub.token("bob")
    turn = hub.acp("alice", "POST", f"sessions/{s['id']}/prompt", {"text": "bob asks"}, token=bob)
    assert turn.status_code == 202, turn.text
    asked = hub.wait_turn("alice", s["id"], turn.json()["turn_id"], alice)
    assert "bob asks" in message_text(asked, turn.json()["turn_id"])
    for path, body in (
        ("agents/builtin/settings", {"api_base": "http://127.0.0.1:9/v1"}),
        ("agents/builtin/settings", {"key_env": "OPENAI_API_KEY", "key": "sk-bobs"}),
        ("agents/enable", {"name": "codex"}),
    ):
        refused = hub.acp("alice", "POST", path, body, token=bob)
        assert refused.status_code == 403, refused.text
        assert "needs 'execute' on resource 'jupyter_acp'" in refused.json()["message"]
    hub.unshare("alice", "bob")


def test_alice_and_bob_in_one_notebook_see_the_agents_edits_and_lose_nothing(hub, browser):
    """jupyter-collaboration: both in alice's notebook; alice prompts while bob types in a cell."""
    nb = hub.notebook("alice", "together.ipynb", ["# notes"], ids=["cell-notes"])
    hub.join("alice-writers", "bob")
    alice = Person(browser, hub, "alice", "together-alice")
    bob = Person(browser, hub, "bob", "together-bob")
    typed = " and bob's words, typed while the agent works"
    try:
        alice.login()
        bob.login()
        alice.open("alice", nb)
        bob.open("alice", nb)
        alice.pick("builtin")
        editor = bob.page.locator(".jp-Cell", has_text="# notes").locator(".cm-content").first
        editor.click()
        bob.page.keyboard.press("End")
        alice.send("add a greeting cell")
        bob.page.keyboard.type(typed, delay=40)
        # inserting a cell asks under the default policy: alice allows it in her panel while bob types on
        allow = alice.panel.locator(".jp-ACP-permissionOption[data-option-kind='allow_once']").last
        allow.wait_for(timeout=90_000)
        allow.click()
        for person in (alice, bob):  # the agent's cell, live in both; the same conversation in both panels
            person.page.locator(".jp-Cell", has_text="hello from the agent").first.wait_for(timeout=90_000)
            person.panel.get_by_text("I added a cell that greets you").first.wait_for(timeout=60_000)
            person.page.locator(".jp-Cell", has_text=typed.strip()).first.wait_for(timeout=30_000)
        bob.shot("01-both-edits")
        alice.shot("01-both-edits")
        # the document on disk (jupyter-collaboration saves it): bob's words and the agent's cell, once each
        import nbformat

        deadline = time.monotonic() + 60
        while True:
            doc = nbformat.reads((hub.home("alice") / nb).read_text(), as_version=4)
            sources = [c.source for c in doc.cells]
            if any(typed in src for src in sources) and any("hello from the agent" in src for src in sources):
                break
            assert time.monotonic() < deadline, sources
            time.sleep(0.5)
        assert sources.count("print('hello from the agent')") == 1
        assert next(src for src in sources if typed in src) == "# notes" + typed
    finally:
        alice.close()
        bob.close()
        hub.leave("alice-writers", "bob")


# -- alice's servers ------------------------------------------------------------------------------------------------
def test_two_named_servers_of_alice_start_on_one_data_dir_and_serve_a_prompt_each(hub):
    hub.start("alice", "second")
    token = hub.token("alice")
    nb = hub.notebook("alice", "named.ipynb")
    for name in ("", "second"):
        s = hub.acp("alice", "POST", "sessions", {"notebook": nb, "agent": "echo"}, token=token, name=name).json()
        turn = hub.acp(
            "alice", "POST", f"sessions/{s['id']}/prompt", {"text": f"to {name or 'default'}"}, token=token, name=name
        )
        assert turn.status_code == 202, turn.text
        deadline = time.monotonic() + 90
        while True:
            events = hub.acp("alice", "GET", f"sessions/{s['id']}/events?after=0", token=token, name=name).json()
            if any(e["type"] == "turn_ended" and e.get("turn_id") == turn.json()["turn_id"] for e in events):
                break
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert f"to {name or 'default'}" in message_text(events, turn.json()["turn_id"])
    assert (hub.home("alice") / ".local" / "share" / "jupyter" / "jupyter_acp" / "transcripts.sqlite").exists()
    hub.stop("alice", "second")


def test_the_admins_preset_and_the_agent_alice_enabled_are_both_there_after_a_restart(hub):
    token = hub.token("alice")
    listed = {a["name"]: a for a in hub.acp("alice", "GET", "agents", token=token).json()}
    assert listed["codex"]["configured"] is False  # found on PATH
    enabled = hub.acp("alice", "POST", "agents/enable", {"name": "codex"}, token=token)
    assert enabled.status_code == 201, enabled.text
    kept = hub.home("alice") / ".local" / "share" / "jupyter" / "jupyter_acp" / "user_agents.json"
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
    hub.stop("alice")
    hub.start("alice")
    token = hub.token("alice")
    listed = {a["name"]: a for a in hub.acp("alice", "GET", "agents", token=token).json()}
    assert "team" in listed and listed.get("codex", {}).get("configured") is True, listed.get("codex")
    assert listed["team"]["origin"] == "configuration" and listed["codex"]["origin"] == "user"
    nb = hub.notebook("alice", "after-restart.ipynb")
    s = hub.acp("alice", "POST", "sessions", {"notebook": nb, "agent": "codex"}, token=token).json()
    turn = hub.acp("alice", "POST", f"sessions/{s['id']}/prompt", {"text": "still here"}, token=token).json()
    events = hub.wait_turn("alice", s["id"], turn["turn_id"], token)
    end = next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn["turn_id"])
    assert end.get("stop_reason") == "end_turn" and not end.get("error"), end
