"""Client terminals: an agent's ``terminal/*`` commands run in real Jupyter terminals.

``terminal/create`` (once the gate allowed it) starts the agent's command in a named terminal of
jupyter-server-terminals' manager (terminado), so the user can open that very terminal in JupyterLab
while it runs. The command starts in the session's folder (or a folder under the server root the agent
names), with the environment an agent gets (``JupyterACP.agent_env``: no server token, no kernel secret).
Its output is captured into a bounded buffer (``outputByteLimit``, capped by
``JupyterACP.terminal_output_bytes``; cut from the start at a UTF-8 character boundary) and streamed to the
session's watchers as ``terminal_output`` events (a bounded tail, throttled). A terminal belongs to the
notebook session that created it: any other id is refused. Terminals end with their session (reset,
eviction, the agent's death) and with the server.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import shlex
import shutil
import signal
import tempfile
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from .terminal_output import ANSI, AgentTerminal, OutputBuffer, clean
from .terminal_plan import (
    DEFAULT_MAX_TERMINALS,
    DEFAULT_OUTPUT_BYTES,
    PlanHub,
    TerminalRefused,
    check_request,
    terminal_environment,
)

if TYPE_CHECKING:  # pragma: no cover
    from ...acp.v1 import CreateTerminalRequest
    from ..state import NotebookSession

log = logging.getLogger(__name__)

#: the tail of the output each ``terminal_output`` event carries (the card shows it; the agent reads the buffer)
EVENT_TAIL_CHARS = 4000
#: at most one ``terminal_output`` event per terminal this often (seconds); after its first ``SLOW_AFTER`` seconds a
#: command that keeps printing is reported once a second (every event is stored in the transcript)
EVENT_INTERVAL = 0.2
SLOW_INTERVAL = 1.0
SLOW_AFTER = 10.0
#: chunks of terminado's own replay buffer kept (it keeps 1,000 of up to 64 KiB: bounded here too)
REPLAY_CHUNKS = 64
#: the command runs under a small shell that writes its exit code to a file before it lets go of the terminal:
#: terminado reads the end of a terminal before the process can be waited for and then hangs it up (SIGHUP) when
#: it is not gone 0.1 s later, so a command that exited 0 could be reported as killed (seen in a third of runs)
STATUS_WRAPPER = 'f=$1; shift; "$@"; s=$?; printf %s "$s" > "$f"; exit "$s"'


class TerminalHub(PlanHub, Protocol):
    """What the terminals ask of the session hub: beside a request's checks (``PlanHub``), the server (its terminal
    manager), the sessions, their event log and a task that outlives a request."""

    @property
    def serverapp(self) -> Any: ...

    @property
    def sessions(self) -> dict[str, NotebookSession]: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...


class _Listener:
    """Sits among terminado's websocket clients of one terminal: sees what it prints and when it dies."""

    size = (None, None)  # never constrains the terminal's size (``resize_to_smallest``)

    def __init__(self, service: TerminalService, terminal: AgentTerminal) -> None:
        self.service = service
        self.terminal = terminal

    def on_pty_read(self, text: str) -> None:
        self.service._output(self.terminal, text)

    def on_pty_died(self) -> None:
        self.service._died(self.terminal)


