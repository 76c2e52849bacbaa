"""Somebody is named.

Two people with write access to one server share a notebook's session.  Every prompt, card answer, agent switch,
revoke and policy change carries ``actor``: the Jupyter identity of who did it (username, display name, colour), or
what did it when no person did (the ``%%acp`` magic, the server).  A real server with the identity provider of
``tests/users.py`` (``NamedUsers``: alice and bob, with names and colours), a real scripted agent, the HTTP routes and
the session's WebSocket, as the two panels use them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from jupyter_acp.protocol.wire import validate_event

from .conftest import hostile, scripted
from .users import USER_HEADER, NamedUsers

ALICE = {"kind": "user", "username": "alice", "display_name": "Alice Liddell", "color": "var(--jp-collaborator-color1)"}
BOB = {"kind": "user", "username": "bob", "display_name": "Bob Dylan", "color": "var(--jp-collaborator-color3)"}


@pytest.fixture
def server_app_config():
    return {"identity_provider_class": NamedUsers}


@pytest.fixture
def acp_agents(tmp_path):
    return {
        "perm": scripted("permission"),
        "hostile": hostile(tmp_path),
        # the built-in agent with a model configured offers modes and a model option (no model server is needed)
        "modelled": {
            "command": sys.executable,
            "args": ["-m", "jupyter_acp.agent", "--models", "openai/a,openai/b"],
            "env": {"JUPYTER_ACP_MODEL": "openai/a"},
        },
    }


@pytest.fixture
def as_user(jp_fetch):
    """The extension's HTTP API as one person (``as_user("bob", "POST", "sessions", ..., body=...)``)."""

    async def call(user: str, method: str, *parts: str, body: Any = None, params: dict | None = None) -> Any:
        kwargs: dict[str, Any] = {"method": method, "headers": {USER_HEADER: user}}
        if body is not None or method in ("POST", "PUT"):
            kwargs["body"] = json.dumps(body if body is not None else {})
        if params:
            kwargs["params"] = params
        resp = await jp_fetch("jupyter-acp", *parts, **kwargs)
        return json.loads(resp.body) if resp.body else None

    return call


async def answer_of(ws, ref: str) -> dict:
    """The socket's answer to the op sent with ``ref`` (event arrays before it are skipped)."""
    while True:
        data = json.loads(await asyncio.wait_for(ws.read_message(), 30))
        if isinstance(data, dict) and data.get("ref") == ref:
            return data


async def test_two_people_prompt_and_answer_each_others_cards_and_the_events_name_each(
    api, as_user, make_notebook, jp_ws_fetch
):
    nb = make_notebook("shared.ipynb")
    s = await as_user("alice", "POST", "sessions", body={"notebook": nb, "agent": "perm"})

    # alice prompts over HTTP; bob, on his own socket, answers the card the agent asks
    bob = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"},
                            headers={USER_HEADER: "bob"})  # fmt: skip
    first = (await as_user("alice", "POST", "sessions", s["id"], "prompt", body={"text": "alice asks"}))["turn_id"]
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    card = next(e for e in events if e["type"] == "permission_request")
    await bob.write_message(json.dumps({"op": "permission", "ref": "b1", "request_id": card["request_id"],
                                        "option_id": "allow"}))  # fmt: skip
    assert (await answer_of(bob, "b1"))["ok"] is True
    await api.wait_turn_end(s["id"], first)

    # bob prompts over his socket; alice answers that card over HTTP
    await bob.write_message(json.dumps({"op": "prompt", "ref": "b2", "text": "bob asks"}))
    second = (await answer_of(bob, "b2"))["turn_id"]
    events = await api.wait_for(
        s["id"], lambda evs: any(e["type"] == "permission_request" and e["turn_id"] == second for e in evs)
    )
    card2 = next(e for e in events if e["type"] == "permission_request" and e["turn_id"] == second)
    await as_user(
        "alice", "POST", "sessions", s["id"], "permissions", card2["request_id"], body={"option_id": "reject"}
    )
    events = await api.wait_turn_end(s["id"], second)
    bob.close()

    started = {e["turn_id"]: e for e in events if e["type"] == "turn_started"}
    assert started[first]["actor"] == ALICE
    assert started[second]["actor"] == BOB
    resolved = {e["request_id"]: e for e in events if e["type"] == "permission_resolved"}
    assert resolved[card["request_id"]]["actor"] == BOB and resolved[card["request_id"]]["option_id"] == "allow"
    assert resolved[card2["request_id"]]["actor"] == ALICE and resolved[card2["request_id"]]["option_id"] == "reject"
    for e in events:  # declared on the wire: the panel's types are made from it
        validate_event(e)


async def test_an_agent_switch_a_revoke_and_a_policy_change_name_who_made_them(as_user, api, make_notebook):
    nb = make_notebook("switch.ipynb")
    s = await as_user("alice", "POST", "sessions", body={"notebook": nb, "agent": "echo"})
    await as_user(
        "bob", "PUT", "notebooks", "current-agent", params={"path": nb}, body={"agent": "perm", "by": "panel"}
    )
    await as_user("alice", "DELETE", "sessions", s["id"], "always-allow")
    await as_user("bob", "POST", "sessions", s["id"], "policy", body={"policy": None})
    events = await api.events(s["id"])

    switch = next(e for e in events if e["type"] == "notice" and e.get("phase") == "current_agent")
    assert switch["by"] == "panel" and switch["actor"] == BOB  # where (the panel) and who (bob)
    policies = [e for e in events if e["type"] == "policy_changed"]
    assert [p["actor"] for p in policies] == [ALICE, BOB]
    audit = next(e for e in events if e["type"] == "audit" and e["action"] == "policy")
    assert audit["actor"] == BOB and audit["user"] == "bob"
    for e in events:
        validate_event(e)


