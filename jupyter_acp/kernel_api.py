"""The kernel's way in (``%acp``): server URL and a per-server secret handed to kernels.

Stub: filled by the magic work. ``start``/``stop`` run with the server; ``handlers`` adds routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .app import JupyterACP


def start(app: JupyterACP) -> None:
    """Called once the server's URL is final."""


def stop(app: JupyterACP) -> None:
    """Called at server stop."""


def handlers() -> list[tuple[str, Any]]:
    return []
