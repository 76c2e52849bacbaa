"""What the labextension offers JupyterLab beyond its sidebar: the panel restored with the layout, and the
``IAcpHost`` service other extensions require (tokens.ts), reached from the page as another extension would."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest

TOKEN = "browser-test-token"  # the lab fixture's (conftest.py)

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000

#: the service, as an extension built against ``jupyter-acp-host`` gets it: the token object of the package's shared
#: module (the federated container JupyterLab loaded the plugin from), then JupyterLab's own service resolution
RESOLVE = """(async () => {
  const factory = await window._JUPYTERLAB['jupyter-acp-host'].get('./index');
  const module = factory();
  return await window.jupyterapp.resolveRequiredService(module.IAcpHost);
})"""


def _saved_layout(lab: Any) -> dict[str, Any]:
    """The default workspace's saved layout, as the server holds it (what a reload restores)."""
    req = urllib.request.Request(f"{lab.url}lab/api/workspaces/default", headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        data = json.loads(resp.read())
    return data.get("data", {}).get("layout-restorer:data", {}) or {}


def test_the_sidebar_open_at_a_reload_is_open_again(ui):
    nb = ui.lab.notebook("restored.ipynb", ["x = 1"])
    ui.open_lab(nb)  # a reset layout, then the sidebar shown
    ui.wait_ready("echo")
    # the layout is saved a moment after it changes: wait until the saved one holds the sidebar, open
    deadline = time.monotonic() + 20
    right: dict[str, Any] = {}
    while time.monotonic() < deadline:
        right = _saved_layout(ui.lab).get("right", {})
        if right.get("current") == "jupyter-acp-sidebar" and not right.get("collapsed", True):
            break
        time.sleep(0.25)
    assert right.get("current") == "jupyter-acp-sidebar", f"the saved layout's right area: {right}"
    assert right.get("collapsed") is False

    # a reload without ?reset restores the saved layout: the sidebar is open again, bound to the notebook
    ui.page.goto(f"{ui.lab.url}lab?token={TOKEN}")
    ui.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=LONG)
    expect(ui.panel).to_be_visible(timeout=LONG)
    ui.wait_ready("echo")
    ui.shot("restored")


def test_another_extension_sends_a_prompt_and_observes_the_session_through_the_service(ui):
    nb = ui.lab.notebook("service.ipynb", ["y = 2"])
    ui.open_lab()
    page = ui.page
    # the service exists and follows the sidebar: no notebook in focus yet, then the one the service opens
    page.evaluate(
        RESOLVE
        + """().then(acp => {
  window.__acp = { acp, shown: [] };
  acp.currentSessionChanged.connect((_, s) => window.__acp.shown.push(s && s.notebook));
})"""
    )
    page.evaluate("nb => window.__acp.acp.openPanel(nb)", nb)
    page.locator(".jp-NotebookPanel:visible .jp-Cell").first.wait_for(timeout=LONG)
    expect(ui.panel).to_be_visible()
    page.wait_for_function("nb => window.__acp.shown.includes(nb)", arg=nb, timeout=LONG)
    assert page.evaluate("() => window.__acp.acp.currentSession.notebook") == nb
    ui.wait_ready("echo")

    # send a prompt to the notebook's session and observe that session's events until the turn ends
    result = page.evaluate(
        """async nb => {
  const { acp } = window.__acp;
  const sent = await acp.sendPrompt(nb, 'hello from another extension');
  const watch = acp.observe(sent.session.id, { after: sent.session.last_seq });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no turn_ended: ' + JSON.stringify(got))), 45000);
    watch.events.connect((_, batch) => {
      got.push(...batch);
      if (batch.some(e => e.type === 'turn_ended')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  watch.dispose();
  return { sent, got, disposed: watch.isDisposed };
}""",
        nb,
    )
    sent, got = result["sent"], result["got"]
    assert sent["session"]["notebook"] == nb and sent["session"]["agent"] == "echo"
    types = [e["type"] for e in got]
    assert types[0] == "turn_started" and types[-1] == "turn_ended", types
    assert {e.get("turn_id") for e in got if e["type"] in ("turn_started", "turn_ended")} == {sent["turnId"]}
    seqs = [e["seq"] for e in got]
    assert seqs == sorted(set(seqs)), "each event once, in order"
    said = "".join(
        e["update"].get("content", {}).get("text", "")
        for e in got
        if e["type"] == "session_update" and e["update"].get("sessionUpdate") == "agent_message_chunk"
    )
    assert "hello from another extension" in said
    assert result["disposed"] is True
    # the sidebar shows the conversation the service talked to: the prompt and the echo
    expect(ui.panel.locator(".jp-ACP-user").last).to_contain_text("hello from another extension", timeout=LONG)
    expect(ui.panel.locator(".jp-ACP-message").last).to_contain_text("hello from another extension", timeout=LONG)
    ui.shot("prompted")
