"""The stable ACP methods met where a user meets them, against a real server and the scripted hostile agent
(``jupyter_acp.testing.hostile``, which reports every request of ours and can withdraw its own):
``session/delete`` from the history's Delete, ``logout`` from the agent's card, ``$/cancel_request`` both ways,
``session_info_update`` titles in the history, ``additionalDirectories``, boolean config options (the client's
opt-in) and the W3C trace context forwarded as ``params._meta``.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import hostile, message_text
from .users import USER_HEADER, HeaderUsers, ReaderOnlyReads

#: what the "full" agent offers beyond the hostile agent's defaults
FULL_CAPS = {
    "sessionCapabilities": {"delete": {}, "additionalDirectories": {}, "fork": {}},
    "auth": {"logout": {}},
}
BRAVE = {"id": "brave", "name": "Brave mode", "type": "boolean", "currentValue": False}
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def acp_agents(tmp_path):
    for sub in ("plain", "refusing"):
        (tmp_path / sub).mkdir()
    return {
        "full": hostile(tmp_path, "--capabilities", json.dumps(FULL_CAPS), "--config-options", json.dumps([BRAVE])),
        "plain": hostile(tmp_path / "plain"),
        "refusing": hostile(
            tmp_path / "refusing",
            "--capabilities",
            json.dumps({"sessionCapabilities": {"delete": {}}}),
            "--refuse",
            "session/delete",
        ),
    }


@pytest.fixture
def acp_config():
    # an agent that ignores session/cancel is given up on quickly
    return {"cancel_grace": 0.5}


@pytest.fixture
def server_app_config():
    return {"identity_provider_class": HeaderUsers, "authorizer_class": ReaderOnlyReads}


def reports(tmp_path: Any, agent: str) -> list[dict[str, Any]]:
    path = tmp_path / ("report.jsonl" if agent == "full" else f"{agent}/report.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def received(tmp_path: Any, agent: str, method: str) -> list[dict[str, Any]]:
    return [r["params"] for r in reports(tmp_path, agent) if r.get("do") == "received" and r.get("method") == method]


async def say(api, sid: str, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One turn of the hostile agent's actions; their results."""
    turn = await api.prompt(sid, json.dumps(actions))
    events = await api.wait_turn_end(sid, turn)
    text = message_text(events, turn)  # what "say" said, then the results
    return json.loads(text[text.rfind('[{"do"') :])


# -- session/delete ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("agent", ["full", "refusing", "plain"])
async def test_deleting_a_past_conversation_deletes_the_agents_copy_where_it_offers_it(
    api, make_notebook, tmp_path, agent
):
    """Delete in the history: ``session/delete`` of the conversation's agent session, only to an agent advertising
    ``sessionCapabilities.delete``; an agent's failure is said (answer and notice) and ours is deleted anyway."""
    s = await api.open(make_notebook("nb.ipynb"), agent)
    await say(api, s["id"], [{"do": "say", "text": "hello"}])
    old_acp = received(tmp_path, agent, "session/prompt")[0]["sessionId"]
    await api.call("POST", "sessions", s["id"], "reset")
    past = [c for c in await api.call("GET", "sessions", s["id"], "conversations") if not c["current"]]
    assert len(past) == 1
    answer = await api.call("DELETE", "sessions", s["id"], "conversations", past[0]["id"])
    assert answer["deleted"] == past[0]["id"] and answer["events"] > 0
    deletes = received(tmp_path, agent, "session/delete")
    after = await api.call("GET", "sessions", s["id"], "conversations")
    assert past[0]["id"] not in [c["id"] for c in after]  # ours is gone whatever the agent said
    notice = [e for e in await api.events(s["id"]) if e.get("phase") == "conversation_deleted"][-1]
    if agent == "full":
        assert deletes == [{"sessionId": old_acp}]
        assert answer["agent_deleted"] is True and answer["agent_error"] is None
        assert "deleted its copy too" in notice["text"]
    elif agent == "refusing":
        assert deletes == [{"sessionId": old_acp}]
        assert answer["agent_deleted"] is False
        assert "session/delete failed" in answer["agent_error"] and "refused by the test agent" in answer["agent_error"]
        assert notice["level"] == "warning" and "kept its copy" in notice["text"]
    else:  # not advertised: never asked (ACP: a client calls only what the agent offers)
        assert deletes == [] and answer["agent_deleted"] is False and answer["agent_error"] is None


