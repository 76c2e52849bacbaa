"""The magic's two failures: both are shown as one line (a ``UsageError``), never a traceback."""

from __future__ import annotations


class AcpError(Exception):
    """A failure the user can act on: shown as one line (a ``UsageError``), without a traceback.

    ``status``: the HTTP status when the server answered with an error (404: already answered elsewhere).
    """

    status: int | None = None


class ServerGone(AcpError):
    """The Jupyter server cannot be reached (the magic falls back to the local agent when nothing started yet)."""