async def test_an_actor_never_carries_more_than_the_identity_shows_every_collaborator(as_user, api, make_notebook):
    """No token, no avatar URL, nothing the identity provider keeps to itself: four keys, bounded."""
    nb = make_notebook("quiet.ipynb")
    s = await as_user("carol", "POST", "sessions", body={"notebook": nb, "agent": "echo"})
    turn = (await as_user("carol", "POST", "sessions", s["id"], "prompt", body={"text": "hi"}))["turn_id"]
    events = await api.wait_turn_end(s["id"], turn)
    actor = next(e for e in events if e["type"] == "turn_started")["actor"]
    assert actor == {"kind": "user", "username": "carol", "display_name": "carol", "color": None}


async def test_an_agents_question_answered_by_the_other_person_names_them(as_user, api, make_notebook):
    nb = make_notebook("question.ipynb")
    s = await as_user("alice", "POST", "sessions", body={"notebook": nb, "agent": "hostile"})
    ask = [{"do": "elicit", "params": {"mode": "form", "message": "How many rows?", "requestedSchema": {
        "type": "object", "properties": {"rows": {"type": "integer"}}, "required": ["rows"]}}}]  # fmt: skip
    turn = (await as_user("alice", "POST", "sessions", s["id"], "prompt", body={"text": json.dumps(ask)}))["turn_id"]
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "elicitation_request" for e in evs))
    eid = next(e for e in events if e["type"] == "elicitation_request")["elicitation_id"]
    await as_user("bob", "POST", "sessions", s["id"], "elicitations", eid, body={"action": "decline"})
    events = await api.wait_turn_end(s["id"], turn)
    resolved = next(e for e in events if e["type"] == "elicitation_resolved")
    assert resolved["action"] == "decline" and resolved["by"] == "bob" and resolved["actor"] == BOB
    validate_event(resolved)


async def test_a_mode_switch_and_an_option_change_name_who_made_them(as_user, api, make_notebook):
    nb = make_notebook("modes.ipynb")
    s = await as_user("alice", "POST", "sessions", body={"notebook": nb, "agent": "modelled"})
    ready = await api.wait_for(s["id"], lambda evs: any(e["type"] == "session_ready" for e in evs))
    modes = next(e for e in ready if e["type"] == "session_ready")["modes"]
    other = next(m["id"] for m in modes["availableModes"] if m["id"] != modes["currentModeId"])
    await as_user("bob", "POST", "sessions", s["id"], "mode", body={"mode_id": other})
    await as_user("alice", "POST", "sessions", s["id"], "config", body={"config_id": "model", "value": "openai/b"})
    events = await api.events(s["id"])
    config = [e for e in events if e["type"] == "session_config"]
    assert [c["actor"] for c in config] == [BOB, ALICE]
    assert config[0]["modes"]["currentModeId"] == other
    # and which switch each was: the panel writes it as a line ("Mode set to ...") whatever the reader saw before
    assert [c["switched"] for c in config] == [
        {"kind": "mode", "id": "mode", "value": other},
        {"kind": "option", "id": "model", "value": "openai/b"},
    ]
    for e in events:
        validate_event(e)


async def test_an_always_allow_picked_on_a_card_names_who_picked_it(
    as_user, api, make_notebook, jp_root_dir, jp_ws_fetch
):
    """Alice's agent asks to edit a cell; bob answers "Always allow" on his socket. From then on the agent edits
    unasked, so the policy change says it was bob's doing, as the card's answer does."""
    import nbformat

    nb = make_notebook("always.ipynb", ["x = 1"])
    cell = nbformat.read(jp_root_dir / nb, as_version=4).cells[0].id
    s = await as_user("alice", "POST", "sessions", body={"notebook": nb, "agent": "hostile"})
    edit = {"do": "tool", "name": "client_edit_cell", "args": {"cell_id": cell, "old_string": "1", "new_string": "2"}}
    bob = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"},
                            headers={USER_HEADER: "bob"})  # fmt: skip
    turn = (await as_user("alice", "POST", "sessions", s["id"], "prompt", body={"text": json.dumps([edit])}))["turn_id"]
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    card = next(e for e in events if e["type"] == "permission_request")
    assert card["source"] == "client", card  # the gate's own card
    await bob.write_message(json.dumps({"op": "permission", "ref": "b1", "request_id": card["request_id"],
                                        "option_id": "allow_always"}))  # fmt: skip
    assert (await answer_of(bob, "b1"))["ok"] is True
    events = await api.wait_turn_end(s["id"], turn)
    bob.close()

    (policy,) = [e for e in events if e["type"] == "policy_changed"]
    assert policy["always_allowed"] == ["client_edit_cell"]
    assert policy["actor"] == BOB, policy
    resolved = next(e for e in events if e["type"] == "permission_resolved")
    assert resolved["actor"] == BOB and resolved["option_id"] == "allow_always"
    for e in events:
        validate_event(e)
