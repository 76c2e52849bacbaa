"""Agents from the ACP Agent Registry: listed with what installing them runs, installed into the user's prefix (an
npm package, a PyPI package, a checked binary), enabled, and usable at once; refusals name their rule.

The registry is a local file (``c.JupyterACP.registry_url``); the binary's archive is served on 127.0.0.1 and holds a
launcher of the scripted ACP agent, so the whole path (list, install, checksum, unpack, enable, prompt) runs offline.
The npm and PyPI installs reach those registries: they skip when they cannot, unless ``JUPYTER_ACP_INTEROP_REQUIRED``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_acp.catalog.registry import SHIPPED, platform_key

from .conftest import message_text
from .users import USER_HEADER, HeaderUsers, ReaderOnlyReads

LAUNCHER = f'#!/bin/sh\nexec "{sys.executable}" -m jupyter_acp.testing.agents stream --chunks 3 "$@"\n'


def _archive() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = LAUNCHER.encode()
        info = tarfile.TarInfo("agent/bin/scripted-agent")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture(scope="module")
def archive_server(tmp_path_factory):
    """The binary's archive over HTTP on 127.0.0.1 (what a release download is, without the network)."""
    root = tmp_path_factory.mktemp("downloads")
    body = _archive()
    (root / "agent.tar.gz").write_bytes(body)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/agent.tar.gz", hashlib.sha256(body).hexdigest()
    finally:
        server.shutdown()


def _entry(agent_id: str, distribution: dict[str, Any]) -> dict[str, Any]:
    return {"id": agent_id, "name": agent_id.replace("-", " ").title(), "version": "1.0.0",
            "description": f"the {agent_id} test entry", "distribution": distribution}  # fmt: skip


@pytest.fixture
def registry_file(tmp_path, archive_server) -> Path:
    url, sha = archive_server
    target = {"archive": url, "cmd": "./agent/bin/scripted-agent", "args": ["--delay", "0"]}
    agents = [
        _entry("local-binary", {"binary": {platform_key(): {**target, "sha256": sha}}}),
        _entry("bad-checksum", {"binary": {platform_key(): {**target, "sha256": "0" * 64}}}),
        _entry("no-checksum", {"binary": {platform_key(): target}}),
        _entry("npm-cowsay", {"npx": {"package": "cowsay@1.6.0", "env": {"LD_PRELOAD": "/tmp/x.so", "COW": "moo"}}}),
        _entry("pypi-cowsay", {"uvx": {"package": "cowsay==6.1"}}),
    ]
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"version": "1.0.0", "agents": agents, "extensions": []}))
    return path


@pytest.fixture
def acp_config(registry_file):
    return {"registry_url": str(registry_file)}


@pytest.fixture
def server_app_config():
    return {"identity_provider_class": HeaderUsers, "authorizer_class": ReaderOnlyReads}


async def wait_installed(api, agent_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        got = await api.call("GET", "registry", agent_id)
        if got["install"]["state"] in ("enabled", "failed"):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"install of {agent_id} did not end in {timeout}s: {got['install']}")
        await asyncio.sleep(0.2)


async def test_the_registry_lists_its_agents_with_what_installing_them_runs(api, registry_file, jp_data_dir):
    listed = {a["id"]: a for a in await api.call("GET", "registry")}
    assert set(listed) == {"local-binary", "bad-checksum", "no-checksum", "npm-cowsay", "pypi-cowsay"}
    binary = listed["local-binary"]
    assert binary["distribution"] == "binary" and binary["installable"] and not binary["installed"]
    assert binary["source"] == str(registry_file) and binary["enabled"] is False
    assert binary["runs"].endswith("registry/local-binary/agent/bin/scripted-agent --delay 0")
    assert str(jp_data_dir) in binary["install_line"]  # the user's own prefix, never the system's
    refused = listed["no-checksum"]
    assert not refused["installable"] and "no sha256" in refused["reason"] and "rule:" in refused["reason"]
    cow = listed["npm-cowsay"]
    if cow["installable"]:  # npm is on this machine
        assert cow["install_line"].startswith("npm install --prefix ") and cow["install_line"].endswith("cowsay@1.6.0")
        assert cow["dropped_env"] == ["LD_PRELOAD"]  # what changes how programs load never comes from a registry
    assert listed["pypi-cowsay"]["distribution"] == "uvx"
    assert "venv/bin/cowsay" in listed["pypi-cowsay"]["runs"]


