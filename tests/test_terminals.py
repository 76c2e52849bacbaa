"""Client terminals: an agent's ``terminal/*`` requests against a real server with real Jupyter terminals.

The hostile scripted agent (``jupyter_acp.testing.hostile``) sends the requests; the commands run in
jupyter-server-terminals' terminals (terminado ptys), the way a user's terminal runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import hostile, message_text, process_alive
from .users import USER_HEADER, HeaderUsers, ReaderOnlyReads

WITH_TERMINALS = {"jpserver_extensions": {"jupyter_acp": True, "jupyter_server_terminals": True}}


@pytest.fixture
def server_app_config():
    return dict(WITH_TERMINALS)


@pytest.fixture
def tool_policies() -> dict[str, str]:
    return {"terminal/create": "auto"}


@pytest.fixture
def jp_server_config(jp_server_config, tool_policies):
    return {**jp_server_config, "JupyterACPTools": {"tool_policies": tool_policies}}


@pytest.fixture
def acp_agents(tmp_path):
    return {"hostile": hostile(tmp_path)}


@pytest.fixture
def manager(jp_serverapp, jp_fetch):
    return jp_serverapp.web_app.settings["terminal_manager"]


@pytest.fixture
def hub(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_acp"].hub


async def run(api, sid: str, actions: list[dict[str, Any]], answer=None, timeout: float = 30) -> tuple[list, list]:
    """One hostile prompt; ``answer(event) -> option kind | None`` for each permission card. (results, events)"""
    turn = await api.prompt(sid, json.dumps(actions))
    answered: set[str] = set()
    deadline = time.monotonic() + timeout
    while True:
        events = await api.events(sid)
        start = next(i for i, e in enumerate(events) if e.get("turn_id") == turn and e["type"] == "turn_started")
        mine = events[start:]
        for ev in mine:
            if ev["type"] == "permission_request" and ev["request_id"] not in answered:
                answered.add(ev["request_id"])
                kind = answer(ev) if answer else None
                if kind is not None:
                    option = {o["kind"]: o["optionId"] for o in ev["options"]}[kind]
                    await api.call("POST", "sessions", sid, "permissions", ev["request_id"], body={"option_id": option})
        if any(e["type"] == "turn_ended" and e["turn_id"] == turn for e in mine):
            return json.loads(message_text(events, turn)), mine
        if time.monotonic() > deadline:
            raise AssertionError(f"turn did not end: {json.dumps(mine)[-2000:]}")
        await asyncio.sleep(0.05)


def create(command: str, name: str = "t", **params: Any) -> dict[str, Any]:
    return {"do": "terminal", "method": "create", "params": {"command": command, **params}, "as": name}


def term(method: str, name: str = "t") -> dict[str, Any]:
    return {"do": "terminal", "method": method, "params": {"terminalId": f"${name}"}}


def rule(result: dict[str, Any]) -> str | None:
    return ((result.get("error") or {}).get("data") or {}).get("rule")


def outputs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "terminal_output"]


# -- the whole life of a terminal -----------------------------------------------------------------------
async def test_create_output_wait_kill_release(api, make_notebook, report, hub, tmp_path):
    s = await api.open(make_notebook("work/nb.ipynb"), "hostile")
    results, events = await run(
        api,
        s["id"],
        [
            create("echo hi; sleep 0.4; printf 'bye\\n'; exit 3"),
            {
                "do": "update",
                "update": {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "call_1",
                    "title": "Run a command",
                    "kind": "execute",
                    "status": "in_progress",
                    "content": [{"type": "terminal", "terminalId": "$t"}],
                },
            },
            term("wait_for_exit"),
            term("output"),
            term("kill"),
            term("release"),
            term("output"),
        ],
    )
    created, _, waited, output, killed, released, after = results
    assert created["ok"]["terminalId"].startswith("term_")
    assert waited["ok"] == {"exitCode": 3, "signal": None}
    assert output["ok"]["output"] == "hi\nbye\n"
    assert output["ok"]["truncated"] is False
    assert output["ok"]["exitStatus"] == {"exitCode": 3, "signal": None}
    assert killed["ok"] == {} and released["ok"] == {}  # kill after exit: the id is still valid
    assert rule(after) == "terminal_owner", "a released id must be refused"
    # the agent's environment starts at the notebook's folder; the card got the output live, with the terminal's name
    live = outputs(events)
    assert live and all(e["terminalId"] == created["ok"]["terminalId"] for e in live)
    assert live[0]["name"] and live[0]["cwd"] == os.path.realpath(hub.cwd_for("work/nb.ipynb"))
    assert live[-1]["released"] is True and live[-1]["output"] == "hi\nbye\n"
    assert any(e["exitStatus"] == {"exitCode": 3, "signal": None} for e in live)
    audits = [e for e in events if e["type"] == "audit" and e["action"] == "terminal/create"]
    assert audits and audits[0]["decision"] == "allowed"
    assert not hub.terminals.terminals


async def test_kill_keeps_the_id_and_the_terminal_is_a_jupyter_terminal(api, make_notebook, manager, jp_fetch):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    task = asyncio.ensure_future(
        run(
            api,
            s["id"],
            [create("sleep 30"), {"do": "sleep", "seconds": 1.5}, term("kill"), term("wait_for_exit"), term("output")],
        )
    )
    # while it runs, the command is one of the server's terminals (JupyterLab can open it by name)
    deadline = time.monotonic() + 20
    names: list[str] = []
    while not names and time.monotonic() < deadline:
        listed = json.loads((await jp_fetch("api", "terminals")).body)
        names = [t["name"] for t in listed]
        await asyncio.sleep(0.1)
    assert names, "the agent's command is not in /api/terminals"
    pid = manager.terminals[names[0]].ptyproc.pid
    results, events = await task
    _, _, killed, waited, output = results
    assert killed["ok"] == {}
    assert waited["ok"]["signal"] in ("SIGHUP", "SIGTERM", "SIGKILL"), waited
    assert output["ok"]["exitStatus"] == waited["ok"]
    assert not process_alive(pid)
    assert outputs(events)[0]["name"] == names[0]


async def test_exit_codes_are_the_commands_own(api, make_notebook):
    """terminado hangs a terminal up (SIGHUP) when its process is not gone 0.1 s after the terminal's end: a command
    that lets go of its terminal before it exits (coreutils close stdout first; here, deliberately, 0.3 s before)
    came back as killed by SIGHUP, and was. The exit code is now the command's own."""
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    late = "import os, sys, time; [os.close(fd) for fd in (0, 1, 2)]; time.sleep(0.3); sys.exit({})"
    actions: list[dict[str, Any]] = []
    for i in range(3):
        command = create(sys.executable, name=f"t{i}", args=["-c", late.format(i)])
        actions += [command, term("wait_for_exit", f"t{i}"), term("release", f"t{i}")]
    actions += [create("touch", name="touch", args=["made"]), term("wait_for_exit", "touch")]
    results, _ = await run(api, s["id"], actions, timeout=60)
    codes = [r["ok"] for r in results[1:9:3]]
    assert codes == [{"exitCode": i, "signal": None} for i in range(3)]
    assert results[-1]["ok"] == {"exitCode": 0, "signal": None}


