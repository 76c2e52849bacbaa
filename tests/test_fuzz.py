"""Fuzz: whatever an agent writes on its stdout, the server answers, records and keeps serving.

A real server process and a scripted agent that writes Hypothesis-generated frames (JSON-RPC shaped
or not) before each answer. After every example the session still completes a turn.
"""

from __future__ import annotations

import json
import time

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_acp.testing.server import ServerProcess

from .conftest import SCRIPTED

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
methods = st.sampled_from(
    [
        "session/update",
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
        "_org.mini-me/tools/list",
        "_jupyter-acp/notebook_outline",
        "terminal/create",
        "nope",
        "",
    ]
)


@st.composite
def frames(draw):
    kind = draw(st.sampled_from(["request", "notification", "response", "error", "value", "garbage"]))
    if kind == "garbage":
        return draw(st.binary(max_size=40)).replace(b"\n", b" ")
    if kind == "value":
        return json.dumps(draw(json_values)).encode()
    msg: dict = {"jsonrpc": draw(st.sampled_from(["2.0", "1.0", None]))}
    if kind in ("request", "notification"):
        msg["method"] = draw(methods)
        msg["params"] = draw(
            st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {
                        "sessionId": st.sampled_from(["SID", "other"]),
                        "update": json_values,
                        "path": st.text(max_size=30),
                        "options": json_values,
                        "toolCall": json_values,
                    }
                ),
            )
        )
    if kind == "request":
        msg["id"] = draw(st.one_of(st.integers(0, 5), st.text(max_size=4)))
    if kind in ("response", "error"):
        msg["id"] = draw(st.one_of(st.integers(0, 50), st.none(), st.text(max_size=4)))
        if kind == "response":
            msg["result"] = draw(json_values)
        else:
            msg["error"] = draw(
                st.one_of(json_values, st.fixed_dictionaries({"code": st.integers(), "message": st.text()}))
            )
    return json.dumps(msg).encode()


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    (base / "root").mkdir()
    (base / "root" / "nb.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    frames_file = base / "frames.txt"
    frames_file.write_text("")
    agents = {
        "fuzz": {
            "command": SCRIPTED[0],
            "args": [*SCRIPTED[1:], "frames", "--frames", str(frames_file)],
            "tool_channel": "client-tools",
        }
    }
    server = ServerProcess(
        base / "root",
        base / "data",
        agents=agents,
        extra_args=[
            "--JupyterACP.turn_idle_timeout=5",
            "--JupyterACP.permission_timeout=2",
            "--JupyterACP.cancel_grace=1",
        ],
    )
    server.start()
    sid = server.open_session("nb.ipynb", "fuzz")["id"]
    server.turn(sid, "warm up")
    yield server, sid, frames_file
    server.stop()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(lines=st.lists(frames(), min_size=1, max_size=8))
def test_arbitrary_frames_never_break_the_server(fuzz_server, lines):
    server, sid, frames_file = fuzz_server
    acp_sid = [e for e in server.get("sessions", sid, "events").json() if e["type"] == "session_ready"][-1][
        "acp_session_id"
    ]
    frames_file.write_bytes(b"\n".join(line.replace(b'"SID"', json.dumps(acp_sid).encode()) for line in lines))
    status = server.get("sessions", sid).json()
    if status["state"] == "busy":  # a previous example left a turn: it must still end
        deadline = time.monotonic() + 20
        while server.get("sessions", sid).json()["state"] == "busy" and time.monotonic() < deadline:
            time.sleep(0.05)
    turn, events = server.turn(sid, "go", timeout=40)
    end = [e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn][-1]
    assert "stop_reason" in end or "error" in end
    assert server.get("agents").status_code == 200
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))


TOOLS = [
    "client_notebook_outline",
    "client_read_cells",
    "client_get_selection",
    "client_list_variables",
    "client_inspect_variable",
    "client_insert_cell",
    "client_edit_cell",
    "client_delete_cells",
    "client_move_cell",
    "client_execute_cells",
    "client_execute_code",
    "client_replace_in_cell",
    "client_clear_outputs",
    "client_search_cells",
    "client_stale_cells",
    "client_kernel",
    "client_list_notebooks",
    "client_read_notebook",
    "client_create_notebook",
    "client_no_such_tool",
]
ARG_NAMES = [
    "cell_id",
    "cell_ids",
    "index",
    "start",
    "end",
    "limit",
    "source",
    "old_string",
    "new_string",
    "replace_all",
    "cell_type",
    "name",
    "code",
    "timeout",
    "to_index",
    "after",
    "before",
    "old",
    "new",
    "scope",
    "stale",
    "action",
    "pattern",
    "regex",
    "in",
    "path",
    "folder",
    "cells",
    "x",
]


@pytest.fixture(scope="module")
def tools_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzztools")
    (base / "root").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("# title")]
    nbformat.write(nb, base / "root" / "nb.ipynb")
    agents = {"mcp": {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], "mcp_client"], "tool_channel": "mcp-http"}}
    server = ServerProcess(
        base / "root",
        base / "data",
        agents=agents,
        extra_args=["--JupyterACPTools.permission_policy=auto", "--JupyterACP.turn_idle_timeout=30"],
    )
    server.start()
    sid = server.open_session("nb.ipynb", "mcp")["id"]
    yield server, sid
    server.stop()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(tool=st.sampled_from(TOOLS), args=st.dictionaries(st.sampled_from(ARG_NAMES), json_values, max_size=4))
def test_tool_arguments_always_get_an_answer(tools_server, tool, args):
    """Whatever arguments a model invents, every tool answers: a result or a clear error, never a hang."""
    server, sid = tools_server
    from jupyter_acp.testing.events import message_text

    turn, events = server.turn(sid, f"call {tool} {json.dumps(args)}", timeout=60)
    end = [e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn][-1]
    assert end.get("stop_reason") == "end_turn", end
    answer = json.loads(message_text(events, turn))
    if "result" in answer:
        result = answer["result"]
        assert isinstance(result["content"], list) and isinstance(result["isError"], bool)
        if result["isError"]:
            assert result["content"][0]["text"], "an error says what went wrong"
    else:
        assert answer["error"]["code"] in (-32602, -32603) and answer["error"]["message"]
    assert server.get("sessions", sid).status_code == 200