async def test_a_checked_binary_is_installed_enabled_and_usable_at_once(api, make_notebook, jp_serverapp):
    started = await api.call("POST", "registry", "install", body={"id": "local-binary"})
    assert started["install"]["state"] == "installing"
    done = await wait_installed(api, "local-binary", 60)
    assert done["install"]["state"] == "enabled", done["install"]
    assert done["installed"] and done["enabled"] and done["installed_version"] == "1.0.0"
    assert any("as the manifest says" in line for line in done["install"]["lines"])
    agents = {a["name"]: a for a in await api.call("GET", "agents")}
    assert agents["local-binary"]["available"] and agents["local-binary"]["command"].endswith("scripted-agent")
    # kept with the user's own agents (apart from an admin's presets), so it is there after a restart too
    assert agents["local-binary"]["origin"] == "user"
    app = jp_serverapp.extension_manager.extension_points["jupyter_acp"].app
    kept = json.loads(open(app.user_agents.path).read())["agents"]
    assert kept["local-binary"]["command"] == agents["local-binary"]["command"], kept
    # usable at once: a notebook's session on it answers
    s = await api.open(make_notebook("nb.ipynb"), "local-binary")
    turn = await api.prompt(s["id"], "go")
    assert message_text(await api.wait_turn_end(s["id"], turn), turn) == "0 1 2"
    again = await api.fetch(
        "jupyter-acp", "registry", "install", method="POST", body=json.dumps({"id": "local-binary"}), raise_error=False
    )
    assert again.code == 409 and b"already configured" in again.body


async def test_a_binary_whose_checksum_differs_is_never_unpacked(api, jp_data_dir):
    await api.call("POST", "registry", "install", body={"id": "bad-checksum"})
    done = await wait_installed(api, "bad-checksum", 60)
    assert done["install"]["state"] == "failed" and "not the manifest's" in done["install"]["error"]
    assert not done["installed"] and not done["enabled"]
    assert not (jp_data_dir / "acp" / "registry" / "bad-checksum").exists()  # nothing kept


@pytest.mark.parametrize(
    "user, body, status, words",
    [
        ("writer", {"id": "local-binary"}, 403, "needs 'execute' on resource 'jupyter_acp'"),
        ("owner", {"id": "no-checksum"}, 400, "no sha256"),
        ("owner", {"id": "nowhere"}, 404, "lists no agent 'nowhere'"),
        ("owner", {"id": "local-binary", "command": "/bin/sh"}, 400, "Extra inputs are not permitted"),
        ("owner", {"id": "../etc"}, 400, "String should match pattern"),
    ],
)
async def test_installs_are_refused_with_their_rule(jp_fetch, user, body, status, words):
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(
            "jupyter-acp", "registry", "install", method="POST", body=json.dumps(body), headers={USER_HEADER: user}
        )
    assert err.value.code == status
    assert words in (err.value.response.body or b"").decode()


class TestOffline:
    @pytest.fixture
    def acp_config(self, tmp_path):
        return {"registry_url": str(tmp_path / "no-such-registry.json")}

    async def test_an_unreadable_registry_lists_the_copy_shipped_with_the_package(self, api):
        listed = await api.call("GET", "registry")
        shipped = json.loads(SHIPPED.read_text())["agents"]
        assert [a["id"] for a in listed] == [a["id"] for a in shipped]
        assert "copy shipped with jupyter-acp" in listed[0]["source"] and "no-such-registry.json" in listed[0]["source"]


def _reachable(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.parametrize(
    "agent_id, probe, run",
    [
        ("npm-cowsay", ["npm", "view", "cowsay@1.6.0", "version"], ["moo from npm"]),
        ("pypi-cowsay", [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", "{tmp}", "cowsay==6.1"], ["-t", "moo from pypi"]),
    ],
)  # fmt: skip
@pytest.mark.timeout(420)
async def test_npm_and_pypi_agents_install_into_the_users_prefix(api, jp_data_dir, tmp_path, agent_id, probe, run):
    if not _reachable([p.replace("{tmp}", str(tmp_path)) for p in probe]):
        if os.environ.get("JUPYTER_ACP_INTEROP_REQUIRED"):
            pytest.fail(f"{probe[0]}'s registry is unreachable and JUPYTER_ACP_INTEROP_REQUIRED is set")
        pytest.skip(f"{probe[0]}'s registry is unreachable")
    await api.call("POST", "registry", "install", body={"id": agent_id})
    done = await wait_installed(api, agent_id, 360)
    assert done["install"]["state"] == "enabled", done["install"]
    command = {a["name"]: a for a in await api.call("GET", "agents")}[agent_id]["command"]
    assert command.startswith(str(jp_data_dir / "acp" / "registry" / agent_id))
    out = subprocess.run([command, *run], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and run[-1] in out.stdout
