"""What the tools need from the layer above them, as protocols: the tools never import the sessions.

The session hub implements :class:`ToolHost` (kernel lookup at call time); a notebook session satisfies
:class:`ToolSession`; the one gate hands each call's context its approval step, an :class:`Approver`. :class:`Action` and :class:`Refused` are the gate's vocabulary,
here because the tools ask the gate with them and answer its refusals.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol

#: the client's own permission options; the sidebar labels buttons by ``kind``
PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow in this notebook's session", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


def digest(arguments: Any) -> str:
    """A canonical digest of a call's arguments: key order and spacing do not matter."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Action:
    """One thing an agent asked the client to do."""

    power: str  # "tool", "fs/read_text_file", "fs/write_text_file"
    name: str  # the tool's name, or the power
    arguments: dict[str, Any]
    channel: str
    ids: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        return digest(self.arguments)


class Refused(Exception):
    """An action the gate refused; ``rule`` names the rule, the message says how to change it."""

    def __init__(self, rule: str, message: str, kind: str = "denied") -> None:
        super().__init__(message)
        self.rule = rule
        self.kind = kind


class ToolSession(Protocol):
    """The notebook session a call is bound to."""

    @property
    def id(self) -> str: ...

    @property
    def notebook(self) -> str: ...

    @property
    def cwd(self) -> str: ...


class ToolHost(Protocol):
    """What the tools ask of the sessions layer."""

    serverapp: Any

    async def kernel_id_for(self, notebook: str) -> str | None:
        """The kernel attached to a notebook now (None: no kernel)."""
        ...


class Approver(Protocol):
    """The one gate's approval step for the notebook session a call's context is bound to (``sessions/gate/gate.py``).

    The gate puts it on the context it builds, so a tool that asks with its own card (``services.gate``) takes a step
    of the call's one pass through the gate rather than a second way into it through the session hub."""

    async def __call__(self, action: Action, *, title: str, kind: str, preview: str = "") -> str:
        """Allow ``action`` (returning how, for the audit) or raise :class:`Refused`; may ask the user."""
        ...
