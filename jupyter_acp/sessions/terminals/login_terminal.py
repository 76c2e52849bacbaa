"""An agent's ``terminal`` login (an ACP ``authMethods`` entry of type ``terminal``): the agent's own command with the
method's ``args`` and ``env``, started in a real Jupyter terminal from its argument list, with the agent's environment.

The panel used to type the line into a new terminal's shell.  An agent's argument holding Ctrl-U (``\\x15``) survives
shell quoting, shows as nothing on the card, and, typed, erases the quoted start of the line, so what ran was the
agent's tail (``touch F``) with the server's whole environment.  So here:

* an argument, variable name or value holding a control or invisible character (C0 and C1 controls, DEL, Unicode
  format characters such as a right-to-left override, line and paragraph separators) is refused, rule
  ``login_hidden_characters``, and so is a variable that is not a name (rule ``login_variable_name``); the card says
  which character and where (``GET agents/NAME/settings`` gives the reason as ``refused``), the characters shown
  escaped;
* the command is started by jupyter-server-terminals' manager (terminado) from its argument list, as
  ``terminals.py`` starts an agent's ``terminal/create``: nothing is parsed by a shell.  A small ``sh`` runs it as
  ``"$@"`` and then waits for Enter, so that what the login printed stays readable in the terminal the panel opens by
  name (a login that ends at once would otherwise leave no terminal to open);
* its environment is the agent's own (``JupyterACP.agent_env``: no server token, no kernel secret, nothing the agent
  would not get) plus the method's variables, as changes to the one terminado starts from (the server's);
* while a login terminal of that agent and method is open, asking again answers that terminal (no second login).

The caller (``http/agent_routes.py``) checks that the user may start commands (``execute``) first.
"""

from __future__ import annotations

import logging
import shlex
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .terminal_plan import environment_changes

if TYPE_CHECKING:  # pragma: no cover
    from ...catalog.agents import AgentSpec
    from ..settings import HubSettings
    from .terminals import TerminalService

log = logging.getLogger(__name__)

#: runs the login command from its arguments ("$@": never parsed), then keeps the terminal until Enter
LOGIN_WRAPPER = (
    '"$@"; s=$?; printf "\\n[the login command ended with status %s; press Enter to close this terminal]\\n" "$s"; '
    "read -r _"
)
#: Unicode categories never allowed in a login's arguments and variables: controls, format characters (bidi
#: overrides, zero-width ones), line and paragraph separators, unassigned code points and surrogates
HIDDEN_CATEGORIES = ("Cc", "Cf", "Zl", "Zp", "Cn", "Cs")


class LoginHub(Protocol):
    """What a terminal login asks of the session hub: the server (its root), the agents' environment, the terminals."""

    @property
    def serverapp(self) -> Any: ...

    @property
    def app(self) -> HubSettings: ...

    @property
    def terminals(self) -> TerminalService: ...


