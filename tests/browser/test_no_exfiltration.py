"""Agent content must not make the browser fetch anything without a click (a fetch carries what the agent put in its
URL, the notebook's secrets among them, to a host the agent chose).

A prompt-injected agent answers markdown images, raw ``<img>``, ``srcset``, CSS ``url()``, ``<link>``,
``<iframe>``, ``<video poster>``, ``<audio>``/``<source>``, ... plus ACP ``image`` / ``resource_link``
blocks, a plan and a tool call, all pointing at a listener on another port of 127.0.0.1 (a foreign
origin) with ``?d=SECRET``. Once the answer is on screen the listener must have seen no request; the
remote image is a click-to-load link, and the click loads it. ``data:`` images and the server's own
files still render.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from gate_agent import PIXEL_PNG_B64, lab_with

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000


@pytest.fixture(scope="module")
def lab(tmp_path_factory, fake_model):
    """A lab with the scripted `gate` agent (the shared fixture does not configure it)."""
    with lab_with(tmp_path_factory.mktemp("exfil-lab"), fake_model) as lab:
        yield lab


class Listener:
    """An HTTP server on a second port: whatever it is asked is recorded (and gets a 1x1 png)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                listener.paths.append(self.path)
                body = base64.b64decode(PIXEL_PNG_B64)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    with Listener() as lst:
        yield lst


def fetched_by_agent_content(listener: Listener) -> list[str]:
    return [p for p in listener.paths if not p.startswith("/canary-")]


def browser_had_its_chance(page, panel, listener: Listener, tag: str) -> None:
    """Barrier: the test's own canaries (an image and a CSS background, put in the panel's last message by the
    test, past the sanitizer) reach the listener. The browser fetches what the agent's content would have made it
    fetch as it lays the message out, before the canaries added after it: once they arrived, so would have that."""
    page.wait_for_load_state("networkidle")
    panel.locator(".jp-ACP-message").last.evaluate(
        """(message, [base, tag]) => {
            const img = document.createElement('img');
            img.src = `${base}/canary-img-${tag}`;
            const css = document.createElement('div');
            css.style.cssText = `width: 2px; height: 2px; background-image: url(${base}/canary-css-${tag})`;
            message.append(img, css);
        }""",
        [listener.url, tag],
    )
    wanted = {f"/canary-img-{tag}", f"/canary-css-{tag}"}
    deadline = time.monotonic() + 30
    while not wanted <= set(listener.paths):
        assert time.monotonic() < deadline, f"the canaries never reached the listener: {listener.paths}"
        time.sleep(0.05)


def test_agent_content_fetches_nothing_until_clicked(ui, listener):
    (ui.lab.root / "pixel.png").write_bytes(base64.b64decode(PIXEL_PNG_B64))
    nb = ui.lab.notebook("exfil.ipynb", ["secret = 'hunter2'"])
    ui.open_lab(nb)
    ui.wait_ready("gate")
    panel = ui.panel
    ui.send(f"exfil {listener.url}")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("END-OF-ANSWER", timeout=LONG)
    expect(panel.get_by_role("button", name="Send (Enter)")).to_be_visible(timeout=LONG)
    # the tool card open (its details render too), the thought open
    panel.locator(".jp-ACP-toolHead").last.click()
    panel.locator(".jp-ACP-thought summary").first.click()
    browser_had_its_chance(ui.page, panel, listener, "rendered")
    ui.shot("exfil-rendered", full=False)
    assert fetched_by_agent_content(listener) == [], f"the page fetched agent URLs with no click: {listener.paths}"

    # what is safe still renders: data: images and the server's own files
    message = panel.locator(".jp-ACP-message")
    expect(message.locator('img[src^="data:image/png"]').first).to_be_visible()
    same = message.locator('img[src$="/files/pixel.png"]')
    expect(same).to_have_count(1)
    ui.page.wait_for_function("img => img.complete && img.naturalWidth === 1", arg=same.element_handle())
    expect(panel.locator('.jp-ACP-toolImage[src^="data:image/png"]')).to_have_count(1)
    # the text of the answer is kept; remote things are click-to-load links that say where they go
    expect(message.first).to_contain_text("Here is a summary")
    remote = message.locator(f'a.jp-ACP-remote[data-acp-url="{listener.url}/md-image?d=SECRET"]')
    expect(remote).to_have_count(1)
    expect(remote).to_contain_text("127.0.0.1")
    assert fetched_by_agent_content(listener) == []

    # a click loads that one image, and only it
    remote.click()
    loaded = message.locator(f'img[src="{listener.url}/md-image?d=SECRET"]')
    expect(loaded).to_have_count(1, timeout=LONG)
    deadline = time.monotonic() + 10
    while not fetched_by_agent_content(listener) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fetched_by_agent_content(listener) == ["/md-image?d=SECRET"]

    # the ACP image of the tool card: same, click to load
    tool_image = panel.locator(f'.jp-ACP-tool a.jp-ACP-remote[data-acp-url="{listener.url}/tool-image?d=SECRET"]')
    expect(tool_image).to_have_count(1)
    tool_image.click()
    deadline = time.monotonic() + 10
    while len(fetched_by_agent_content(listener)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fetched_by_agent_content(listener) == ["/md-image?d=SECRET", "/tool-image?d=SECRET"]

    # a reload renders the transcript again: still nothing fetched but what was clicked in this page
    ui.page.reload()
    ui.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=LONG)
    ui.show_panel()
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("END-OF-ANSWER", timeout=LONG)
    browser_had_its_chance(ui.page, panel, listener, "reloaded")
    assert fetched_by_agent_content(listener) == ["/md-image?d=SECRET", "/tool-image?d=SECRET"]
