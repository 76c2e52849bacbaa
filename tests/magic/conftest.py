"""Real kernels started through the real Jupyter server, the magic executed in them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from jupyter_client.session import Session

from ..conftest import scripted


@pytest.fixture
def acp_agents() -> dict[str, Any]:
    return {
        "perm": scripted("permission"),
        "slow": scripted("slow", "--chunks", "200", "--delay", "0.1"),
        "login": scripted("needs_auth"),
    }


@pytest.fixture
def acp_server(jp_serverapp, api, monkeypatch, jp_asyncio_loop):
    """The server with the kernel API started (pytest-jupyter never runs the extensions' start hook)."""
    # whatever the extension puts in os.environ is undone after the test
    monkeypatch.setenv("JUPYTER_ACP_URL", "")
    monkeypatch.setenv("JUPYTER_ACP_TOKEN", "")
    jp_asyncio_loop.run_until_complete(jp_serverapp.extension_manager.start_extension("jupyter_acp"))
    return jp_serverapp


@dataclass
class Result:
    msgs: list[dict[str, Any]]
    reply: dict[str, Any]
    stdin_requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.reply["content"]["status"]

    @property
    def stdout(self) -> str:
        return "".join(
            m["content"]["text"] for m in self.msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )

    @property
    def stderr(self) -> str:
        return "".join(
            m["content"]["text"] for m in self.msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
        )

    @property
    def error(self) -> str:
        parts = [f"{m['content']['ename']}: {m['content']['evalue']}" for m in self.msgs if m["msg_type"] == "error"]
        return "\n".join(parts)

    def displays(self) -> list[dict[str, Any]]:
        return [m for m in self.msgs if m["msg_type"] in ("display_data", "update_display_data", "execute_result")]

    def final(self) -> dict[str, Any]:
        """The last state of the first display (what the user sees when the cell ends)."""
        shown = self.displays()
        assert shown, f"no display; stdout={self.stdout!r} stderr={self.stderr!r} error={self.error!r}"
        first_id = shown[0]["content"].get("transient", {}).get("display_id")
        last = [m for m in shown if m["content"].get("transient", {}).get("display_id") == first_id][-1]
        return last["content"]

    def text(self) -> str:
        """Everything the cell showed, as plain text."""
        out = [self.stdout, self.stderr, self.error]
        out += [m["content"]["data"].get("text/plain", "") for m in self.displays()]
        return "\n".join(out)


class Kernel:
    def __init__(self, serverapp: Any, fetch: Any, path: str) -> None:
        self.serverapp = serverapp
        self.fetch = fetch
        self.path = path
        self.id = ""
        self.kc: Any = None

    async def start(self) -> Kernel:
        resp = await self.fetch(
            "api",
            "sessions",
            method="POST",
            body=json.dumps({"path": self.path, "name": self.path, "type": "notebook", "kernel": {"name": "python3"}}),
        )
        self.id = json.loads(resp.body)["kernel"]["id"]
        km = self.serverapp.kernel_manager.get_kernel(self.id)
        # a session of its own: clients made by km.client() share the manager's session id, which is also
        # their ZMQ identity, so a second client (the server's tool client) would receive our replies
        session = Session(key=km.session.key, signature_scheme=km.session.signature_scheme, username="magic-test")
        self.kc = km.client(session=session)
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=90)
        return self

    async def run(
        self,
        code: str,
        timeout: float = 60.0,
        on_msg: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        stdin: Callable[[str], str] | None = None,
    ) -> Result:
        """Execute a cell; ``stdin`` answers the kernel's input() prompts (the frontend's input box)."""
        msg_id = self.kc.execute(code, allow_stdin=stdin is not None, stop_on_error=False)
        msgs: list[dict[str, Any]] = []
        asked: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"cell did not finish in {timeout} s; so far: {msgs[-5:]}")
            if stdin is not None:
                try:
                    req = await self.kc.get_stdin_msg(timeout=0.01)
                except Exception:  # queue.Empty
                    req = None
                if req is not None and req["msg_type"] == "input_request":
                    asked.append(req)
                    self.kc.input(stdin(req["content"]["prompt"]))
            try:
                msg = await self.kc.get_iopub_msg(timeout=min(left, 0.2 if stdin else 1.0))
            except Exception:  # queue.Empty
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
            if msg["msg_type"] in ("status", "execute_input"):
                continue
            msgs.append(msg)
            if on_msg is not None:
                await on_msg(msg)
        while True:
            reply = await self.kc.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                return Result(msgs, reply, asked)

    def stop(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()


@pytest.fixture
def start_kernel(acp_server, jp_fetch, jp_asyncio_loop):
    kernels: list[Kernel] = []

    async def start(path: str, load: bool = True) -> Kernel:
        k = await Kernel(acp_server, jp_fetch, path).start()
        kernels.append(k)
        if load:
            res = await k.run("%load_ext jupyter_acp")
            assert res.status == "ok", res.text()
        return k

    yield start
    for k in kernels:
        k.stop()
        jp_asyncio_loop.run_until_complete(acp_server.kernel_manager.shutdown_kernel(k.id, now=True))


async def wait_until(predicate: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.05)
