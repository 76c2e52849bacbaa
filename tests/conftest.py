"""Shared fixtures: a real Jupyter server (pytest-jupyter) with jupyter_acp and real agents."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import nbformat
import pytest

from jupyter_acp.testing.events import message_text  # noqa: F401  (re-exported for the tests)

pytest_plugins = ("pytest_jupyter.jupyter_server",)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Agent subprocesses import jupyter_acp from this checkout, whatever is installed.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)

SCRIPTED = [sys.executable, "-m", "jupyter_acp.testing.agents"]


def scripted(behaviour: str, *extra: str) -> dict[str, Any]:
    """An agent entry running one of the scripted test agents."""
    return {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], behaviour, *extra], "title": f"scripted {behaviour}"}


def hostile(tmp_path: Any, *extra: str, **entry: Any) -> dict[str, Any]:
    """An agent entry running the scriptable hostile agent (``jupyter_acp.testing.hostile``), which reports every
    message it got to ``tmp_path/report.jsonl`` (read with the ``report`` fixture)."""
    args = ["-m", "jupyter_acp.testing.hostile", *extra, "--report", str(tmp_path / "report.jsonl")]
    return {"command": sys.executable, "args": args, "title": "hostile", **entry}


@pytest.fixture
def report(tmp_path) -> Any:
    """What the hostile agent of ``hostile(tmp_path)`` reported so far: a function answering its JSON lines."""
    path = tmp_path / "report.jsonl"

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    return read


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def chromium() -> Any:
    """One headless Debian Chromium for the whole run, shared by tests/browser and tests/hub.

    Playwright's sync API keeps its own event loop running in this thread for as long as it is open, so a second
    ``sync_playwright()`` (a module's own browser, opened while the session's is alive) fails with "Sync API inside
    the asyncio loop": one launcher, opened on first use, closed at the end of the run."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def acp_agents() -> dict[str, Any]:
    """Override in a test module to configure more agents."""
    return {}


@pytest.fixture
def acp_config() -> dict[str, Any]:
    """Override in a test module for other JupyterACP settings."""
    return {}


@pytest.fixture
def server_app_config() -> dict[str, Any]:
    """Override for extra ``ServerApp`` settings (an Authorizer, more extensions, ...)."""
    return {}


@pytest.fixture
def jp_server_config(jp_root_dir, jp_data_dir, acp_agents, acp_config, server_app_config):
    return {
        "ServerApp": {
            "jpserver_extensions": {"jupyter_acp": True},
            "allow_unauthenticated_access": False,
            **server_app_config,
        },
        "JupyterACP": {
            "agents": acp_agents,
            "default_agent": "echo",
            "store_path": str(jp_data_dir / "acp" / "transcripts.sqlite"),
            **acp_config,
        },
    }


@pytest.fixture
def make_notebook(jp_root_dir):
    def make(path: str, cells: list[str] | None = None) -> str:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        for src in cells or []:
            nb.cells.append(nbformat.v4.new_code_cell(src))
        full = jp_root_dir / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(nbformat.writes(nb))
        return path

    return make


class Api:
    """The extension's HTTP API, as the sidebar and users' scripts call it."""

    def __init__(self, fetch):
        self.fetch = fetch

    async def call(self, method: str, *parts: str, body: Any = None, params: dict | None = None) -> Any:
        kwargs: dict[str, Any] = {"method": method}
        if body is not None or method == "POST":
            kwargs["body"] = json.dumps(body if body is not None else {})
        if params:
            kwargs["params"] = params
        resp = await self.fetch("jupyter-acp", *parts, **kwargs)
        return json.loads(resp.body) if resp.body else None

    async def open(self, notebook: str, agent: str | None = None) -> dict[str, Any]:
        body = {"notebook": notebook}
        if agent:
            body["agent"] = agent
        return await self.call("POST", "sessions", body=body)

    async def prompt(self, sid: str, text: str) -> str:
        return (await self.call("POST", "sessions", sid, "prompt", body={"text": text}))["turn_id"]

    async def events(self, sid: str, after: int = 0) -> list[dict[str, Any]]:
        return await self.call("GET", "sessions", sid, "events", params={"after": str(after)})

    async def wait_for(self, sid: str, predicate, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            events = await self.events(sid)
            if predicate(events):
                return events
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; events so far: {json.dumps(events)[-3000:]}")
            await asyncio.sleep(0.05)

    async def wait_turn_end(self, sid: str, turn_id: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        return await self.wait_for(
            sid, lambda evs: any(e["type"] == "turn_ended" and e["turn_id"] == turn_id for e in evs), timeout
        )


@pytest.fixture
def api(jp_fetch) -> Api:
    return Api(jp_fetch)


def process_alive(pid: int) -> bool:
    """True while a process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


#: what each marker means (registered in pyproject.toml; ``kind`` below gives every test exactly one)
KINDS = ("unit", "server", "browser", "interop")


def kind(item: pytest.Item) -> str:
    """A test's kind, from where it lives and what it uses: ``browser``, ``interop`` and ``hub`` by folder; ``server`` for a
    test that uses pytest-jupyter's server (``jp_serverapp``, also through ``api``, ``jp_fetch``, ...) or whose
    module launches servers of its own (``jupyter_acp.testing.server.ServerProcess``); else ``unit``."""
    parts = item.path.relative_to(REPO).parts
    if parts[:2] == ("tests", "browser"):
        return "browser"
    if parts[:2] == ("tests", "interop"):
        return "interop"
    if parts[:2] == ("tests", "hub"):
        return "hub"
    if "jp_serverapp" in getattr(item, "fixturenames", ()):
        return "server"
    module = getattr(item, "module", None)
    if module is not None and getattr(module, "ServerProcess", None) is not None:
        return "server"
    return "unit"


def pytest_collection_modifyitems(session, config, items):
    """Each test marked with its kind (``-m unit``; ``scripts/test.sh --fast`` is ``-m "not browser and not interop
    and not hub"``), so that no test file names its own. Tests that drive a browser last (the hub's too):
    Playwright's sync API keeps its own event loop running in this thread until its session fixture ends, which no
    pytest-jupyter test after it could share."""
    for item in items:
        item.add_marker(kind(item))
    items.sort(
        key=lambda item: item.get_closest_marker("browser") is not None or item.get_closest_marker("hub") is not None
    )


def _rerun_lines(terminalreporter) -> list[str]:
    reruns = terminalreporter.stats.get("rerun", [])
    failed = {r.nodeid for r in terminalreporter.stats.get("failed", [])}
    lines = []
    for report in reruns:
        crash = getattr(report.longrepr, "reprcrash", None)
        reason = (
            crash.message.splitlines()[0][:300] if crash is not None and crash.message else str(report.longrepr)[-300:]
        )
        then = "failed again" if report.nodeid in failed else "passed when run again"
        lines.append(f"{report.nodeid} ({report.when}, {then}): {reason}")
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Name every test that failed once and was run again (``scripts/test.sh`` runs each failure once more,
    pytest-rerunfailures): CI stays green on a race the machine's load provoked, and the race is printed here, with
    the first failure's reason, to be fixed, not forgotten. A test that failed twice is reported by pytest with its
    second failure, which a first failure can cause (what it left behind); the first one is here."""
    lines = _rerun_lines(terminalreporter)
    if lines:
        terminalreporter.section(f"run again: {len(lines)} failure(s); each is a race to fix")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_unconfigure(config):
    """The same lines once more after pytest's last line: where a CI that keeps only the head and the tail of the
    output still shows them."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    for line in _rerun_lines(reporter):
        reporter.write_line(f"run again: {line}")
