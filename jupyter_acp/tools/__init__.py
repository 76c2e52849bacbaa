"""The tool surface the client lends to agents: defined once, served by every channel."""

from .surface import ToolContext, ToolDef, ToolSurface, error_result, text_result

__all__ = ["ToolContext", "ToolDef", "ToolSurface", "error_result", "text_result"]
