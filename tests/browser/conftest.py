"""Browser tests: a real `jupyter lab` subprocess driven by Playwright on Debian's Chromium.

One server and one browser for the whole module run (starting JupyterLab costs seconds on two
cores); each test gets its own browser context and its own notebooks, so conversations never mix.
The server has its own root, runtime, config, data, settings and workspace directories, the echo
agent as default and scripted agents for permissions, slow turns and crashes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

CHROMIUM = "/usr/bin/chromium"
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
TOKEN = "browser-test-token"
SCRIPTED = ["-m", "jupyter_acp.testing.agents"]

Browser = Page = Any  # playwright's types, imported lazily so a missing browser only skips


def _require_browser() -> None:
    """Skip (with the reason) when the browser tests cannot run here."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:  # pragma: no cover
        pytest.skip("browser tests need python playwright (pip install -e '.[test]')")
    if not (REPO / "jupyter_acp" / "labextension" / "package.json").exists():
        pytest.skip("the labextension is not built (cd labextension && jlpm build:prod)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent(*args: str, title: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [*SCRIPTED, *args], "title": title}


class Lab:
    def __init__(
        self, url: str, root: Path, proc: subprocess.Popen, log: Path, config_dir: Path, data_dir: Path
    ) -> None:
        self.url = url
        self.root = root
        self.proc = proc
        self.log = log
        self.config_dir = config_dir
        self.data_dir = data_dir
        #: which run of the current test this is (scripts/test.sh runs a failed test once more; the ``ui`` fixture
        #: sets it)
        self.attempt = 1

    def notebook(self, name: str, cells: list[str] | None = None, ids: list[str] | None = None) -> str:
        """Write a notebook into the server's root and return its path. A test run again gets its notebooks in a
        folder of that run's own: the first run's conversation (bound to the same path) would otherwise be what the
        second run opens."""
        if self.attempt > 1:
            name = f"rerun-{self.attempt}/{name}"
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
        nb = nbformat.v4.new_notebook()
        # without a kernelspec a "Select Kernel" dialog blocks the page
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        for i, src in enumerate(cells or []):
            cell = nbformat.v4.new_code_cell(src)
            if ids:
                cell.id = ids[i]
            nb.cells.append(cell)
        (self.root / name).write_text(nbformat.writes(nb))
        return name

    def api(self, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(
            f"{self.url}jupyter-acp/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "POST",
            headers={"Authorization": f"token {TOKEN}"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")


#: what the fake model answers the built-in agent (see jupyter_acp.testing.fake_model)
FAKE_MODEL_RULES = [
    # the kernel tools reach the agent in the user's order of events (session before kernel); without them: words only
    {"tool": "execute_cells$", "match": "run the first cell", "arguments": {"cell_ids": ["cell-run"]}},
    {"match": "run the first cell", "text": "I cannot run code in this notebook."},
    {"role": "tool", "match": "41 \\+ 1 =", "text": "It printed: {last}"},
    {"tool": "get_selection", "match": "what did I select", "arguments": {}},
    {"role": "tool", "match": "active cell: index", "text": "From your tab: {last}"},
    {
        "tool": "insert_cell",
        "match": "greeting cell",
        "arguments": {"source": "print('hello from the agent')"},
    },
    {
        # matched by what the tool answered (the inserted source), not by a use count: a retried model
        # request under load must not use the answer up
        "role": "tool",
        "match": "hello from the agent",
        "text": "I added a cell that greets you:\n\n```python\nprint('hello from the agent')\n```\n\nRun it with **Shift+Enter**.",
    },
    {
        "tool": "edit_cell",
        "match": "make it 43",
        "arguments": {"cell_id": "cell-one", "old_string": "x = 42", "new_string": "x = 43"},
    },
    {
        "tool": "edit_cell",
        "match": "make it 42",
        "arguments": {"cell_id": "cell-one", "old_string": "x = 1", "new_string": "x = 42"},
    },
    {
        "role": "tool",
        "match": "(?i)refused|reject|denied|not allowed",
        "text": "The edit was rejected; nothing changed.",
    },
    {"role": "tool", "text": "Done: the cell now reads x = 42."},
    {"match": "take your time", "text": "Thinking it over, one word at a time, before I answer you.", "delay": 0.4},
    {
        "match": "what does this notebook do",
        "text": "It loads **sales.csv** into `df` and plots the monthly totals. The plot cell needs `df` from the cell above.",
    },
]


@pytest.fixture(scope="session")
def fake_model() -> Iterator[Any]:
    _require_browser()
    from jupyter_acp.testing.fake_model import FakeModel

    with FakeModel(FAKE_MODEL_RULES) as fm:
        yield fm


@contextlib.contextmanager
def run_lab(
    base: Path,
    settings: dict[str, Any],
    *,
    store: str = "transcripts.sqlite",
    env: dict[str, str] | None = None,
    drop_env: tuple[str, ...] = ("JUPYTER_ACP_MODEL",),
    keep_log: str | None = None,
    server_app: dict[str, Any] | None = None,
) -> Iterator[Lab]:
    """``jupyter lab`` in its own root, runtime, config, data, settings and workspace folders under ``base``, with
    ``settings`` as its ``JupyterACP`` config (the store at ``store`` in its data folder); stopped on exit.

    It serves the labextension built from this checkout (an installed copy may be older), or the build named by
    ``JUPYTER_ACP_TEST_LABEXTENSION`` (an older commit's, to see a test fail on it). ``env`` is added to the
    server's environment, ``drop_env`` taken out of it; ``keep_log`` copies its log into test-artifacts/browser;
    ``server_app`` is more ``ServerApp`` config (an identity provider that gives each browser its own person).
    """
    root, runtime, config, data = (base / n for n in ("root", "runtime", "config", "data"))
    for d in (root, runtime, config, data, base / "settings", base / "workspaces"):
        d.mkdir()
    # the "get notified about Jupyter news?" toast covers buttons: switch that plugin off
    (config / "labconfig").mkdir()
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    (data / "labextensions").mkdir()
    built = os.environ.get("JUPYTER_ACP_TEST_LABEXTENSION") or str(REPO / "jupyter_acp" / "labextension")
    (data / "labextensions" / "jupyter-acp-host").symlink_to(built)
    server_config = {
        "ServerApp": {"jpserver_extensions": {"jupyter_acp": True}, **(server_app or {})},
        "JupyterACP": {"store_path": str(data / store), **settings},
    }
    (config / "jupyter_server_config.json").write_text(json.dumps(server_config))
    port = _free_port()
    server_env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(data),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        **(env or {}),
    }
    for name in drop_env:
        server_env.pop(name, None)
    log = base / "server.log"
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
        f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
        f"--LabApp.user_settings_dir={base / 'settings'}", f"--LabApp.workspaces_dir={base / 'workspaces'}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, env=server_env, stdout=out, stderr=subprocess.STDOUT, cwd=root, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{url}api/status?token={TOKEN}", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"jupyter lab did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.25)
    try:
        yield Lab(url, root, proc, log, config, data)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        if keep_log:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, ARTIFACTS / keep_log)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, fake_model: Any) -> Iterator[Lab]:
    settings = {
        "default_agent": "echo",
        "agents": {
            "builtin": {
                "command": sys.executable,
                "args": ["-m", "jupyter_acp.agent"],
                "title": "Built-in (fake model)",
                "env": {
                    "JUPYTER_ACP_MODEL": "openai/fake",
                    "JUPYTER_ACP_API_BASE": fake_model.url,
                    "OPENAI_API_KEY": "sk-fake",
                    "JUPYTER_ACP_AGENT_MODE": "auto",
                },
            },
            # the built-in agent offering two models (and its modes ask/auto): the header's pickers
            "models": {
                "command": sys.executable,
                "args": ["-m", "jupyter_acp.agent", "--models", "openai/fake,openai/fake-large"],
                "title": "Built-in (two models)",
                "env": {
                    "JUPYTER_ACP_MODEL": "openai/fake",
                    "JUPYTER_ACP_API_BASE": fake_model.url,
                    "OPENAI_API_KEY": "sk-fake",
                },
            },
            "options": {
                "command": sys.executable,
                "args": [str(Path(__file__).with_name("options_agent.py"))],
                "title": "Scripted: every kind of option",
            },
            "perm": _agent("permission", title="Scripted: permission"),
            "slow": _agent("slow", "--chunks", "80", "--delay", "0.15", title="Scripted: slow"),
            "crash": _agent("crash", title="Scripted: crash"),
            "login": _agent("needs_auth", title="Scripted: needs login"),
        },
    }
    with run_lab(tmp_path_factory.mktemp("lab"), settings, keep_log="server.log") as lab:
        yield lab


@pytest.fixture(autouse=True)
def jp_asyncio_loop() -> Iterator[None]:
    """pytest-jupyter's loop fixture would close Playwright's running loop: these tests need none."""
    yield None


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> Iterator[None]:
    """No in-process server here to clean up (the server is a subprocess)."""
    yield None


@pytest.fixture(scope="session")
def browser(chromium: Browser) -> Browser:
    """The run's one Chromium (tests/conftest.py ``chromium``)."""
    return chromium


class Ui:
    """The page, with the few gestures the tests need."""

    def __init__(self, page: Page, lab: Lab, name: str) -> None:
        self.page = page
        self.lab = lab
        self.name = name
        self.shots = 0

    @property
    def panel(self):
        return self.page.locator("#jupyter-acp-sidebar")

    def open_lab(self, notebook: str | None = None) -> None:
        path = f"lab/tree/{notebook}" if notebook else "lab"
        self.page.goto(f"{self.lab.url}{path}?reset&token={TOKEN}")
        self.page.wait_for_selector("#jupyter-acp-sidebar", state="attached", timeout=60_000)
        if notebook:
            self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
            # its cells loaded (its context ready): the panel binds sooner than that, and a prompt sent before it
            # would find no cell to attach
            self.page.wait_for_function(
                "() => { const w = window.jupyterapp.shell.currentWidget; return !w || !w.context || w.context.isReady; }",
                timeout=60_000,
            )
        self.show_panel()

    def show_panel(self) -> None:
        self.page.evaluate("window.jupyterapp.shell.activateById('jupyter-acp-sidebar')")
        self.panel.wait_for(state="visible", timeout=30_000)

    def widen_panel(self, by: int = 160) -> None:
        """Drag the sidebar's split handle left (screenshots read better with a wider panel)."""
        box = self.panel.bounding_box()
        if not box:
            return
        x, y = box["x"] - 2, box["y"] + box["height"] / 2
        self.page.mouse.move(x, y)
        self.page.mouse.down()
        self.page.mouse.move(x - by / 2, y)
        self.page.mouse.move(x - by, y)
        self.page.mouse.up()

    def open_notebook(self, notebook: str) -> None:
        self.page.evaluate("p => window.jupyterapp.commands.execute('docmanager:open', {path: p})", notebook)
        self.page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(timeout=60_000)
        self.show_panel()

    def wait_ready(self, agent: str) -> None:
        """The panel is bound to a session of `agent` and the agent is up."""
        self.page.wait_for_function(
            "a => { const p = document.querySelector('#jupyter-acp-sidebar');"
            " const s = p && p.querySelector('.jp-ACP-agentSelect');"
            " return p.dataset.agent === a && s.value === a && !s.disabled; }",
            arg=agent,
            timeout=60_000,
        )
        self.page.wait_for_function(
            "() => { const s = document.querySelector('#jupyter-acp-sidebar .jp-ACP-status');"
            " return s && (s.hidden || !/Starting/.test(s.textContent)); }",
            timeout=60_000,
        )

    def wait_connected(self) -> None:
        """The panel's live connection to its session is open (until then its ops go over HTTP)."""
        self.page.wait_for_function(
            "() => { const p = document.querySelector('#jupyter-acp-sidebar');"
            " return p && p.dataset.session && p.dataset.stream === 'open'; }",
            timeout=60_000,
        )

    def pick_agent(self, agent: str) -> None:
        self.panel.get_by_label("Agent for this notebook").select_option(agent)
        self.wait_ready(agent)

    def send(self, text: str) -> None:
        box = self.panel.get_by_label("Message to the agent")
        box.fill(text)
        box.press("Enter")

    def shot(self, label: str, full: bool = True) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.shots += 1
        path = ARTIFACTS / f"{self.name}-{self.shots:02d}-{label}.png"
        (self.page if full else self.panel).screenshot(path=str(path))
        return path


@pytest.fixture
def ui(browser: Browser, lab: Lab, request: pytest.FixtureRequest) -> Iterator[Ui]:
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    context.set_default_timeout(30_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
    u = Ui(page, lab, request.node.name.removeprefix("test_"))
    lab.attempt = getattr(request.node, "execution_count", 1)  # pytest-rerunfailures counts the runs
    try:
        yield u
    except Exception:
        raise
    finally:
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            u.shot("failure")
        context.close()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"{u.name}-console.log").write_text("\n".join(console + errors))
    ours = [e for e in errors if "jupyter-acp" in e or "ACP" in e]
    ours += [c for c in console if c.startswith("error") and "jupyter-acp-host" in c]
    assert not ours, "the extension logged errors:\n" + "\n".join(ours)


@pytest.fixture
def second_ui(browser: Browser, lab: Lab, request: pytest.FixtureRequest) -> Iterator[Ui]:
    """Another browser (its own context: cookies, storage) on the same server."""
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    context.set_default_timeout(30_000)
    try:
        yield Ui(context.new_page(), lab, request.node.name.removeprefix("test_") + "-second")
    finally:
        context.close()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.rep_call = rep
