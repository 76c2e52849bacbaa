"""``%acp`` / ``%%acp``: the notebook's agent session from inside a cell.

The magic and the sidebar share ONE session: the kernel asks the server extension (through its kernel routes,
naming itself by its kernel id and showing the token the server gave this kernel alone) for *its notebook's*
session, prompts it, and long-polls the session's events, which it renders into the cell's output as they
arrive. Where no server is reachable (plain IPython, a terminal, a kernel on another host) the magic drives an
agent itself from the kernel process (``local.py``) and says once what is missing.

Shapes follow ``%%ai`` (jupyter-ai-magics): ``-f/--format``, ``{name}`` interpolation with unknown names left as
they are, ``-f code`` puts the code in a new cell below, displayed results carry metadata. What ``%%ai`` lacks is
here: streaming, tool calls shown, permission requests answerable from the cell or the sidebar (whichever
answers first wins), interrupt (⏹) cancels the turn, no hard time limit.

Permissions in the cell: a running cell cannot receive comm (widget) messages (they queue behind it on the shell
channel), so buttons cannot work while the cell blocks; the cell asks with ``input()`` (the stdin channel does
work mid-cell) when the frontend allows it. If the sidebar answers first, the input box stays until Enter, and a
late answer is reported as already given.

The modules, one job each: ``options`` (the prompt's options, ``magic_arguments``), ``interpolate`` (``{name}``),
``server`` (discovery and the HTTP client of the kernel routes), ``local`` (the no-server backend, on the real
tool definitions), ``turn`` (a prompt followed to its end), ``view`` (the cell's output, permission prompts),
``commands`` (the subcommands). The magic imports only ``protocol``, ``acp``, ``agents`` and, for the local
backend, ``tools`` and ``kernels``.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display
from traitlets import Dict, Float, Unicode

from .commands import run_line
from .errors import AcpError, ServerGone
from .interpolate import interpolate
from .options import FORMAT_INSTRUCTIONS, FORMATS, HELP, SUBCOMMANDS, Options, option_help, parse_options
from .server import ServerBackend, discover_server, kernel_id, missing_server_reason
from .turn import run_prompt
from .view import TurnView, extract_code

__all__ = [
    "FORMATS", "FORMAT_INSTRUCTIONS", "HELP", "SUBCOMMANDS", "AcpError", "AcpMagics", "Options", "ServerBackend",
    "ServerGone", "TurnView", "discover_server", "extract_code", "interpolate", "kernel_id",
    "load_ipython_extension", "missing_server_reason", "parse_options",
]  # fmt: skip


@magics_class
class AcpMagics(Magics):
    """``%acp`` and ``%%acp``."""

    default_agent = Unicode("", config=True, help="Agent used when a prompt names none (empty: the server's default).")
    agents = Dict(
        default_value={},
        config=True,
        help="Agents for the no-server mode, added to 'builtin' and 'echo': {name: {command, args, env}}.",
    )
    poll_wait = Float(10.0, config=True, help="Seconds one long poll of the server may wait for events.")

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._backend: Any = None
        self._agent: str | None = None  # set by %acp use
        self._said_local = False

    # -- backend -----------------------------------------------------------------------------------
    @property
    def backend(self) -> Any:
        if self._backend is None:
            found = discover_server()
            kid = kernel_id()
            if found and kid:
                self._backend = ServerBackend(found[0], found[1], kid, found[2])
            else:
                from .local import LocalBackend

                self._backend = LocalBackend(self)
                missing = missing_server_reason() if not found else "this kernel has no kernel id"
                self._notice_once(
                    f"jupyter_acp: {missing}, so the agent runs inside this kernel: no notebook cells, "
                    "no sidebar; variables of this kernel are its tools."
                )
        return self._backend

    def _notice_once(self, text: str) -> None:
        if not self._said_local:
            self._said_local = True
            print(text, file=sys.stderr, flush=True)

    def _fallback_to_local(self, why: str) -> None:
        from .local import LocalBackend

        self._backend = LocalBackend(self)
        self._notice_once(
            f"jupyter_acp: {why}; the agent runs inside this kernel from now on (no notebook cells, no sidebar)."
        )

    def backend_call(self, fn: Any, *args: Any) -> Any:
        """A backend call; if the server is gone before anything started, fall back to the local agent."""
        try:
            return fn(*args)
        except ServerGone as exc:
            if isinstance(self._backend, ServerBackend):
                self._fallback_to_local(str(exc))
                return getattr(self._backend, fn.__name__)(*args)
            raise

    def agent_for(self, explicit: str | None) -> str | None:
        return explicit or self._agent or self.default_agent or None

    def use_agent(self, name: str | None) -> None:
        """The agent this kernel's prompts go to; ``None``: follow the notebook's agent the server keeps."""
        self._agent = name

    def show(self, text: str, markdown: str | None = None) -> None:
        if getattr(self.shell, "kernel", None) is not None:
            display({"text/plain": text, "text/markdown": markdown or f"```\n{text}\n```"}, raw=True)
        else:
            print(text)

    # -- entry point -------------------------------------------------------------------------------
    @line_cell_magic
    def acp(self, line: str = "", cell: str | None = None) -> Any:
        try:
            return self._acp(line, cell)
        except AcpError as exc:
            raise UsageError(f"%acp: {exc}") from None

    acp.__doc__ = f"{HELP}\n{option_help()}"

    def _acp(self, line: str, cell: str | None) -> Any:
        if cell is None:
            return run_line(self, line)
        try:
            tokens = shlex.split(line)
        except ValueError as exc:
            raise AcpError(f"cannot read the options: {exc}") from None
        opts = parse_options(tokens, positional_agent=True, stop_at_text=False)
        if not cell.strip():
            raise AcpError("the prompt is empty: write it in the cell body, below %%acp")
        return run_prompt(self, cell.strip(), opts)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(AcpMagics)
