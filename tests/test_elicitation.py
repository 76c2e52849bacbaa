"""Elicitation: an agent's ``elicitation/create`` (form and URL mode) and ``elicitation/complete``,
against a real server, answered through ``POST /jupyter-acp/sessions/{sid}/elicitations/{id}``.

The hostile scripted agent (``jupyter_acp.testing.hostile``) sends the requests and reports what it got back.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import hostile, message_text
from .users import USER_HEADER, HeaderUsers, ReaderOnlyReads

SCHEMA = {
    "type": "object",
    "properties": {
        "strategy": {"type": "string", "title": "Strategy", "enum": ["a", "b"]},
        "rows": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
        "email": {"type": "string", "format": "email"},
        "dry_run": {"type": "boolean", "default": True},
    },
    "required": ["strategy", "rows"],
}


@pytest.fixture
def acp_agents(tmp_path):
    return {"hostile": hostile(tmp_path)}


def form(message: str = "Choose a strategy", schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"do": "elicit", "params": {"mode": "form", "message": message, "requestedSchema": schema or SCHEMA}}


def url(address: str, eid: str = "e1", message: str = "Authorize the data source") -> dict[str, Any]:
    return {"do": "elicit", "params": {"mode": "url", "message": message, "url": address, "elicitationId": eid}}


async def start(api, sid: str, actions: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Prompt the hostile agent; wait for its elicitation card. (turn id, the elicitation_request event)"""
    turn = await api.prompt(sid, json.dumps(actions))
    events = await api.wait_for(sid, lambda evs: any(e["type"] == "elicitation_request" for e in evs))
    return turn, next(e for e in events if e["type"] == "elicitation_request")


async def results(api, sid: str, turn: str) -> list[dict[str, Any]]:
    events = await api.wait_turn_end(sid, turn)
    return json.loads(message_text(events, turn))


async def answer(api, sid: str, eid: str, body: dict[str, Any], **kw: Any) -> Any:
    return await api.call("POST", "sessions", sid, "elicitations", eid, body=body, **kw)


async def test_capability_advertised(api, make_notebook, report):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    await results(api, s["id"], await api.prompt(s["id"], json.dumps([{"do": "sleep", "seconds": 0}])))
    init = next(r for r in report() if r.get("method") == "initialize")
    assert init["params"]["clientCapabilities"]["elicitation"] == {"form": {}, "url": {}}


