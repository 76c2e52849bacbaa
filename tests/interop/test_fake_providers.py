"""The fake provider servers on their own: the rules of the fake model, in each provider's wire format.

The Responses stream is read by the official ``openai`` client (a litellm dependency), so its event
shapes are the ones a real client accepts; the Anthropic stream is parsed by hand.
"""

from __future__ import annotations

import json

import httpx
import openai

from jupyter_acp.testing.fake_providers import FakeAnthropic, FakeResponses

RULES = [
    {"match": "look", "tool": r"read_cells$", "arguments": {"start": 0}, "times": 1},
    {"role": "tool", "match": "CELL", "text": "I read: {last}"},
]


def test_responses_tool_call_then_answer_through_the_openai_client():
    ns_tools = [
        {"type": "namespace", "name": "mcp__jupyter", "tools": [{"type": "function", "name": "client_read_cells"}]}
    ]
    with FakeResponses(RULES) as fake:
        client = openai.OpenAI(base_url=fake.url, api_key="sk-fake")
        first = client.responses.create(
            model="fake-model",
            input="please look",
            stream=True,
            tools=[{"type": "function", "name": "other", "parameters": {}}],
        )
        events = list(first)
        assert events[-1].type == "response.completed" and events[-1].response.usage.total_tokens == 20
        # no offered tool matches: the rule is skipped, the default answer echoes
        assert "You said: please look" in "".join(e.delta for e in events if e.type == "response.output_text.delta")
        # codex's namespaced MCP tools: matched qualified, called by namespace + name
        raw = httpx.post(
            fake.url + "/responses", json={"model": "m", "input": "look", "stream": True, "tools": ns_tools}
        )
        datas = [json.loads(line[6:]) for line in raw.text.splitlines() if line.startswith("data: ")]
        call = next(d["item"] for d in datas if d["type"] == "response.output_item.done")
        assert (call["type"], call["namespace"], call["name"]) == ("function_call", "mcp__jupyter", "client_read_cells")
        assert json.loads(call["arguments"]) == {"start": 0}
        second = client.responses.create(
            model="fake-model",
            input=[
                {"type": "function_call", "call_id": call["call_id"], "name": "client_read_cells", "arguments": "{}"},
                {"type": "function_call_output", "call_id": call["call_id"], "output": "CELL 0: x = 1"},
            ],
        )
        assert second.output_text == "I read: CELL 0: x = 1"
        assert fake.paths == ["POST /v1/responses"] * 3


def test_anthropic_messages_tool_use_then_answer():
    tools = [{"name": "mcp__jupyter__client_read_cells", "input_schema": {"type": "object"}}]
    with FakeAnthropic(RULES) as fake:
        raw = httpx.post(
            fake.base + "/v1/messages?beta=true",
            json={
                "model": "claude",
                "max_tokens": 10,
                "stream": True,
                "tools": tools,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "please look"}]}],
            },
        )
        events = [json.loads(line[6:]) for line in raw.text.splitlines() if line.startswith("data: ")]
        kinds = [e["type"] for e in events]
        assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
        block = next(e["content_block"] for e in events if e["type"] == "content_block_start")
        args = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
        assert block["name"] == "mcp__jupyter__client_read_cells" and json.loads(args) == {"start": 0}
        assert events[-2]["delta"]["stop_reason"] == "tool_use"
        answer = httpx.post(
            fake.base + "/v1/messages",
            json={
                "model": "claude",
                "max_tokens": 10,
                "messages": [
                    {"role": "user", "content": "please look"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": block["id"],
                                "content": [{"type": "text", "text": "CELL 0: x = 1"}],
                            }
                        ],
                    },
                ],
            },
        ).json()
        assert answer["stop_reason"] == "end_turn" and answer["content"] == [
            {"type": "text", "text": "I read: CELL 0: x = 1"}
        ]
        assert httpx.post(fake.base + "/v1/messages/count_tokens", json={}).json() == {"input_tokens": 10}
        assert httpx.get(fake.base + "/v1/anything").status_code == 404
        assert "GET /v1/anything" in fake.paths
