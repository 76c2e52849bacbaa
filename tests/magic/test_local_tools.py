"""The no-server backend lends the server's own variable tools (tools/kernel_tools.py), not a copy."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from jupyter_acp.magic.local import LocalBackend, _Client
from jupyter_acp.magic.local_tools import VARIABLE_TOOLS
from jupyter_acp.protocol import client_tools
from jupyter_acp.testing.fake_model import FakeModel
from jupyter_acp.tools.kernel_tools import kernel_tools

from .test_local import run_ipython

pytestmark = pytest.mark.timeout(120)

PREFIX = client_tools.TOOL_METHOD_PREFIX


@pytest.fixture
def backend():
    magics = SimpleNamespace(
        shell=SimpleNamespace(user_ns={"nums": [3, 1, 2], "city": "Oslo", "_hidden": 1}), agents={}
    )
    b = LocalBackend(magics)  # type: ignore[arg-type]
    yield b
    b.close()


def ask(backend: LocalBackend, method: str, params: dict) -> dict:
    return asyncio.run(_Client(backend, None).handle_request(method, params))  # type: ignore[arg-type]


def test_same_names_descriptions_and_schemas_as_the_server(backend):
    listed = ask(backend, client_tools.TOOLS_LIST_METHOD, {})["tools"]
    server = {t.name: t.to_wire() for t in kernel_tools() if t.name in VARIABLE_TOOLS}
    assert {t["name"]: t for t in listed} == server
    assert set(server) == {"client_list_variables", "client_inspect_variable"}


def test_calls_answer_with_the_kernel_summariser(backend):
    meta = client_tools.call_meta("acp-session")
    listed = ask(backend, PREFIX + "list_variables", {"_meta": meta})
    assert not listed["isError"], listed
    names = [v["name"] for v in listed["structuredContent"]["variables"]]
    assert names == ["nums", "city"], names  # _hidden is not listed
    assert listed["structuredContent"]["method"] == "in_process"
    only = ask(backend, PREFIX + "list_variables", {"filter": "cit"})
    assert [v["name"] for v in only["structuredContent"]["variables"]] == ["city"]
    one = ask(backend, PREFIX + "inspect_variable", {"name": "nums", "_meta": meta})
    assert not one["isError"], one
    assert one["structuredContent"]["kind"] == "sequence" and one["structuredContent"]["length"] == 3
    # the server's schema and its errors: refused in band, the reason named
    bad = ask(backend, PREFIX + "inspect_variable", {"name": "nums", "bogus": 1})
    assert bad["isError"] and bad["structuredContent"]["error"] == "invalid_arguments", bad
    missing = ask(backend, PREFIX + "inspect_variable", {"name": "nope"})
    assert missing["isError"] and "not defined in the kernel" in missing["content"][0]["text"], missing
    call = ask(backend, PREFIX + "inspect_variable", {"name": "nums.sort()"})
    assert call["isError"] and call["structuredContent"]["error"] == "invalid_arguments", call


def test_plain_ipython_agent_uses_the_variable_tools(tmp_path):
    """End to end: the built-in agent in plain IPython is offered the server's tools and calls one."""
    rules = [
        {"tool": "inspect_variable", "match": "variable temps", "arguments": {"name": "temps"}, "times": 1},
        {"role": "tool", "text": "temps has three readings."},
    ]
    with FakeModel(rules) as fm:
        entry = json.dumps({"builtin": fm.agent_entry(JUPYTER_ACP_AGENT_MODE="auto")})
        proc = run_ipython(
            f"""
            %load_ext jupyter_acp
            %config AcpMagics.agents = {entry}
            temps = [12.5, 14.0, 9.25]
            %acp --agent builtin describe the variable temps
            """,
            tmp_path,
        )
        assert "temps has three readings." in proc.stdout, (proc.stdout, proc.stderr)
        offered = {t["function"]["name"]: t["function"] for req in fm.requests for t in req.get("tools") or []}
        server = {t.name: t for t in kernel_tools() if t.name in VARIABLE_TOOLS}
        for name, tool in server.items():
            match = [f for n, f in offered.items() if n.endswith(name)]
            assert match, (name, sorted(offered))
            assert match[0]["description"] == tool.description
            assert match[0]["parameters"]["properties"] == tool.input_schema["properties"]
        results = fm.tool_results()
        assert results and "sequence" in results[-1] and "12.5" in results[-1], results