async def test_form_accept_valid_content_reaches_the_agent(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    turn, ev = await start(api, s["id"], [form()])
    assert len(ev["elicitation_id"]) == 32 and ev["mode"] == "form" and ev["turn_id"] == turn
    assert ev["message"] == "Choose a strategy" and ev["requested_schema"] == SCHEMA
    content = {"strategy": "b", "rows": 5, "dry_run": False}
    await answer(api, s["id"], ev["elicitation_id"], {"action": "accept", "content": content})
    (res,) = await results(api, s["id"], turn)
    assert res["ok"] == {"action": "accept", "content": content}
    events = await api.events(s["id"])
    resolved = [e for e in events if e["type"] == "elicitation_resolved"]
    assert [(r["elicitation_id"], r["action"], r["content"]) for r in resolved] == [
        (ev["elicitation_id"], "accept", content)
    ]
    # answered once: a second answer finds nothing
    with pytest.raises(HTTPClientError) as err:
        await answer(api, s["id"], ev["elicitation_id"], {"action": "decline"})
    assert err.value.code == 404


async def test_invalid_content_is_400_naming_the_field(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    turn, ev = await start(api, s["id"], [form()])
    eid = ev["elicitation_id"]
    bad = [
        ({"strategy": "c", "rows": 5}, "strategy"),
        ({"strategy": "a", "rows": 500}, "rows"),
        ({"strategy": "a"}, "rows"),
        ({"strategy": "a", "rows": 2, "email": "not an address"}, "email"),
        ({"strategy": "a", "rows": 2, "extra": 1}, "extra"),
    ]
    for content, field in bad:
        with pytest.raises(HTTPClientError) as err:
            await answer(api, s["id"], eid, {"action": "accept", "content": content})
        assert err.value.code == 400, content
        assert field in err.value.response.body.decode(), (field, err.value.response.body)
    # still pending: a valid answer goes through
    await answer(api, s["id"], eid, {"action": "accept", "content": {"strategy": "a", "rows": 2}})
    (res,) = await results(api, s["id"], turn)
    assert res["ok"] == {"action": "accept", "content": {"strategy": "a", "rows": 2}}


async def test_decline(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    turn, ev = await start(api, s["id"], [form()])
    await answer(api, s["id"], ev["elicitation_id"], {"action": "decline"})
    (res,) = await results(api, s["id"], turn)
    assert res["ok"] == {"action": "decline"}


async def test_turn_cancel_cancels_the_elicitation(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    turn, ev = await start(api, s["id"], [form(), {"do": "sleep", "seconds": 0}])
    await api.call("POST", "sessions", s["id"], "cancel")
    events = await api.wait_turn_end(s["id"], turn)
    resolved = [e for e in events if e["type"] == "elicitation_resolved"]
    assert resolved and resolved[0]["action"] == "cancel" and resolved[0]["elicitation_id"] == ev["elicitation_id"]
    with pytest.raises(HTTPClientError) as err:
        await answer(api, s["id"], ev["elicitation_id"], {"action": "accept", "content": {"strategy": "a", "rows": 1}})
    assert err.value.code == 404


async def test_url_mode_and_complete(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    turn, ev = await start(
        api,
        s["id"],
        [
            url("https://auth.example.com/device?code=1"),
            {"do": "elicit_complete", "elicitationId": "e1"},
            {"do": "sleep", "seconds": 0.3},
        ],
    )
    assert ev["mode"] == "url" and ev["url"] == "https://auth.example.com/device?code=1"
    assert ev["url_host"] == "auth.example.com" and "requested_schema" not in ev
    await answer(api, s["id"], ev["elicitation_id"], {"action": "accept"})
    res = await results(api, s["id"], turn)
    assert res[0]["ok"] == {"action": "accept"}
    events = await api.events(s["id"])
    resolved = [e for e in events if e["type"] == "elicitation_resolved"]
    assert [(r["action"], bool(r.get("completed"))) for r in resolved] == [("accept", False), ("accept", True)]


async def test_url_mode_refuses_other_schemes(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    bad = ["javascript:alert(1)", "file:///etc/passwd", "data:text/html,hi", "https://", "x" * 5000]
    turn = await api.prompt(s["id"], json.dumps([url(u) for u in bad]))
    res = await results(api, s["id"], turn)
    assert all(r["error"]["code"] == -32602 for r in res), res
    events = await api.events(s["id"])
    assert not [e for e in events if e["type"] == "elicitation_request"]
    audits = [e for e in events if e["type"] == "audit" and e["action"] == "elicitation/create"]
    assert len(audits) == len(bad) and all(a["decision"] == "refused" and a["rule"] for a in audits)


async def test_complete_from_nobody_else(api, make_notebook):
    """An elicitation/complete names the agent's own id; an unknown id changes nothing."""
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    turn, ev = await start(api, s["id"], [{"do": "elicit_complete", "elicitationId": "nope"}, url("https://a.example")])
    await answer(api, s["id"], ev["elicitation_id"], {"action": "decline"})
    res = await results(api, s["id"], turn)
    assert res[1]["ok"] == {"action": "decline"}


async def test_other_sessions_elicitation_is_404(api, make_notebook):
    a = await api.open(make_notebook("a.ipynb"), "hostile")
    b = await api.open(make_notebook("b.ipynb"), "hostile")
    turn, ev = await start(api, a["id"], [form()])
    with pytest.raises(HTTPClientError) as err:
        await answer(api, b["id"], ev["elicitation_id"], {"action": "accept", "content": {"strategy": "a", "rows": 1}})
    assert err.value.code == 404
    await answer(api, a["id"], ev["elicitation_id"], {"action": "decline"})
    assert (await results(api, a["id"], turn))[0]["ok"] == {"action": "decline"}


async def test_outside_a_turn_refused(api, make_notebook, report):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    turn = await api.prompt(s["id"], json.dumps([{"do": "later", "delay": 0.3, "actions": [form()]}]))
    await results(api, s["id"], turn)
    deadline = time.monotonic() + 15
    while not any(r.get("do") == "later_done" for r in report()):
        assert time.monotonic() < deadline, report()
        await asyncio.sleep(0.05)
    elicit = [r for r in report() if r.get("do") == "elicit"]
    assert elicit and elicit[0]["error"]["code"] == -32602 and "turn" in elicit[0]["error"]["message"]
    assert not [e for e in await api.events(s["id"]) if e["type"] == "elicitation_request"]


async def test_no_session_refused(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    no_sid = {"do": "elicit", "params": {"sessionId": None, "mode": "form", "message": "m", "requestedSchema": SCHEMA}}
    res = await results(api, s["id"], await api.prompt(s["id"], json.dumps([no_sid])))
    assert res[0]["error"]["code"] == -32602


async def test_huge_schema_or_message_bounded(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    many = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(500)}}
    deep = {"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "string"}}}}}
    fat = {"type": "object", "properties": {"x": {"type": "string", "description": "d" * 200_000}}}
    bad_schema = {"type": "object", "properties": {"x": {"type": "strnig"}}}
    actions = [form("m" * 100_000), form(schema=many), form(schema=deep), form(schema=fat), form(schema=bad_schema)]
    turn = await api.prompt(s["id"], json.dumps(actions))
    res = await results(api, s["id"], turn)
    assert [r.get("error", {}).get("code") for r in res] == [-32602] * len(actions), res
    events = await api.events(s["id"])
    assert not [e for e in events if e["type"] == "elicitation_request"]
    audits = [e for e in events if e["type"] == "audit"]
    assert [a["rule"] for a in audits] == [
        "elicitation_size",
        "elicitation_size",
        "elicitation_schema",
        "elicitation_size",
        "elicitation_schema",
    ], audits
    # what the user is shown of a refusal stays small, whatever the agent sent
    assert max(len(json.dumps(a)) for a in audits) < 1000


# -- a read-only user cannot answer ------------------------------------------------------------------


class TestReadOnlyUser:
    @pytest.fixture
    def server_app_config(self):
        return {"identity_provider_class": HeaderUsers, "authorizer_class": ReaderOnlyReads}

    async def test_reader_cannot_answer(self, api, make_notebook, jp_fetch):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        turn, ev = await start(api, s["id"], [form()])
        body = {"action": "accept", "content": {"strategy": "a", "rows": 1}}
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch(
                "jupyter-acp",
                "sessions",
                s["id"],
                "elicitations",
                ev["elicitation_id"],
                method="POST",
                body=json.dumps(body),
                headers={USER_HEADER: "reader"},
            )
        assert err.value.code == 403
        # still waiting for someone who may answer it
        await answer(api, s["id"], ev["elicitation_id"], body)
        assert (await results(api, s["id"], turn))[0]["ok"] == {"action": "accept", **body}
        resolved = [e for e in await api.events(s["id"]) if e["type"] == "elicitation_resolved"]
        assert resolved[0]["by"] == "owner"


class TestTimeout:
    @pytest.fixture
    def acp_config(self):
        return {"permission_timeout": 1.0}

    async def test_unanswered_question_times_out_with_a_notice(self, api, make_notebook):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        turn, ev = await start(api, s["id"], [form()])
        (res,) = await results(api, s["id"], turn)
        assert res["ok"] == {"action": "cancel"}
        events = await api.events(s["id"])
        resolved = [e for e in events if e["type"] == "elicitation_resolved"]
        assert [(r["action"], r.get("reason")) for r in resolved] == [("cancel", "timeout")]
        notice = next(e for e in events if e["type"] == "notice" and "not answered" in e["text"])
        assert "JupyterACP.permission_timeout" in notice["text"]


async def test_complete_after_the_turn_ended_closes_the_card(api, make_notebook, report):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    later = {"do": "later", "delay": 0.5, "actions": [{"do": "elicit_complete", "elicitationId": "e9"}]}
    turn, ev = await start(api, s["id"], [url("https://auth.example.com/x", "e9"), later])
    await answer(api, s["id"], ev["elicitation_id"], {"action": "accept"})
    await results(api, s["id"], turn)
    events = await api.wait_for(
        s["id"], lambda evs: any(e["type"] == "elicitation_resolved" and e.get("completed") for e in evs)
    )
    ended = next(e["seq"] for e in events if e["type"] == "turn_ended")
    done = next(e for e in events if e["type"] == "elicitation_resolved" and e.get("completed"))
    assert done["seq"] > ended and done["elicitation_id"] == ev["elicitation_id"] and done["action"] == "accept"


async def test_multi_select_and_a_form_without_fields(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    tags = {
        "type": "object",
        "properties": {
            "cols": {
                "type": "array",
                "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
                "minItems": 1,
            }
        },
        "required": ["cols"],
    }
    turn, ev = await start(api, s["id"], [form(schema=tags), form("Go on?", {"properties": {}})])
    for content, field in (({"cols": ["c"]}, "cols"), ({"cols": []}, "cols"), ({"cols": "a"}, "cols")):
        with pytest.raises(HTTPClientError) as err:
            await answer(api, s["id"], ev["elicitation_id"], {"action": "accept", "content": content})
        assert err.value.code == 400 and field in err.value.response.body.decode()
    await answer(api, s["id"], ev["elicitation_id"], {"action": "accept", "content": {"cols": ["b", "a"]}})
    events = await api.wait_for(s["id"], lambda evs: sum(e["type"] == "elicitation_request" for e in evs) == 2)
    second = [e for e in events if e["type"] == "elicitation_request"][1]
    await answer(api, s["id"], second["elicitation_id"], {"action": "accept", "content": {}})
    res = await results(api, s["id"], turn)
    assert [r["ok"] for r in res] == [
        {"action": "accept", "content": {"cols": ["b", "a"]}},
        {"action": "accept", "content": {}},
    ]


async def test_agent_exit_cancels_the_question(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    crash = {"do": "later", "delay": 0.5, "actions": [{"do": "exit"}]}
    turn, ev = await start(api, s["id"], [crash, form()])
    events = await api.wait_turn_end(s["id"], turn)
    resolved = [e for e in events if e["type"] == "elicitation_resolved"]
    assert [(r["elicitation_id"], r["action"]) for r in resolved] == [(ev["elicitation_id"], "cancel")]
    assert resolved[0]["reason"] == "agent 'hostile' exited", resolved
    with pytest.raises(HTTPClientError) as err:
        await answer(api, s["id"], ev["elicitation_id"], {"action": "decline"})
    assert err.value.code == 404


async def test_a_waiting_question_survives_the_replay_page(api, make_notebook, jp_serverapp, jp_ws_fetch):
    """Like a pending permission card: a question still waiting is sent first (pinned) on reconnect, however
    much the agent said after it."""
    hub = jp_serverapp.web_app.settings["jupyter_acp"].hub
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    turn, ev = await start(api, s["id"], [form()])
    session = hub.get(s["id"])
    for _i in range(12):  # far more than a page (1 MiB) after the question
        hub.emit(
            session,
            "session_update",
            update={"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "y" * (200 * 1024)}},
        )
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    ws = await jp_ws_fetch("jupyter-acp", "sessions", s["id"], "stream", params={"after": "0"})
    got: list[dict[str, Any]] = []
    while not got or got[-1]["seq"] < session.seq:
        msg = await asyncio.wait_for(ws.read_message(), 30)
        assert msg is not None
        got += json.loads(msg)
    ws.close()
    pinned = [e for e in got if e.get("pinned")]
    assert ev["seq"] in [e["seq"] for e in pinned], [e["type"] for e in pinned]
    assert not any(e["seq"] == ev["seq"] for e in got if not e.get("pinned")), "the page itself starts later"
    # the card still works: answered, the turn ends (its events lie past a page of GET events: ask the hub)
    await answer(api, s["id"], ev["elicitation_id"], {"action": "decline"})
    for _i in range(300):
        if session.turn is None:
            break
        await asyncio.sleep(0.05)
    assert session.turn is None and not hub.questions.waiting(session)
