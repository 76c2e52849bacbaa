"""``%acp history`` shows the latest page of a long conversation, not its first page."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def acp_config() -> dict[str, Any]:
    # a page holds a few events: three exchanges do not fit in one
    return {"replay_page_events": 4}


async def test_history_shows_the_latest_page(start_kernel, make_notebook, api):
    nb = make_notebook("long.ipynb")
    k = await start_kernel(nb)
    for word in ("first", "second", "third"):
        res = await k.run(f"%acp question {word}")
        assert res.status == "ok", res.text()
    res = await k.run("%acp history")
    assert res.status == "ok", res.text()
    shown = res.text()
    assert "You: question third" in shown and "echo: question third" in shown, shown
    assert "You: question first" not in shown, shown
    assert "earlier turns are not shown" in shown, shown


async def test_kernel_route_events_before(start_kernel, make_notebook, api, acp_server):
    """The kernel route takes ``before=`` as the user route does (and refuses it with ``after=``)."""
    nb = make_notebook("pages.ipynb")
    k = await start_kernel(nb)
    res = await k.run("%acp one\n")
    assert res.status == "ok", res.text()
    code = (
        "m = get_ipython().magics_manager.registry['AcpMagics']\n"
        "s = m.backend.current(None)\n"
        "page = m.backend.page_before(s['id'], s['last_seq'] + 1)\n"
        "print([e['seq'] for e in page], s['last_seq'])\n"
        "from jupyter_acp.magic import AcpError\n"
        "try:\n"
        "    m.backend.call('GET', f\"sessions/{s['id']}/events\", params={'after': 0, 'before': 2})\n"
        "except AcpError as exc:\n"
        "    print('refused:', exc)\n"
    )
    res = await k.run(code)
    assert res.status == "ok", res.text()
    first, _, rest = res.stdout.partition("\n")
    seqs, last = first.rsplit(" ", 1)
    assert eval(seqs) == list(range(int(last) - 3, int(last) + 1)), res.stdout
    assert "refused: give after" in rest and "(HTTP 400)" in rest, res.stdout
