"""The subcommands of ``%acp`` (help, version, agents, use, status, history, reset, cancel, fix) and the line's
dispatch: a line that starts with none of them is a one-line prompt."""

from __future__ import annotations

import re
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..protocol.transcript import exchanges
from .errors import AcpError
from .options import HELP, Options, parse_options
from .server import ServerGone
from .turn import run_prompt


def run_line(magics: Any, line: str) -> Any:
    """``%acp …``: a subcommand, else a prompt (options first, then the text with the user's spacing)."""
    stripped = line.strip()
    word, _, rest = stripped.partition(" ")
    rest = rest.strip()
    if not stripped or word in ("help", "-h", "--help"):
        return magics.show(HELP)
    if word == "version":
        # the package root is loaded (the magic is inside it); importing it by name would point at the server's app
        return magics.show(f"jupyter_acp {sys.modules['jupyter_acp'].__version__}")
    command = COMMANDS.get(word)
    if command is not None:
        return command(magics, rest)
    tokens = stripped.split()
    opts = parse_options(tokens, positional_agent=False, stop_at_text=True)
    if not opts.rest:
        raise AcpError("the prompt is empty (see %acp help)")
    # keep the user's spacing: the prompt is the line after the options
    prompt = stripped
    for tok in tokens[: len(tokens) - len(opts.rest)]:
        prompt = prompt[prompt.index(tok) + len(tok) :]
    return run_prompt(magics, prompt.strip(), opts)


def cmd_agents(magics: Any, rest: str = "") -> None:
    agents = magics.backend_call(magics.backend.agents)
    current = magics.agent_for(None)
    if current is None and magics.backend.mode == "server":  # the notebook's current agent, the panel's too
        current = magics.backend_call(magics.backend.whoami).get("current_agent")
    lines, rows = [], ["| agent | title | state |", "|---|---|---|"]
    for a in agents:
        mark = " (default)" if a.get("default") else ""
        mark += " ← in use" if current == a["name"] else ""
        state = a.get("state", "")
        if a.get("error"):
            state += f": {a['error']}"
        if not a.get("available", True):
            state = "not installed"
        lines.append(f"{a['name']}{mark}: {a.get('title', '')} [{state}]")
        rows.append(f"| `{a['name']}`{mark} | {a.get('title', '')} | {state} |")
    magics.show("\n".join(lines), "\n".join(rows))


def cmd_use(magics: Any, name: str) -> None:
    if not name:
        raise AcpError("which agent? %acp use AGENT (see %acp agents)")
    names = [a["name"] for a in magics.backend_call(magics.backend.agents)]
    if name not in names:
        raise AcpError(f"no agent named {name!r}; the agents are: {', '.join(names)}")
    backend = magics.backend
    if backend.mode == "server":
        # one fact for the notebook: the server keeps it, the Agent panel switches to it, %%acp follows it
        try:
            res = backend.call("PUT", "current-agent", {"kernel_id": backend.kernel_id, "agent": name})
        except ServerGone as exc:
            magics._fallback_to_local(str(exc))
        else:
            magics.use_agent(None)  # follow the notebook's agent from now on, whoever changes it
            was = f" (it was {res['previous']!r})" if res.get("previous") not in (None, name) else ""
            text = (
                f"this notebook's agent is now {name!r}{was}: the Agent panel shows its conversation, and %%acp "
                "cells that name no agent go to it"
            )
            return magics.show(text, text.replace("%%acp", "`%%acp`"))
    magics.use_agent(name)
    magics.show(f"%acp prompts of this kernel now go to {name!r} (the agent runs in this kernel: no Agent panel)")


def _session(magics: Any) -> dict[str, Any] | None:
    return magics.backend_call(magics.backend.current, magics.agent_for(None))


