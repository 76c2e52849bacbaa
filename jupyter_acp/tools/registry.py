"""Which tools the client lends: the app calls ``build_tool_surface`` once at start-up."""

from __future__ import annotations

from typing import Any

from .kernel_tools import kernel_tools
from .notebook_files import notebook_file_tools
from .notebook_tools import notebook_tools
from .services import JupyterACPTools, ToolServices
from .surface import ToolSurface


def all_tools() -> list[Any]:
    return [*notebook_tools(), *kernel_tools(), *notebook_file_tools()]


def build_tool_surface(serverapp: Any, config: JupyterACPTools) -> ToolSurface:
    surface = ToolSurface(all_tools())
    surface.services = ToolServices(serverapp, config)
    return surface
