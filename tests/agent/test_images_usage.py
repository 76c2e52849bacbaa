"""The built-in agent with images and usage: a real agent subprocess over stdio, litellm against the fake model.

The model string is a real one litellm knows (``openai/gpt-4o-mini``: vision, a 128k context, prices) served
by the fake model (``--api-base``), so vision, the context window and the cost come from litellm itself.
"""

from __future__ import annotations

import asyncio
import base64
import os
import struct
import zlib
from typing import Any

import acp.schema as schema  # the test extra's ACP SDK
import pytest

from jupyter_acp.protocol.jsonrpc import RpcError
from jupyter_acp.testing.fake_model import FakeModel, images_of

from .client import AgentClient, initialize_params

pytestmark = pytest.mark.timeout(240)


def png(width: int = 2, height: int = 2) -> str:
    """A real PNG (grey pixels), base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")).decode()


PNG = png()
PLOT = png(8, 8)

TOOLS = [
    {
        "name": "client_execute_code",
        "description": "Run code in the kernel",
        "method": "_t/exec",
        "inputSchema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        "annotations": {"readOnlyHint": True},
    }
]

RULES: list[dict[str, Any]] = [
    {"match": "^plot", "tool": "^client_execute_code$", "arguments": {"code": "plt.plot([1, 2])"}},
]


def run(loop: asyncio.AbstractEventLoop, coro: Any, timeout: float = 120) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    loop = asyncio.new_event_loop()
    model = FakeModel(RULES)
    run(loop, model.start())
    base = tmp_path_factory.mktemp("agent-images")
    cwd = str(base / "cwd")
    os.makedirs(cwd)
    agent = run(
        loop,
        AgentClient.start(
            *["--model", "openai/gpt-4o-mini", "--api-base", model.url, "--api-key", "sk-fake"],
            *["--max-turn-requests", "3", "--models", "openai/gpt-4o-mini,openai/fake"],
            env={"JUPYTER_ACP_AGENT_STATE_DIR": str(base / "state")},
            initialize=initialize_params({"discovery": "meta", "tools": TOOLS}),
        ),
    )
    executed: list[dict[str, Any]] = []

    async def execute(params: dict[str, Any]) -> dict[str, Any]:
        executed.append(params)
        return {
            "content": [
                {"type": "text", "text": "[display] image/png image (attached as image #1)"},
                {"type": "image", "mimeType": "image/png", "data": PLOT},
            ]
        }

    agent.handlers["_t/exec"] = execute
    yield loop, model, agent, cwd, executed
    run(loop, agent.close())
    run(loop, model.stop())
    loop.close()


def test_image_prompt_reaches_the_model_as_an_image_url(world):
    loop, model, agent, cwd, _ = world
    assert agent.init_result["agentCapabilities"]["promptCapabilities"]["image"] is True  # litellm: supports_vision
    schema.InitializeResponse.model_validate(agent.init_result)
    sid = run(loop, agent.new_session(cwd))["sessionId"]
    prompt = [{"type": "text", "text": "what is this?"}, {"type": "image", "mimeType": "image/png", "data": PNG}]
    answer = run(loop, agent.request("session/prompt", {"sessionId": sid, "prompt": prompt}))
    assert answer["stopReason"] == "end_turn"
    user = model.requests[-1]["messages"][-1]
    assert user["role"] == "user"
    assert images_of(user) == [f"data:image/png;base64,{PNG}"]
    assert user["content"][0] == {"type": "text", "text": "what is this?"}


def test_a_model_without_vision_reads_notes_instead(world):
    """Switched to a model litellm knows no vision for: the images (new and earlier) become notes for it."""
    loop, model, agent, cwd, _ = world
    sid = run(loop, agent.new_session(cwd))["sessionId"]
    image = {"type": "image", "mimeType": "image/png", "data": PNG}
    run(loop, agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "a"}, image]}))
    assert images_of(model.requests[-1]["messages"][-1])
    run(
        loop,
        agent.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "openai/fake"}),
    )
    run(loop, agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "b"}, image]}))
    sent = model.requests[-1]
    assert sent["model"] == "fake"
    assert not any(images_of(m) for m in sent["messages"])
    texts = [m["content"] for m in sent["messages"] if m["role"] == "user"]
    assert texts[0] == "a\n[an image; not shown: openai/fake does not take images]"
    size = len(base64.b64decode(PNG))
    assert texts[1] == f"b\n[image: image/png, {size} bytes; not shown: openai/fake does not take images]"


def test_a_bad_image_is_refused_with_the_rule(world):
    loop, _, agent, cwd, _ = world
    sid = run(loop, agent.new_session(cwd))["sessionId"]
    bad = [{"type": "image", "mimeType": "image/svg+xml", "data": PNG}]
    with pytest.raises(RpcError) as err:
        run(loop, agent.request("session/prompt", {"sessionId": sid, "prompt": bad}))
    assert "image/png" in err.value.message and "svg" in err.value.message
    garbage = [{"type": "image", "mimeType": "image/png", "data": "not base64!"}]
    with pytest.raises(RpcError) as err:
        run(loop, agent.request("session/prompt", {"sessionId": sid, "prompt": garbage}))
    assert "base64" in err.value.message


def test_usage_update_after_each_model_call(world):
    loop, _, agent, cwd, _ = world
    sid = run(loop, agent.new_session(cwd))["sessionId"]
    run(loop, agent.prompt(sid, "hello there"))
    usage = [u for u in agent.updates[sid] if u["sessionUpdate"] == "usage_update"]
    assert len(usage) == 1
    first = usage[0]
    assert first["used"] > 0
    assert first["size"] == 128000  # litellm's context window of gpt-4o-mini
    assert first["cost"]["currency"] == "USD" and first["cost"]["amount"] > 0
    run(loop, agent.prompt(sid, "and again, a longer prompt this time " * 20))
    usage = [u for u in agent.updates[sid] if u["sessionUpdate"] == "usage_update"]
    assert len(usage) == 2
    assert usage[1]["used"] > first["used"]  # the context grew
    assert usage[1]["cost"]["amount"] > first["cost"]["amount"]  # the session's cost so far
    for u in usage:  # as the ACP SDK's schema has it
        schema.SessionNotification.model_validate({"sessionId": sid, "update": u})


def test_the_session_cost_survives_a_restart(world, tmp_path):
    loop, model, agent, cwd, _ = world
    state = str(tmp_path / "state")
    args = ["--model", "openai/gpt-4o-mini", "--api-base", model.url, "--api-key", "sk-fake"]

    async def start() -> AgentClient:
        return await AgentClient.start(
            *args, env={"JUPYTER_ACP_AGENT_STATE_DIR": state}, initialize=initialize_params()
        )

    def total(client: AgentClient, sid: str) -> float:
        return [u for u in client.updates[sid] if u["sessionUpdate"] == "usage_update"][-1]["cost"]["amount"]

    first = run(loop, start())
    control = run(loop, first.new_session(cwd))["sessionId"]  # the same two prompts without a restart
    run(loop, first.prompt(control, "hello"))
    run(loop, first.prompt(control, "hello again"))
    sid = run(loop, first.new_session(cwd))["sessionId"]
    run(loop, first.prompt(sid, "hello"))
    spent = total(first, sid)
    run(loop, first.close())
    second = run(loop, start())
    run(loop, second.request("session/resume", {"sessionId": sid, "cwd": cwd, "mcpServers": []}))
    run(loop, second.prompt(sid, "hello again"))
    again = total(second, sid)
    assert spent > 0 and again == pytest.approx(total(first, control))  # the session's total, not this process's
    run(loop, second.close())


def test_tool_images_in_the_card_and_to_the_model(world):
    loop, model, agent, cwd, executed = world
    sid = run(loop, agent.new_session(cwd))["sessionId"]
    assert run(loop, agent.prompt(sid, "plot it"))["stopReason"] == "end_turn"
    assert executed and executed[-1]["code"] == "plt.plot([1, 2])"
    done = [u for u in agent.updates[sid] if u["sessionUpdate"] == "tool_call_update" and u.get("status")]
    done = [u for u in done if u["status"] == "completed"]
    assert done
    blocks = [c["content"] for c in done[-1]["content"] if c.get("type") == "content"]
    assert {"type": "image", "mimeType": "image/png", "data": PLOT} in blocks
    assert PLOT not in str(done[-1]["rawOutput"])  # the image once, in the content
    schema.SessionNotification.model_validate({"sessionId": sid, "update": done[-1]})
    # the model got the plot as an image after the tool's text
    last = model.requests[-1]["messages"]
    assert last[-2]["role"] == "tool"
    assert images_of(last[-1]) == [f"data:image/png;base64,{PLOT}"]
    # two model calls in the turn: two usage updates
    assert len([u for u in agent.updates[sid] if u["sessionUpdate"] == "usage_update"]) == 2


def test_echo_describes_images(tmp_path):
    loop = asyncio.new_event_loop()
    try:
        agent = run(loop, AgentClient.start("--echo", initialize=initialize_params()))
        assert agent.init_result["agentCapabilities"]["promptCapabilities"]["image"] is True
        sid = run(loop, agent.new_session(str(tmp_path)))["sessionId"]
        prompt = [{"type": "text", "text": "see"}, {"type": "image", "mimeType": "image/png", "data": PNG}]
        run(loop, agent.request("session/prompt", {"sessionId": sid, "prompt": prompt}))
        size = len(base64.b64decode(PNG))
        assert agent.text(sid) == f"see [image: image/png, {size} bytes]"
        run(loop, agent.close())
    finally:
        loop.close()


def test_a_model_without_vision_does_not_advertise_images(tmp_path):
    loop = asyncio.new_event_loop()
    try:
        agent = run(
            loop,
            AgentClient.start(
                "--model", "openai/unknown-model", "--api-base", "http://127.0.0.1:9/v1", initialize=initialize_params()
            ),
        )
        assert agent.init_result["agentCapabilities"]["promptCapabilities"]["image"] is False
        sid = run(loop, agent.new_session(str(tmp_path)))["sessionId"]
        prompt = [{"type": "image", "mimeType": "image/png", "data": PNG}]
        with pytest.raises(RpcError) as err:
            run(loop, agent.request("session/prompt", {"sessionId": sid, "prompt": prompt}))
        assert "did not advertise" in err.value.message
        run(loop, agent.close())
    finally:
        loop.close()
