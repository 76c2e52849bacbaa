"""A long conversation opens at once: the latest turns are drawn, older ones as the user scrolls up to them.

The history is written into the transcript store before the lab starts (the store is what the server loads a
session's history from), as a notebook used for a long while would leave it: 150 turns, each a prompt and an
answer of markdown with two code blocks.  The whole history fits in one replay page, so the panel receives every
turn at once: what it draws is its own choice.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_acp.protocol import codec
from jupyter_acp.sessions.store import SessionRecord, TranscriptStore

expect = pytest.importorskip("playwright.sync_api").expect

LONG = 60_000
TURNS = 150
#: a history whose replay lands in more than one socket frame while JupyterLab opens the notebook, the agent's notice
#: that it could not reload the seeded conversation arriving after it: the log grows below after the panel scrolled to
#: its end, and items above leave the drawn window (the browser's scroll anchoring scrolls up by as much). Run on
#: builds of earlier commits: before 7a2d9b7 the log sat 125,022 px above its end; at 7a2d9b7 529 px in one run of
#: two (bench/panel_history.py's 300-turn open: 619 px, every time); 320 turns did not show either.
LATE_TURNS = 600


def answer(i: int) -> str:
    return (
        f"Turn {i}: load the data and plot it.\n\n```python\ndf = pd.read_csv('sales_{i}.csv')\ndf.plot()\n```\n\n"
        f"- the month is a date\n\n```bash\nhead sales_{i}.csv\n```\n\nDone with turn {i}."
    )


def seed(
    store_path: Path,
    root: Path,
    notebook: str,
    agent: str,
    turns: int,
    acp_session_id: str | None = None,
    long_prompts: bool = False,
) -> None:
    """``acp_session_id``: the agent's session the record names (the echo agent cannot reload one: opening the
    notebook then says so in a notice, after the replay). ``long_prompts``: each prompt is the answer's markdown (as
    the echo agent's users send), drawn as text: tall prompts."""
    store = TranscriptStore(str(store_path))
    store.open()
    sid = uuid.uuid4().hex
    record = SessionRecord(id=sid, notebook=notebook, agent=agent, cwd=str(root), root=str(root))
    record.acp_session_id = acp_session_id
    store.save_session(record)
    events: list[dict[str, Any]] = [
        {"seq": 1, "type": "session_ready", "ts": 1.0, "acp_session_id": "s_seeded", "how": "new"}
    ]
    for i in range(turns):
        tid = uuid.uuid4().hex[:12]
        seq = len(events)
        text = answer(i)
        events += [
            {"seq": seq + 1, "type": "turn_started", "ts": 2.0 + i, "turn_id": tid, "prompt": [{"type": "text", "text": text if long_prompts else f"question {i}"}]},
            {"seq": seq + 2, "type": "session_update", "ts": 2.1 + i, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}},
            {"seq": seq + 3, "type": "turn_ended", "ts": 2.2 + i, "turn_id": tid, "stop_reason": "end_turn"},
        ]  # fmt: skip
    store.append_many(sid, events, [codec.dumps(e) for e in events])
    store.commit()
    store.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, fake_model: Any) -> Iterator[Any]:
    from conftest import run_lab  # the browser tests' conftest (same folder)

    base = tmp_path_factory.mktemp("long-history-lab")
    store = base / "store" / "transcripts.sqlite"
    store.parent.mkdir()
    seed(store, (base / "root").resolve(), "long.ipynb", "echo", TURNS)
    seed(
        store, (base / "root").resolve(), "late.ipynb", "echo", LATE_TURNS, acp_session_id="s_seeded", long_prompts=True
    )
    echo = {"command": sys.executable, "args": ["-m", "jupyter_acp.testing.agents", "echo_prompt"], "title": "Echo"}
    with run_lab(base, {"default_agent": "echo", "agents": {"echo": echo}}, store=str(store)) as lab:
        yield lab


