"""The single-user servers' Authorizer in the hub tests: JupyterHub's granular scopes as jupyter_server's actions.

JupyterHub's own single-user Authorizer lets whoever may access a server do everything on it. JupyterHub's
read-only example instead reads custom scopes named ``custom:jupyter_server:ACTION:RESOURCE`` (``*`` for every
resource), each filtered to a user's servers or one server: a share of ``custom:jupyter_server:read:*`` lets the
other user read, not act. This is that mapping, for the action and resource jupyter_server asks about (here
``read`` / ``write`` / ``execute`` on ``jupyter_acp``, the extension's resource).
"""

from __future__ import annotations

import os

from jupyterhub.singleuser.extension import JupyterHubAuthorizer


class ScopesAuthorizer(JupyterHubAuthorizer):
    def is_authorized(self, handler, user, action, resource):  # type: ignore[override]
        owner = os.environ["JUPYTERHUB_USER"]
        server = os.environ.get("JUPYTERHUB_SERVER_NAME", "")
        wanted = {
            f"custom:jupyter_server:{action}:{what}{where}"
            for what in (resource, "*")
            for where in (f"!user={owner}", f"!server={owner}/{server}")
        }
        return bool(self.hub_auth.check_scopes(wanted, user.hub_user))
