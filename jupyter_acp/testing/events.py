"""Reading the extension's event stream in tests and benchmarks."""

from __future__ import annotations

from typing import Any


def message_text(events: list[dict[str, Any]], turn_id: str | None = None, kind: str = "agent_message_chunk") -> str:
    """The agent's streamed text in a list of events (optionally one turn's)."""
    out, inside = [], turn_id is None
    for e in events:
        if e["type"] == "turn_started":
            inside = turn_id is None or e["turn_id"] == turn_id
        if inside and e["type"] == "session_update" and e["update"].get("sessionUpdate") == kind:
            out.append(e["update"]["content"].get("text", ""))
    return "".join(out)
