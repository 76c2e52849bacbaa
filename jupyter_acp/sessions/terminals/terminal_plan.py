"""What an agent may ask of a client terminal: ``terminal/create`` checked before anyone is asked.

The command and its arguments, the folder it starts in (the notebook's, or one under the server root that the
contents API would show), the variables the agent adds (never the server's or the kernels' secrets), the output
limit and how many terminals a session may run; and the environment the command gets: the agent's own
(``JupyterACP.agent_env``), as changes to the one terminado starts from (the server's). Kept apart from the
terminals' lives (``terminals.py``) so each reads alone.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from ...acp.process import NEVER_PASS
from ...tools.files import FileRefused

if TYPE_CHECKING:  # pragma: no cover
    from ...acp.v1 import CreateTerminalRequest
    from ...catalog.agents import AgentSpec
    from ...tools.files import FileRules
    from ..settings import HubSettings
    from ..state import NotebookSession

#: ``outputByteLimit`` when the agent names none, and the most any agent gets (``JupyterACP.terminal_output_bytes``)
DEFAULT_OUTPUT_BYTES = 1024 * 1024
#: terminals one notebook session may hold at once (``JupyterACP.max_terminals_per_session``)
DEFAULT_MAX_TERMINALS = 8
#: variables the terminal itself sets (its size and type): kept
TERMINAL_VARS = ("TERM", "COLUMNS", "LINES", "PYXTERM_DIMENSIONS")
#: the longest command line (command and arguments) accepted
MAX_COMMAND_CHARS = 64 * 1024


class PlanHub(Protocol):
    """What checking a terminal request asks of the session hub: the agents' specs and environment, the file rules."""

    @property
    def app(self) -> HubSettings: ...

    def specs(self) -> dict[str, AgentSpec]: ...

    def file_rules(self) -> FileRules: ...


class TerminalRefused(Exception):
    """A terminal request refused; ``rule`` names the rule, the message says what to do instead."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def check_request(
    hub: PlanHub, session: NotebookSession, params: CreateTerminalRequest, *, running: int, output_cap: int, most: int
) -> dict[str, Any]:
    """What would run, where, with which variables and output limit; raises :class:`TerminalRefused`."""
    command = params.get("command")
    if not isinstance(command, str) or not command.strip():
        raise TerminalRefused("invalid_arguments", "terminal/create needs a command (a non-empty string)")
    args = params.get("args") if params.get("args") is not None else []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise TerminalRefused("invalid_arguments", "terminal/create: args must be a list of strings")
    if "\0" in command or any("\0" in a for a in args):
        raise TerminalRefused("invalid_arguments", "terminal/create: the command holds a NUL byte")
    if len(command) + sum(len(a) for a in args) > MAX_COMMAND_CHARS:
        raise TerminalRefused("invalid_arguments", f"the command line is longer than {MAX_COMMAND_CHARS} characters")
    env_list = params.get("env") if params.get("env") is not None else []
    extra: dict[str, str] = {}
    if not isinstance(env_list, list):
        raise TerminalRefused("invalid_arguments", "terminal/create: env must be a list of {name, value}")
    for item in env_list:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("name"), str)
            or not isinstance(item.get("value"), str)
        ):
            raise TerminalRefused("invalid_arguments", "terminal/create: each env entry is {name, value} strings")
        if not item["name"] or "=" in item["name"] or "\0" in item["name"] + item["value"]:
            raise TerminalRefused("invalid_arguments", f"terminal/create: bad variable name {item['name']!r}")
        if item["name"] in NEVER_PASS:
            raise TerminalRefused(
                "secret_env",
                f"terminal/create: {item['name']} is the server's or the kernels' secret and is never set for "
                "an agent's command. This cannot be changed.",
            )
        extra[item["name"]] = item["value"]
    cwd = working_directory(hub, session, params.get("cwd"))
    limit = params.get("outputByteLimit")
    if limit is None:
        limit = output_cap
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise TerminalRefused("invalid_arguments", "terminal/create: outputByteLimit must be a non-negative integer")
    if running >= most:
        raise TerminalRefused(
            "too_many_terminals",
            f"this notebook session already runs {running} terminals (JupyterACP.max_terminals_per_session = "
            f"{most}); kill or release one first.",
        )
    return {
        "command": command,
        "args": list(args),
        "env": extra,
        "cwd": cwd,
        "outputByteLimit": min(limit, output_cap),
    }


def working_directory(hub: PlanHub, session: NotebookSession, cwd: Any) -> str:
    """The folder a command starts in: the notebook's, or one the agent names under the server root."""
    if cwd is None or cwd == "":
        cwd = session.cwd
    if not isinstance(cwd, str) or "\0" in cwd:
        raise TerminalRefused("invalid_arguments", "terminal/create: cwd must be a path")
    shown = cwd
    if not os.path.isabs(cwd):
        cwd = os.path.join(session.cwd, cwd)
    real: str = os.path.realpath(cwd)
    try:
        hub.file_rules().check(real, shown)
    except FileRefused as exc:
        raise TerminalRefused(
            exc.rule,
            f"terminal/create refused (rule: {exc.rule}): the working directory {exc} Commands start in a folder "
            "under the server root; leave cwd out to start in the notebook's folder.",
        ) from None
    if not os.path.isdir(real):
        raise TerminalRefused("cwd_missing", f"terminal/create: the working directory {shown} is not a folder")
    return real


def terminal_environment(
    hub: PlanHub, session: NotebookSession, extra: dict[str, str], manager: Any
) -> dict[str, str | None]:
    """The terminal's environment as changes to terminado's (which starts from the server's own): everything
    the agent would not get is removed, what it gets is set."""
    spec = hub.specs().get(session.agent)
    curated = dict(hub.app.agent_env(spec)) if spec is not None else {}
    curated.update(extra)
    return environment_changes(curated, manager)


def environment_changes(curated: dict[str, str], manager: Any) -> dict[str, str | None]:
    """``curated`` as changes to the environment terminado starts a terminal with (the server's own, its
    ``extra_env``): every other variable removed, the secrets removed whatever ``curated`` says (an agent's
    ``terminal/create`` and an agent's terminal login alike)."""
    inherited = set(os.environ) | set(getattr(manager, "extra_env", None) or {}) | {"PYXTERM_URL"}
    changes: dict[str, str | None] = {k: None for k in inherited if k not in curated and k not in TERMINAL_VARS}
    changes.update(curated)
    for name in NEVER_PASS:
        changes[name] = None
    return changes
