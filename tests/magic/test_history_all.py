"""``%acp history --all`` lists the notebook's conversations; ``%acp history N`` shows one."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


async def test_history_all_lists_and_shows_earlier_conversations(start_kernel, make_notebook, api):
    nb = make_notebook("convs.ipynb")
    k = await start_kernel(nb)
    for line in ("%acp tell me about apples", "%acp reset", "%acp now pears please"):
        res = await k.run(line)
        assert res.status == "ok", res.text()
    res = await k.run("%acp history --all")
    assert res.status == "ok", res.text()
    shown = res.text()
    first, second = (line for line in shown.splitlines() if line[:2] in ("1.", "2."))
    assert "tell me about apples" in first and "1 turns" in first and "(current)" not in first, shown
    assert "now pears please" in second and "(current)" in second and "echo" in second, shown
    res = await k.run("%acp history 1")
    assert res.status == "ok", res.text()
    one = res.text()
    assert "You: tell me about apples" in one and "echo: tell me about apples" in one, one
    assert "pears" not in one, one
    res = await k.run("%acp history 3")
    assert res.status == "error" and "no conversation 3: this notebook has 2" in res.text(), res.text()
    res = await k.run("%acp history nonsense")
    assert res.status == "error" and "--all or a conversation's number" in res.text(), res.text()


async def test_kernel_route_refuses_another_notebooks_conversations(start_kernel, make_notebook, api):
    """A kernel token opens only its own notebook's conversations (403 for another session)."""
    other = await api.open(make_notebook("other.ipynb"))
    turn = await api.prompt(other["id"], "not yours")
    await api.wait_turn_end(other["id"], turn)
    cid = (await api.call("GET", "sessions", other["id"], "conversations"))[0]["id"]
    k = await start_kernel(make_notebook("mine.ipynb"))
    code = (
        "m = get_ipython().magics_manager.registry['AcpMagics']\n"
        "from jupyter_acp.magic import AcpError\n"
        f"for path in ('sessions/{other['id']}/conversations', 'sessions/{other['id']}/conversations/{cid}/events'):\n"
        "    try:\n"
        "        print('answered:', m.backend.call('GET', path))\n"
        "    except AcpError as exc:\n"
        "        print('refused:', exc)\n"
    )
    res = await k.run(code)
    assert res.status == "ok", res.text()
    assert res.stdout.count("refused:") == 2 and res.stdout.count("(HTTP 403)") == 2, res.stdout
    assert "not yours" not in res.stdout


async def test_history_shows_the_current_conversation_only(start_kernel, make_notebook, api):
    """``%acp history`` is the current conversation: after a reset, not the earlier one (nor a note that earlier
    turns are hidden); after a resume, the resumed one, not the one left."""
    nb = make_notebook("current.ipynb")
    k = await start_kernel(nb)
    for line in ("%acp tell me about apples", "%acp reset", "%acp now pears please"):
        res = await k.run(line)
        assert res.status == "ok", res.text()
    res = await k.run("%acp history")
    shown = res.text()
    assert "now pears please" in shown and "apples" not in shown, shown
    assert "earlier turns are not shown" not in shown, shown
    sid = (await api.call("GET", "sessions", params={"notebook": nb}))[0]["id"]
    convs = await api.call("GET", "sessions", sid, "conversations")
    await api.call("POST", "sessions", sid, "conversations", convs[1]["id"], "resume")
    res = await k.run("%acp history")
    shown = res.text()
    assert "You: tell me about apples" in shown and "pears" not in shown, shown
