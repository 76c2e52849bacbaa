"""A prompt fits what the agent said it takes (``promptCapabilities``): ACP says a client must not send the rest.

Images (or audio) to an agent that did not advertise them are refused with the capability named, before anything is
sent; embedded text resources (the panel's selection, the cells above) reach an agent without ``embeddedContext``
as text. The hostile scripted agent, told to advertise no prompt capabilities, reports what it received.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import hostile

PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a") + b"\0" * 32).decode()


@pytest.fixture
def acp_agents(tmp_path):
    return {"hostile": hostile(tmp_path, "--plain-prompts")}


def prompts(tmp_path) -> list[dict[str, Any]]:
    lines = (tmp_path / "report.jsonl").read_text().splitlines()
    return [r["params"]["prompt"] for r in map(json.loads, lines) if r.get("method") == "session/prompt"]


async def test_images_to_an_agent_that_takes_none_are_refused_naming_the_capability(api, make_notebook, tmp_path):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    await api.wait_turn_end(s["id"], await api.prompt(s["id"], json.dumps([])))  # the agent has started
    blocks = [{"type": "text", "text": "[]"}, {"type": "image", "mimeType": "image/png", "data": PNG}]
    with pytest.raises(HTTPClientError) as err:
        await api.call("POST", "sessions", s["id"], "prompt", body={"prompt": blocks})
    assert err.value.code == 400
    assert "promptCapabilities.image" in err.value.response.body.decode()
    assert len(prompts(tmp_path)) == 1, "nothing was sent"


async def test_an_image_sent_while_the_agent_starts_is_refused_too(api, make_notebook, tmp_path):
    """Sent at once after opening: either the agent had started (400) or the turn waits for it and ends saying why."""
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    blocks = [{"type": "text", "text": "[]"}, {"type": "image", "mimeType": "image/png", "data": PNG}]
    try:
        turn = await api.call("POST", "sessions", s["id"], "prompt", body={"prompt": blocks})
    except HTTPClientError as err:
        assert err.code == 400 and "promptCapabilities.image" in err.response.body.decode()
    else:
        events = await api.wait_turn_end(s["id"], turn["turn_id"])
        ended = next(e for e in events if e["type"] == "turn_ended" and e["turn_id"] == turn["turn_id"])
        assert ended.get("error_kind") == "unsupported_content", ended
        assert "promptCapabilities.image" in ended["error"]
    assert not (tmp_path / "report.jsonl").exists() or not prompts(tmp_path), "nothing was sent"


async def test_embedded_text_reaches_an_agent_without_embedded_context_as_text(api, make_notebook, tmp_path):
    s = await api.open(make_notebook("nb.ipynb"), "hostile")
    selection = {
        "type": "resource",
        "resource": {"uri": "nb.ipynb#cell=c1", "title": "cell 1", "mimeType": "text/x-python", "text": "x = 41"},
    }
    turn = await api.call(
        "POST", "sessions", s["id"], "prompt", body={"prompt": [{"type": "text", "text": "[]"}, selection]}
    )
    await api.wait_turn_end(s["id"], turn["turn_id"])
    (sent,) = prompts(tmp_path)
    assert [b["type"] for b in sent] == ["text", "text"]
    assert sent[1]["text"] == "cell 1:\n\nx = 41"
    # the transcript keeps what the user sent (the panel shows the attachment)
    started = next(e for e in await api.events(s["id"]) if e["type"] == "turn_started")
    assert started["prompt"][1]["type"] == "resource"


def test_fit_prompt_titled_and_untitled_resources():
    """A titled attachment says what it is; an untitled one (the magic's cells-above context) is its own text;
    an agent with embeddedContext gets the blocks unchanged."""
    from jupyter_acp.sessions.connections.turns import fit_prompt

    context = {"type": "resource", "resource": {"uri": "file:///r/nb.ipynb", "text": "Cells above ...:\n\nx = 1"}}
    var = {"type": "resource", "resource": {"uri": "kernel:nb.ipynb#df", "title": "@df", "text": "DataFrame"}}
    link = {"type": "resource_link", "uri": "file:///r/data.csv", "name": "data.csv"}
    blocks = [{"type": "text", "text": "go"}, context, var, link]
    assert fit_prompt({"agentCapabilities": {}}, blocks) == [
        {"type": "text", "text": "go"},
        {"type": "text", "text": "Cells above ...:\n\nx = 1"},
        {"type": "text", "text": "@df:\n\nDataFrame"},
        link,
    ]
    with_context = {"agentCapabilities": {"promptCapabilities": {"embeddedContext": True}}}
    assert fit_prompt(with_context, blocks) == blocks
