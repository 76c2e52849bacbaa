"""Helpers shared by the tool tests (import them; never import conftest)."""

from __future__ import annotations

import asyncio
import time
from typing import Any


def text(result: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in result["content"] if b.get("type") == "text")


async def wait_until(predicate, timeout: float = 20.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)
