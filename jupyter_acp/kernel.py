"""Moved to ``jupyter_acp.kernels`` (one client layer for local and gateway kernels); this module
re-exports what the tools import from here."""

from .kernels import (  # noqa: F401
    ANSI_RE,
    HIDDEN_NAMES,
    PSEUDO_VARIABLES,
    IopubCallback,
    KernelBridge,
    KernelConnection,
    KernelTimeout,
    KernelUnavailable,
    clip,
    describe,
    output_from_msg,
    strip_ansi,
    summariser_source,
    summary_expression,
)
