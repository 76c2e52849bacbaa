"""jupyter-acp-host: drive ACP coding agents from Jupyter, one agent session per notebook."""

from __future__ import annotations

from typing import Any

from ._version import __version__

__all__ = ["__version__"]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .app import JupyterACP

    return [{"module": "jupyter_acp", "app": JupyterACP}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-acp-host"}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_acp``: register ``%acp`` and ``%%acp`` (imported only then)."""
    from .magic import load_ipython_extension as load

    load(ipython)
