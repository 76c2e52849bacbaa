"""A real JupyterHub for the tests: jupyterhub from PyPI, configurable-http-proxy from npm, two users on 127.0.0.1.

One hub per test module (starting a hub and its users' JupyterLab servers costs seconds on two cores): the module
says what its single-user image's admin configures (``ADMIN_CONFIG``: ``c.JupyterACP.*`` lines, in a config folder
on ``JUPYTER_CONFIG_PATH``, which wins over the user's own folder as an image's ``/etc/jupyter`` does in a
virtualenv). The hub has the dummy authenticator (users ``alice`` and ``bob``, password ``PASSWORD``), the
``SimpleLocalProcessSpawner`` (each user's home under the module's folder), named servers, JupyterHub's sharing API,
custom scopes ``custom:jupyter_server:{read,write,execute}:*`` read by ``scopes_authorizer.ScopesAuthorizer`` (every
user has ``execute`` on their own servers), and a service token for the admin's API calls. Every port it opens is
on 127.0.0.1. The single-user servers serve this checkout's package and built labextension, with the echo agent as
default, a preset ``team`` agent, the built-in agent on a fake model server (the stand-in for a LiteLLM proxy the
hub runs: its model, endpoint and key come from the hub's environment) and a ``codex-acp`` stand-in on PATH.

Without configurable-http-proxy (no npm or registry) the tests skip, unless ``JUPYTER_ACP_INTEROP_REQUIRED=1``.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.interop.npm_agents import InstallError, install

from .proxy import CHP

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "hub"
PASSWORD = "hub-test-password"
SERVICE_TOKEN = "hub-test-service-token-0123456789abcdef"
CHROMIUM = "/usr/bin/chromium"
SCRIPTED = [sys.executable, "-m", "jupyter_acp.testing.agents"]

#: what the fake model (the hub's "LiteLLM proxy") answers the built-in agent
MODEL_RULES = [
    {
        "tool": "edit_cell",
        "match": "make it 42",
        "arguments": {"cell_id": "cell-one", "old_string": "x = 1", "new_string": "x = 42"},
    },
    {"role": "tool", "match": "x = 42", "text": "Done: the cell now reads x = 42."},
    {"tool": "insert_cell", "match": "greeting cell", "arguments": {"source": "print('hello from the agent')"}},
    {"role": "tool", "match": "hello from the agent", "text": "I added a cell that greets you."},
    {"role": "tool", "match": "(?i)refused|reject|denied|not allowed", "text": "The change was refused."},
    {"match": "refuse my key", "status": 401, "text": "Incorrect API key provided"},
    {"match": "hello", "text": "Hello from the hub's model."},
]

#: the single-user image's agents, as an admin presets them
PRESET_AGENTS = {
    "team": {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], "stream"], "title": "Team agent (preset)"},
    "builtin": {
        "command": sys.executable,
        "args": ["-m", "jupyter_acp.agent"],
        "title": "Built-in (the hub's model)",
        "env": {"JUPYTER_ACP_AGENT_MODE": "auto"},  # the agent does not ask itself; the client's gate still does
    },
}

#: the custom scopes the granular Authorizer reads (JupyterHub's read-only example's)
CUSTOM_SCOPES = {
    "custom:jupyter_server:read:*": {"description": "read a Jupyter server"},
    "custom:jupyter_server:write:*": {
        "description": "change files and act, without executing",
        "subscopes": ["custom:jupyter_server:read:*"],
    },
    "custom:jupyter_server:execute:*": {
        "description": "everything, execution included",
        "subscopes": ["custom:jupyter_server:write:*", "custom:jupyter_server:read:*"],
    },
}
READ_SHARE = ["access:servers", "custom:jupyter_server:read:*"]
FULL_SHARE = ["access:servers", "custom:jupyter_server:read:*", "custom:jupyter_server:write:*"]
#: the same two shares as groups with a role each, for the browser: JupyterHub 6.1's OAuth step (a browser's login to
#: a server) grants what the user's roles hold, and of a share only its access scope, so a share's custom scopes
#: reach API tokens but not a browser; a group's role reaches both, and membership changes at run time
GROUP_SHARES = {"alice-readers": READ_SHARE, "alice-writers": FULL_SHARE}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy_command() -> str:
    """configurable-http-proxy's executable (installed into the cache when missing), or a skip with the reason."""
    try:
        return str(install(CHP))
    except InstallError as exc:
        if os.environ.get("JUPYTER_ACP_INTEROP_REQUIRED"):
            raise
        pytest.skip(f"{CHP.spec} could not be installed: {exc}")