class LoginRefused(Exception):
    """A terminal login refused; ``rule`` names the rule, the message says which character or name, and where."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass
class LoginPlan:
    """What a terminal login runs: the argument list and the variables the method adds."""

    argv: list[str]
    env: dict[str, str]


def hidden_character(text: str) -> str | None:
    """The first control or invisible character of ``text``, as ``U+XXXX``, or None."""
    for ch in text:
        if unicodedata.category(ch) in HIDDEN_CATEGORIES:
            return f"U+{ord(ch):04X}"
    return None


def visible(text: str) -> str:
    """``text`` with its control and invisible characters written as escapes (``\\x15``, ``\\u202e``)."""
    out = []
    for ch in text:
        if unicodedata.category(ch) in HIDDEN_CATEGORIES:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def _parts(method: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    raw_args = method.get("args")
    args = [str(a) for a in raw_args] if isinstance(raw_args, list) else []
    raw_env = method.get("env")
    env = {str(k): str(v) for k, v in raw_env.items()} if isinstance(raw_env, dict) else {}
    return args, env


def command_line(argv: list[str], method: dict[str, Any]) -> str:
    """What the card shows of a terminal login: its variables and command line, each word quoted as a shell would
    need it (the user may copy it), control and invisible characters escaped so that the card hides nothing."""
    args, env = _parts(method)
    words = [
        f"{visible(k)}={shlex.quote(visible(v))}"
        if k.isidentifier() and k.isascii()
        else shlex.quote(visible(f"{k}={v}"))
        for k, v in env.items()
    ]
    return " ".join([*words, shlex.join(visible(w) for w in [*argv, *args])])


def plan(name: str, argv: list[str], method: dict[str, Any]) -> LoginPlan:
    """The argument list and variables of agent ``name``'s terminal login ``method`` (``argv``: its configured
    command), or :class:`LoginRefused` saying what it hides."""
    args, env = _parts(method)
    what = f"the terminal login {method.get('id')!r} of agent {name!r}"
    for i, arg in enumerate(args, 1):
        found = hidden_character(arg)
        if found:
            raise LoginRefused(
                "login_hidden_characters",
                f"{what} is refused (rule: login_hidden_characters, a login's arguments and variables hold no control "
                f"or invisible characters): its argument {i} holds {found}, which no card shows as it is "
                f"({visible(arg)!r}). Run the agent's login yourself in a terminal, or ask its "
                "authors to fix it.",
            )
    for key, value in env.items():
        found = hidden_character(key) or hidden_character(value)
        if found:
            raise LoginRefused(
                "login_hidden_characters",
                f"{what} is refused (rule: login_hidden_characters, a login's arguments and variables hold no control "
                f"or invisible characters): its variable {visible(key)!r} holds {found}. Run the agent's login "
                "yourself in a terminal, or ask its authors to fix it.",
            )
        if not (key.isascii() and key.isidentifier()):
            raise LoginRefused(
                "login_variable_name",
                f"{what} is refused (rule: login_variable_name, a login sets variables by their names): {key!r} is "
                "not a variable name. Run the agent's login yourself in a terminal.",
            )
    return LoginPlan([*argv, *args], env)


@dataclass
class LoginTerminal:
    """A started (or still open) login terminal: its name in Jupyter's terminal manager."""

    name: str
    reused: bool


def start(hub: LoginHub, name: str, spec: AgentSpec, method: dict[str, Any]) -> LoginTerminal:
    """Start agent ``name``'s terminal login ``method`` in a named Jupyter terminal (or answer the one still open)."""
    login = plan(name, spec.argv, method)
    manager = hub.terminals.manager
    if manager is None:
        raise LoginRefused(
            "terminals_disabled",
            "this Jupyter server has no terminals (jupyter-server-terminals is not enabled, or "
            "ServerApp.terminals_enabled is False), so a terminal login cannot run. Run the agent's login yourself.",
        )
    key = (name, str(method.get("id")))
    for term_name, pty in list(manager.terminals.items()):
        if getattr(pty, "jupyter_acp_login", None) == key:
            return LoginTerminal(str(term_name), reused=True)
    curated = dict(hub.app.agent_env(spec))
    curated.update(login.env)
    wrapped = ["/bin/sh", "-c", LOGIN_WRAPPER, "jupyter-acp-login", *login.argv]
    cwd = getattr(hub.serverapp, "root_dir", None) or None
    try:
        if hasattr(manager, "create"):
            term_name = manager.create(shell_command=wrapped, cwd=cwd, extra_env=environment_changes(curated, manager))[
                "name"
            ]
        else:  # a bare terminado manager
            term_name, _ = manager.new_named_terminal(
                shell_command=wrapped, cwd=cwd, extra_env=environment_changes(curated, manager)
            )
    except Exception as exc:  # the command missing, MaxTerminalsReached and friends
        raise LoginRefused("terminal_failed", f"agent {name!r}'s login could not start in a terminal: {exc}") from None
    manager.terminals[term_name].jupyter_acp_login = key
    log.info("login terminal %s for agent %r: %s", term_name, name, shlex.join(visible(a) for a in login.argv))
    return LoginTerminal(str(term_name), reused=False)
