"""The analyst's toolkit attacked through the one gate: a hostile agent against a server whose root is the home.

The notebook-file tools obey the ``fs/*`` rules (a path outside the root, a hidden file, Jupyter's own folders,
a symlink out: refused before any question), ``client_create_notebook`` never overwrites a notebook whatever
the name that leads to it, and a kernel restart outside a turn is refused like every other power.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from . import test_gate as _gate
from .test_gate import audits, cards, notebook, run

# the home-as-root layout of test_gate.py (its fixtures, by name, for this module too)
jp_root_dir = _gate.jp_root_dir
jp_data_dir = _gate.jp_data_dir
jp_runtime_dir = _gate.jp_runtime_dir
jp_config_dir = _gate.jp_config_dir
acp_agents = _gate.acp_agents
home = _gate.home


def rules_of(results: list[dict]) -> list[str | None]:
    return [(r.get("ok") or {}).get("structuredContent", {}).get("rule") for r in results]


async def test_notebook_tools_never_read_or_list_outside_the_rules_of_fs(api, home, jp_runtime_dir, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    notebook(outside, "secret.ipynb", ["token = 'OUTSIDE-SECRET'"])
    (home / ".private").mkdir()
    notebook(home / ".private", "hidden.ipynb", ["token = 'HIDDEN-SECRET'"])
    notebook(jp_runtime_dir, "runtime.ipynb", ["token = 'RUNTIME-SECRET'"])
    os.symlink(outside / "secret.ipynb", home / "link.ipynb")
    s = await api.open(notebook(home, "nb.ipynb", ["a = 1"]), "hostile")
    reads = [
        str(outside / "secret.ipynb"),
        "../outside/secret.ipynb",
        ".private/hidden.ipynb",
        str(jp_runtime_dir / "runtime.ipynb"),
        "link.ipynb",
    ]
    actions = [{"do": "tool", "name": "client_read_notebook", "args": {"path": p}} for p in reads]
    actions += [
        {"do": "tool", "name": "client_list_notebooks", "args": {"folder": str(outside)}},
        {"do": "mcp", "name": "client_list_notebooks", "args": {"folder": ".private"}},
        {"do": "tool", "name": "client_list_notebooks", "args": {}},
    ]
    results, events = await run(api, s["id"], actions, answer=lambda ev: "allow_once")
    said = json.dumps(results)
    assert "SECRET" not in said
    assert rules_of(results[:6]) == [
        "outside_root",
        "outside_root",
        "hidden_files",
        "jupyter_dirs",
        "outside_root",
        "outside_root",
    ]
    assert results[6]["ok"]["result"]["structuredContent"]["rule"] == "hidden_files"
    listed = results[7]["ok"]["structuredContent"]
    assert [n["path"] for n in listed["notebooks"]] == ["nb.ipynb"], listed  # the symlink out and hidden ones not shown
    assert ".private" not in json.dumps(listed) and ".local" not in json.dumps(listed)
    assert cards(events) == []  # refused paths never become a question


async def test_create_notebook_never_overwrites_a_notebook_whatever_the_name(api, home, tmp_path):
    nb = notebook(home, "nb.ipynb", ["print('mine')"])
    before = (home / nb).read_text()
    os.symlink(home / nb, home / "alias.ipynb")
    os.symlink(tmp_path / "elsewhere.ipynb", home / "dangling.ipynb")
    (home / "sub").mkdir()
    s = await api.open(nb, "hostile")
    paths = [nb, str(home / nb), "sub/../nb.ipynb", "alias.ipynb", "dangling.ipynb", "nb.ipynb/.", ".sneaky.ipynb"]
    results, events = await run(
        api,
        s["id"],
        [
            {"do": "tool", "name": "client_create_notebook", "args": {"path": p, "cells": [{"source": "pwned"}]}}
            for p in paths
        ],
        answer=lambda ev: "allow_once",
    )
    got = rules_of(results)
    assert got[:4] == ["exists"] * 4, results
    assert got[4] == "outside_root" and got[5] in ("exists", "not_a_notebook", "path") and got[6] == "hidden_files", got
    assert (home / nb).read_text() == before
    assert not (tmp_path / "elsewhere.ipynb").exists() and not (home / ".sneaky.ipynb").exists()
    assert cards(events) == []
    assert [a["rule"] for a in audits(events)] == got  # each refusal in the transcript, by its rule

    # a new name asks, with the cells on the card; a rejection writes nothing
    results, events = await run(
        api,
        s["id"],
        [
            {
                "do": "tool",
                "name": "client_create_notebook",
                "args": {"path": "fresh.ipynb", "cells": [{"source": "x = 1"}]},
            }
        ],
        answer=lambda ev: "reject_once",
    )
    (card,) = cards(events)
    assert card["tool_call"]["title"] == "Create the notebook fresh.ipynb" and "x = 1" in json.dumps(card)
    assert results[0]["ok"]["structuredContent"]["rule"] == "user_rejected"
    assert not (home / "fresh.ipynb").exists()


async def test_a_kernel_restart_outside_a_turn_is_refused_and_the_kernel_keeps_its_state(api, home, jp_fetch, report):
    path = notebook(home, "k.ipynb", [])
    body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}
    await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
    s = await api.open(path, "hostile")
    results, _ = await run(
        api,
        s["id"],
        [
            {"do": "tool", "name": "client_execute_code", "args": {"code": "kept = 'STILL-HERE'"}},
            {
                "do": "later",
                "delay": 0.5,
                "actions": [{"do": "tool", "name": "client_kernel", "args": {"action": "restart"}}],
            },
        ],
        answer=lambda ev: "allow_once",
        timeout=60,
    )
    assert results[0]["ok"]["isError"] is False, results
    deadline = time.monotonic() + 20
    while not any(r.get("do") == "later_done" for r in report()):
        assert time.monotonic() < deadline, report()
        await asyncio.sleep(0.1)
    late = [r for r in report() if r.get("do") == "tool"][-1]
    assert late["ok"]["structuredContent"]["rule"] == "outside_turn", late
    # inside a turn the user is asked; rejected, nothing is lost
    results, events = await run(
        api,
        s["id"],
        [
            {"do": "tool", "name": "client_kernel", "args": {"action": "restart"}},
            {"do": "tool", "name": "client_execute_code", "args": {"code": "print(kept)"}},
        ],
        answer=lambda ev: "reject_once" if "Restart" in ev["tool_call"]["title"] else "allow_once",
        timeout=60,
    )
    assert results[0]["ok"]["structuredContent"]["rule"] == "user_rejected"
    assert "kept" in json.dumps(cards(events)[0]["tool_call"])  # the card says what a restart would lose
    assert "STILL-HERE" in results[1]["ok"]["content"][0]["text"]