# -- logout -------------------------------------------------------------------------------------------------------
async def test_log_out_asks_the_agent_to_forget_its_account_with_execute_only(api, jp_fetch, tmp_path):
    """``POST agents/{name}/logout``: ACP ``logout`` to an agent advertising ``auth.logout``; 409 naming the
    capability for one that does not; a collaborator with write but not execute is refused (403, the rule named)."""
    card = await api.call("GET", "agents", "full", "settings")
    assert card["logout"] is False  # not started yet: unknown, no button
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(
            "jupyter-acp", "agents", "full", "logout", method="POST", body="{}", headers={USER_HEADER: "writer"}
        )
    assert err.value.code == 403
    assert "needs 'execute'" in json.loads(err.value.response.body)["message"]
    assert received(tmp_path, "full", "logout") == []

    answer = await api.call("POST", "agents", "full", "logout")
    assert answer["logged_out"] is True and answer["logout"] is True
    assert received(tmp_path, "full", "logout") == [{}]

    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "agents", "plain", "logout")
    assert err.value.code == 409
    assert "agentCapabilities.auth.logout" in json.loads(err.value.response.body)["message"]
    assert received(tmp_path, "plain", "logout") == []


# -- $/cancel_request -----------------------------------------------------------------------------------------------
PERMISSION = {
    "sessionId": "$sid",
    "toolCall": {"toolCallId": "c1", "title": "Delete data.csv", "kind": "delete", "status": "pending"},
    "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}],
}
ELICIT = {
    "sessionId": "$sid",
    "mode": "form",
    "message": "Which region?",
    "requestedSchema": {"type": "object", "properties": {"region": {"type": "string"}}},
}


@pytest.mark.parametrize(
    "method, params, card, resolved",
    [
        ("session/request_permission", PERMISSION, "permission_request", "permission_resolved"),
        ("elicitation/create", ELICIT, "elicitation_request", "elicitation_resolved"),
    ],
    ids=["permission", "elicitation"],
)
async def test_a_request_the_agent_withdraws_is_taken_off_the_panel_and_answered_cancelled(
    api, make_notebook, method, params, card, resolved
):
    """The agent's ``$/cancel_request`` for its question: the card is withdrawn (resolved, ``reason: withdrawn``),
    the conversation says so, the question can no longer be answered, and the agent gets -32800 (ACP: the
    request is still answered)."""
    s = await api.open(make_notebook("nb.ipynb"), "full")
    (result,) = await say(api, s["id"], [{"do": "withdraw", "method": method, "params": params, "after": 1.0}])
    assert result["error"]["code"] == -32800, result
    assert f"{method} was cancelled ($/cancel_request)" in result["error"]["message"]
    events = await api.events(s["id"])
    shown = next(e for e in events if e["type"] == card)
    closed = [e for e in events if e["type"] == resolved]
    assert len(closed) == 1 and closed[0]["reason"] == "withdrawn"
    assert closed[0].get("cancelled") is True or closed[0].get("action") == "cancel"
    notice = next(e for e in events if e.get("phase") == "request_withdrawn")
    assert notice["method"] == method and "withdrew its question" in notice["text"]
    if card == "permission_request":
        with pytest.raises(HTTPClientError) as err:
            await api.call("POST", "sessions", s["id"], "permissions", shown["request_id"], body={"option_id": "yes"})
    else:
        with pytest.raises(HTTPClientError) as err:
            await api.call(
                "POST", "sessions", s["id"], "elicitations", shown["elicitation_id"], body={"action": "decline"}
            )
    assert err.value.code == 404


