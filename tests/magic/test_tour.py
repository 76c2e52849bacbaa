"""notebooks/tour.ipynb runs headless against a real server, with the built-in agent on the fake model."""

from __future__ import annotations

import os
import shutil

import nbformat
import pytest

from jupyter_acp.testing.fake_model import FakeModel

pytestmark = pytest.mark.timeout(180)

TOUR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "notebooks", "tour.ipynb"
)


@pytest.fixture
def fake_model():
    rules = [
        {"tool": "inspect_variable", "match": "variable df", "arguments": {"name": "df"}, "times": 1},
        {"role": "tool", "text": "df is a small table of three cities and their temperatures."},
        {"match": "variable df", "text": "df is a small table (no variable tool was offered)."},
    ]
    with FakeModel(rules) as fm:
        yield fm


@pytest.fixture
def acp_agents(fake_model):
    return {"builtin": fake_model.agent_entry(JUPYTER_ACP_AGENT_MODE="auto")}


@pytest.fixture
def acp_config():
    return {"default_agent": "builtin"}


async def test_tour_runs(start_kernel, jp_root_dir, fake_model):
    shutil.copy(TOUR, jp_root_dir / "tour.ipynb")
    nb = nbformat.read(TOUR, as_version=4)
    k = await start_kernel("tour.ipynb", load=False)
    results = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        res = await k.run(cell.source, timeout=90)
        assert res.status == "ok", f"{cell.source!r} failed: {res.text()}"
        results.append((cell.source, res))
    by_source = dict(results)
    echo = next(r for s, r in results if s.startswith("%%acp echo\nHello"))
    assert "streams in word by word" in echo.final()["data"]["text/plain"]
    code = next(r for s, r in results if "-f code" in s)
    assert code.reply["content"]["payload"][0]["text"].strip() == 'print("this cell was written by the agent")'
    asked = next(r for s, r in results if "describe it in one sentence" in s)
    answer = asked.final()["data"]["text/plain"]
    assert "three cities" in answer, answer  # the tool path, not the no-tool fallback
    assert fake_model.requests, "the built-in agent asked the fake model"
    tool_messages = [m for req in fake_model.requests for m in req.get("messages", []) if m.get("role") == "tool"]
    assert tool_messages, "the variable tool was called"
    summary = str(tool_messages[-1].get("content"))
    assert "client tool error" not in summary and "DataFrame" in summary, summary[:500]
    interp = next(r for s, r in results if "interpolated by the magic" in s)
    assert "Oslo" in interp.final()["data"]["text/plain"]
    assert "tour.ipynb" in by_source["%acp status"].text()
