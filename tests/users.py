"""Users for the Authorizer tests: the usual token check, then the user a test header names (default ``owner``).

``reader`` may only ``read`` this extension's resource, ``writer`` may ``read`` and ``write`` (not ``execute``);
everyone else may do everything. One definition for every test of what a read-only user cannot do.
"""

from __future__ import annotations

from jupyter_server.auth.authorizer import Authorizer
from jupyter_server.auth.identity import IdentityProvider, User

USER_HEADER = "X-Test-User"


class HeaderUsers(IdentityProvider):
    """The usual token check, then the user named by a test header (default ``owner``)."""

    async def get_user(self, handler):  # type: ignore[override]
        user = await self._get_user(handler)
        if user is None:
            return None
        return User(username=handler.request.headers.get(USER_HEADER, "owner"))


class ReaderOnlyReads(Authorizer):
    """Everyone may do everything on this extension, except ``reader`` (only ``read``) and ``writer`` (no
    ``execute``)."""

    def is_authorized(self, handler, user, action, resource):
        if user.username == "reader" and resource == "jupyter_acp":
            return action == "read"
        if user.username == "writer" and resource == "jupyter_acp":
            return action in ("read", "write")
        return True