async def test_a_prompt_given_up_on_is_cancelled_at_the_agent_and_its_late_answer_is_no_warning(
    api, make_notebook, tmp_path
):
    """Stop on an agent that ignores ``session/cancel``: past ``cancel_grace`` the turn ends and our
    ``session/prompt`` is withdrawn with ``$/cancel_request``; the agent stops serving it and answers -32800, which
    is expected, not reported as an odd frame."""
    s = await api.open(make_notebook("nb.ipynb"), "full")
    turn = await api.prompt(s["id"], json.dumps([{"do": "sleep", "seconds": 30}]))
    await api.wait_for(s["id"], lambda evs: any(e["type"] == "session_ready" for e in evs))
    await api.call("POST", "sessions", s["id"], "cancel")
    events = await api.wait_turn_end(s["id"], turn, timeout=10)
    end = next(e for e in events if e["type"] == "turn_ended")
    assert end["stop_reason"] == "cancelled"
    for _ in range(50):  # the agent reports it when its handler is cancelled
        if any(r.get("do") == "cancelled" for r in reports(tmp_path, "full")):
            break
        await asyncio.sleep(0.1)
    assert {"do": "cancelled", "method": "session/prompt"} in reports(tmp_path, "full")
    # the agent is still fine, and its -32800 for the withdrawn prompt was no "ignored a response" warning
    await say(api, s["id"], [{"do": "say", "text": "still here"}])
    assert not [e for e in await api.events(s["id"]) if "ignored a response" in str(e.get("text", ""))]


# -- session_info_update titles -------------------------------------------------------------------------------------
async def test_the_agents_title_names_the_conversation_in_the_history(api, make_notebook):
    """``session_info_update`` with a title: the history lists the conversation by it (over the first prompt)."""
    s = await api.open(make_notebook("nb.ipynb"), "full")
    title = {"sessionUpdate": "session_info_update", "title": "Sales by region", "updatedAt": "2026-12-02T05:00:00Z"}
    await say(api, s["id"], [{"do": "update", "update": title}])
    await api.call("POST", "sessions", s["id"], "reset")
    convs = await api.call("GET", "sessions", s["id"], "conversations")
    assert [c["title"] for c in convs if not c["current"]] == ["Sales by region"]


# -- additionalDirectories ------------------------------------------------------------------------------------------
async def test_a_notebook_in_a_sub_folder_gives_the_agent_the_project_root_as_an_additional_directory(
    api, make_notebook, tmp_path, jp_root_dir
):
    """``session/new``'s ``additionalDirectories``: the server root, for a notebook below it, to an agent
    advertising ``sessionCapabilities.additionalDirectories``; none for a notebook at the root, none to an agent
    that does not take them."""
    root = os.path.realpath(jp_root_dir)
    for notebook in ("deep/er/nb.ipynb", "top.ipynb"):
        for agent in ("full", "plain"):
            s = await api.open(make_notebook(notebook), agent)
            await say(api, s["id"], [{"do": "say", "text": "hi"}])
    full, plain = received(tmp_path, "full", "session/new"), received(tmp_path, "plain", "session/new")
    assert [(p["cwd"], p.get("additionalDirectories")) for p in full] == [
        (os.path.join(root, "deep", "er"), [root]),
        (root, None),
    ]
    assert all("additionalDirectories" not in p for p in plain) and len(plain) == 2


# -- boolean config options ------------------------------------------------------------------------------------------
async def test_a_boolean_option_is_offered_to_the_client_and_set_as_a_boolean(api, make_notebook, tmp_path):
    """The client opts in to boolean options (``session.configOptions.boolean``), so a conforming agent offers
    them; one set from the API reaches the agent with ``type: "boolean"``."""
    s = await api.open(make_notebook("nb.ipynb"), "full")
    await say(api, s["id"], [{"do": "say", "text": "hi"}])
    init = received(tmp_path, "full", "initialize")[0]
    assert init["clientCapabilities"]["session"] == {"configOptions": {"boolean": {}}}
    session = await api.call("GET", "sessions", s["id"])
    assert [o["id"] for o in session["config_options"]] == ["brave"]
    answer = await api.call("POST", "sessions", s["id"], "config", body={"config_id": "brave", "value": True})
    assert answer["config_options"][0]["currentValue"] is True
    (sent,) = received(tmp_path, "full", "session/set_config_option")
    assert sent == {"sessionId": sent["sessionId"], "configId": "brave", "value": True, "type": "boolean"}