class TerminalService:
    """The agents' terminals of one server (the hub owns it)."""

    def __init__(self, hub: TerminalHub) -> None:
        self.hub = hub
        self.terminals: dict[str, AgentTerminal] = {}
        self._status_dir: str | None = None

    # -- settings ----------------------------------------------------------------------------------
    @property
    def manager(self) -> Any:
        """jupyter-server-terminals' manager, or None when the server has no terminals."""
        web_app = getattr(self.hub.serverapp, "web_app", None)
        settings = getattr(web_app, "settings", None) or {}
        if settings.get("terminals_available") is False:
            return None
        return settings.get("terminal_manager")

    @property
    def available(self) -> bool:
        return self.manager is not None

    def _setting(self, name: str, default: Any) -> Any:
        value = getattr(self.hub.app, name, default)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else default

    # -- create ------------------------------------------------------------------------------------
    def plan(self, session: NotebookSession, params: CreateTerminalRequest) -> dict[str, Any]:
        """Check a ``terminal/create`` before anyone is asked: what would run, where, with which environment."""
        if not self.available:
            raise TerminalRefused(
                "terminals_disabled",
                "this Jupyter server has no terminals (jupyter-server-terminals is not enabled, or "
                "ServerApp.terminals_enabled is False), so commands cannot run in one. The owner can enable them.",
            )
        running = sum(1 for t in self.terminals.values() if t.session_id == session.id and t.exit_status is None)
        return check_request(
            self.hub,
            session,
            params,
            running=running,
            output_cap=int(self._setting("terminal_output_bytes", DEFAULT_OUTPUT_BYTES)),
            most=int(self._setting("max_terminals_per_session", DEFAULT_MAX_TERMINALS)),
        )

    def environment(self, session: NotebookSession, extra: dict[str, str]) -> dict[str, str | None]:
        """The command's environment, as changes to the server's (see ``terminal_plan``)."""
        return terminal_environment(self.hub, session, extra, self.manager)

    def create(self, session: NotebookSession, plan: dict[str, Any]) -> AgentTerminal:
        """Start an allowed command in a new Jupyter terminal; returns at once (it runs in the background)."""
        manager = self.manager
        if manager is None:
            raise TerminalRefused("terminals_disabled", "this Jupyter server has no terminals any more")
        command, args = plan["command"], plan["args"]
        if args:
            argv = [command, *args]
        else:
            # a command line without arguments runs in a shell, as in a terminal (pipes, &&, globs)
            argv = [os.environ.get("SHELL") or "/bin/sh", "-c", command]
        if self._status_dir is None:
            self._status_dir = tempfile.mkdtemp(prefix="jupyter-acp-terminals-")  # 0700
        terminal_id = "term_" + secrets.token_hex(8)
        status_file = os.path.join(self._status_dir, terminal_id)
        wrapped = ["/bin/sh", "-c", STATUS_WRAPPER, "sh", status_file, *argv]
        terminal = AgentTerminal(
            id=terminal_id,
            session_id=session.id,
            name="",
            command=command,
            args=args,
            cwd=plan["cwd"],
            buffer=OutputBuffer(plan["outputByteLimit"]),
            status_file=status_file,
        )
        try:
            if hasattr(manager, "create"):
                model = manager.create(
                    shell_command=wrapped, cwd=plan["cwd"], extra_env=self.environment(session, plan["env"])
                )
                name = model["name"]
            else:  # a bare terminado manager
                name, _ = manager.new_named_terminal(
                    shell_command=wrapped, cwd=plan["cwd"], extra_env=self.environment(session, plan["env"])
                )
        except (FileNotFoundError, OSError) as exc:
            raise TerminalRefused(
                "command_failed", f"terminal/create: {shlex.join(argv)} could not start: {exc}"
            ) from None
        except Exception as exc:  # MaxTerminalsReached and friends
            raise TerminalRefused("terminal_failed", f"terminal/create: no terminal could be opened: {exc}") from None
        pty = manager.terminals[name]
        terminal.name = str(name)
        terminal.pty = pty
        terminal.pid = getattr(getattr(pty, "ptyproc", None), "pid", None)
        if hasattr(pty, "read_buffer"):
            pty.read_buffer = collections.deque(pty.read_buffer, maxlen=REPLAY_CHUNKS)
        pty.clients.append(_Listener(self, terminal))
        self.terminals[terminal.id] = terminal
        self._emit(terminal)
        log.info("agent terminal %s (%s) for session %s: %s", terminal.id, name, session.id, shlex.join(argv))
        return terminal

    # -- the agent's other requests ------------------------------------------------------------------
    def get(self, session: NotebookSession, terminal_id: Any) -> AgentTerminal:
        terminal = self.terminals.get(terminal_id) if isinstance(terminal_id, str) else None
        if terminal is None or terminal.session_id != session.id or terminal.released:
            raise TerminalRefused(
                "terminal_owner",
                f"{terminal_id!r} is not a terminal of this session (unknown, released, or another session's): an "
                "agent reaches only the terminals it created in this notebook's session. Create one with "
                "terminal/create.",
            )
        return terminal

    def output(self, terminal: AgentTerminal) -> dict[str, Any]:
        out: dict[str, Any] = {"output": terminal.buffer.text(), "truncated": terminal.buffer.truncated}
        if terminal.exit_status is not None:
            out["exitStatus"] = terminal.exit_status
        return out

    async def wait_for_exit(self, terminal: AgentTerminal) -> dict[str, Any]:
        await terminal.exited.wait()
        return dict(terminal.exit_status or {"exitCode": None, "signal": None})

    async def kill(self, terminal: AgentTerminal, grace: float = 2.0) -> None:
        """Stop the command (its whole process group); the id stays valid."""
        if terminal.exit_status is not None:
            return
        terminal.killed = True
        for sig, wait in ((signal.SIGHUP, 0.0), (signal.SIGTERM, grace), (signal.SIGKILL, grace)):
            self._signal(terminal, sig)
            if wait:
                try:
                    await asyncio.wait_for(terminal.exited.wait(), wait)
                    return
                except TimeoutError:
                    continue
        if terminal.exit_status is None:  # the pty never closed: give the id an end all the same
            self._died(terminal)

    def _signal(self, terminal: AgentTerminal, sig: int) -> None:
        if terminal.pid is None:
            return
        try:
            os.killpg(os.getpgid(terminal.pid), sig)
        except (ProcessLookupError, PermissionError):
            pass
        except OSError as exc:
            log.info("signal %s to terminal %s failed: %s", sig, terminal.name, exc)

    async def release(self, terminal: AgentTerminal) -> None:
        """Kill the command if it still runs and forget the id (the card keeps the output)."""
        await self.kill(terminal)
        terminal.released = True
        self.terminals.pop(terminal.id, None)
        self._emit(terminal, now=True)

    # -- ends ----------------------------------------------------------------------------------------
    async def end_session(self, session: NotebookSession, reason: str = "") -> int:
        """Every terminal of a notebook session killed and released (reset, eviction, the agent's death)."""
        mine = [t for t in list(self.terminals.values()) if t.session_id == session.id]
        if not mine:
            return 0
        await asyncio.gather(*(self.release(t) for t in mine), return_exceptions=True)
        if reason:
            self.hub.emit(
                session,
                "notice",
                level="info",
                phase="terminals_ended",
                text=f"{len(mine)} agent terminal{'s' if len(mine) != 1 else ''} ended: {reason}",
            )
        return len(mine)

    def end_session_soon(self, session: NotebookSession, reason: str = "") -> None:
        if any(t.session_id == session.id for t in self.terminals.values()):
            self.hub.spawn(self.end_session(session, reason))

    async def stop(self) -> None:
        """The server stops: every agent terminal ends (quickly)."""
        terminals = list(self.terminals.values())
        await asyncio.gather(*(self.kill(t, grace=0.5) for t in terminals), return_exceptions=True)
        for terminal in terminals:
            terminal.released = True
            # the last word in the transcript: a card replayed after the restart does not say "running"
            self._emit(terminal, now=True)
        self.terminals.clear()
        if self._status_dir is not None:
            shutil.rmtree(self._status_dir, ignore_errors=True)
            self._status_dir = None

    # -- what the terminal reports -------------------------------------------------------------------
    def _output(self, terminal: AgentTerminal, text: str) -> None:
        text = terminal._partial + text
        # an escape sequence cut at the end of a read waits for the rest (bounded: a stray ESC passes)
        cut = text.rfind("\x1b")
        if cut != -1 and len(text) - cut < 32 and not ANSI.search(text, cut):
            terminal._partial, text = text[cut:], text[:cut]
        else:
            terminal._partial = ""
        if text:
            terminal.buffer.write(clean(text))
            self._emit(terminal)

    def _died(self, terminal: AgentTerminal) -> None:
        if terminal.exit_status is not None:
            return
        proc = getattr(terminal.pty, "ptyproc", None)
        code = getattr(proc, "exitstatus", None)
        sig = getattr(proc, "signalstatus", None)
        try:
            with open(terminal.status_file, encoding="ascii") as fh:
                code, sig = int(fh.read().strip()), None  # the command's own exit code (128+N: killed by N)
            os.unlink(terminal.status_file)
        except (OSError, ValueError):
            pass  # the wrapper itself was stopped (kill): the terminal's status says how
        name = None
        if isinstance(sig, int):
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = str(sig)
        if code is None and name is None and terminal.killed:
            name = "SIGKILL"
        if terminal._partial:
            terminal.buffer.write(clean(terminal._partial))
            terminal._partial = ""
        terminal.exit_status = {"exitCode": code, "signal": name}
        terminal.pty = None
        terminal.exited.set()
        self._emit(terminal, now=True)

    # -- events (throttled) ----------------------------------------------------------------------------
    def _emit(self, terminal: AgentTerminal, now: bool = False) -> None:
        if now:
            self._cancel_pending(terminal)
            self._send(terminal)
            return
        if terminal._pending is not None:
            return
        now_ = time.monotonic()
        interval = EVENT_INTERVAL if now_ - terminal.started < SLOW_AFTER else SLOW_INTERVAL
        wait = terminal._last_event + interval - now_
        if wait <= 0:
            self._send(terminal)
        else:
            terminal._pending = asyncio.get_running_loop().call_later(wait, self._send, terminal)

    def _cancel_pending(self, terminal: AgentTerminal) -> None:
        if terminal._pending is not None:
            terminal._pending.cancel()
            terminal._pending = None

    def _send(self, terminal: AgentTerminal) -> None:
        terminal._pending = None
        terminal._last_event = time.monotonic()
        session = self.hub.sessions.get(terminal.session_id)
        if session is None:
            return
        text = terminal.buffer.text()
        tail = text[-EVENT_TAIL_CHARS:]
        self.hub.emit(
            session,
            "terminal_output",
            **terminal.describe(),
            output=tail,
            truncated=terminal.buffer.truncated or len(tail) < len(text),
            turn_id=session.turn.id if session.turn else None,
        )
