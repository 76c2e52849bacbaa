"""Both ends of the wire against the ACP SDK's own schema (``agent-client-protocol``, a test dependency only).

The client side: what our server sends a (hostile, recording) agent and answers its requests. The agent side: what
the built-in agent answers a client. The project speaks ACP with its own small wire (``protocol/jsonrpc.py``);
these tests keep it honest against the reference types.
"""

from __future__ import annotations

import asyncio
import json
import sys

import acp.schema as schema  # a test dependency (the test extra): missing, the test fails
import pytest

from .agent.client import AgentClient, initialize_params
from .test_gate import cards, kinds, notebook, run


@pytest.fixture
def acp_agents(tmp_path):
    return {
        "recorder": {
            "command": sys.executable,
            "args": ["-m", "jupyter_acp.testing.hostile", "--report", str(tmp_path / "report.jsonl")],
            "tool_channel": "auto",
        },
    }


async def test_what_the_client_sends_fits_the_schema(api, jp_root_dir, tmp_path):
    (jp_root_dir / "data.txt").write_text("hello")
    s = await api.open(notebook(jp_root_dir, "nb.ipynb", ["1"]), "recorder")
    ask = {
        "do": "permission",
        "toolCall": {"toolCallId": "t1", "title": "Do a thing", "kind": "other"},
        "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
    }
    results, events = await run(
        api,
        s["id"],
        [
            ask,
            {"do": "fs_read", "path": str(jp_root_dir / "data.txt")},
            {"do": "fs_write", "path": str(jp_root_dir / "out.txt"), "content": "written"},
        ],
        answer=lambda ev: "allow_once",
    )
    report = [json.loads(line) for line in (tmp_path / "report.jsonl").read_text().splitlines()]
    received = {r["method"]: r["params"] for r in report if r.get("do") == "received"}
    schema.InitializeRequest.model_validate(received["initialize"])
    schema.NewSessionRequest.model_validate(received["session/new"])
    schema.PromptRequest.model_validate(received["session/prompt"])
    schema.RequestPermissionResponse.model_validate(results[0]["ok"])
    schema.ReadTextFileResponse.model_validate(results[1]["ok"])
    assert results[1]["ok"]["content"] == "hello"
    schema.WriteTextFileResponse.model_validate(results[2]["ok"] or {})
    # the client's own permission request (the write) fits the schema an agent's would
    card = cards(events)[0]
    schema.RequestPermissionRequest.model_validate(
        {"sessionId": "x", "toolCall": card["tool_call"], "options": card["options"]}
    )
    assert kinds(card["options"]) == {
        "allow_once": "allow_once",
        "allow_always": "allow_always",
        "reject_once": "reject_once",
    }


def test_what_the_built_in_agent_answers_fits_the_schema(tmp_path):
    async def go():
        client = await AgentClient.start(
            "--echo",
            env={"JUPYTER_ACP_AGENT_STATE_DIR": str(tmp_path / "state"), "JUPYTER_ACP_MODEL": ""},
            initialize=initialize_params(),
        )
        schema.InitializeRequest.model_validate(initialize_params())
        schema.InitializeResponse.model_validate(client.init_result)
        new = await client.new_session(str(tmp_path))
        schema.NewSessionResponse.model_validate(new)
        result = await client.prompt(new["sessionId"], "hello there")
        schema.PromptResponse.model_validate(result)
        updates = client.updates[new["sessionId"]]
        assert updates
        for update in updates:
            schema.SessionNotification.model_validate({"sessionId": new["sessionId"], "update": update})
        await client.close()

    asyncio.run(go())


def test_the_params_the_client_handlers_read_are_the_schemas_own():
    """The method table of the client side (``sessions/connections/acp_client.py``) hands each handler its params typed by
    ``acp/v1.py``; each of those types has the keys (and only the keys) of the SDK's model of the same request."""
    from typing import get_type_hints

    from jupyter_acp.acp import v1

    pairs = {
        v1.SessionNotification: [schema.SessionNotification],
        v1.RequestPermissionRequest: [schema.RequestPermissionRequest],
        v1.ReadTextFileRequest: [schema.ReadTextFileRequest],
        v1.WriteTextFileRequest: [schema.WriteTextFileRequest],
        v1.CreateTerminalRequest: [schema.CreateTerminalRequest],
        v1.TerminalRequest: [
            schema.TerminalOutputRequest,
            schema.WaitForTerminalExitRequest,
            schema.KillTerminalRequest,
            schema.ReleaseTerminalRequest,
        ],
    }
    for ours, models in pairs.items():
        keys = set(get_type_hints(ours))
        for model in models:
            theirs = {f.alias or name for name, f in model.model_fields.items()} - {"_meta"}
            assert keys == theirs, (ours.__name__, model.__name__, keys ^ theirs)