# -- the gate: ask, auto, deny -------------------------------------------------------------------------
class TestAsk:
    @pytest.fixture
    def tool_policies(self):
        return {}  # the default: permission_policy 'ask'

    async def test_the_card_shows_command_args_and_cwd_before_it_runs(self, api, make_notebook, manager, tmp_path):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        marker = tmp_path / "ran"
        seen: list[dict[str, Any]] = []

        def answer(ev):
            seen.append(ev)
            assert not marker.exists(), "the command ran before the user answered"
            return "allow_once"

        results, events = await run(
            api, s["id"], [create("touch", args=[str(marker)]), term("wait_for_exit")], answer=answer
        )
        assert results[1]["ok"]["exitCode"] == 0 and marker.exists(), results
        (card,) = seen
        assert card["source"] == "client" and card["tool_call"]["kind"] == "execute"
        assert card["tool_call"]["rawInput"]["command"] == "touch"
        assert card["tool_call"]["rawInput"]["args"] == [str(marker)]
        shown = card["tool_call"]["content"][0]["content"]["text"]
        assert f"$ touch {marker}" in shown and "in " in shown
        # once allowed and started, the card says so (not "pending" until the turn ends)
        settled = [
            e["update"]["status"]
            for e in events
            if e["type"] == "session_update" and e["update"].get("toolCallId") == card["tool_call"]["toolCallId"]
        ]
        assert settled == ["completed"]

    async def test_rejected_never_runs(self, api, make_notebook, manager, tmp_path):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        marker = tmp_path / "ran"
        results, events = await run(api, s["id"], [create(f"touch {marker}")], answer=lambda ev: "reject_once")
        assert rule(results[0]) == "user_rejected"
        await asyncio.sleep(0.5)
        assert not marker.exists() and not manager.terminals

    async def test_a_command_allowed_on_the_agents_card_is_not_asked_twice(self, api, make_notebook):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        options = [
            {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ]

        def permission(title: str, command: str) -> dict[str, Any]:
            call = {
                "toolCallId": f"call_{command[-6:]}",
                "title": title,
                "kind": "execute",
                "rawInput": {"command": command},
            }
            return {"do": "permission", "toolCall": call, "options": options}

        results, events = await run(
            api,
            s["id"],
            [
                permission("`echo agreed`", "echo agreed"),
                create("echo agreed"),  # what the user allowed on the agent's card: not asked again
                create("echo agreed", name="u"),  # the approval is used up: asked
                permission("Read the README", "echo hidden"),  # allowed, but the card did not show the command
                create("echo hidden", name="h"),  # asked
            ],
            answer=lambda ev: "allow_once" if ev["source"] == "agent" else "reject_once",
        )
        assert results[1]["ok"]["terminalId"].startswith("term_")
        assert rule(results[2]) == "user_rejected" and rule(results[4]) == "user_rejected"
        asked = [e["tool_call"]["rawInput"]["command"] for e in events if e["type"] == "permission_request"]
        assert asked == ["echo agreed", "echo agreed", "echo hidden", "echo hidden"]  # agent, ours, agent, ours
        allowed = [e for e in events if e["type"] == "audit" and e["decision"] == "allowed"]
        assert len(allowed) == 1 and "the user allowed the agent's request" in allowed[0]["rule"]

    async def test_a_command_the_card_only_mentions_is_asked_on_the_gates_card(self, api, make_notebook, tmp_path):
        """An Allow carries over to ``terminal/create`` only when the card showed that very command
        as the command (a ``$ ...`` line, or a title that is the command), never when it is mentioned."""
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        marker = tmp_path / "F"
        options = [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}]
        text = [{"type": "content", "content": {"type": "text", "text": "Runs the test suite."}}]
        mentioned = {
            "toolCallId": "call_tests",
            "title": f"Run the tests with pytest -q (it will not run `touch {marker}`)",
            "kind": "execute",
            "rawInput": {"command": f"touch {marker}"},
            "content": text,
        }
        other_line = {
            "toolCallId": "call_other",
            "title": "Run the tests",
            "kind": "execute",
            "rawInput": {"command": f"touch {marker}"},
            "content": [{"type": "content", "content": {"type": "text", "text": f"$ pytest -q\n(touch {marker})"}}],
        }
        shown = {
            "toolCallId": "call_shown",
            "title": "Say hello",
            "kind": "execute",
            "rawInput": {"command": "echo shown"},
            "content": [{"type": "content", "content": {"type": "text", "text": "$ echo shown"}}],
        }
        results, events = await run(
            api,
            s["id"],
            [
                {"do": "permission", "toolCall": mentioned, "options": options},
                create(f"touch {marker}"),  # only mentioned in the title: asked
                {"do": "permission", "toolCall": other_line, "options": options},
                create(f"touch {marker}", name="u"),  # the card's command line is another: asked
                {"do": "permission", "toolCall": shown, "options": options},
                create("echo shown", name="v"),  # the very line the card showed: not asked again
            ],
            answer=lambda ev: "allow_once" if ev["source"] == "agent" else "reject_once",
        )
        assert rule(results[1]) == "user_rejected" and rule(results[3]) == "user_rejected"
        assert results[5]["ok"]["terminalId"].startswith("term_")
        await asyncio.sleep(0.3)
        assert not marker.exists()
        ours = [e["tool_call"] for e in events if e["type"] == "permission_request" and e["source"] == "client"]
        assert [c["rawInput"]["command"] for c in ours] == [f"touch {marker}"] * 2

    async def test_one_command_is_one_card(self, api, make_notebook, hub):
        """The gate's question about a command the agent's card shows exactly is asked on that
        card, with the line as the shell runs it; it never adds a card of its own."""
        s = await api.open(make_notebook("nb.ipynb"), "hostile")

        def card(call_id: str, line: str) -> dict[str, Any]:
            update = {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": f"`{line}`",
                "kind": "execute",
                "status": "pending",
                "rawInput": {"command": line},
            }
            return {"do": "update", "update": update}

        results, events = await run(
            api,
            s["id"],
            [
                card("call_one", "echo 'a b'"),
                create("bash", args=["-lc", "echo 'a b'"]),  # the same line, run by a shell
                card("call_two", "echo two"),
                create("echo three", name="u"),  # no card shows it: the gate's own card
            ],
            answer=lambda ev: "allow_once",
        )
        assert results[1]["ok"]["terminalId"] and results[3]["ok"]["terminalId"]
        asked = [e["tool_call"] for e in events if e["type"] == "permission_request"]
        assert [c["_meta"]["jupyter_acp"].get("agent_call") for c in asked] == ["call_one", None]
        preview = asked[0]["content"][0]["content"]["text"].split("\n")
        assert preview[0] == "$ echo 'a b'" and preview[1].startswith("run by bash -lc in ")
        # asked on the agent's card, the gate reports on no card of its own (the panel would add one)
        settled = {
            e["update"]["toolCallId"]
            for e in events
            if e["type"] == "session_update" and e["update"].get("status") == "completed"
        }
        assert asked[0]["toolCallId"] not in settled and asked[1]["toolCallId"] in settled


