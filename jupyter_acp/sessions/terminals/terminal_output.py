"""One agent terminal's state: its bounded output buffer (cut at a character boundary) and what it ran.

Apart from ``terminals.py`` (the service that starts, watches and ends terminals) because these are plain data with
no Jupyter or event-loop wiring: the buffer's bound is what keeps a terminal's memory flat whatever it prints.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import Any

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>78]")


def clean(text: str) -> str:
    """Terminal output as text: line ends as ``\\n``, colour and cursor sequences dropped."""
    return ANSI.sub("", text.replace("\r\n", "\n"))


class OutputBuffer:
    """The last ``limit`` bytes of a terminal's output, cut from the start at a UTF-8 character boundary."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, int(limit))
        self.data = bytearray()
        self.truncated = False
        self.total = 0  # bytes ever written

    def write(self, text: str) -> None:
        raw = text.encode("utf-8", errors="replace")
        self.total += len(raw)
        if len(raw) >= self.limit:
            self.data = bytearray(raw[len(raw) - self.limit :]) if self.limit else bytearray()
            self.truncated = self.truncated or len(raw) > self.limit
        else:
            self.data += raw
            extra = len(self.data) - self.limit
            if extra > 0:
                del self.data[:extra]
                self.truncated = True
        # a cut in the middle of a character: drop its continuation bytes (0b10xxxxxx)
        n = 0
        while n < len(self.data) and n < 4 and (self.data[n] & 0xC0) == 0x80:
            n += 1
        if n:
            del self.data[:n]

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass
class AgentTerminal:
    """One command an agent runs: its Jupyter terminal, its output, its exit."""

    id: str
    session_id: str
    name: str
    command: str
    args: list[str]
    cwd: str
    buffer: OutputBuffer
    pid: int | None = None
    exit_status: dict[str, Any] | None = None
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    released: bool = False
    killed: bool = False
    #: the Jupyter terminal (terminado's ``PtyWithClients``) while it runs
    pty: Any = None
    #: where the wrapper writes the command's exit code
    status_file: str = ""
    started: float = field(default_factory=time.monotonic)
    _pending: asyncio.TimerHandle | None = None
    _last_event: float = 0.0
    _partial: str = ""

    def describe(self) -> dict[str, Any]:
        return {
            "terminalId": self.id,
            "name": self.name,
            "command": self.command,
            "args": self.args,
            "cwd": self.cwd,
            "running": self.exit_status is None,
            "exitStatus": self.exit_status,
            "released": self.released,
        }
