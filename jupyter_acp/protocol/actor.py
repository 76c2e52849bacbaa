"""Who did it: the ``actor`` an event carries when someone (or something) acted on a session.

Two people with write access to one server (a JupyterHub share, jupyter-collaboration) share a notebook's session;
without this a prompt of bob's shows in alice's panel as her own and nobody knows who answered a card.  So every
prompt, answer, agent switch, settings change, review and revert says who, as a small dict (plain, like the events
themselves: no model on the server's path; ``wire.Actor`` is what it is checked against):

- a person: ``{"kind": "user", "username", "display_name", "color"}`` from the Jupyter identity (``color`` null when
  the identity has none).  Only what the identity provider already shows every collaborator: no token, no avatar URL;
- something else says what: ``magic`` (the ``%%acp`` magic in a kernel, which has no person behind its token),
  ``server`` (the server itself, e.g. a question that timed out), ``agent`` (the agent withdrew its own question).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

#: how long a name or colour may be on the wire: an identity provider's values are the admin's, but bounded anyway
MAX_CHARS = 200

ActorKind = Literal["user", "magic", "server", "agent"]


class Actor(TypedDict, total=False):
    """Who acted: ``kind`` always; a person's ``username``, ``display_name`` and ``color`` (maybe null)."""

    kind: ActorKind
    username: str
    display_name: str
    color: str | None


MAGIC: Actor = {"kind": "magic"}
SERVER: Actor = {"kind": "server"}
AGENT: Actor = {"kind": "agent"}


def _text(value: Any) -> str:
    return value[:MAX_CHARS] if isinstance(value, str) else ""


def person(user: Any) -> Actor:
    """A Jupyter identity (``jupyter_server.auth.User``, or anything with its attributes) as an actor.

    The display name falls back to ``name`` then the username (an identity provider may leave it empty), the colour to
    null (JupyterLab then picks one)."""
    username = _text(getattr(user, "username", None)) or _text(getattr(user, "name", None)) or "?"
    display = _text(getattr(user, "display_name", None)) or _text(getattr(user, "name", None)) or username
    return {
        "kind": "user",
        "username": username,
        "display_name": display,
        "color": _text(getattr(user, "color", None)) or None,
    }
