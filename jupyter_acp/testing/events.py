"""Reading the extension's event stream in tests and benchmarks (the reader lives in ``protocol.transcript``)."""

from __future__ import annotations

from ..protocol.transcript import message_text

__all__ = ["message_text"]
