"""The panel sends prompts, permission answers and stops on the session's open WebSocket, not over HTTP."""

from __future__ import annotations

import json
import re

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
ROUTES = re.compile(r"/jupyter-acp/sessions/[0-9a-f]{32}/(prompt|cancel|permissions/)")


def test_c5_ops_ride_the_socket(ui):
    posted: list[str] = []
    ops: list[dict] = []
    ui.page.on("request", lambda req: posted.append(req.url) if ROUTES.search(req.url) else None)

    def watch(ws) -> None:
        def sent(payload) -> None:
            try:
                frame = json.loads(payload if isinstance(payload, str) else payload.decode())
            except ValueError:
                return
            if isinstance(frame, dict) and "op" in frame:
                ops.append(frame)

        ws.on("framesent", sent)

    ui.page.on("websocket", watch)
    nb = ui.lab.notebook("c5ops.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("echo")
    ui.wait_connected()  # each session's socket opens after the panel binds; an op before then goes over HTTP
    panel = ui.panel

    ui.send("warm turn over the socket")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("warm turn over the socket", timeout=LONG)

    ui.pick_agent("perm")
    ui.wait_connected()
    ui.send("write the answer file")
    card = panel.locator(".jp-ACP-tool").last
    card.get_by_role("button", name="Allow").click(timeout=LONG)
    expect(panel.locator(".jp-ACP-message").last).to_have_text("permission: allow", timeout=LONG)

    ui.pick_agent("slow")
    ui.wait_connected()
    ui.send("count slowly")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text(re.compile(r"\b3\b"), timeout=LONG)
    panel.get_by_role("button", name="Stop the agent", exact=True).click()
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    ui.shot("stopped")

    assert [o["op"] for o in ops] == ["prompt", "prompt", "permission", "prompt", "cancel"], ops
    assert all(isinstance(o.get("ref"), int) for o in ops)
    assert posted == [], f"went over HTTP although the socket was open: {posted}"
