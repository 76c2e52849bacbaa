"""The bridge to open JupyterLab tabs (selection; edits when RTC is off); its socket route is in ``http/``."""

from .bridge import FrontendBridge, NoTab, TabClient, TabError

__all__ = ["FrontendBridge", "NoTab", "TabClient", "TabError"]
