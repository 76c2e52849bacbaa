"""The options of a prompt (``%%acp AGENT -f code …``, ``%acp -f md PROMPT``, ``%acp fix --agent X``).

Parsed with IPython's ``magic_arguments`` (argparse underneath); what argparse would say is put in the
magic's own words, each naming the rule and pointing at ``%acp help``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments

from .errors import AcpError

FORMATS = ("markdown", "code", "text", "json", "html", "math")
FORMAT_ALIASES = {"md": "markdown", "py": "code", "latex": "math"}
CONTEXTS = ("none", "cells-above", "selection")
SUBCOMMANDS = ("help", "agents", "list", "use", "status", "history", "reset", "cancel", "fix", "version")

#: Added to the prompt (as an instruction block, not in the user's text) per format, as ``%%ai`` does.
FORMAT_INSTRUCTIONS = {
    "code": "Answer with source code only, in the notebook's language, with no text or explanation before or after it. "
    "It will be put into a new notebook cell as is.",
    "json": "Answer with JSON only, with no text before or after it.",
    "html": "Answer with HTML only, with no text before or after it.",
    "math": "Answer with LaTeX math only, with no text before or after it and no surrounding $ signs.",
    "markdown": "",
    "text": "",
}

HELP = """\
%%acp [AGENT] [-f FORMAT] [--new] [--context cells-above|selection|none] [--timeout S]
<prompt; {name} is replaced by the value of name in the kernel>

    Ask this notebook's agent session (the same one as the Agent sidebar). The answer streams into
    the output. FORMAT: markdown (default), code (puts the code into a new cell below), text, json,
    html, math. --new starts a new session for this notebook first. Interrupt the kernel (⏹) to
    cancel the turn.

%acp PROMPT                one-line prompt (options as above, AGENT as --agent NAME)
%acp help                  this text
%acp agents                the agents you can use
%acp use AGENT             the notebook's agent (the Agent panel shows it too; %%acp without an agent uses it)
%acp status                server, notebook, agent and session
%acp history               this notebook's current conversation (its latest page)
%acp history --all         this notebook's conversations, numbered from the oldest
%acp history N             conversation N of that list
%acp reset                 a new conversation for this notebook (the earlier one is kept and listed)
%acp cancel                cancel the running turn (also one started in the sidebar)
%acp fix                   explain the last error (with its traceback) and propose a fix

Configuration: %config AcpMagics.default_agent = "echo"; AcpMagics.agents adds agents for the
no-server mode ({"name": {"command": ..., "args": [...]}}).
"""


@dataclass
class Options:
    agent: str | None = None
    format: str = "markdown"
    new: bool = False
    context: str = "none"
    timeout: float | None = None
    rest: list[str] = field(default_factory=list)


def _prompt_options(fn):  # type: ignore[no-untyped-def]
    """The options every prompt takes (one list, for both parsers below)."""
    for decorator in reversed(
        (
            argument("-f", "--format", help="markdown (default), code, text, json, html, math (md, py, latex)"),
            argument("--new", action="store_true", help="start a new session for this notebook first"),
            argument("-c", "--context", help="none (default), cells-above, selection"),
            argument("--no-context", dest="context", action="store_const", const="none", help="same as --context none"),
            argument("-t", "--timeout", help="cancel the turn after this many seconds"),
            argument("-a", "--agent", help="the agent to ask (see %%acp agents)"),
        )
    ):
        fn = decorator(fn)
    return fn


@magic_arguments()
@_prompt_options
@argument("name", nargs="?", help="the agent (%%%%acp only)")
def _cell_line() -> None:
    """``%%acp [AGENT] [options]``: the prompt is the cell body."""


@magic_arguments()
@_prompt_options
@argument("prompt", nargs=argparse.REMAINDER, help="the prompt")
def _prompt_line() -> None:
    """``%acp [options] PROMPT``: the first word that is not an option starts the prompt."""


for _fn, _prog in ((_cell_line, "%acp"), (_prompt_line, "acp")):  # the formatter adds one %
    _fn.parser.allow_abbrev = False  # type: ignore[attr-defined]  # --form is not --format
    _fn.parser.prog = _prog  # type: ignore[attr-defined]


def _needs_value(message: str, tokens: list[str]) -> AcpError:
    """argparse's "argument -f/--format: expected one argument" in the magic's words (the flag as typed)."""
    m = re.match(r"argument ([^:]+): expected one argument", message)
    if not m:
        return AcpError(f"{message} (see %acp help)")
    aliases = m.group(1).split("/")
    typed = next((t for t in reversed(tokens) if t in aliases), aliases[0])
    return AcpError(f"{typed} needs a value (see %acp help)")


def _checked(ns: argparse.Namespace, opts: Options) -> Options:
    if ns.format is not None:
        fmt = FORMAT_ALIASES.get(ns.format, ns.format)
        if fmt not in FORMATS:
            raise AcpError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        opts.format = fmt
    if ns.context is not None:
        if ns.context not in CONTEXTS:
            raise AcpError(f"unknown context {ns.context!r}; use one of {', '.join(CONTEXTS)}")
        opts.context = ns.context
    if ns.timeout is not None:
        try:
            opts.timeout = float(ns.timeout)
        except ValueError:
            raise AcpError(f"--timeout takes seconds, not {ns.timeout!r}") from None
        if opts.timeout <= 0:
            raise AcpError("--timeout must be positive")
    opts.new = bool(ns.new)
    opts.agent = ns.agent
    return opts


def parse_options(tokens: list[str], *, positional_agent: bool, stop_at_text: bool) -> Options:
    """Options before the prompt. ``stop_at_text``: the first non-option token starts the prompt (``%acp``);
    else the prompt is elsewhere (the cell body) and ``positional_agent`` allows ``%%acp AGENT``."""
    parser = (_prompt_line if stop_at_text else _cell_line).parser  # type: ignore[attr-defined]
    try:
        ns, extra = parser.parse_known_args(tokens)
    except UsageError as exc:
        raise _needs_value(str(exc), tokens) from None
    opts = Options()
    for tok in extra:
        if tok.startswith("-") and len(tok) > 1:
            raise AcpError(f"unknown option {tok!r} (see %acp help)")
        raise AcpError(f"unexpected {tok!r} after the agent name: the prompt goes in the cell body")
    _checked(ns, opts)
    if stop_at_text:
        rest = list(ns.prompt)
        opts.rest = rest[1:] if rest[:1] == ["--"] else rest
    elif ns.name is not None:
        if not positional_agent or opts.agent is not None:
            raise AcpError(f"unexpected {ns.name!r} after the agent name: the prompt goes in the cell body")
        opts.agent = ns.name
    return opts


def option_help() -> str:
    """The options as argparse lists them (for ``%acp?``)."""
    return _cell_line.parser.format_help()  # type: ignore[attr-defined]
