"""What every part of the kernel layer shares: its errors, and small text and message helpers."""

from __future__ import annotations

import re
from typing import Any

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class KernelUnavailable(Exception):
    """No kernel, a dead or restarted kernel, or a kernel the server cannot reach (the text says which)."""


class KernelTimeout(Exception):
    """The kernel did not answer in time (it is busy, stuck, or its host is unreachable)."""


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text)


def clip(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    return text[:budget] + f"… [{len(text) - budget} more characters]"


def output_from_msg(msg: dict[str, Any]) -> dict[str, Any]:
    """An nbformat output from an iopub message (ZMQ or gateway WebSocket alike).

    nbformat is imported here, at the first output: it imports jsonschema, whose format checkers build a grammar at
    import (2.7-2.8 s of CPU in a process without it, three runs on the 2-core test machine). The server has it from
    its start (jupyter_events); a kernel whose ``%acp`` runs the agent itself (``magic.local``) does not.
    """
    import nbformat

    return dict(nbformat.v4.output_from_msg(msg))


def describe(exc: BaseException) -> str:
    """``Type: reason`` for any exception, never empty."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
