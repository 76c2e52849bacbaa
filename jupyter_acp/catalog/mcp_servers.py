"""The user's own MCP servers, handed to every agent beside the notebook's own server.

Two sources, one shape (Jupyter AI's ``mcp_settings.json``, which is ACP's own ``McpServer`` shape, so an entry
reaches the agent as written once checked): ``c.JupyterACP.mcp_servers`` (a list of entries: the admin's, or the
user's Jupyter config) and ``<data dir>/jupyter_acp/mcp_settings.json`` (``{"mcp_servers": [...]}``, the user's,
read again when it changes; kept 0600 because headers and env carry tokens: a looser file is made private with a
warning).  An entry::

    {"name": "files", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
     "env": [{"name": "TOKEN", "value": "..."}]}                        # stdio (``"type": "stdio"`` optional)
    {"type": "http", "name": "corp", "url": "https://mcp.example.com/mcp",
     "headers": [{"name": "Authorization", "value": "Bearer ..."}]}      # Streamable HTTP

Per agent (``for_agent``): HTTP servers only to agents that advertise ``mcpCapabilities.http`` (SSE ones only with
``mcpCapabilities.sse``), as ACP says a client must; a stdio server's command is resolved on the agent's own ``PATH``
(the built-in agent takes absolute paths only) and its environment is the basics of the agent's curated environment
(``PATH``, ``HOME``, locale, ``TMPDIR``, certificates: what a program needs to start) plus the entry's own ``env``:
never the provider keys the agent itself holds, nor the server's token (it never reaches the agent anyway).

A bad entry is skipped with a log line naming the rule (never a value); the name ``jupyter`` is the notebook's own
server and stays reserved; a name given twice keeps its first entry (the configuration's before the file's).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from ..acp.process import BASE_ENV

log = logging.getLogger(__name__)

#: the per-user file, in the extension's private folder (beside the transcripts and agent settings)
FILE_NAME = "mcp_settings.json"
#: names an entry may not take: the notebook's own MCP server
RESERVED = frozenset({"jupyter"})
#: most entries kept, and the longest value of any field (they travel in every session/new)
MAX_SERVERS = 32
MAX_VALUE = 8192


class EntryRefused(ValueError):
    """A skipped entry: the message names the rule (never a value)."""


def _pairs(raw: Any, what: str) -> list[dict[str, str]]:
    """``[{name, value}]`` (ACP's shape) from that list or from an object ``{NAME: value}``."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        items: list[tuple[Any, Any]] = list(raw.items())
    elif isinstance(raw, list) and all(isinstance(p, dict) for p in raw):
        items = [(p.get("name"), p.get("value")) for p in raw]
    else:
        raise EntryRefused(f"{what} is a list of {{name, value}} (or an object of names to values)")
    out = []
    for name, value in items:
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise EntryRefused(f"each of {what} has a non-empty string name and a string value")
        if len(value) > MAX_VALUE or "\x00" in name + value:
            raise EntryRefused(f"a value of {what} is longer than {MAX_VALUE} characters or holds a NUL")
        out.append({"name": name, "value": value})
    return out


def check_entry(raw: Any) -> dict[str, Any]:
    """One entry in ACP's shape, or ``EntryRefused``."""
    if not isinstance(raw, dict):
        raise EntryRefused("an entry is an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise EntryRefused("an entry needs a name (a string of at most 200 characters)")
    if name in RESERVED:
        raise EntryRefused(f"the name {name!r} is the notebook's own MCP server's: choose another")
    kind = raw.get("type") or ("http" if "url" in raw else "stdio")
    if kind == "stdio":
        command, args = raw.get("command"), raw.get("args") or []
        if not isinstance(command, str) or not command or len(command) > MAX_VALUE:
            raise EntryRefused(f"stdio server {name!r} needs a command")
        if not isinstance(args, list) or not all(isinstance(a, str) and len(a) <= MAX_VALUE for a in args):
            raise EntryRefused(f"the args of {name!r} are a list of strings")
        return {"name": name, "command": command, "args": list(args), "env": _pairs(raw.get("env"), f"{name}'s env")}
    if kind in ("http", "sse"):
        url = raw.get("url")
        if not isinstance(url, str) or urlparse(url).scheme not in ("http", "https") or len(url) > MAX_VALUE:
            raise EntryRefused(f"{kind} server {name!r} needs an http:// or https:// url")
        return {"type": kind, "name": name, "url": url, "headers": _pairs(raw.get("headers"), f"{name}'s headers")}
    raise EntryRefused(f"server {name!r} is of type {str(kind)[:40]!r}: stdio, http and sse are the types ACP knows")


def check_entries(raw: Any, source: str) -> list[dict[str, Any]]:
    """The valid entries of a list (or of ``{"mcp_servers": [...]}``), the others skipped with a log line."""
    if isinstance(raw, dict) and "mcp_servers" in raw:
        raw = raw["mcp_servers"]
    if raw is None:
        return []
    if not isinstance(raw, list):
        log.warning(
            'jupyter_acp: the MCP servers of %s are not a list (rule: {"mcp_servers": [...]}); none used', source
        )
        return []
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(check_entry(item))
        except EntryRefused as exc:
            log.warning("jupyter_acp: MCP server %d of %s skipped: %s", i, source, exc)
    return out


class UserMcpServers:
    """The configured list and the per-user file, merged; what each agent gets of them."""

    def __init__(self, configured: Any, folder: str) -> None:
        self.configured = check_entries(configured, "c.JupyterACP.mcp_servers")
        self.path = os.path.join(folder, FILE_NAME)
        self._file: tuple[float, list[dict[str, Any]]] | None = None

    def _from_file(self) -> list[dict[str, Any]]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._file = None
            return []
        except OSError as exc:
            log.warning("jupyter_acp: %s cannot be read (%s); its MCP servers are not used", self.path, exc.strerror)
            return []
        if self._file is not None and self._file[0] == st.st_mtime:
            return self._file[1]
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(self.path, 0o600)
            log.warning("jupyter_acp: %s was readable by other users; it is private now (0600)", self.path)
        try:
            with open(self.path, encoding="utf-8") as fh:
                entries = check_entries(json.load(fh), self.path)
        except (OSError, ValueError) as exc:  # never the content: headers and env hold tokens
            log.error("jupyter_acp: %s is not valid JSON (%s); its MCP servers are not used", self.path, type(exc))
            entries = []
        self._file = (st.st_mtime, entries)
        return entries

    def entries(self) -> list[dict[str, Any]]:
        """Every entry, the configuration's first; a name given twice keeps its first entry."""
        seen: set[str] = set()
        out = []
        for entry in [*self.configured, *self._from_file()]:
            if entry["name"] in seen:
                log.warning("jupyter_acp: a second MCP server named %r skipped (rule: names are unique)", entry["name"])
                continue
            seen.add(entry["name"])
            out.append(entry)
        if len(out) > MAX_SERVERS:
            log.warning("jupyter_acp: %d MCP servers configured; the first %d are used", len(out), MAX_SERVERS)
        return out[:MAX_SERVERS]

    def for_agent(self, mcp_capabilities: Mapping[str, Any], env: Mapping[str, str]) -> list[dict[str, Any]]:
        """The ``mcpServers`` entries this agent can take, stdio ones with its environment's basics."""
        basics = [{"name": k, "value": env[k]} for k in BASE_ENV if k in env]
        out = []
        for entry in self.entries():
            kind = entry.get("type", "stdio")
            if kind in ("http", "sse"):
                if mcp_capabilities.get(kind):
                    out.append(entry)
                continue
            command = shutil.which(entry["command"], path=env.get("PATH", os.defpath))
            if command is None:
                log.warning("jupyter_acp: MCP server %r skipped: its command is not on the agent's PATH", entry["name"])
                continue
            own = {p["name"] for p in entry["env"]}
            out.append(
                {**entry, "command": command, "env": [*(b for b in basics if b["name"] not in own), *entry["env"]]}
            )
        return out
