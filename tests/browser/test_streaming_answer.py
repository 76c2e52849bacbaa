"""A streaming answer shows each complete block as it arrives, code buttons included, and ends as a stored one.

The scripted ``stream`` agent answers a markdown text (a paragraph, a python block, a list, a shell block, a last
paragraph) a few characters at a time, with a pause between chunks, so the panel draws it many times while it
streams (renderers/messages.ts renders complete blocks once and the open one again).  Once the turn ended, the
answer's DOM must be what the same answer gives when the page is reloaded and the answer comes from the history in
one piece: the streamed rendering is a passing view, never a different final one.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
ANSWER = (
    "Here is the plan for **the data**.\n\n"
    "```python\nimport pandas as pd\n\ndf = pd.read_csv('sales.csv')\n```\n\n"
    "Then:\n\n- group by month\n- plot the totals\n\n"
    "```bash\nhead sales.csv\n```\n\n"
    "That is all, enjoy."
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, fake_model: Any) -> Iterator[Any]:
    from conftest import run_lab  # the browser tests' conftest (same folder)

    args = ["-m", "jupyter_acp.testing.agents", "stream", "--answer", ANSWER, "--chunks", "3", "--delay", "0.03"]
    agent = {"command": sys.executable, "args": args, "title": "Markdown stream"}
    with run_lab(tmp_path_factory.mktemp("stream-lab"), {"default_agent": "md", "agents": {"md": agent}}) as lab:
        yield lab


def test_a_streaming_answer_shows_complete_code_blocks_with_their_buttons_and_ends_as_the_stored_answer(ui):
    nb = ui.lab.notebook("stream.ipynb", ["x = 1"])
    ui.open_lab(nb)
    ui.wait_ready("md")
    panel = ui.panel
    ui.send("stream it")
    message = panel.locator(".jp-ACP-message").last
    # while it streams: the first code block, once closed, has its buttons before the answer has ended
    streaming = message.locator(".jp-ACP-streaming")
    expect(streaming.locator(".jp-ACP-code").first.get_by_role("button", name="Copy code")).to_be_attached(timeout=LONG)
    assert panel.locator(".jp-ACP-log[aria-busy='true']").count() == 1, "the answer ended before it was seen streaming"
    ui.shot("streaming", full=False)
    # ended: rendered whole, the streamed view gone
    expect(message).to_contain_text("That is all, enjoy.", timeout=LONG)
    expect(panel.locator(".jp-ACP-log[aria-busy='false']")).to_be_attached(timeout=LONG)
    expect(message.locator(".jp-ACP-streaming")).to_have_count(0, timeout=LONG)
    expect(message.locator(".jp-ACP-code")).to_have_count(2)
    expect(message.locator(".jp-ACP-code").first.get_by_role("button", name="Insert as a cell below")).to_be_attached()
    ui.page.wait_for_timeout(500)
    streamed = message.evaluate("n => n.innerHTML")
    ui.shot("ended", full=False)
    # the same answer from the history, in one piece
    ui.open_lab(nb)
    ui.wait_ready("md")
    again = ui.panel.locator(".jp-ACP-message").last
    expect(again).to_contain_text("That is all, enjoy.", timeout=LONG)
    expect(again.locator(".jp-ACP-code")).to_have_count(2, timeout=LONG)
    ui.page.wait_for_timeout(500)
    stored = again.evaluate("n => n.innerHTML")
    # an icon's id is new on each page load (JupyterLab's icons): the rest must be the same
    streamed, stored = (re.sub(r' data-icon-id="[^"]*"', "", html) for html in (streamed, stored))
    assert streamed == stored, f"streamed:\n{streamed}\n\nfrom the history:\n{stored}"
