"""An agent installed from the ACP registry in a real JupyterLab, then used: the picker lists a local registry file's
entry (codex-acp from the npm registry, the version the interop tests pin), the dialog says what installs and what
runs, Install shows its progress under the picker, and once enabled the agent answers a prompt from a fake OpenAI
Responses server (offline but for the npm download).

A server of its own (this module's ``lab``).  Bounded: the install is given 5 minutes, the answer 2; skipped when the
npm registry cannot be reached, unless ``JUPYTER_ACP_INTEROP_REQUIRED=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Lab, run_lab  # the browser tests' conftest (same folder)

from jupyter_acp.testing.fake_responses import FakeResponses, codex_config

expect = pytest.importorskip("playwright.sync_api").expect

SPEC = "@zed-industries/codex-acp@0.16.0"  # tests/interop/npm_agents.py pins the same one
ANSWER = "Hello from codex, installed from the ACP registry."
pytestmark = pytest.mark.timeout(600)


def _npm_reachable() -> bool:
    try:
        return subprocess.run(["npm", "view", SPEC, "version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def responses() -> Iterator[FakeResponses]:
    with FakeResponses([{"match": "say hello", "text": ANSWER}]) as fake:
        yield fake


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, responses: FakeResponses) -> Iterator[Lab]:
    if not _npm_reachable():
        if os.environ.get("JUPYTER_ACP_INTEROP_REQUIRED"):
            pytest.fail(f"the npm registry is unreachable ({SPEC}) and JUPYTER_ACP_INTEROP_REQUIRED is set")
        pytest.skip(f"the npm registry is unreachable ({SPEC})")
    base = tmp_path_factory.mktemp("registry-lab")
    codex_home = base / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(codex_config(responses.url))
    entry = {
        "id": "codex-acp",
        "name": "Codex",
        "version": "0.16.0",
        "description": "ACP adapter for OpenAI's coding assistant",
        "distribution": {"npx": {"package": SPEC, "env": {"CODEX_HOME": str(codex_home), "RUST_LOG": "warn"}}},
    }
    registry = base / "registry.json"
    registry.write_text(json.dumps({"version": "1.0.0", "agents": [entry], "extensions": []}))
    settings = {"default_agent": "echo", "registry_url": str(registry)}
    with run_lab(base, settings, env={"OPENAI_API_KEY": "sk-fake"}, keep_log="registry-server.log") as lab:
        yield lab


def test_an_agent_installed_from_the_registry_answers_in_the_panel(ui: Any, lab: Lab) -> None:
    nb = lab.notebook("registry.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    panel = ui.panel
    picker = panel.get_by_label("Agent for this notebook")
    option = picker.locator("option[data-registry='codex-acp']")
    expect(option).to_contain_text("Install Codex 0.16.0 (npx)", timeout=60_000)
    picker.select_option("install:codex-acp")
    dialog = ui.page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("npm install --prefix ")
    expect(dialog).to_contain_text(SPEC)
    expect(dialog).to_contain_text("node_modules/.bin/codex-acp")
    ui.shot("install-dialog")
    dialog.get_by_role("button", name="Install").click()
    note = panel.locator(".jp-ACP-enabledNote")
    expect(note).to_contain_text("Installing Codex", timeout=30_000)
    expect(note).to_contain_text("is installed and enabled", timeout=300_000)
    ui.shot("installed")
    ui.pick_agent("codex-acp")
    ui.send("Please say hello.")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text(ANSWER, timeout=120_000)
    ui.shot("answered")
    installed = lab.api("agents")
    codex = next(a for a in installed if a["name"] == "codex-acp")
    assert Path(codex["command"]).is_relative_to(lab.data_dir) and codex["configured"]
