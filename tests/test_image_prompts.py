"""Image prompts over HTTP: only PNG, JPEG, GIF and WebP as base64, within JupyterACP.max_image_bytes; refusals
name the rule; an accepted image reaches the agent (the echo agent describes it) and stays in the history."""

from __future__ import annotations

import asyncio
import base64
import json
import os

import pytest
from tornado.httpclient import HTTPClientError

from .agent.test_images_usage import PNG


@pytest.fixture
def acp_config():
    return {"max_image_bytes": 2000}


async def refused(api, sid: str, prompt: list[dict]) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", sid, "prompt", body={"prompt": prompt})
    return err.value.code, json.loads(err.value.response.body)["message"]


async def test_image_blocks_are_checked(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    big = base64.b64encode(os.urandom(2100)).decode()  # the server counts bytes, it does not decode images
    code, message = await refused(api, s["id"], [{"type": "image", "mimeType": "image/png", "data": big}])
    assert code == 413 and "JupyterACP.max_image_bytes" in message and "2000" in message
    # two images that are each within the limit but not together
    half = [{"type": "image", "mimeType": "image/png", "data": PNG}] * 30
    code, message = await refused(api, s["id"], half)
    assert code == 413 and "max_image_bytes" in message
    code, message = await refused(api, s["id"], [{"type": "image", "mimeType": "image/svg+xml", "data": PNG}])
    assert code == 400 and "image/svg+xml" in message and "image/png" in message
    code, message = await refused(api, s["id"], [{"type": "image", "mimeType": "image/png", "data": "<script>"}])
    assert code == 400 and "base64" in message
    code, message = await refused(api, s["id"], [{"type": "image", "mimeType": "image/png"}])
    assert code == 400 and "base64" in message


async def test_an_image_prompt_reaches_the_agent_and_the_history(api, make_notebook):
    s = await api.open(make_notebook("nb.ipynb"), "echo")
    for _ in range(400):  # the agent starts in the background after the session opens
        agents = {a["name"]: a for a in await api.call("GET", "agents")}
        if agents["echo"]["prompt_capabilities"] is not None:
            break
        await asyncio.sleep(0.05)
    assert agents["echo"]["prompt_capabilities"]["image"] is True  # the panel enables its image chip by this
    prompt = [{"type": "text", "text": "look"}, {"type": "image", "mimeType": "image/png", "data": PNG}]
    turn = (await api.call("POST", "sessions", s["id"], "prompt", body={"prompt": prompt}))["turn_id"]
    events = await api.wait_turn_end(s["id"], turn)
    started = next(e for e in events if e["type"] == "turn_started" and e["turn_id"] == turn)
    assert started["prompt"][1] == {"type": "image", "mimeType": "image/png", "data": PNG}  # thumbnails on replay
    text = "".join(
        e["update"]["content"]["text"]
        for e in events
        if e["type"] == "session_update" and e["update"].get("sessionUpdate") == "agent_message_chunk"
    )
    assert text == f"look [image: image/png, {len(base64.b64decode(PNG))} bytes]"
