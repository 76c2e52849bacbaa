"""What the agent showed the user of its own tool calls, and the approvals that follow from it.

An agent's ``session/request_permission`` that the user allowed pre-approves one call of the client's gate
whose tool and arguments match what the card showed (names of client tools and digests of the arguments it
carried), or, for ``terminal/create``, the command line the card showed without a click. The gate
(``gate.py``) takes them, once each; this module only says what was seen.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..tools.host import digest

#: most agent tool calls remembered per turn (to match a permission with what the user saw)
MAX_REMEMBERED_CALLS = 256
#: largest arguments remembered for matching (larger ones are asked again)
MAX_REMEMBERED_ARGS = 256 * 1024
_TOOL_NAME = re.compile(r"client_[a-z][a-z0-9_]*")


@dataclass
class SeenCall:
    """What the agent showed the user of one of its tool calls (from its updates and its request)."""

    names: set[str] = field(default_factory=set)
    digests: set[str] = field(default_factory=set)
    #: the command lines it showed (``rawInput.command``): a ``terminal/create`` of exactly one of them was seen
    commands: set[str] = field(default_factory=set)

    def add(self, tool_call: dict[str, Any]) -> None:
        for text in _name_sources(tool_call):
            self.names.update(_TOOL_NAME.findall(text))
        raw = tool_call.get("rawInput")
        for args in _argument_candidates(raw):
            try:
                if len(json.dumps(args, default=str)) <= MAX_REMEMBERED_ARGS:
                    self.digests.add(digest(args))
            except (TypeError, ValueError):
                continue
            for key in ("command", "cmd"):
                # only a command line the card shows without a click (its title or its text) counts as seen
                self.commands |= {c for c in command_lines(args.get(key)) if c in _visible_text(tool_call)}

    def merge(self, other: SeenCall) -> None:
        self.names |= other.names
        self.digests |= other.digests
        self.commands |= other.commands


def _visible_text(tool_call: dict[str, Any]) -> str:
    """What a card shows of a tool call before any click: its title and its text content."""
    title = tool_call.get("title")
    out: list[str] = [title if isinstance(title, str) else ""]
    for item in tool_call.get("content") or []:
        inner = item.get("content") if isinstance(item, dict) else None
        if isinstance(inner, dict) and inner.get("type") == "text" and isinstance(inner.get("text"), str):
            out.append(inner["text"])
    return "\n".join(out)


def command_lines(command: Any, args: Any = None) -> set[str]:
    """The ways a command line is written: ``npm test``, ``['npm', 'test']``, ``['bash', '-lc', 'npm test']``."""
    parts: list[str]
    if isinstance(command, str) and not args:
        return {command.strip()} if command.strip() and len(command) <= MAX_REMEMBERED_ARGS else set()
    if isinstance(command, str) and isinstance(args, list):
        parts = [command, *args]
    elif isinstance(command, list):
        parts = list(command)
    else:
        return set()
    if not parts or not all(isinstance(p, str) for p in parts) or sum(map(len, parts)) > MAX_REMEMBERED_ARGS:
        return set()
    out = {shlex.join(parts), " ".join(parts)}
    if len(parts) == 3 and parts[1] in ("-c", "-lc"):
        out.add(parts[2].strip())  # a shell running one command line: the line is what the user read
    return out


@dataclass
class AgentApproval:
    """The user allowed an agent's permission request: good for one matching call, in this turn."""

    request_id: str
    seen: SeenCall


def _name_sources(tool_call: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key in ("title", "kind"):
        if isinstance(tool_call.get(key), str):
            out.append(tool_call[key])
    meta = tool_call.get("_meta")
    if isinstance(meta, dict):
        for value in meta.values():
            if isinstance(value, dict):
                out.extend(v for v in value.values() if isinstance(v, str))
            elif isinstance(value, str):
                out.append(value)
    raw = tool_call.get("rawInput")
    if isinstance(raw, dict):
        for key in ("tool", "name", "tool_name", "toolName", "invocation"):
            value = raw.get(key)
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, dict):
                out.extend(v for v in value.values() if isinstance(v, str))
    return out


def _argument_candidates(raw: Any) -> list[dict[str, Any]]:
    """The arguments a ``rawInput`` may hold: itself, or nested the ways agents nest them."""
    if not isinstance(raw, dict):
        return []
    out = [raw]
    for key in ("arguments", "input", "params", "args"):
        if isinstance(raw.get(key), dict):
            out.append(raw[key])
    invocation = raw.get("invocation")
    if isinstance(invocation, dict) and isinstance(invocation.get("arguments"), dict):
        out.append(invocation["arguments"])
    return out
