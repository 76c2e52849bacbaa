"""What the notebook tools share: when they are offered (the notebook is writable, a kernel is
attached), the origin their edits are tagged with, and the schema pieces more than one of them uses.

It exists so that the reading, editing and running tools (``cell_reading``, ``cell_editing``,
``cell_running``) and the kernel tools can each live in a module of their own without importing one
another for these few helpers.
"""

from __future__ import annotations

from typing import Any, cast

from ..notebook import origin_for
from .services import ToolServices
from .surface import ToolContext

CELL_TYPES = ["code", "markdown", "raw"]
#: a list of cell ids in a tool's input schema
ID_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 200}


def _svc(ctx: ToolContext) -> ToolServices:
    """The context's services, by their type (the surface holds them untyped: services.py builds on surface.py)."""
    return cast(ToolServices, ctx.services)


def _origin(ctx: ToolContext) -> str:
    return origin_for(ctx.session.id, ctx.turn_id)


# -- availability ----------------------------------------------------------------------------------
async def has_kernel(ctx: ToolContext) -> bool:
    return await ctx.kernel_id() is not None


async def writable(ctx: ToolContext) -> bool:
    if "writable" not in ctx.cache:
        ctx.cache["writable"] = await _svc(ctx).notebooks.writable(ctx.notebook)
    answer: bool = ctx.cache["writable"]
    return answer


async def writable_with_kernel(ctx: ToolContext) -> bool:
    return await writable(ctx) and await has_kernel(ctx)