class Hub:
    """A running hub: its URLs, its log, and the API calls the tests make."""

    def __init__(self, url: str, base: Path, proc: subprocess.Popen, log: Path) -> None:
        self.url = url
        self.base = base
        self.proc = proc
        self.log = log
        self.http = httpx.Client(timeout=60)

    def home(self, user: str) -> Path:
        return self.base / "home" / user

    # -- the hub's REST API --------------------------------------------------------------------------
    def api(self, method: str, path: str, body: Any = None, token: str = SERVICE_TOKEN) -> httpx.Response:
        return self.http.request(
            method,
            f"{self.url}hub/api/{path}",
            headers={"Authorization": f"token {token}"},
            content=None if body is None else json.dumps(body),
        )

    def token(self, user: str) -> str:
        """A new API token of ``user`` (their own scopes; a new one is never in a server's cache of old ones)."""
        resp = self.api("POST", f"users/{user}/tokens", {"note": "hub tests"})
        assert resp.status_code in (200, 201), resp.text
        return resp.json()["token"]

    def server_ready(self, user: str, name: str = "") -> bool:
        model = self.api("GET", f"users/{user}").json()
        server = (model.get("servers") or {}).get(name)
        return bool(server and server.get("ready"))

    def start(self, user: str, name: str = "", timeout: float = 180) -> None:
        if self.server_ready(user, name):
            return
        path = f"users/{user}/servers/{name}" if name else f"users/{user}/server"
        resp = self.api("POST", path)
        assert resp.status_code in (201, 202, 400), resp.text  # 400: already pending
        deadline = time.monotonic() + timeout
        while not self.server_ready(user, name):
            if time.monotonic() > deadline:
                pytest.fail(f"{user}'s server {name!r} did not start:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)
        # ready for the hub; the extension builds its hub in the background: wait for its routes
        token = self.token(user)
        while self.acp(user, "GET", "agents", token=token, name=name).status_code != 200:
            if time.monotonic() > deadline:
                pytest.fail(f"{user}'s jupyter-acp routes did not answer:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)

    def stop(self, user: str, name: str = "", timeout: float = 60) -> None:
        path = f"users/{user}/servers/{name}" if name else f"users/{user}/server"
        resp = self.api("DELETE", path)
        assert resp.status_code in (202, 204), resp.text
        deadline = time.monotonic() + timeout
        while True:
            model = self.api("GET", f"users/{user}").json()
            if name not in (model.get("servers") or {}):
                return
            assert time.monotonic() < deadline, f"{user}'s server {name!r} did not stop"
            time.sleep(0.3)

    def share(self, owner: str, user: str, scopes: list[str], server: str = "") -> None:
        """``owner`` shares a server with ``user`` (the owner's own token, as the sharing API wants)."""
        self.unshare(owner, user, server)
        resp = self.api("POST", f"shares/{owner}/{server}", {"user": user, "scopes": scopes}, token=self.token(owner))
        assert resp.status_code == 200, resp.text

    def unshare(self, owner: str, user: str, server: str = "") -> None:
        shares = self.api("GET", f"shares/{owner}/{server}", token=self.token(owner)).json().get("items", [])
        for share in shares:
            if (share.get("user") or {}).get("name") == user:
                resp = self.api(
                    "PATCH", f"shares/{owner}/{server}", {"user": user, "scopes": share["scopes"]}, self.token(owner)
                )
                assert resp.status_code == 200, resp.text

    def join(self, group: str, user: str) -> None:
        resp = self.api("POST", f"groups/{group}/users", {"users": [user]})
        assert resp.status_code == 200, resp.text

    def leave(self, group: str, user: str) -> None:
        resp = self.api("DELETE", f"groups/{group}/users", {"users": [user]})
        assert resp.status_code == 200, resp.text

    # -- a user's server, through the proxy --------------------------------------------------------------
    def user_url(self, user: str, name: str = "") -> str:
        return f"{self.url}user/{user}/{name + '/' if name else ''}"

    def acp(
        self, owner: str, method: str, path: str, body: Any = None, *, token: str, name: str = ""
    ) -> httpx.Response:
        return self.http.request(
            method,
            f"{self.user_url(owner, name)}jupyter-acp/{path}",
            headers={"Authorization": f"token {token}"},
            content=None if body is None and method in ("GET", "DELETE") else json.dumps(body or {}),
        )

    def ws_url(self, owner: str, path: str, name: str = "") -> str:
        return self.user_url(owner, name).replace("http://", "ws://", 1) + f"jupyter-acp/{path}"

    def notebook(self, user: str, path: str, cells: list[str] | None = None, ids: list[str] | None = None) -> str:
        import nbformat

        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        for i, src in enumerate(cells or []):
            cell = nbformat.v4.new_code_cell(src)
            if ids:
                cell.id = ids[i]
            nb.cells.append(cell)
        full = self.home(user) / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(nbformat.writes(nb))
        return path

    def wait_turn(self, owner: str, sid: str, turn: str, token: str, timeout: float = 90) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            events = self.acp(owner, "GET", f"sessions/{sid}/events?after=0", token=token).json()
            if any(e["type"] == "turn_ended" and e.get("turn_id") == turn for e in events):
                return events
            assert time.monotonic() < deadline, f"turn {turn} did not end: {json.dumps(events)[-2000:]}"
            time.sleep(0.2)


def hub_config(base: Path, *, port: int, proxy: str, fake_model_url: str, admin_dir: Path) -> str:
    """The hub's ``jupyterhub_config.py``."""
    home = base / "home"
    bin_dir = base / "bin"
    share = base / "share"
    env = {
        # this checkout, whatever is installed; the admin's config folder wins over the user's own
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "JUPYTER_CONFIG_PATH": str(admin_dir),
        "JUPYTER_PATH": str(share),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        # the provider's settings come from the hub's environment, never the image (docs/jupyterhub.md)
        "JUPYTER_ACP_MODEL": "openai/fake",
        "JUPYTER_ACP_API_BASE": fake_model_url,
        "OPENAI_API_KEY": "sk-the-hubs-key",
    }
    roles = [
        {
            "name": "user",
            "scopes": ["self", "shares!user", "read:users:name", "custom:jupyter_server:execute:*!user"],
        },
        {
            "name": "tester",
            "services": ["tester"],
            "scopes": [
                "admin:users",
                "admin:servers",
                "tokens",
                "read:users",
                "list:users",
                "access:servers",
                "groups",
            ],
        },
        *(
            {"name": group, "groups": [group], "scopes": [f"{s}!server=alice/" for s in scopes]}
            for group, scopes in GROUP_SHARES.items()
        ),
    ]
    return f"""
c = get_config()  # noqa
import os
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {free_port()}
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"
c.JupyterHub.db_url = "sqlite:///{base / "hub.sqlite"}"
c.JupyterHub.cookie_secret_file = {str(base / "cookie_secret")!r}
c.JupyterHub.pid_file = {str(base / "hub.pid")!r}
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {PASSWORD!r}
c.Authenticator.allowed_users = {{"alice", "bob"}}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(home / "{username}")!r}
c.Spawner.ip = "127.0.0.1"
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
# a single-user server without a terminal waits for a confirmation after SIGINT: go on to SIGTERM soon
c.LocalProcessSpawner.interrupt_timeout = 1
c.LocalProcessSpawner.term_timeout = 10
c.Spawner.environment = {env!r}
c.Spawner.oauth_client_allowed_scopes = [
    "access:servers!server",
    "custom:jupyter_server:read:*!server",
    "custom:jupyter_server:write:*!server",
    "custom:jupyter_server:execute:*!server",
]
c.JupyterHub.allow_named_servers = True
c.JupyterHub.custom_scopes = {CUSTOM_SCOPES!r}
c.JupyterHub.load_roles = {roles!r}
c.JupyterHub.load_groups = {{g: {{"users": []}} for g in {list(GROUP_SHARES)!r}}}
c.JupyterHub.services = [{{"name": "tester", "api_token": {SERVICE_TOKEN!r}}}]
c.JupyterHub.cleanup_servers = True
"""


def admin_settings(base: Path, extra: str) -> Path:
    """The single-user image's config folder (``/etc/jupyter`` of a real image), on ``JUPYTER_CONFIG_PATH``."""
    admin = base / "etc-jupyter"
    (admin / "labconfig").mkdir(parents=True)
    # the "get notified about Jupyter news?" toast covers buttons: switch that plugin off
    (admin / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    (admin / "jupyter_server_config.py").write_text(
        f"""
c = get_config()  # noqa
c.ServerApp.jpserver_extensions = {{"jupyter_acp": True}}
c.ServerApp.allow_root = True
c.ServerApp.authorizer_class = "tests.hub.scopes_authorizer.ScopesAuthorizer"
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabApp.expose_app_in_browser = True
c.JupyterACP.default_agent = "echo"
c.JupyterACP.agents = {PRESET_AGENTS!r}
{extra}
"""
    )
    return admin


@contextlib.contextmanager
def run_hub(base: Path, admin_config: str, fake_model_url: str) -> Iterator[Hub]:
    proxy = proxy_command()
    admin = admin_settings(base, admin_config)
    bin_dir = base / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex-acp"  # a stand-in found on PATH, which speaks ACP (the scripted streaming agent)
    codex.write_text(f"#!/bin/sh\nexec {sys.executable} -m jupyter_acp.testing.agents stream\n")
    codex.chmod(0o755)
    (base / "share" / "labextensions").mkdir(parents=True)
    (base / "share" / "labextensions" / "jupyter-acp-host").symlink_to(REPO / "jupyter_acp" / "labextension")
    for user in ("alice", "bob"):
        (base / "home" / user).mkdir(parents=True)
    port = free_port()
    (base / "jupyterhub_config.py").write_text(
        hub_config(base, port=port, proxy=proxy, fake_model_url=fake_model_url, admin_dir=admin)
    )
    log = base / "hub.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_ACP_", "OPENAI_", "JUPYTERHUB_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(base / "jupyterhub_config.py"), "--debug"],
            cwd=base,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}hub/api/", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"jupyterhub did not start:\n{log.read_text()[-4000:]}")
        time.sleep(0.3)
    hub = Hub(url, base, proc, log)
    try:
        yield hub
    finally:
        hub.http.close()
        # the hub stops its users' servers and its proxy (cleanup_servers) on SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for pid in descendants_of(proc.pid):  # a server or proxy left in a session of its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, ARTIFACTS / f"{base.name}-hub.log")


def descendants_of(root: int) -> set[int]:
    """Every process started under ``root`` that is still there (from /proc: parent links)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = {root}
    while frontier:
        children = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= children
        frontier = children
    return found


@pytest.fixture(scope="module")
def fake_model() -> Iterator[Any]:
    from jupyter_acp.testing.fake_model import FakeModel

    with FakeModel(MODEL_RULES) as fm:
        yield fm


@pytest.fixture(scope="module")
def hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, fake_model: Any) -> Iterator[Hub]:
    """One hub for the module, alice's server started; the module's time is printed when it ends."""
    started = time.monotonic()
    name = request.module.__name__.rsplit(".", 1)[-1]
    with run_hub(tmp_path_factory.mktemp(name), getattr(request.module, "ADMIN_CONFIG", ""), fake_model.url) as h:
        h.start("alice")
        print(f"\n[{name}] hub and alice's server up in {time.monotonic() - started:.1f}s")
        yield h
        tests_done = time.monotonic()
    print(
        f"\n[{name}] the hub module took {time.monotonic() - started:.1f}s "
        f"(its tests until {tests_done - started:.1f}s, the hub's stop {time.monotonic() - tests_done:.1f}s)"
    )


# -- the browser ----------------------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def jp_asyncio_loop() -> Iterator[None]:
    """pytest-jupyter's loop fixture would close Playwright's running loop: these tests need none."""
    yield None


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> Iterator[None]:
    """No in-process server here (the hub and its servers are subprocesses)."""
    yield None


@pytest.fixture(scope="module")
def browser(chromium: Any) -> Any:
    """The run's one Chromium (tests/conftest.py ``chromium``: a second sync Playwright in the same run would fail)."""
    if not (REPO / "jupyter_acp" / "labextension" / "package.json").exists():
        pytest.skip("the labextension is not built (cd labextension && jlpm build:prod)")
    return chromium


class Person:
    """One person's browser (its own cookies) on the hub."""

    def __init__(self, browser: Any, hub: Hub, user: str, label: str) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 860})
        self.context.set_default_timeout(60_000)
        self.page = self.context.new_page()
        self.hub = hub
        self.user = user
        self.label = label
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def login(self) -> None:
        """The hub's own login form (the dummy authenticator)."""
        self.page.goto(f"{self.hub.url}hub/login?next=%2Fhub%2Fhome")  # home, not a spawn of their own server
        self.page.fill("#username_input", self.user)
        self.page.fill("#password_input", PASSWORD)
        self.page.click("#login_submit")
        self.page.wait_for_url("**/hub/home", timeout=60_000)

    def open(self, owner: str, notebook: str, cells: bool = True) -> None:
        """A notebook on ``owner``'s server (the hub's OAuth in between; a shared server asks once to authorize)."""
        self.page.goto(f"{self.hub.user_url(owner)}lab/tree/{notebook}?reset")
        authorize = self.page.locator("button:has-text('Authorize')")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.page.locator("#jupyter-acp-sidebar").count():
                break
            if authorize.count():
                authorize.first.click()
            time.sleep(0.3)
        try:
            self.wait_panel()
            if cells:
                self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
        except Exception:
            self.shot("failed-to-open")
            raise

    def wait_panel(self) -> None:
        self.page.wait_for_selector("#jupyter-acp-sidebar", state="attached", timeout=60_000)
        self.page.evaluate("window.jupyterapp.shell.activateById('jupyter-acp-sidebar')")
        self.panel.wait_for(state="visible", timeout=30_000)

    def pick(self, agent: str) -> None:
        self.panel.get_by_label("Agent for this notebook").select_option(agent)
        self.page.wait_for_function(
            "a => document.querySelector('#jupyter-acp-sidebar').dataset.agent === a", arg=agent, timeout=60_000
        )

    def send(self, text: str) -> None:
        box = self.panel.get_by_label("Message to the agent")
        box.fill(text)
        box.press("Enter")

    @property
    def panel(self) -> Any:
        return self.page.locator("#jupyter-acp-sidebar")

    def shot(self, label: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.label}-{label}.png"
        self.page.screenshot(path=str(path))
        return path

    def close(self) -> None:
        self.context.close()
