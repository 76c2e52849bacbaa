"""The tools with kernels behind a real Jupyter Gateway (``jupyter kernelgateway`` on 127.0.0.1).

The tool suite's kernel tests already run in both modes (``tests/tools/conftest.py``); these cover what
only a gateway has (its kernel killed behind it, the gateway going away) and what both modes must
answer alike (a restart, the summariser's source in the kernel).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest

from jupyter_acp.kernels import summarise, summariser_source, summary_expression

from .helpers import KernelGateway, text, wait_until

GATEWAY = pytest.mark.parametrize("kernel_mode", ["gateway"], indirect=True)


@GATEWAY
async def test_cells_read_edit_run_through_a_gateway_kernel(
    make_notebook, start_kernel, tool_ctx, call, browser, acp, jp_serverapp
):
    from jupyter_server.gateway.managers import GatewayMappingKernelManager

    assert isinstance(jp_serverapp.kernel_manager, GatewayMappingKernelManager)
    path = make_notebook("gw/nb.ipynb", ["n = 6", "print(n * 7)"])
    kid = await start_kernel(path)
    bridge = acp.tools.services.kernels
    assert bridge.is_remote(kid) and bridge.language(kid) == "python" and bridge.kernel_name(kid) == "python3"
    info = await bridge.kernel_info(kid)
    assert info["implementation"] == "ipython" and "kernel subshells" in info["supported_features"]
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = [c["id"] for c in tab.ycells]
        out = await call(ctx, "client_notebook_outline")
        assert out["structuredContent"]["kernel"]["language"] == "python", out
        res = await call(ctx, "client_read_cells", {"cell_ids": [ids[1]]})
        assert "print(n * 7)" in text(res)
        res = await call(ctx, "client_edit_cell", {"cell_id": ids[1], "old_string": "n * 7", "new_string": "n * 8"})
        assert not res["isError"], res
        new = (await call(ctx, "client_insert_cell", {"source": "print('third')"}))["structuredContent"]["cell_id"]
        res = await call(ctx, "client_execute_cells", {"cell_ids": [ids[0], ids[1], new]})
        assert not res["isError"], res
        assert "48" in text(res) and "third" in text(res)
        await wait_until(lambda: tab.ycells[1]["execution_count"] == 2 and len(tab.ycells[2]["outputs"]) == 1)
        assert tab.ycells[1]["outputs"].to_py()[0]["text"] == "48\n"
        res = await call(ctx, "client_list_variables")
        assert (
            res["structuredContent"]["method"] == "inspectVariables"
            and res["structuredContent"]["variables"][0]["name"] == "n"
        )


@GATEWAY
async def test_the_toolkit_runs_through_a_gateway_kernel(make_notebook, start_kernel, tool_ctx, call, browser, acp):
    """The analyst's tools whose work is the kernel's: the run plan reads the gateway kernel's history, a scoped run
    and a clear write into the live document, and a restart through the gateway leaves a fresh kernel."""
    path = make_notebook("gw/kit.ipynb", ["base = 2", "twice = base * 2", "print(twice)"])
    kid = await start_kernel(path)
    assert acp.tools.services.kernels.is_remote(kid)
    ctx = await tool_ctx(path)
    async with browser(path) as tab:
        ids = [c["id"] for c in tab.ycells]
        res = await call(ctx, "client_execute_cells", {"scope": "all"})
        assert "4" in text(res), res
        await call(ctx, "client_replace_in_cell", {"cell_id": ids[0], "old": "2", "new": "5"})
        res = await call(ctx, "client_stale_cells")
        assert [s["cell_id"] for s in res["structuredContent"]["plan"]] == ids, res
        assert res["structuredContent"]["history"] == "kernel"
        res = await call(ctx, "client_execute_cells", {"stale": True})
        assert "10" in text(res) and res["structuredContent"]["plan"]["summary"].startswith("Run 3 cells"), res
        res = await call(ctx, "client_clear_outputs", {"cell_ids": [ids[2]]})
        assert not res["isError"], res
        await wait_until(lambda: len(tab.ycells[2]["outputs"]) == 0)
        status = await call(ctx, "client_kernel", {"action": "status"})
        assert "gateway" in status["structuredContent"]["where"], status
        res = await call(ctx, "client_kernel", {"action": "restart"})
        assert not res["isError"] and "twice" in res["structuredContent"]["lost_variables"], res
        res = await call(ctx, "client_execute_code", {"code": "print(twice)"})
        assert "NameError" in text(res), res
        res = await call(ctx, "client_stale_cells")  # a fresh kernel: what ran before is gone
        assert {s["why"] for s in res["structuredContent"]["plan"]} == {"restarted"}, res


@GATEWAY
async def test_a_kernel_killed_behind_the_gateway_is_an_answer(
    make_notebook, start_kernel, tool_ctx, call, kernel_gateway
):
    path = make_notebook("gw/killed.ipynb", ["a = 1", "import time\ntime.sleep(60)"])
    kid = await start_kernel(path)
    ctx = await tool_ctx(path)
    ids = [c["id"] for c in (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"]]
    assert not (await call(ctx, "client_execute_cells", {"cell_ids": [ids[0]]}))["isError"]
    pid = kernel_gateway.kernel_pid(kid)
    assert pid, "the gateway's kernel process was not found"

    running = asyncio.ensure_future(call(ctx, "client_execute_cells", {"cell_ids": [ids[1]], "timeout": 120}))
    await asyncio.sleep(1.0)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    res = await asyncio.wait_for(running, 30)
    assert res["isError"] and "died" in text(res) and "gateway" in text(res), res
    assert time.monotonic() - t0 < 20, "the dead kernel was noticed only at the timeout"

    # the gateway restarts it: the tools work again, on a fresh kernel whose variables are gone
    async def fresh():
        res = await call(ctx, "client_execute_code", {"code": "print('back')"})
        return res if "back" in text(res) else None

    deadline = time.monotonic() + 30
    while not await fresh():
        assert time.monotonic() < deadline, "the kernel never came back behind the gateway"
        await asyncio.sleep(0.5)
    res = await call(ctx, "client_inspect_variable", {"name": "a"})
    assert res["isError"] and "not defined" in text(res), res


class TestGatewayGone:
    @pytest.fixture
    def own_gateway(self, spare_gateways):
        gw = KernelGateway()
        spare_gateways.append(gw)
        gw.start()
        return gw

    @pytest.fixture
    def gateway_url(self, own_gateway):  # this server talks to a gateway of its own, stopped mid-test
        return own_gateway.url

    async def test_failures_name_their_reason(self, make_notebook, start_kernel, tool_ctx, call, own_gateway):
        path = make_notebook("gw/gone.ipynb", ["x = 1"])
        await start_kernel(path)
        ctx = await tool_ctx(path)
        cid = (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"][0]["id"]
        assert not (await call(ctx, "client_execute_cells", {"cell_ids": [cid]}))["isError"]
        own_gateway.stop()
        for name, args in [
            ("client_execute_cells", {"cell_ids": [cid]}),
            ("client_list_variables", {}),
            ("client_execute_code", {"code": "1"}),
            ("client_inspect_variable", {"name": "x"}),
        ]:
            res = await call(ctx, name, args)
            body = text(res)
            assert res["isError"], (name, res)
            # never "client_execute_cells failed: " with nothing after it: what failed, and why
            assert "gateway" in body and not body.rstrip().endswith(":"), (name, body)
        own_gateway.start()  # back on the same port: the server's shutdown asks it to stop the kernel


class TestGatewayWithAToken:
    """A gateway that wants its token on every request, the kernel WebSocket included."""

    @pytest.fixture
    def own_gateway(self, spare_gateways):
        gw = KernelGateway(auth_token="gw-secret-123")
        spare_gateways.append(gw)
        gw.start()
        return gw

    @pytest.fixture
    def gateway_url(self, own_gateway):
        return own_gateway.url

    @pytest.fixture
    def gateway_config(self):
        return {"auth_token": "gw-secret-123"}

    async def test_tools_send_the_gateway_token(self, make_notebook, start_kernel, tool_ctx, call):
        path = make_notebook("gw/token.ipynb", ["t = 'ok'\nprint(t)"])
        await start_kernel(path)
        ctx = await tool_ctx(path)
        cid = (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"][0]["id"]
        res = await call(ctx, "client_execute_cells", {"cell_ids": [cid]})
        assert not res["isError"] and "ok" in text(res), res
        res = await call(ctx, "client_list_variables")
        assert [v["name"] for v in res["structuredContent"]["variables"]] == ["t"], res


async def test_a_restart_is_followed(make_notebook, start_kernel, tool_ctx, call, jp_fetch, kernel_mode):
    """Local and gateway alike: a cell running through Kernel > Restart is answered at once, and the
    tools then talk to the new process."""
    path = make_notebook(f"restart-{kernel_mode}.ipynb", ["b = 2", "import time\ntime.sleep(60)"])
    kid = await start_kernel(path)
    ctx = await tool_ctx(path)
    ids = [c["id"] for c in (await call(ctx, "client_notebook_outline"))["structuredContent"]["cells"]]
    await call(ctx, "client_execute_cells", {"cell_ids": [ids[0]]})
    res = await call(ctx, "client_list_variables")
    assert [v["name"] for v in res["structuredContent"]["variables"]] == ["b"]
    res = await call(ctx, "client_inspect_variable", {"name": "b"})  # makes the subshell
    assert res["structuredContent"]["value"] == "2"
    running = asyncio.ensure_future(call(ctx, "client_execute_cells", {"cell_ids": [ids[1]], "timeout": 120}))
    await asyncio.sleep(1.0)
    t0 = time.monotonic()
    await jp_fetch("api", "kernels", kid, "restart", method="POST", body="{}")
    res = await asyncio.wait_for(running, 30)
    assert res["isError"] and "restarted" in text(res), res
    assert time.monotonic() - t0 < 10, "the restart was noticed only at the timeout"

    async def settled():
        res = await call(ctx, "client_execute_code", {"code": "print('alive')", "timeout": 5})
        return "alive" in text(res)

    await wait_until_async(settled, 30)
    res = await call(ctx, "client_inspect_variable", {"name": "b"})
    assert res["isError"] and "not defined" in text(res), res
    res = await call(ctx, "client_list_variables")
    assert not res["isError"] and res["structuredContent"]["total"] == 0, res


async def wait_until_async(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.3)


def test_the_summariser_is_a_module_and_its_source_is_what_the_kernel_runs():
    import numpy as np
    import pandas as pd

    ns = {"df": pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}), "arr": np.arange(4.0), "_private": 1, "np": np}
    assert [r["name"] for r in summarise.summarise(ns, {"op": "list"})["variables"]] == ["df", "arr"]
    df = summarise.summarise(ns, {"op": "inspect", "name": "df"})
    assert df["shape"] == [3, 2] and df["dtypes"]["a"] == "int64" and "b" in df["dtypes"]
    assert summarise.summarise(ns, {"op": "inspect", "name": "arr.nope"})["error"].startswith("'arr' has no attribute")
    # what the kernel is sent is this module's own text, run in a throw-away namespace
    src = summariser_source()
    assert "def summarise(ns, args):" in src and src == open(summarise.__file__, encoding="utf-8").read()
    expr = summary_expression({"op": "list"})
    scope = {"get_ipython": lambda: type("Shell", (), {"user_ns": ns})()}
    assert json.loads(repr(eval(expr, scope)))["variables"][1]["name"] == "arr"
    assert set(scope) == {"get_ipython", "__builtins__"}


def test_the_readme_hub_snippets_are_valid_configuration(monkeypatch):
    """The JupyterHub section's snippets: every setting they name exists and takes that value."""
    import re
    from pathlib import Path

    from jupyter_server.gateway.gateway_client import GatewayClient
    from traitlets.config import Config

    from jupyter_acp.app import JupyterACP

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## JupyterHub", 1)[1].split("\n## ", 1)[0]
    blocks = [textwrap_dedent(b) for b in re.findall(r"```python\n(.*?)```", section, re.S)]
    single_user = next(b for b in blocks if "jupyter_server_config.py" in b)
    hub = next(b for b in blocks if "jupyterhub_config.py" in b)
    c = Config()
    exec(compile(single_user, "README single-user snippet", "exec"), {"c": c})
    assert set(c) == {"JupyterACP", "GatewayClient"}
    acp = JupyterACP(config=c)
    assert "codex" in acp.agents and acp.default_agent == "builtin"
    gw = GatewayClient(config=c)
    assert gw.url.startswith("http://") and gw.request_timeout == 120.0
    c = Config()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    exec(compile(hub, "README hub snippet", "exec"), {"c": c})
    env = c.Spawner.environment
    assert env["OPENAI_API_KEY"] == "sk-test" and env["JUPYTER_ACP_MODEL"].startswith("openai/")


def textwrap_dedent(block: str) -> str:
    import textwrap

    return textwrap.dedent(block)


@GATEWAY
async def test_language_without_blocking_the_loop(make_notebook, start_kernel, acp):
    kid = await start_kernel(make_notebook("gw/lang.ipynb", ["1"]))
    bridge = acp.tools.services.kernels
    assert await bridge.language_async(kid) == "python"
    assert bridge.language(kid) == "python"  # cached: no blocking fetch
