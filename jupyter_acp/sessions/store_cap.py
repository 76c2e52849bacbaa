"""Capping one event: the store's and the wire's bound on a single event's JSON.

Apart from the store because it is pure (no SQLite): the stream handler caps what it sends with the same
function the store caps what it keeps, and both read the sizes the same way (``text_bytes``, ``human``).
"""

from __future__ import annotations

from typing import Any

from ..protocol import codec

MiB = 1024 * 1024


def human(n: int) -> str:
    """A byte count as people read it: 900 B, 250 KiB, 3.8 MiB."""
    if n < 1024:
        return f"{n} B"
    if n < MiB:
        return f"{n / 1024:.0f} KiB"
    return f"{n / MiB:.1f} MiB"


def text_bytes(text: str) -> int:
    """UTF-8 size of a string; free for ASCII (``isascii`` is a flag lookup)."""
    return len(text) if text.isascii() else len(text.encode())


# -- capping one event ---------------------------------------------------------------------------
def _string_leaves(value: Any, out: list[tuple[Any, Any, str]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str):
                out.append((value, k, v))
            elif isinstance(v, (dict, list)):
                _string_leaves(v, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, str):
                out.append((value, i, v))
            elif isinstance(v, (dict, list)):
                _string_leaves(v, out)


def _copy(value: Any) -> Any:
    """A copy of the containers; strings are shared (immutable)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def cap_event(event: dict[str, Any], text: str, max_bytes: int) -> tuple[dict[str, Any], str]:
    """The event (and its JSON) within ``max_bytes``: long strings cut, each cut marked.

    Marked ``… [cut: 3.5 MiB not kept]`` at the place of the cut, so a reader (and the agent, when the
    history seeds a new session) knows text is missing.  An event that is big for another reason (a
    huge list of small strings) keeps its scalar fields and says it was cut.
    """
    size = text_bytes(text)
    if max_bytes <= 0 or size <= max_bytes:
        return event, text
    ev = _copy(event)
    for _ in range(4):
        excess = size - max_bytes + 256  # room for the markers
        leaves: list[tuple[Any, Any, str]] = []
        _string_leaves(ev, leaves)
        leaves.sort(key=lambda leaf: -len(leaf[2]))
        for container, key, value in leaves:
            if excess <= 0 or len(value) <= 1024:
                break
            keep = max(512, len(value) - excess)
            if keep >= len(value):
                continue
            removed = value[keep:]
            gone = text_bytes(removed)
            container[key] = value[:keep] + f"… [cut: {human(gone)} not kept]"
            excess -= gone - 40
        text = codec.dumps(ev)
        size = text_bytes(text)
        if size <= max_bytes:
            return ev, text
    stub: dict[str, Any] = {k: v for k, v in event.items() if not isinstance(v, (dict, list))}
    update = event.get("update")
    if isinstance(update, dict):
        stub["update"] = {
            k: v
            for k, v in update.items()
            if isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) <= 256)
        }
    stub = {k: (v[:256] + "…" if isinstance(v, str) and len(v) > 256 else v) for k, v in stub.items()}
    stub["cut"] = f"[cut: an event of {human(text_bytes(codec.dumps(event)))} not kept] (JupyterACP.max_event_bytes)"
    return stub, codec.dumps(stub)
