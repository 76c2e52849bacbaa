"""What a real server sends, checked against the declared wire (``jupyter_acp/protocol/wire.py``).

One real server, the hostile scripted agent and the built-in echo agent, driven through turns that make every declared
event type in about 20 s: a prompt on the socket, message chunks, tool calls and a plan, client tools (allowed, asked
and answered on the socket, refused), the agent's own permission question answered on the route, a client terminal,
a form question and a URL one (completed by the agent), an event cut to ``max_event_bytes``, a replay that pins the
running turn's start, a cancel, refused ops, an agent that dies mid-turn and restarts, a config switch, the session's
policy, always-allow revoked, a new conversation, the notebook's agent switched, a stream opened past the history.

Every event the server stored (``GET .../events``, paged) and every frame its sockets sent (events, op answers,
``history_moved``) must validate, strictly: an undeclared type or field fails (see the module docstring of wire.py for
why extra fields are refused), so the models, and the TypeScript made from them, stay what the server says.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

import nbformat
import pytest
from tornado.websocket import WebSocketClientConnection

from jupyter_acp.protocol import wire

from .conftest import hostile

OPTIONS = [
    {
        "id": "model",
        "name": "Model",
        "type": "select",
        "currentValue": "small",
        "options": [{"value": "small", "name": "Small"}, {"value": "large", "name": "Large"}],
    }
]
SCHEMA = {"type": "object", "properties": {"rows": {"type": "integer"}}, "required": ["rows"]}
FORM = {"mode": "form", "message": "How many rows?", "requestedSchema": SCHEMA}
FORM_ANSWER = {"action": "accept", "content": {"rows": 3}}
URL = {
    "mode": "url",
    "message": "Authorize",
    "url": "https://example.com/auth",
    "elicitationId": "e1",
    "toolCallId": "x1",
}


@pytest.fixture
def acp_agents(tmp_path):
    return {"hostile": hostile(tmp_path, "--config-options", json.dumps(OPTIONS))}


@pytest.fixture
def acp_config():
    # pages of 25 events: the stream's replay of a longer history pins what still matters, and GET events pages;
    # events over 16 KiB are cut (one of many small strings keeps only its scalar fields and says ``cut``)
    return {"replay_page_events": 25, "max_event_bytes": 16 * 1024}


@pytest.fixture
def server_app_config():
    return {"jpserver_extensions": {"jupyter_acp": True, "jupyter_server_terminals": True}}


@pytest.fixture
def jp_server_config(jp_server_config):
    return {**jp_server_config, "JupyterACPTools": {"tool_policies": {"terminal/create": "auto"}}}


class Socket:
    """A session's stream read in the background: event frames into ``events``, every other frame into ``objects``."""

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.objects: list[dict[str, Any]] = []
        self.frames = 0
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            msg = await self.ws.read_message()
            if msg is None:
                return
            self.frames += 1
            data = json.loads(msg)
            (self.events.extend if isinstance(data, list) else self.objects.append)(data)

    async def op(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send an op; its answer (validated against what ``frame["op"]`` answers)."""
        ref = f"r{time.monotonic_ns()}"
        await self.ws.write_message(json.dumps({**frame, "ref": ref}))
        answer = await until(lambda: next((o for o in self.objects if o.get("ref") == ref), None))
        wire.validate_answer(frame["op"], answer)
        return answer

    def close(self) -> None:
        self.ws.close()
        self._task.cancel()


async def until(found, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = found()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.05)


async def history(api, sid: str) -> list[dict[str, Any]]:
    """The session's whole stored history, page by page."""
    out: list[dict[str, Any]] = []
    while True:
        page = await api.events(sid, out[-1]["seq"] if out else 0)
        if not page:
            return out
        out += page


async def turn(api, sid: str, actions: list[Any], sock: Socket, answer: Any = None) -> list[dict[str, Any]]:
    """One hostile prompt sent on the socket; each question answered by ``answer(event)`` (a coroutine) as it comes.
    Returns the turn's events."""
    started = await sock.op({"op": "prompt", "text": json.dumps(actions)})
    turn_id = started["turn_id"]
    seen: set[int] = set()
    deadline = time.monotonic() + 30
    while True:
        events = await history(api, sid)
        start = next(i for i, e in enumerate(events) if e["type"] == "turn_started" and e["turn_id"] == turn_id)
        mine = events[start:]
        for e in mine:
            if e["type"] in ("permission_request", "elicitation_request") and e["seq"] not in seen:
                seen.add(e["seq"])
                if answer is not None:
                    await answer(e)
        if any(e["type"] == "turn_ended" and e["turn_id"] == turn_id for e in mine):
            return mine
        if time.monotonic() > deadline:
            raise AssertionError(f"turn did not end: {json.dumps(events)[-2000:]}")
        await asyncio.sleep(0.05)


def notebook(root, name: str = "nb.ipynb") -> str:
    nb = nbformat.v4.new_notebook()
    for i in range(3):
        cell = nbformat.v4.new_code_cell(f"x{i} = {i}")
        cell["id"] = f"c{i}"
        nb.cells.append(cell)
    (root / name).write_text(nbformat.writes(nb))
    return name


def option(event: dict[str, Any], kind: str) -> str:
    return next(o["optionId"] for o in event["options"] if o["kind"] == kind)


async def test_every_event_and_frame_a_real_server_sends_is_declared(api, jp_root_dir, jp_ws_fetch):
    path = notebook(jp_root_dir)
    s = await api.open(path, "hostile")
    sid = s["id"]
    sock = Socket(await jp_ws_fetch("jupyter-acp", "sessions", sid, "stream", params={"after": "0"}))
    sockets = [sock]

    async def answer(e: dict[str, Any]) -> None:
        if e["type"] == "elicitation_request":
            body = FORM_ANSWER if e["mode"] == "form" else {"action": "accept"}
            await api.call("POST", "sessions", sid, "elicitations", e["elicitation_id"], body=body)
        elif e["source"] == "client":  # the gate's question: on the socket
            await sock.op({"op": "permission", "request_id": e["request_id"], "option_id": option(e, "allow_once")})
        else:  # the agent's own: on the route
            body = {"option_id": option(e, "reject_once")}
            await api.call("POST", "sessions", sid, "permissions", e["request_id"], body=body)

    call = {"toolCallId": "x1", "title": "Look around", "kind": "read", "status": "pending"}
    plan = {"sessionUpdate": "plan", "entries": [{"content": "look", "priority": "high", "status": "in_progress"}]}
    agent_question = {
        "toolCall": {"toolCallId": "x2", "title": "Write answer.txt", "kind": "edit"},
        "options": [
            {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
            {"optionId": "no", "name": "Reject", "kind": "reject_once"},
        ],
    }
    await turn(
        api,
        sid,
        [
            {"do": "say", "text": "hello"},
            {"do": "update", "update": {"sessionUpdate": "tool_call", **call}},
            {"do": "update", "update": plan},
            {
                "do": "update",
                "update": {"sessionUpdate": "tool_call_update", "toolCallId": "x1", "status": "completed"},
            },
            {"do": "tool", "name": "client_read_cells", "args": {}},
            {"do": "tool", "name": "client_delete_cells", "args": {"cell_ids": ["c2"]}},
            {"do": "fs_read", "path": "/etc/passwd"},
            {"do": "permission", **agent_question},
            {"do": "terminal", "method": "create", "params": {"command": "echo", "args": ["hi"]}, "as": "t"},
            {"do": "terminal", "method": "wait_for_exit", "params": {"terminalId": "$t"}},
            {"do": "terminal", "method": "release", "params": {"terminalId": "$t"}},
            {"do": "elicit", "params": FORM},
            {"do": "elicit", "params": URL},
            {"do": "elicit_complete", "elicitationId": "e1"},
            {"do": "update", "update": {"sessionUpdate": "plan", "entries": [{"content": "step"}] * 3000}},
        ],
        sock,
        answer,
    )

    # a stream opened now replays the latest page (25 events of a longer history), the running turn's start pinned
    cards = [
        {"do": "update", "update": {"sessionUpdate": "tool_call", "toolCallId": f"p{i}", "title": "t"}}
        for i in range(30)
    ]
    pending = await sock.op({"op": "prompt", "text": json.dumps([*cards, {"do": "elicit", "params": FORM}])})
    await until(
        lambda: any(e["type"] == "elicitation_request" and e["turn_id"] == pending["turn_id"] for e in sock.events)
    )
    late = Socket(await jp_ws_fetch("jupyter-acp", "sessions", sid, "stream", params={"after": "1"}))
    sockets.append(late)
    await until(lambda: late.events)
    assert any(e.get("pinned") for e in late.events), "a replay of more than a page pins the running turn's start"
    assert (await sock.op({"op": "cancel"}))["cancelled"] is True  # the question is cancelled with the turn
    await until(lambda: any(e["type"] == "turn_ended" and e["turn_id"] == pending["turn_id"] for e in sock.events))

    # ops the server refuses are answered too
    refused = await sock.op({"op": "cancel", "extra": 1})
    assert refused["ok"] is False and refused["status"] == 400
    refused = await sock.op({"op": "permission", "request_id": "nope", "option_id": "allow"})
    assert refused["ok"] is False
    await sock.ws.write_message("not JSON")
    garbled = await until(lambda: next((o for o in sock.objects if o.get("ref") is None), None))
    assert wire.Refused.model_validate(garbled).status == 400

    # the agent dies mid-turn; the next prompt restarts it
    died = await turn(api, sid, [{"do": "say", "text": "bye"}, {"do": "exit"}], sock)
    assert died[-1].get("error"), died[-1]
    await turn(api, sid, [{"do": "say", "text": "back"}], sock)

    # the session's mode and policy, the tools always allowed, a new conversation
    await api.call("POST", "sessions", sid, "config", body={"config_id": "model", "value": "large"})
    await api.call("POST", "sessions", sid, "policy", body={"policy": "review"})
    await api.call("DELETE", "sessions", sid, "always-allow")
    await api.call("POST", "sessions", sid, "reset")
    await turn(api, sid, [{"do": "say", "text": "anew"}], sock)

    # the notebook's agent switched (from the default, echo): its hostile session hears it; an echo session runs a turn
    await api.call("PUT", "notebooks", "current-agent", params={"path": path}, body={"agent": "hostile"})
    echo = await api.open(path, "echo")
    await api.wait_turn_end(echo["id"], await api.prompt(echo["id"], "one two"))

    # a stream opened past the server's history is told so first
    moved = Socket(await jp_ws_fetch("jupyter-acp", "sessions", sid, "stream", params={"after": "999999"}))
    sockets.append(moved)
    await until(lambda: moved.objects)
    wire.HistoryMoved.model_validate(moved.objects[0])

    stored = await history(api, sid)
    last = stored[-1]["seq"]
    await until(lambda: max(e["seq"] for e in sock.events) >= last)  # the socket saw everything stored
    stored += await history(api, echo["id"])
    for sent in sockets:
        sent.close()
    problems = []
    for where, events in [("GET events", stored), *((f"socket {n}", k.events) for n, k in enumerate(sockets))]:
        for e in events:
            try:
                wire.validate_event(e)
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                problems.append(f"{where}: {json.dumps(e)[:300]}\n  {exc}")
    assert not problems, "\n".join(problems)
    kinds = Counter(e["type"] for e in stored)
    # every declared type is made here: a new one gets a step above (its fields checked against a real server)
    missing = sorted(set(wire.EVENT_TYPES) - set(kinds))
    assert not missing, f"declared types this script did not make: {missing}; made: {dict(kinds)}"
    assert any("cut" in e for e in stored), "the plan of 3,000 entries was stored cut"
    phases = Counter(e.get("phase") for e in stored if e["type"] == "notice")
    print(f"validated {len(stored)} stored events, {sum(len(k.events) for k in sockets)} streamed: {dict(kinds)}")
    print(f"notice phases: {dict(phases)}")