def cmd_status(magics: Any, rest: str = "") -> None:
    backend = magics.backend
    info: dict[str, Any] = {"mode": backend.mode, "where": backend.describe()}
    if backend.mode == "server":
        who = magics.backend_call(backend.whoami)
        info["notebook"] = who.get("notebook")
        info["default_agent"] = who.get("default_agent")
    info["agent"] = magics.agent_for(None) or info.get("default_agent")
    session = _session(magics)
    lines = [f"mode: {info['mode']} ({info['where']})"]
    if info.get("notebook"):
        lines.append(f"notebook: {info['notebook']}")
    lines.append(f"agent: {info['agent']}")
    if session:
        lines.append(f"session: {session['id']} ({session['state']}, {session.get('last_seq', 0)} events)")
        if session.get("error"):
            lines.append(f"last error: {session['error']}")
    else:
        lines.append("session: none yet (the first prompt opens it)")
    magics.show("\n".join(lines), "\n\n".join(f"**{line.split(':', 1)[0]}**:{line.split(':', 1)[1]}" for line in lines))


#: most pages ``%acp history`` reads back to find the start of the latest page's first turn
HISTORY_PAGES = 8


def _latest_events(magics: Any, session_id: str, last_seq: int) -> list[dict[str, Any]]:
    """The latest page of the session's events; older pages too while the page begins mid-turn (its prompt is
    further back), a few at most."""
    events: list[dict[str, Any]] = []
    before = last_seq + 1
    for _ in range(HISTORY_PAGES):
        page = magics.backend_call(magics.backend.page_before, session_id, before)
        events = page + events
        if not page or page[0].get("seq", 1) <= 1 or any(e.get("type") == "turn_started" for e in page):
            break
        before = page[0]["seq"]
    return events


#: most pages ``%acp history N`` reads of one earlier conversation
CONVERSATION_PAGES = 20


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "?"


def _conversations(magics: Any, session: dict[str, Any]) -> list[dict[str, Any]]:
    """The notebook's conversations with this agent, oldest first (numbered from 1 as ``%acp history N`` names them)."""
    if magics.backend.mode != "server":
        raise AcpError(
            "earlier conversations are kept by the Jupyter server; this kernel runs the agent itself (local mode), "
            "which keeps only the current one (see %acp status)"
        )
    listed = magics.backend.call("GET", f"sessions/{session['id']}/conversations")
    return list(reversed(listed))


def _history_all(magics: Any, session: dict[str, Any]) -> None:
    convs = _conversations(magics, session)
    rows_txt, rows_md = [], ["| # | started | agent | turns | first prompt |", "|---|---|---|---|---|"]
    for n, c in enumerate(convs, start=1):
        mark = " (current)" if c.get("current") else ""
        title = (c.get("title") or "(no prompt yet)").replace("\n", " ")
        title = title[:80] + ("…" if len(title) > 80 else "")
        rows_txt.append(f"{n}. {_when(c.get('started'))}  {c.get('agent')}  {c.get('turns', 0)} turns{mark}  {title}")
        cell = title.replace("|", "\\|")
        rows_md.append(f"| {n}{mark} | {_when(c.get('started'))} | {c.get('agent')} | {c.get('turns', 0)} | {cell} |")
    foot = "%acp history N shows one; the Agent sidebar's history menu resumes or deletes one"
    magics.show("\n".join(rows_txt) + "\n\n" + foot, "\n".join(rows_md) + f"\n\n_{foot}_")


def _history_one(magics: Any, session: dict[str, Any], n: int) -> None:
    convs = _conversations(magics, session)
    if not 1 <= n <= len(convs):
        raise AcpError(f"no conversation {n}: this notebook has {len(convs)} (see %acp history --all)")
    conv = convs[n - 1]
    if conv.get("id") is None:
        return magics.show(f"conversation {n} (current): no prompts yet")
    events: list[dict[str, Any]] = []
    for _ in range(CONVERSATION_PAGES):
        after = events[-1]["seq"] if events else 0
        path = f"sessions/{session['id']}/conversations/{conv['id']}/events"
        page = magics.backend.call("GET", path, None, {"after": after})
        if not page:
            break
        events += page
    turns = exchanges(events)
    agent = conv.get("agent") or session["agent"]
    answers = [t.answer + (f"\n[error: {t.error}]" if t.error else "") for t in turns]
    head = f"conversation {n} of {_when(conv.get('started'))} with {agent}" + (
        " (current)" if conv.get("current") else ""
    )
    txt = "\n\n".join(f"You: {t.prompt}\n{agent}: {a}" for t, a in zip(turns, answers, strict=True))
    md = "\n\n".join(f"**You:** {t.prompt}\n\n**{agent}:** {a}" for t, a in zip(turns, answers, strict=True))
    magics.show(f"{head}\n\n{txt or 'no prompts'}", f"_{head}_\n\n{md or 'no prompts'}")


