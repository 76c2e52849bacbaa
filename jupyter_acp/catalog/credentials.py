"""Per-agent settings set from the panel: environment values (a model, a provider key) kept server-side.

One JSON file, ``agent_settings.json``, in the extension's private folder (the transcript store's: 0700), the file
itself 0600 and written whole (a temporary file renamed over it).  A value goes only into the environment of the
agent it was set for, and only where neither the server's environment nor the agent's configured ``env`` sets the
same variable: the environment still wins.  Values are never logged, never in events or transcripts, and never
answered back: ``describe`` says ``set`` / ``from environment`` / ``from configuration`` only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

#: a variable name an agent's settings may hold
VAR_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
#: the built-in agent's own variables a user may set (model, models offered, API base)
BUILTIN_VARS = ("JUPYTER_ACP_MODEL", "JUPYTER_ACP_API_BASE")
#: longest value kept (a key, a model string, a URL)
MAX_VALUE = 4096


class SettingsError(ValueError):
    """A refused setting: the message names the rule and how to change it."""


class AgentSettingsStore:
    """``{agent: {VAR: value}}`` in one private file."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.path = os.path.join(folder, "agent_settings.json")
        self._data: dict[str, dict[str, str]] | None = None

    # -- file ------------------------------------------------------------------------------------
    def _load(self) -> dict[str, dict[str, str]]:
        if self._data is not None:
            return self._data
        data: dict[str, dict[str, str]] = {}
        try:
            st = os.stat(self.path)
            if stat.S_IMODE(st.st_mode) & 0o077:
                os.chmod(self.path, 0o600)
                log.warning("jupyter_acp: %s was readable by other users; it is private now (0600)", self.path)
            with open(self.path, encoding="utf-8") as fh:
                raw = json.load(fh)
            if isinstance(raw, dict):
                for agent, values in raw.items():
                    if isinstance(values, dict):
                        data[str(agent)] = {str(k): str(v) for k, v in values.items() if VAR_NAME.match(str(k))}
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:  # never the content: it may hold keys
            log.error("jupyter_acp: agent settings in %s could not be read (%s); none applied", self.path, type(exc))
        self._data = data
        return data

    def _save(self, data: dict[str, dict[str, str]]) -> None:
        if not os.path.isdir(self.folder):
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            os.chmod(self.folder, 0o700)
        fd, tmp = tempfile.mkstemp(prefix=".agent_settings.", dir=self.folder)  # mkstemp: 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._data = data

    # -- values ----------------------------------------------------------------------------------
    def values(self, agent: str) -> dict[str, str]:
        return dict(self._load().get(agent, {}))

    def update(self, agent: str, changes: Mapping[str, str | None]) -> list[str]:
        """Set (a string) or remove (None or "") variables of one agent; the names changed."""
        data = {a: dict(v) for a, v in self._load().items()}
        mine = data.setdefault(agent, {})
        changed: list[str] = []
        for name, value in changes.items():
            if not VAR_NAME.match(name):
                raise SettingsError(f"{name!r} is not a variable name (A-Z, 0-9 and _, starting with a letter)")
            if value:
                if len(value) > MAX_VALUE or "\x00" in value or "\n" in value:
                    raise SettingsError(f"the value of {name} is longer than {MAX_VALUE} characters or has a newline")
                if mine.get(name) != value:
                    mine[name] = value
                    changed.append(name)
            elif name in mine:
                del mine[name]
                changed.append(name)
        if not mine:
            data.pop(agent, None)
        if changed:
            self._save(data)
        return changed

    def env_for(self, agent: str, environ: Mapping[str, str], configured: Mapping[str, str]) -> dict[str, str]:
        """What this agent's stored values add to its environment: only variables set nowhere else."""
        return {k: v for k, v in self.values(agent).items() if k not in environ and k not in configured}

    def describe(
        self, agent: str, names: list[str], environ: Mapping[str, str], configured: Mapping[str, str]
    ) -> dict[str, str]:
        """Where each variable comes from, never its value: set | from environment | from configuration | unset."""
        stored = self.values(agent)
        out: dict[str, str] = {}
        for name in sorted({*names, *stored}):
            if name in environ:
                out[name] = "from environment"
            elif name in configured:
                out[name] = "from configuration"
            elif name in stored:
                out[name] = "set"
            else:
                out[name] = "unset"
        return out

    def file_mode(self) -> int | None:
        try:
            return stat.S_IMODE(os.stat(self.path).st_mode)
        except FileNotFoundError:
            return None


def public_value(name: str, value: str | None) -> Any:
    """What GET may show of a variable: the model and the API base (not secrets) as they are; never a key."""
    return value if name in BUILTIN_VARS else None
