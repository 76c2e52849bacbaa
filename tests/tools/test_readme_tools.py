"""The README's tool table lists every tool the client lends, each with the policy the gate gives it by default."""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_acp.tools.registry import all_tools


def test_the_readme_lists_every_tool_with_its_default_policy():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(client_\w+)` \| .*? \| `(\w+)`[^|]*\|$", readme, flags=re.M))
    # the gate asks, under the default policy, for every tool that changes something (an inserted cell too: it is a
    # change the user reviews, and it may run later); tools that only read are allowed
    expected = {t.name: "auto" if t.read_only else "ask" for t in all_tools()}
    assert rows == expected
