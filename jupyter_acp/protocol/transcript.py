"""Transcript shapes: the events the server records, read back as conversation turns.

One reader for every place that turns a transcript into text: the history re-seeded into a new agent session
after a crash, the ``%acp history`` command, tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: event types the server records (``type`` of each transcript event)
EVENT_TYPES = (
    "turn_started", "session_update", "permission_request", "permission_resolved", "turn_ended",
    "session_ready", "session_config", "notice", "audit", "policy_changed",
)  # fmt: skip


@dataclass
class Exchange:
    """One prompt of the user and what the agent answered (its streamed message text)."""

    turn_id: str | None
    prompt: str
    answer: str = ""
    error: str | None = None


def prompt_text(event: dict[str, Any]) -> str:
    """The text blocks of a ``turn_started`` event's prompt, joined."""
    return " ".join(
        b.get("text", "") for b in event.get("prompt") or [] if isinstance(b, dict) and b.get("type") == "text"
    )


def exchanges(events: Iterable[dict[str, Any]], *, since_reset: bool = False) -> list[Exchange]:
    """The conversation in ``events``: a list of exchanges, oldest first.

    ``since_reset``: only what came after the last ``session_reset`` notice (what the agent still remembers).
    """
    out: list[Exchange] = []
    for e in events:
        kind = e.get("type")
        if kind == "notice" and e.get("phase") == "session_reset" and since_reset:
            out = []
        elif kind == "turn_started":
            out.append(Exchange(e.get("turn_id"), prompt_text(e)))
        elif kind == "session_update" and out:
            upd = e.get("update") or {}
            content = upd.get("content") or {}
            if upd.get("sessionUpdate") == "agent_message_chunk" and content.get("type") == "text":
                out[-1].answer += content.get("text", "")
        elif kind == "turn_ended" and out and e.get("error"):
            out[-1].error = str(e["error"])
    return out


def message_text(events: list[dict[str, Any]], turn_id: str | None = None, kind: str = "agent_message_chunk") -> str:
    """The agent's streamed text in a list of events (optionally one turn's)."""
    out, inside = [], turn_id is None
    for e in events:
        if e["type"] == "turn_started":
            inside = turn_id is None or e["turn_id"] == turn_id
        if inside and e["type"] == "session_update" and e["update"].get("sessionUpdate") == kind:
            out.append(e["update"]["content"].get("text", ""))
    return "".join(out)
