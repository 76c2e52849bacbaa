"""The agents a user enabled or switched off, kept apart from the admin's presets, and merged with them at start.

``c.JupyterACP.agents`` is configuration, and traitlets gives a ``Dict`` setting to the one config file that wins,
whole: in a JupyterHub image the admin presets agents in the single-user image's config (``/etc/jupyter``, or the
environment's ``etc/jupyter`` that wins over the user's own folder in a virtualenv), so an agent the panel's
"Enable …" wrote into the user's config folder, and a user's own ``{"builtin": null}``, were replaced by the admin's
whole list at the next start. So what the user chose lives in a file of its own, ``user_agents.json`` in the
extension's private folder (``<data dir>/jupyter_acp/``, 0700; the file 0600, written whole through a temporary file),
and :func:`merge` lays it over the presets:

* an entry adds an agent; ``null`` switches one off (a default or a preset);
* a name the admin's configuration sets keeps the admin's entry (a user adds or switches off, never replaces);
* a name ``JupyterACP.allowed_user_agents`` does not list is left out, and the log says so.

Older versions wrote the entries to ``<jupyter config dir>/jupyter_server_config.d/jupyter_acp_agents.json``; it is
read once (:meth:`UserAgents.migrate`), its entries moved here, and renamed ``*.migrated`` so that it is not loaded as
configuration again (the log says both).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .spec import AgentSpec

#: the file's name in the extension's private folder
FILE = "user_agents.json"
#: where versions before this one wrote enabled agents (under the user's Jupyter config folder)
LEGACY_FILE = os.path.join("jupyter_server_config.d", "jupyter_acp_agents.json")


class UserAgentsError(ValueError):
    """The user's file cannot be read or written: the message says which file and what to do (never its content)."""


class UserAgents:
    """``{name: entry or None}`` in one private file."""

    def __init__(self, folder: str, log: logging.Logger | None = None) -> None:
        self.folder = folder
        self.path = os.path.join(folder, FILE)
        self.log = log or logging.getLogger(__name__)

    def load(self) -> dict[str, dict[str, Any] | None]:
        """The user's entries; an unreadable file counts as none (the log says why: the presets still work)."""
        try:
            return self._read()
        except UserAgentsError as exc:
            self.log.error("jupyter_acp: %s; the agents you enabled are not loaded", exc)
            return {}

    def _read(self) -> dict[str, dict[str, Any] | None]:
        try:
            mode = stat.S_IMODE(os.stat(self.path).st_mode)
            if mode & 0o077:
                os.chmod(self.path, 0o600)
                self.log.warning("jupyter_acp: %s was readable by other users; it is private now (0600)", self.path)
            with open(self.path, encoding="utf-8") as fh:
                raw = json.load(fh)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise UserAgentsError(f"{self.path} could not be read ({type(exc).__name__}: fix or remove it)") from None
        agents = raw.get("agents") if isinstance(raw, dict) else None
        if not isinstance(agents, dict):
            raise UserAgentsError(f"{self.path} has no 'agents' object (fix or remove it)")
        return {
            str(k): (v if isinstance(v, dict) else None) for k, v in agents.items() if v is None or isinstance(v, dict)
        }

    def set(self, name: str, entry: dict[str, Any] | None) -> None:
        """Add (an entry) or switch off (None) one agent, keeping the others; the file is written whole."""
        data = self._read()
        data[name] = entry
        self._write(data)

    def _write(self, agents: Mapping[str, dict[str, Any] | None]) -> None:
        if not os.path.isdir(self.folder):
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            os.chmod(self.folder, 0o700)
        fd, tmp = tempfile.mkstemp(prefix=".user_agents.", dir=self.folder)  # mkstemp: 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"agents": dict(agents)}, fh, indent=2)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def migrate(self, config_dir: str) -> list[str]:
        """Move the entries an older version wrote into the user's config folder here, once; the names moved.

        The old file is renamed ``*.migrated`` (kept for the user to look at, no longer loaded as configuration).
        A name this file already has keeps this file's entry."""
        legacy = os.path.join(config_dir, LEGACY_FILE)
        try:
            with open(legacy, encoding="utf-8") as fh:
                raw = json.load(fh)
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            self.log.error(
                "jupyter_acp: %s (written by an earlier version) could not be read (%s); fix or remove it",
                legacy,
                type(exc).__name__,
            )
            return []
        entries = (raw.get("JupyterACP") or {}).get("agents") if isinstance(raw, dict) else None
        entries = entries if isinstance(entries, dict) else {}
        data = self._read()
        moved = [n for n in entries if n not in data and (entries[n] is None or isinstance(entries[n], dict))]
        for name in moved:
            data[name] = entries[name]
        self._write(data)
        os.replace(legacy, legacy + ".migrated")
        self.log.warning(
            "jupyter_acp: agents enabled by an earlier version (%s) moved from %s to %s, where an admin's "
            "c.JupyterACP.agents no longer hides them; the old file is kept as %s.migrated. If it hid agents the "
            "admin preset, they are back at the next start",
            ", ".join(moved) or "none",
            legacy,
            self.path,
            legacy,
        )
        return moved


def merge(
    specs: dict[str, AgentSpec],
    configured: Mapping[str, Any],
    user: Mapping[str, dict[str, Any] | None],
    allowed: list[str] | None,
    log: logging.Logger,
) -> tuple[dict[str, AgentSpec], dict[str, str]]:
    """The agents to run, and where each came from (``default``, ``configuration``, ``user``).

    ``specs``: the defaults; ``configured``: ``c.JupyterACP.agents`` (the admin's presets, or whatever config won);
    ``user``: the user's file; ``allowed``: ``JupyterACP.allowed_user_agents`` (None: any name)."""
    from .spec import AgentSpec

    origin = dict.fromkeys(specs, "default")
    for name, entry in configured.items():
        if entry is None:
            specs.pop(name, None)
            origin.pop(name, None)
            continue
        try:
            specs[name] = AgentSpec.model_validate(entry)
            origin[name] = "configuration"
        except Exception as exc:
            log.error("JupyterACP.agents[%r] is invalid and skipped: %s", name, exc)
    for name, entry in user.items():
        if allowed is not None and name not in allowed:
            log.warning(
                "jupyter_acp: the agent %r you %s is left out (rule: c.JupyterACP.allowed_user_agents = %r, set by "
                "the server's admin, does not list it)",
                name,
                "switched off" if entry is None else "enabled",
                allowed,
            )
            continue
        if entry is None:
            if name in specs:
                specs.pop(name)
                origin.pop(name, None)
                log.info("jupyter_acp: agent %r switched off by you (user_agents.json)", name)
            continue
        if origin.get(name) == "configuration":
            log.info("jupyter_acp: agent %r is set by the configuration, which wins over the one you enabled", name)
            continue
        try:
            specs[name] = AgentSpec.model_validate(entry)
            origin[name] = "user"
        except Exception as exc:
            log.error("jupyter_acp: the agent %r you enabled is invalid and skipped: %s", name, exc)
    return specs, origin