class TestDeny:
    @pytest.fixture
    def tool_policies(self):
        return {"terminal/create": "deny"}

    async def test_denied_by_policy_without_a_card(self, api, make_notebook, manager, tmp_path):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        results, events = await run(api, s["id"], [create(f"touch {tmp_path / 'ran'}")])
        assert rule(results[0]) == "policy"
        assert "JupyterACPTools.tool_policies['terminal/create']" in results[0]["error"]["message"]
        assert not [e for e in events if e["type"] == "permission_request"]
        assert not (tmp_path / "ran").exists() and not manager.terminals


class TestWithoutTerminals:
    @pytest.fixture
    def server_app_config(self):
        return {**WITH_TERMINALS, "terminals_enabled": False}

    async def test_not_advertised_and_refused(self, api, make_notebook, report, tmp_path):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        results, _ = await run(api, s["id"], [create("echo hi")])
        init = next(r for r in report() if r.get("method") == "initialize")
        assert not init["params"]["clientCapabilities"].get("terminal")
        assert rule(results[0]) == "terminals_disabled"


async def test_advertised_with_terminals(api, make_notebook, report):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    await run(api, s["id"], [])
    init = next(r for r in report() if r.get("method") == "initialize")
    assert init["params"]["clientCapabilities"]["terminal"] is True