def cmd_history(magics: Any, rest: str = "") -> None:
    """The latest page of the current conversation (what the agent remembers); ``--all``: the
    notebook's conversations; ``N``: conversation N of that list."""
    arg = rest.strip()
    if arg and arg != "--all" and not arg.isdigit():
        raise AcpError(f"%acp history takes --all or a conversation's number, not {arg!r}")
    session = _session(magics)
    if session is None:
        return magics.show("no conversation yet in this notebook")
    if arg == "--all":
        return _history_all(magics, session)
    if arg:
        return _history_one(magics, session, int(arg))
    events = _latest_events(magics, session["id"], int(session.get("last_seq") or 0))
    turns = exchanges(events, since_reset=True)
    if not turns:
        return magics.show(f"session {session['id']}: no prompts yet")
    agent = session["agent"]
    answers = [t.answer + (f"\n[error: {t.error}]" if t.error else "") for t in turns]
    txt = "\n\n".join(f"You: {t.prompt}\n{agent}: {a}" for t, a in zip(turns, answers, strict=True))
    md = "\n\n".join(f"**You:** {t.prompt}\n\n**{agent}:** {a}" for t, a in zip(turns, answers, strict=True))
    head_txt, head_md = f"session {session['id']}", f"_session {session['id']}_"
    first = events[0].get("seq", 1) if events else 1
    if first > 1 and magics.backend_call(magics.backend.page_before, session["id"], first):
        older = "earlier turns are not shown: scroll up in the Agent sidebar to read them"
        head_txt, head_md = f"{head_txt} ({older})", f"{head_md} ({older})"
    magics.show(f"{head_txt}\n\n" + txt, f"{head_md}\n\n" + md)


def cmd_reset(magics: Any, rest: str = "") -> None:
    session = magics.backend_call(magics.backend.open, magics.agent_for(None), True)
    magics.show(f"new conversation with {session['agent']!r} in this notebook's session {session['id']}")


def cmd_cancel(magics: Any, rest: str = "") -> None:
    session = _session(magics)
    if session is None or not magics.backend_call(magics.backend.cancel, session["id"]):
        return magics.show("nothing to cancel: no turn is running")
    magics.show("cancelled the running turn")


def cmd_fix(magics: Any, rest: str) -> None:
    etype, value, tb = (
        getattr(sys, "last_type", None),
        getattr(sys, "last_value", None),
        getattr(sys, "last_traceback", None),
    )
    if value is None:
        raise AcpError("no error to explain yet: %acp fix explains the last exception raised in this kernel")
    tb_text = "".join(traceback.format_exception(etype, value, tb))
    tb_text = re.sub(r"\x1b\[[0-9;]*m", "", tb_text)
    inputs = magics.shell.user_ns.get("In") or []
    code = inputs[-2] if len(inputs) >= 2 else ""
    opts = parse_options(rest.split(), positional_agent=False, stop_at_text=False) if rest else Options()
    prompt = "Explain the following error and propose a fix.\n\n"
    if code:
        prompt += f"The code that ran:\n```python\n{code}\n```\n\n"
    prompt += f"The error:\n```\n{tb_text[-6000:]}\n```"
    run_prompt(magics, prompt, opts, interpolate_=False)


COMMANDS: dict[str, Callable[[Any, str], Any]] = {
    "agents": cmd_agents,
    "list": cmd_agents,
    "use": cmd_use,
    "status": cmd_status,
    "history": cmd_history,
    "reset": cmd_reset,
    "cancel": cmd_cancel,
    "fix": cmd_fix,
}
