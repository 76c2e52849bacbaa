"""The built-in agent restarted with another model (the panel's model form saved): a conversation re-opened after the
restart follows the agent's new model, unless a model was picked for it (``session/set_config_option``), which it
keeps.  A real agent subprocess over stdio, litellm against the fake model.
"""

from __future__ import annotations

import asyncio

import pytest

from jupyter_acp.testing.fake_model import FakeModel, message_text

from .client import AgentClient, initialize_params

pytestmark = pytest.mark.timeout(240)


async def conversation_models(state: str, cwd: str) -> dict[str, str]:
    model = await FakeModel([]).start()
    base = ["--api-base", model.url, "--api-key", "sk-fake", "--models", "openai/old,openai/picked,openai/new"]

    async def start(default: str) -> AgentClient:
        return await AgentClient.start(
            "--model", default, *base, env={"JUPYTER_ACP_AGENT_STATE_DIR": state}, initialize=initialize_params()
        )

    try:
        first = await start("openai/old")
        follows = (await first.new_session(cwd))["sessionId"]
        picked = (await first.new_session(cwd))["sessionId"]
        choose = {"sessionId": picked, "configId": "model", "value": "openai/picked"}
        await first.request("session/set_config_option", choose)
        await first.close()
        second = await start("openai/new")  # the panel saved another model: the agent restarted with it
        for sid, text in ((follows, "from the conversation that follows"), (picked, "from the picked one")):
            await second.request("session/resume", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
            await second.prompt(sid, text)
        await second.close()
        return {message_text(r["messages"][-1]): r["model"] for r in model.requests}
    finally:
        await model.stop()


def test_a_reopened_conversation_follows_the_agents_new_model_unless_one_was_picked_for_it(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    got = asyncio.run(asyncio.wait_for(conversation_models(str(tmp_path / "state"), str(cwd)), 200))
    assert got == {"from the conversation that follows": "new", "from the picked one": "picked"}, got