# -- a hostile agent -----------------------------------------------------------------------------------
async def test_no_terminal_outside_a_turn(api, make_notebook, report, manager, tmp_path):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    await run(api, s["id"], [{"do": "later", "delay": 0.5, "actions": [create(f"touch {tmp_path / 'ran'}")]}])
    deadline = time.monotonic() + 15
    while not any(r.get("do") == "later_done" for r in report()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    late = [r for r in report() if r.get("do") == "terminal"]
    assert late and rule(late[-1]) == "outside_turn"
    assert not (tmp_path / "ran").exists() and not manager.terminals


async def test_cwd_is_confined_to_the_root(api, make_notebook, manager, jp_root_dir):
    s = await api.open(make_notebook("sub/nb.ipynb"), "hostile")
    (jp_root_dir / ".hidden").mkdir()
    results, _ = await run(
        api,
        s["id"],
        [
            create("pwd", cwd="../.."),
            create("pwd", cwd="/etc"),
            create("pwd", cwd=str(jp_root_dir / "sub" / ".." / "..")),
            create("pwd", cwd=str(jp_root_dir / ".hidden")),
            create("pwd", cwd=str(jp_root_dir / "missing")),
            create("pwd", cwd="..", name="ok"),
            term("wait_for_exit", "ok"),
            term("output", "ok"),
        ],
    )
    assert [rule(r) for r in results[:5]] == [
        "outside_root",
        "outside_root",
        "outside_root",
        "hidden_files",
        "cwd_missing",
    ]
    assert "outside the server root" in results[1]["error"]["message"]
    assert results[7]["ok"]["output"].strip() == os.path.realpath(jp_root_dir)


async def test_another_sessions_terminal_is_refused(api, make_notebook, hub):
    a = await api.open(make_notebook("a.ipynb"), "hostile")
    b = await api.open(make_notebook("b.ipynb"), "hostile")
    results, _ = await run(api, a["id"], [create("sleep 20", name="a_term")])
    theirs = results[0]["ok"]["terminalId"]
    results, events = await run(
        api,
        b["id"],
        [
            term("output", "a_term"),
            term("kill", "a_term"),
            term("release", "a_term"),
            {"do": "terminal", "method": "output", "params": {"terminalId": "term_guessed"}},
        ],
    )
    assert [rule(r) for r in results] == ["terminal_owner"] * 4
    assert "not a terminal of this session" in results[0]["error"]["message"]
    assert hub.terminals.terminals[theirs].exit_status is None, "session b's agent killed session a's terminal"
    refused = [e for e in events if e["type"] == "audit" and e["decision"] == "refused"]
    assert len(refused) == 4


class TestHugeOutput:
    @pytest.fixture
    def acp_config(self):
        return {"terminal_output_bytes": 20_000}

    async def test_memory_stays_bounded(self, api, make_notebook, hub, manager):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        flood = f"{sys.executable} -c \"import sys; sys.stdout.write('é' * 3_000_000 + 'END')\""
        results, events = await run(
            api,
            s["id"],
            [
                create(flood, outputByteLimit=1001),
                create(flood, name="u", outputByteLimit=10**12),
                term("wait_for_exit"),
                term("wait_for_exit", "u"),
                term("output"),
                term("output", "u"),
            ],
            timeout=120,
        )
        small, big = results[4]["ok"], results[5]["ok"]
        # cut from the start at a character boundary: 'é' is two bytes, a limit of 1001 keeps 500 of them
        assert small["truncated"] is True and small["output"] == "é" * 499 + "END"
        assert len(small["output"].encode()) <= 1001
        # the agent's limit is capped by JupyterACP.terminal_output_bytes
        assert big["truncated"] is True and len(big["output"].encode()) <= 20_000 and big["output"].endswith("END")
        for t in hub.terminals.terminals.values():
            assert len(t.buffer.data) <= 20_000
        # the events carry a bounded tail, not the output, at most five a second per terminal (plus its start and end)
        assert max(len(e["output"]) for e in outputs(events)) <= 4000
        for tid in {e["terminalId"] for e in outputs(events)}:
            mine = [e for e in outputs(events) if e["terminalId"] == tid]
            assert len(mine) <= 3 + (mine[-1]["ts"] - mine[0]["ts"]) / 0.2, len(mine)


async def test_env_has_no_server_token(api, make_notebook, jp_serverapp, monkeypatch):
    token = jp_serverapp.identity_provider.token
    assert token
    monkeypatch.setenv("JUPYTER_TOKEN", token)
    monkeypatch.setenv("SOME_API_KEY", token)  # a provider-looking name holding the token: dropped too
    monkeypatch.setenv("UNRELATED_SECRET", "not-for-agents")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-passes")
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    results, _ = await run(
        api,
        s["id"],
        [
            create("env", env=[{"name": "AGENT_VAR", "value": "set-by-agent"}]),
            term("wait_for_exit"),
            term("output"),
            create("env", name="bad", env=[{"name": "JUPYTER_TOKEN", "value": "x"}]),
        ],
    )
    env = results[2]["ok"]["output"]
    assert "PATH=" in env and "AGENT_VAR=set-by-agent" in env and "OPENAI_API_KEY=sk-passes" in env
    assert token not in env
    assert "JUPYTER_TOKEN" not in env and "UNRELATED_SECRET" not in env and "JUPYTER_SERVER_URL" not in env
    assert rule(results[3]) == "secret_env"


# -- terminals end with their session and with the server -------------------------------------------------
async def test_terminals_end_with_a_reset(api, make_notebook, manager, hub):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    results, _ = await run(api, s["id"], [create("sleep 60")])
    tid = results[0]["ok"]["terminalId"]
    pid = hub.terminals.terminals[tid].pid
    assert process_alive(pid)
    await api.call("POST", "sessions", s["id"], "reset")
    assert not process_alive(pid)
    assert tid not in hub.terminals.terminals and not manager.terminals
    events = await api.events(s["id"])
    assert any(e["type"] == "notice" and e.get("phase") == "terminals_ended" for e in events)
    last = [e for e in outputs(events) if e["terminalId"] == tid][-1]
    assert last["released"] and last["exitStatus"] is not None


async def test_terminals_end_when_an_earlier_conversation_is_resumed(api, make_notebook, hub):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    await run(api, s["id"], [])
    await api.call("POST", "sessions", s["id"], "reset")
    results, _ = await run(api, s["id"], [create("sleep 60")])
    pid = hub.terminals.terminals[results[0]["ok"]["terminalId"]].pid
    earlier = [c for c in await api.call("GET", "sessions", s["id"], "conversations") if not c.get("current")]
    await api.call("POST", "sessions", s["id"], "conversations", earlier[0]["id"], "resume")
    assert not process_alive(pid)


class TestEviction:
    @pytest.fixture
    def acp_config(self):
        return {"max_sessions_per_agent": 1}

    async def test_terminals_end_when_the_agent_session_yields(self, api, make_notebook, hub):
        a = await api.open(make_notebook("a.ipynb"), "hostile")
        results, _ = await run(api, a["id"], [create("sleep 60")])
        pid = hub.terminals.terminals[results[0]["ok"]["terminalId"]].pid
        b = await api.open(make_notebook("b.ipynb"), "hostile")
        await run(api, b["id"], [])  # a's agent session yields to b's (JupyterACP.max_sessions_per_agent = 1)
        assert not process_alive(pid)
        events = await api.events(a["id"])
        assert any(e["type"] == "notice" and e.get("phase") == "terminals_ended" for e in events)


async def test_terminals_end_with_the_agent(api, make_notebook, hub):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    results, _ = await run(api, s["id"], [create("sleep 60")])
    pid = hub.terminals.terminals[results[0]["ok"]["terminalId"]].pid
    hub.connections["hostile"].process.kill_now()  # the agent dies
    deadline = time.monotonic() + 10
    while process_alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not process_alive(pid)


async def test_terminals_end_with_the_server(api, make_notebook, hub):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    results, _ = await run(api, s["id"], [create("sleep 60"), create("trap '' TERM HUP; sleep 60", name="u")])
    ids = [r["ok"]["terminalId"] for r in results]
    pids = [hub.terminals.terminals[t].pid for t in ids]
    await hub.stop()
    assert not [p for p in pids if process_alive(p)]
    # the transcript's last word on each: ended and released (a card replayed after a restart does not say running)
    stored = [e for e in hub.events(hub.get(s["id"])) if e["type"] == "terminal_output"]
    for tid in ids:
        last = [e for e in stored if e["terminalId"] == tid][-1]
        assert last["released"] and last["exitStatus"] is not None, last


# -- a read-only user cannot let an agent run a command -------------------------------------------------


class TestReadOnlyUser:
    @pytest.fixture
    def server_app_config(self):
        return {**WITH_TERMINALS, "identity_provider_class": HeaderUsers, "authorizer_class": ReaderOnlyReads}

    @pytest.fixture
    def tool_policies(self):
        return {}

    async def test_reader_cannot_answer_the_terminal_card(self, api, make_notebook, jp_fetch, manager, tmp_path):
        s = await api.open(make_notebook("nb.ipynb"), "hostile")
        marker = tmp_path / "ran"
        task = asyncio.ensure_future(api.prompt(s["id"], json.dumps([create(f"touch {marker}")])))
        turn = await task
        events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
        card = next(e for e in events if e["type"] == "permission_request")
        allow = {o["kind"]: o["optionId"] for o in card["options"]}["allow_once"]
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch(
                "jupyter-acp",
                "sessions",
                s["id"],
                "permissions",
                card["request_id"],
                method="POST",
                body=json.dumps({"option_id": allow}),
                headers={USER_HEADER: "reader"},
            )
        assert err.value.code == 403
        await asyncio.sleep(0.3)
        assert not marker.exists() and not manager.terminals
        # the card is still waiting for someone who may answer it
        await api.call("POST", "sessions", s["id"], "permissions", card["request_id"], body={"option_id": allow})
        await api.wait_turn_end(s["id"], turn)
        for _ in range(50):
            if marker.exists():
                break
            await asyncio.sleep(0.1)
        assert marker.exists()