def test_a_long_conversation_opens_at_its_end_and_scrolls_back_to_its_start_in_order(ui):
    nb = ui.lab.notebook("long.ipynb", ["x = 1"])
    ui.open_lab(nb)
    panel = ui.panel
    log = panel.locator(".jp-ACP-log")
    last = panel.locator(".jp-ACP-message").last
    # the latest answer, its code blocks drawn, at the bottom of the log where the user reads
    expect(last).to_contain_text(f"Done with turn {TURNS - 1}.", timeout=LONG)
    expect(last.locator(".jp-ACP-code")).to_have_count(2)
    ui.page.wait_for_function("n => n.scrollHeight - n.scrollTop - n.clientHeight < 48", arg=log.element_handle())
    expect(last).to_be_in_viewport()
    # few elements: the latest turns are drawn, not 150 turns of markdown (about 8,400 elements when all were)
    ui.page.wait_for_timeout(1000)  # anything the open left to draw is drawn
    drawn = panel.evaluate("n => n.querySelectorAll('*').length")
    assert drawn < 2500, f"{drawn} elements in the panel"
    shown = panel.locator(".jp-ACP-user").count()
    assert 0 < shown < TURNS / 3, shown
    earlier = panel.locator(".jp-ACP-earlier")
    expect(earlier.get_by_role("button", name="Earlier messages")).to_be_visible()
    ui.shot("latest-turns", full=False)

    # scrolling up draws the older turns above what was read, which stays in view
    for _ in range(60):
        if earlier.is_hidden():
            break
        before = panel.locator(".jp-ACP-user").count()
        log.evaluate("n => { n.scrollTop = 0; n.dispatchEvent(new Event('scroll')); }")
        ui.page.wait_for_function(
            "([p, c]) => p.querySelectorAll('.jp-ACP-user').length > c || p.querySelector('.jp-ACP-earlier').hidden",
            arg=[panel.element_handle(), before],
            timeout=LONG,
        )
        if earlier.is_visible():
            assert log.evaluate("n => n.scrollTop") > 0, "the reading position jumped to the top"
    expect(earlier).to_be_hidden()
    # the whole conversation, once, in order (their text: an item scrolled out of view is not laid out, and the
    # browser gives no rendered text, innerText, for it)
    prompts = panel.locator(".jp-ACP-user").all_text_contents()
    assert [int(re.sub(r"\D", "", p)) for p in prompts] == list(range(TURNS))
    # answers drawn for the first time render a few a frame: every one is there once they all have
    ui.page.wait_for_function(
        "p => [...p.querySelectorAll('.jp-ACP-message')].every(m => /Done with turn/.test(m.textContent))",
        arg=panel.element_handle(),
        timeout=LONG,
    )
    answers = panel.locator(".jp-ACP-message").all_text_contents()
    assert [int(re.search(r"Done with turn (\d+)", a).group(1)) for a in answers] == list(range(TURNS))


def test_a_long_conversation_opened_while_a_notice_arrives_ends_at_its_last_answer(ui):
    nb = ui.lab.notebook("late.ipynb", ["x = 1"])
    # as a user does: the lab is open with the sidebar shown, then the notebook is opened (JupyterLab's own work to
    # open it runs while the history replays and its answers render)
    ui.open_lab()
    ui.show_panel()
    ui.page.wait_for_timeout(1000)
    ui.page.evaluate("path => window.jupyterapp.commands.execute('docmanager:open', {path})", nb)
    panel = ui.panel
    log = panel.locator(".jp-ACP-log")
    # the notice of the open: the seeded agent session cannot be reloaded, a new one starts (it lands after the
    # replay, below the answers)
    expect(log).to_contain_text("could not reload the earlier conversation", timeout=LONG)
    last = panel.locator(".jp-ACP-message").last
    expect(last).to_contain_text(f"Done with turn {LATE_TURNS - 1}.", timeout=LONG)
    expect(last.locator(".jp-ACP-code")).to_have_count(2)
    ui.page.wait_for_timeout(1500)  # what the open left to draw (late markdown, the replay's last frame) is drawn
    gap = log.evaluate("n => n.scrollHeight - n.scrollTop - n.clientHeight")
    assert gap < 48, f"the log sits {gap} px above its end after the open"
    expect(last).to_be_in_viewport()
    # and it still follows the end: a prompt's answer shows without the reader scrolling
    ui.send("one more question")
    expect(panel.locator(".jp-ACP-message").last).to_contain_text("one more question", timeout=LONG)
    ui.page.wait_for_function("n => n.scrollHeight - n.scrollTop - n.clientHeight < 48", arg=log.element_handle())
    ui.shot("late-notice-at-end", full=False)
