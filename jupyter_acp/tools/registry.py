"""Which tools the client lends, and the HTTP routes that belong to the tool surface.

The app calls ``build_tool_surface`` once at start-up and adds ``tool_handlers()`` to its routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .kernel_tools import kernel_tools
from .notebook_tools import notebook_tools
from .services import JupyterACPTools, ToolServices
from .surface import ToolSurface

if TYPE_CHECKING:  # pragma: no cover
    from ..app import JupyterACP


def all_tools() -> list[Any]:
    return [*notebook_tools(), *kernel_tools()]


def build_tool_surface(app: JupyterACP) -> ToolSurface:
    surface = ToolSurface(all_tools())
    config = JupyterACPTools(parent=app)
    surface.services = ToolServices(app.serverapp, config)
    return surface


def tool_handlers() -> list[tuple[str, Any]]:
    from ..frontend import FrontendWebSocket
    from .handlers import RevertHandler

    sid = r"(?P<session_id>[0-9a-f]{32})"
    return [
        (rf"/jupyter-acp/sessions/{sid}/revert", RevertHandler),
        (r"/jupyter-acp/frontend/ws", FrontendWebSocket),
    ]
