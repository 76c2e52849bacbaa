"""The tools follow the notebook's kernel, in the order of events users have.

JupyterLab opens the notebook's agent session before it has started the kernel; the agent (request discovery)
was told "no kernel". When the kernel starts, is switched or shuts down, the agent must ask again.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import pytest

from .test_gate import cards, kinds, notebook

HOSTILE = [sys.executable, "-m", "jupyter_acp.testing.hostile"]
KERNEL_TOOLS = {"client_execute_cells", "client_execute_code", "client_list_variables", "client_inspect_variable"}


@pytest.fixture
def acp_agents(tmp_path):
    def entry(name: str, *extra: str, **more: Any) -> dict[str, Any]:
        return {
            "command": HOSTILE[0],
            "args": [*HOSTILE[1:], "--report", str(tmp_path / f"{name}.jsonl"), *extra],
            "title": name,
            "tool_channel": "client-tools",
            **more,
        }

    return {
        "follower": entry("follower"),
        "no_resume": entry("no_resume", "--no-resume"),
        "meta": entry("meta", client_tools_discovery="meta"),
    }


@pytest.fixture
def listed(tmp_path):
    def read(agent: str) -> list[dict[str, Any]]:
        path = tmp_path / f"{agent}.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if '"listed"' in line]

    return read


@pytest.fixture
def fake_r(jp_data_dir):
    """A second kernel spec in another language (an ipykernel that says it is R: no debugger variables)."""
    spec = jp_data_dir / "kernels" / "fake_r"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Fake R",
                "language": "R",
            }
        )
    )
    return "fake_r"


async def wait_until(predicate, timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def start_kernel(jp_fetch, path: str, name: str = "python3") -> dict[str, Any]:
    body = {"path": path, "type": "notebook", "name": path, "kernel": {"name": name}}
    resp = await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
    return json.loads(resp.body)


async def ready(api, sid: str) -> None:
    await api.wait_for(sid, lambda evs: any(e["type"] == "session_ready" for e in evs))


def notices(events: list[dict[str, Any]], phase: str) -> list[str]:
    return [e["text"] for e in events if e["type"] == "notice" and e.get("phase") == phase]


async def test_kernel_started_after_the_session_reaches_the_agent(api, jp_fetch, jp_root_dir, listed):
    s = await api.open(notebook(jp_root_dir, "nb.ipynb", ["x = 41"]), "follower")
    await ready(api, s["id"])
    first = listed("follower")
    assert [e["reason"] for e in first] == ["new"] and not KERNEL_TOOLS & set(first[0]["tools"])
    kernel_session = await start_kernel(jp_fetch, "nb.ipynb")
    again = await wait_until(lambda: len(listed("follower")) >= 2 and listed("follower"), what="a second list")
    assert again[1]["reason"] == "resume" and KERNEL_TOOLS <= set(again[1]["tools"])
    events = await api.events(s["id"])
    assert notices(events, "tools_changed") == [
        "the Python kernel is up: the agent can now run code and look at its variables"
    ]
    # the agent uses what it was just told
    turn = await api.prompt(
        s["id"], json.dumps([{"do": "tool", "name": "client_execute_code", "args": {"code": "x = 41\nprint(x + 1)"}}])
    )
    events = await api.wait_for(
        s["id"], lambda evs: any(e["type"] == "permission_request" and e.get("turn_id") == turn for e in evs)
    )
    card = [e for e in events if e["type"] == "permission_request"][-1]
    await api.call(
        "POST",
        "sessions",
        s["id"],
        "permissions",
        card["request_id"],
        body={"option_id": kinds(card["options"])["allow_once"]},
    )
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    assert "42" in json.dumps([e for e in events if e["type"] == "session_update"][-1])
    del kernel_session


@pytest.mark.usefixtures("fake_r")
async def test_switch_and_shutdown_are_followed_with_their_reason(api, jp_fetch, jp_root_dir, listed):
    s = await api.open(notebook(jp_root_dir, "sw.ipynb", ["1"]), "follower")
    await ready(api, s["id"])
    kernel_session = await start_kernel(jp_fetch, "sw.ipynb")
    await wait_until(lambda: len(listed("follower")) >= 2, what="the list after start")
    await jp_fetch(
        "api", "sessions", kernel_session["id"], method="PATCH", body=json.dumps({"kernel": {"name": "fake_r"}})
    )
    third = await wait_until(
        lambda: len(listed("follower")) >= 3 and listed("follower")[2], what="the list after the switch"
    )
    assert third["reason"] == "resume"
    assert {"client_execute_cells", "client_execute_code"} <= set(third["tools"])
    assert not {"client_list_variables", "client_inspect_variable"} & set(third["tools"])
    await jp_fetch("api", "sessions", kernel_session["id"], method="DELETE")
    fourth = await wait_until(
        lambda: len(listed("follower")) >= 4 and listed("follower")[3], what="the list after shutdown"
    )
    assert fourth["reason"] == "resume" and not KERNEL_TOOLS & set(fourth["tools"])
    events = await api.events(s["id"])
    changed = notices(events, "tools_changed")
    assert changed[1] == "the R kernel offers no variable inspection: the agent can still run code"
    assert changed[2] == "the notebook's kernel is gone: the agent can no longer run code until one is started"


async def test_never_in_the_middle_of_a_turn(api, jp_fetch, jp_root_dir, listed, jp_serverapp):
    s = await api.open(notebook(jp_root_dir, "mid.ipynb", ["1"]), "follower")
    await ready(api, s["id"])
    hub = jp_serverapp.web_app.settings["jupyter_acp"].hub
    session, follower = hub.sessions[s["id"]], hub.follower
    ask = {
        "do": "permission",
        "toolCall": {"toolCallId": "t1", "title": "wait", "kind": "other"},
        "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
    }
    turn = await api.prompt(s["id"], json.dumps([ask]))
    events = await api.wait_for(s["id"], lambda evs: any(e["type"] == "permission_request" for e in evs))
    await start_kernel(jp_fetch, "mid.ipynb")

    async def kernel_tools_offered() -> bool:
        return KERNEL_TOOLS <= await follower.current_tools(session)

    # barrier: once the kernel's tools are there, the check a kernel event makes, awaited: a follower that reopened
    # the agent mid-turn does it (or starts to: the agent's session dropped, a notice said) within that check
    await wait_until(kernel_tools_offered, what="the kernel's tools")
    assert await follower.refresh_if_changed(session) is False
    # the turn still runs: the agent is not reopened under it (nor about to be: its session is kept, nothing said)
    assert session.tools_stale and session.acp_generation is not None and len(listed("follower")) == 1
    assert not notices(await api.events(s["id"]), "tools_changed")
    card = cards(events, "agent")[-1]
    await api.call("POST", "sessions", s["id"], "permissions", card["request_id"], body={"option_id": "ok"})
    await api.wait_turn_end(s["id"], turn)
    after = await wait_until(
        lambda: len(listed("follower")) >= 2 and listed("follower")[1], what="the list after the turn"
    )
    assert after["reason"] == "resume" and KERNEL_TOOLS <= set(after["tools"])


async def test_agent_without_resume_gets_a_fresh_seeded_session(api, jp_fetch, jp_root_dir, listed, tmp_path):
    s = await api.open(notebook(jp_root_dir, "nr.ipynb", ["1"]), "no_resume")
    await ready(api, s["id"])
    turn = await api.prompt(s["id"], json.dumps([{"do": "say", "text": "remember me"}]))
    await api.wait_turn_end(s["id"], turn)
    await start_kernel(jp_fetch, "nr.ipynb")
    turn = await api.prompt(s["id"], json.dumps([{"do": "tool", "name": "client_list_variables", "args": {}}]))
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    lists = listed("no_resume")
    assert [e["reason"] for e in lists] == ["new", "new"] and KERNEL_TOOLS <= set(lists[1]["tools"])
    assert any(e["type"] == "notice" and e.get("phase") == "session_recreated" for e in events)
    prefaces = [
        json.loads(line) for line in (tmp_path / "no_resume.jsonl").read_text().splitlines() if '"preface"' in line
    ]
    assert "remember me" in prefaces[-1]["text"]  # the recent conversation went with the new session
    answer = json.loads([e for e in events if e["type"] == "session_update"][-1]["update"]["content"]["text"])
    assert answer[0]["ok"]["isError"] is False, answer


async def test_a_prompt_while_the_kernel_starts_keeps_the_kernel_tools(api, jp_fetch, jp_root_dir, listed):
    s = await api.open(notebook(jp_root_dir, "fast.ipynb", ["1"]), "follower")
    await ready(api, s["id"])
    await start_kernel(jp_fetch, "fast.ipynb")
    # at once, before the kernel has said it is idle
    turn = await api.prompt(s["id"], json.dumps([{"do": "tool", "name": "client_list_variables", "args": {}}]))
    events = await api.wait_turn_end(s["id"], turn, timeout=60)
    answer = json.loads([e for e in events if e["type"] == "session_update"][-1]["update"]["content"]["text"])
    assert answer[0]["ok"]["isError"] is False, answer
    assert KERNEL_TOOLS <= set(listed("follower")[-1]["tools"])


async def test_meta_discovery_states_the_widest_list_and_answers_no_kernel_at_call_time(api, jp_root_dir):
    s = await api.open(notebook(jp_root_dir, "meta.ipynb", ["1"]), "meta")
    await ready(api, s["id"])
    turn = await api.prompt(s["id"], json.dumps([{"do": "tool", "name": "client_list_variables", "args": {}}]))
    events = await api.wait_turn_end(s["id"], turn)
    answer = json.loads([e for e in events if e["type"] == "session_update"][-1]["update"]["content"]["text"])
    result = answer[0]["ok"]
    assert result["isError"] is True and "no kernel yet" in result["content"][0]["text"]


@pytest.fixture
def meta_only_agent(tmp_path):
    """An agent that acknowledges only `meta` discovery, on an entry configured for `request` (the default)."""
    script = tmp_path / "meta_only.py"
    script.write_text(
        "import sys\n"
        "from jupyter_acp.protocol import client_tools as convention\n"
        "from jupyter_acp.testing import hostile\n"
        "convention_meta = convention.agent_capability_meta\n"
        "convention.agent_capability_meta = lambda modes=('meta',): convention_meta(('meta',))\n"
        "hostile.main(sys.argv[1:])\n"
    )
    return script


async def test_discovery_mode_must_be_one_the_agent_acknowledged(
    api, jp_root_dir, jp_serverapp, meta_only_agent, tmp_path
):
    from jupyter_acp.catalog.agents import AgentSpec

    app = jp_serverapp.web_app.settings["jupyter_acp"]
    app.agent_specs["meta_only"] = AgentSpec(
        command=sys.executable,
        args=[str(meta_only_agent), "--report", str(tmp_path / "meta_only.jsonl")],
        tool_channel="auto",
    )
    s = await api.open(notebook(jp_root_dir, "ack.ipynb", ["1"]), "meta_only")
    await ready(api, s["id"])
    session = await api.call("GET", "sessions", s["id"])
    # it acknowledged `meta` only, and we discover by `request`: the tools go over MCP instead of never arriving
    assert session["tool_channels"] in (["mcp-http"], ["mcp-stdio"])