# -- _meta: W3C trace context ----------------------------------------------------------------------------------------
async def test_the_requests_trace_context_reaches_the_agent_as_meta_and_nothing_else(
    api, jp_fetch, make_notebook, tmp_path
):
    """A ``traceparent`` (and ``tracestate``) header on the server's request goes to the agent as ``params._meta``
    of ``session/new`` (opening the session) and ``session/prompt``; a malformed one, and any other header, never."""
    nb = make_notebook("nb.ipynb")
    headers = {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7", "X-Secret": "no"}
    opened = await jp_fetch(
        "jupyter-acp", "sessions", method="POST", body=json.dumps({"notebook": nb, "agent": "full"}), headers=headers
    )
    sid = json.loads(opened.body)["id"]

    async def prompt(text: str, hdrs: dict[str, str]) -> None:
        resp = await jp_fetch(
            "jupyter-acp", "sessions", sid, "prompt", method="POST", body=json.dumps({"text": text}), headers=hdrs
        )
        await api.wait_turn_end(sid, json.loads(resp.body)["turn_id"])

    await prompt("one", headers)
    await prompt("two", {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"})  # an invalid trace id
    await prompt("three", {"traceparent": TRACEPARENT.upper()})  # not lower-case hex
    (new,) = received(tmp_path, "full", "session/new")
    assert new["_meta"] == {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}
    prompts = received(tmp_path, "full", "session/prompt")
    assert prompts[0]["_meta"] == {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}
    assert "_meta" not in prompts[1] and "_meta" not in prompts[2]
    assert "no" not in json.dumps(prompts[0]["_meta"])


# -- session/fork (unstable) -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("agent, at", [("full", "last"), ("full", "first"), ("plain", "first")])
async def test_a_fork_starts_a_new_conversation_from_that_turn_listed_in_the_history(
    api, make_notebook, tmp_path, agent, at
):
    """``POST sessions/{id}/fork {turn_id}``: a new current conversation holding the history up to that turn, the
    earlier one kept in the history. The agent forks its own session (``session/fork``) where it offers it and the
    turn is the last (then resumes the fork); elsewhere the new agent session is seeded with our transcript up to
    that turn, and no further."""
    s = await api.open(make_notebook("nb.ipynb"), agent)
    first = await api.prompt(s["id"], json.dumps([{"do": "say", "text": "first answer"}]))
    await api.wait_turn_end(s["id"], first)
    second = await api.prompt(s["id"], json.dumps([{"do": "say", "text": "second answer"}]))
    await api.wait_turn_end(s["id"], second)
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "fork", body={"turn_id": "nosuchturn"})
    assert err.value.code == 404
    turn = second if at == "last" else first
    await api.call("POST", "sessions", s["id"], "fork", body={"turn_id": turn})

    convs = await api.call("GET", "sessions", s["id"], "conversations")
    ours = [c for c in convs if c["kind"] == "ours"]
    assert len(ours) == 2 and ours[0]["current"] and ours[0]["turns"] == (2 if at == "last" else 1)
    events = await api.call("GET", "sessions", s["id"], "events", params={"conversation": "current"})
    said = message_text(events, first)
    assert "first answer" in said
    assert ("second answer" in message_text(events, second)) == (at == "last")
    notice = next(e for e in events if e.get("phase") == "conversation_forked")

    await say(api, s["id"], [{"do": "say", "text": "after the fork"}])
    forks = received(tmp_path, agent, "session/fork")
    prompts = received(tmp_path, agent, "session/prompt")
    prefaces = [r["text"] for r in reports(tmp_path, agent) if r.get("do") == "preface"]
    if agent == "full" and at == "last":
        (fork,) = forks
        assert fork["sessionId"] == prompts[0]["sessionId"]
        (resumed,) = received(tmp_path, agent, "session/resume")
        assert resumed["sessionId"] == prompts[-1]["sessionId"] != fork["sessionId"]
        assert "forked its session" in notice["text"] and prefaces == []
    else:
        assert forks == [] and len(received(tmp_path, agent, "session/new")) == 2
        (preface,) = prefaces
        assert "first answer" in preface and "second answer" not in preface
        assert "given this history with your next prompt" in notice["text"]
        if agent == "full":
            assert "later turns followed" in notice["text"]


async def test_a_prompt_op_on_the_socket_forwards_its_own_trace_context_else_the_sockets(
    api, jp_ws_fetch, make_notebook, tmp_path
):
    """The socket's prompt op: its own ``traceparent`` / ``tracestate`` keys, else the socket request's headers,
    become the prompt's ``_meta``; the keys never reach the prompt's body."""
    from .test_stream_ops import Reader, ended

    s = await api.open(make_notebook("nb.ipynb"), "full")
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ws = await jp_ws_fetch(
        "jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"}, headers={"traceparent": TRACEPARENT}
    )
    r = Reader(ws)
    for ref, extra in (("own", {"traceparent": other}), ("socket", {}), ("bad", {"traceparent": "nonsense"})):
        answer = await r.op({"op": "prompt", "ref": ref, "text": json.dumps([{"do": "say", "text": ref}]), **extra})
        assert answer["ok"], answer
        await r.until(ended(answer["turn_id"]))
    ws.close()
    metas = [p.get("_meta") for p in received(tmp_path, "full", "session/prompt")]
    assert metas == [{"traceparent": other}, {"traceparent": TRACEPARENT}, None]


class TestWithdrawnTerminalWait:
    @pytest.fixture
    def jp_server_config(self, jp_server_config):
        return {**jp_server_config, "JupyterACPTools": {"tool_policies": {"terminal/create": "auto"}}}

    async def test_a_terminal_wait_the_agent_withdraws_stops_and_the_command_is_left_to_the_agent(
        self, api, make_notebook
    ):
        """``terminal/wait_for_exit`` withdrawn: the wait stops at once (-32800) while the command still runs, so the
        agent can still kill and release it; the conversation says what was withdrawn."""
        s = await api.open(make_notebook("nb.ipynb"), "full")
        terminal = {"sessionId": "$sid", "terminalId": "$t"}
        results = await say(
            api,
            s["id"],
            [
                {"do": "terminal", "method": "create", "params": {"command": "sleep", "args": ["30"]}, "as": "t"},
                {"do": "withdraw", "method": "terminal/wait_for_exit", "params": terminal, "after": 1.0},
                {"do": "terminal", "method": "kill", "params": {"terminalId": "$t"}},
                {"do": "terminal", "method": "release", "params": {"terminalId": "$t"}},
            ],
        )
        assert "ok" in results[0], results
        assert results[1]["error"]["code"] == -32800, results
        assert results[2] == {"do": "terminal", "ok": {}} and results[3] == {"do": "terminal", "ok": {}}
        notice = next(e for e in await api.events(s["id"]) if e.get("phase") == "request_withdrawn")
        assert "withdrew its wait for a command to end" in notice["text"]


class TestLogoutFixedByAdmin:
    @pytest.fixture
    def acp_config(self):
        return {"allowed_user_agents": []}

    async def test_an_agent_users_may_not_log_in_to_is_not_theirs_to_log_out_of(self, api, tmp_path):
        """The admin's ``allowed_user_agents`` leaves this agent out: logging out is refused (403 naming the rule),
        since the user could not log back in; the agent is never asked."""
        with pytest.raises(HTTPClientError) as err:
            await api.call("POST", "agents", "full", "logout")
        assert err.value.code == 403
        message = json.loads(err.value.response.body)["message"]
        assert "logging out of agent 'full'" in message and "c.JupyterACP.allowed_user_agents" in message
        assert received(tmp_path, "full", "logout") == []
