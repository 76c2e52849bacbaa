"""Users for the Authorizer tests: the usual token check, then the user a test header names (default ``owner``).

``reader`` may only ``read`` this extension's resource, ``writer`` may ``read`` and ``write`` (not ``execute``);
everyone else may do everything, except what a test took away from them while the server runs (:func:`revoke`:
the Authorizer is asked each time, so a share revoked mid-socket is seen at the next check). One definition for
every test of what a user cannot do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jupyter_server.auth.authorizer import Authorizer
from jupyter_server.auth.identity import IdentityProvider, User

USER_HEADER = "X-Test-User"

#: actions on ``jupyter_acp`` taken away from a user for now (user name -> actions); see :func:`revoke`
REVOKED: dict[str, set[str]] = {}


@contextmanager
def revoke(user: str, *actions: str) -> Iterator[None]:
    """Take ``actions`` on ``jupyter_acp`` away from ``user`` until the block ends (a share revoked, then given back)."""
    REVOKED.setdefault(user, set()).update(actions)
    try:
        yield
    finally:
        REVOKED.pop(user, None)


class HeaderUsers(IdentityProvider):
    """The usual token check, then the user named by a test header (default ``owner``)."""

    async def get_user(self, handler):  # type: ignore[override]
        user = await self._get_user(handler)
        if user is None:
            return None
        return User(username=handler.request.headers.get(USER_HEADER, "owner"))


class ReaderOnlyReads(Authorizer):
    """Everyone may do everything on this extension, except ``reader`` (only ``read``), ``writer`` (no
    ``execute``) and what :func:`revoke` took away."""

    def is_authorized(self, handler, user, action, resource):
        if resource == "jupyter_acp" and action in REVOKED.get(user.username, ()):
            return False
        if user.username == "reader" and resource == "jupyter_acp":
            return action == "read"
        if user.username == "writer" and resource == "jupyter_acp":
            return action in ("read", "write")
        return True


#: the people of the shared-session tests: username -> (display name, colour); anyone else gets no colour
PEOPLE: dict[str, tuple[str, str | None]] = {
    "alice": ("Alice Liddell", "var(--jp-collaborator-color1)"),
    "bob": ("Bob Dylan", "var(--jp-collaborator-color3)"),
}
#: the cookie a browser context sets to be one of them (a header cannot reach every WebSocket a page opens)
USER_COOKIE = "acp-test-user"


class NamedUsers(IdentityProvider):
    """Two people sharing one server (a JupyterHub share, jupyter-collaboration): the usual token check, then the
    person a test names (``X-Test-User`` header, else the ``acp-test-user`` cookie, else ``alice``), with the display
    name and colour an identity provider gives (:data:`PEOPLE`)."""

    async def get_user(self, handler):  # type: ignore[override]
        user = await self._get_user(handler)
        if user is None:
            return None
        name = handler.request.headers.get(USER_HEADER) or handler.get_cookie(USER_COOKIE) or "alice"
        display, color = PEOPLE.get(name, (name, None))
        return User(username=name, name=display, display_name=display, initials=display[:1], color=color)
