"""A socket keeps only the rights its user still has (a share revoked while a socket is open takes effect on it).

The session's stream socket and the frontend bridge are asked for at connect like any route; they then live for
hours.  A share revoked meanwhile (JupyterHub access taken back, an Authorizer's rule changed) must not go on
delivering the next turn, nor let a tab answer for the agent.  So the Authorizer is asked again:

* at every operation a client sends (the stream socket's ops need ``write``; each message of a tab needs
  ``write``), before it is taken;
* every ``JupyterACP.socket_recheck_interval`` seconds (60 by default) for what the socket sends out (``read`` for
  the stream, ``write`` for the bridge).

A socket whose user lost it is closed with code 1008 (policy violation) and a reason naming the rule; nothing is
sent on it after the check.  The Authorizer is asked about the user identified when the socket opened: it sees a
withdrawn right when it looks rights up as it is asked (an Authorizer that answers from a snapshot taken at login
sees it only at the next connection, which then fails).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from .base import allowed, username

log = logging.getLogger(__name__)

#: WebSocket close code: policy violation (RFC 6455)
POLICY_VIOLATION = 1008
#: a close reason is at most 123 bytes (RFC 6455)
MAX_REASON_BYTES = 123
#: the interval when the setting is missing (a bare handler in a test)
DEFAULT_INTERVAL = 60.0


def close_reason(action: str) -> str:
    """The close frame's reason: which right went, and the rule (short: 123 bytes at most)."""
    text = f"jupyter_acp: the Authorizer no longer gives '{action}' (rule: a socket keeps only current rights); ask the owner"
    return text.encode()[:MAX_REASON_BYTES].decode(errors="ignore")


class RecheckedRights:
    """Mixin of a WebSocketHandler (with ``extensionapp``, ``authorizer``, ``current_user``): the periodic check
    and the check of one message.  ``rights_lost`` is the socket's own clean-up before it is closed."""

    _recheck: asyncio.Task[None] | None = None
    _rights_gone = False

    def start_rechecks(self, action: str) -> None:
        """Ask for ``action`` every ``socket_recheck_interval`` seconds while the socket is open."""
        interval = getattr(getattr(self, "extensionapp", None), "socket_recheck_interval", DEFAULT_INTERVAL)
        self._recheck = asyncio.ensure_future(self._recheck_loop(action, float(interval)))

    def stop_rechecks(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None

    async def _recheck_loop(self, action: str, interval: float) -> None:
        while not self._rights_gone:
            await asyncio.sleep(interval)
            if getattr(self, "ws_connection", None) is None:  # closed meanwhile
                return
            await self.still_allowed(action)

    async def still_allowed(self, action: str) -> bool:
        """Whether the user still has ``action``; if not, the socket is cleaned up and closed, naming the rule. An
        Authorizer that fails counts as a refusal (the client reconnects, and is asked anew)."""
        if self._rights_gone:
            return False
        try:
            ok = await allowed(self, action)
        except Exception:
            log.exception("jupyter_acp: the Authorizer failed while re-checking a socket")
            ok = False
        if ok:
            return True
        self._rights_gone = True
        log.info("jupyter_acp: closing a socket of user %r: it no longer has %r on jupyter_acp", username(self), action)
        with contextlib.suppress(Exception):
            self.rights_lost()
        ws: Any = self
        ws.close(POLICY_VIOLATION, close_reason(action))
        return False

    def rights_lost(self) -> None:
        """What the socket stops before it closes (its subscription, its tab); nothing by default."""
