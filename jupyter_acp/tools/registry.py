"""Which tools the client lends, and the HTTP routes that belong to the tool surface.

The app calls ``build_tool_surface`` once at start-up and adds ``tool_handlers()`` to its routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .surface import ToolSurface

if TYPE_CHECKING:  # pragma: no cover
    from ..app import JupyterACP


def build_tool_surface(app: JupyterACP) -> ToolSurface:
    return ToolSurface()


def tool_handlers() -> list[tuple[str, Any]]:
    return []
