"""JSON on the hot path: orjson when it can, the standard library when it cannot.

Every streamed chunk is decoded once from the agent's pipe and encoded once for the store and the
WebSocket; orjson makes both several times cheaper.  Values orjson refuses (integers beyond 64
bits, for instance) fall back to ``json`` so no frame is lost to a faster parser.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency, but stay correct without it
    orjson = None  # type: ignore[assignment]


def loads(data: bytes | str) -> Any:
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def dumps(value: Any) -> str:
    """Compact JSON text (UTF-8, no ASCII escaping)."""
    if orjson is not None:
        try:
            return orjson.dumps(value).decode()
        except TypeError:
            pass
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dumps_line(value: Any) -> bytes:
    """One ndjson frame: compact JSON and a newline (JSON never holds a raw newline)."""
    if orjson is not None:
        try:
            return orjson.dumps(value) + b"\n"
        except TypeError:
            pass
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
