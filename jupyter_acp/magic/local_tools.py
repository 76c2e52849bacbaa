"""The tools a kernel lends its own agent when no server is there: the server's variable tools, in-process.

The definitions (names, descriptions, input schemas, executors) are those of ``tools/kernel_tools.py``, served
by the same ``ToolSurface`` (schema validation, errors as answers); only the kernel service they ask is this
process: ``InProcessKernel`` answers with ``kernels/summarise.py``, the summariser the server sends to kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ..kernels import summarise
from ..tools.kernel_tools import kernel_tools
from ..tools.surface import ToolDef, ToolSurface

#: the tools this kernel lends in the no-server mode: the server's own definitions (names, descriptions, schemas)
VARIABLE_TOOLS = ("client_list_variables", "client_inspect_variable")


def variable_tools() -> list[ToolDef]:
    """The variable tools of ``tools/kernel_tools.py``, executors included (they run against ``InProcessKernel``)."""
    return [t for t in kernel_tools() if t.name in VARIABLE_TOOLS]


class InProcessKernel:
    """The kernel service the variable tools ask, answered in this process by the summariser the server sends
    to kernels (``kernels/summarise.py``): the same bounded summaries, without a round trip."""

    def __init__(self, namespace: Callable[[], dict[str, Any]]) -> None:
        self.namespace = namespace

    async def language_async(self, kernel_id: str | None) -> str:
        return "python"

    async def list_variables(self, kernel_id: str, *, timeout: float = 15.0) -> tuple[list[dict[str, Any]], str]:
        return summarise.list_names(self.namespace())["variables"], "in_process"

    async def inspect_variable(
        self, kernel_id: str, name: str, *, budget: int = 2000, timeout: float = 30.0
    ) -> dict[str, Any]:
        return summarise.summarise(self.namespace(), {"op": "inspect", "name": name, "budget": budget})


class LocalToolContext:
    """What the tool surface and the executors read of a ``ToolContext``: the kernel (this one) and the services."""

    def __init__(self, services: Any) -> None:
        self.services = services
        self.cache: dict[str, Any] = {}
        self.notebook = ""

    async def kernel_id(self) -> str:
        return "in-process"


def variable_surface(namespace: Callable[[], dict[str, Any]], *, timeout: float = 15.0) -> ToolSurface:
    """The variable tools over ``namespace`` (the kernel's ``user_ns``, read when a tool is called)."""
    surface = ToolSurface(variable_tools())
    surface.services = SimpleNamespace(
        kernels=InProcessKernel(namespace), config=SimpleNamespace(variable_timeout=timeout)
    )
    return surface
