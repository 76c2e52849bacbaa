"""What the agent's cards show the user of its own tool calls, and the approvals that follow from them.

A card is followed as the panel builds it (``labextension/src/model.ts``, ``_upsertTool``): a ``tool_call``,
each ``tool_call_update`` of its id and the agent's own ``session/request_permission`` each *replace* the title,
kind, ``rawInput`` and content they carry; nothing is merged across updates. The panel's permission box
(``renderers/permissions.ts``) shows the title and the text content, or the ``rawInput`` when the card has no text
and no diff.

An agent's permission request that the user allowed pre-approves one call of the client's gate, frozen at the
moment the user answered (:class:`AgentApproval`): the tool names and argument digests that card showed then, or,
for ``terminal/create``, the command lines it showed as the command. A later update that changes what the card
shows cancels it (the gate drops it; ``gate.py``). Only digests and the lines that count are kept, never the
arguments themselves: a turn remembers up to :data:`MAX_REMEMBERED_CALLS` cards, and a hostile agent's updates
can be megabytes each.

An agent that asks about one of the project's own tools (:func:`own_tool_call`) is recognised by the MCP server
name the project gave it and the tool's name, in the forms real agents write them, so the user is asked in the
notebook's words instead (``own_tools.py``). That recognition only ever chooses which card the user sees: the
gate still decides the call itself when it comes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from ...channels import MCP_SERVER_NAME
from ...tools.host import digest

#: the agent's own question to the user (``session/request_permission``)
PERMISSION = "session/request_permission"
#: most agent tool calls remembered per turn (to match a permission with what the user saw)
MAX_REMEMBERED_CALLS = 256
#: largest arguments remembered for matching (larger ones are asked again)
MAX_REMEMBERED_ARGS = 256 * 1024
_TOOL_NAME = re.compile(r"client_[a-z][a-z0-9_]*")
#: shells whose ``-c LINE`` runs LINE as typed: a card showing LINE shows the command
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
SHELL_FLAGS = ("-c", "-lc")


def _names_in(texts: list[str]) -> frozenset[str]:
    out: set[str] = set()
    for text in texts:
        if len(text) <= MAX_REMEMBERED_ARGS:
            out.update(_TOOL_NAME.findall(text))
    return frozenset(out)


@dataclass
class ShownCard:
    """One agent card as the panel shows it now, kept as what matching needs (digests, names, command lines)."""

    title: str = ""
    kind: str = ""
    #: the tool names its ``_meta`` carries (the panel does not show them; agents name their tool there)
    meta_names: frozenset[str] = frozenset()
    #: ``rawInput``: digests of the arguments it may hold, the tool names and command lines it carries
    raw_digest: str | None = None
    raw_digests: frozenset[str] = frozenset()
    raw_names: frozenset[str] = frozenset()
    raw_commands: frozenset[str] = frozenset()
    #: content: its digest and the ``$ ...`` lines of its text
    content_digest: str = digest([])
    dollar_lines: frozenset[str] = frozenset()
    #: the agent changed what this card shows after the user allowed it: the gate no longer asks on it
    changed_after_allow: bool = False

    def fold(self, update: dict[str, Any]) -> bool:
        """Apply one update (or a permission request's toolCall) as the panel does; True if what it shows changed."""
        before = self.shown
        title = update.get("title")
        if isinstance(title, str) and title:
            self.title = title if len(title) <= MAX_REMEMBERED_ARGS else f"(a title of {len(title)} characters)"
        kind = update.get("kind")
        if isinstance(kind, str) and kind:
            self.kind = kind[:200]
        meta = update.get("_meta")
        if isinstance(meta, dict):
            self.meta_names = _names_in(_meta_strings(meta))
        raw = update.get("rawInput")
        if raw is not None:
            self._set_raw(raw)
        content = update.get("content")
        if isinstance(content, list):
            self._set_content(content)
        return self.shown != before

    def _set_raw(self, raw: Any) -> None:
        try:
            self.raw_digest = digest(raw)
        except (TypeError, ValueError):
            self.raw_digest = "unhashable"
        digests: set[str] = set()
        commands: set[str] = set()
        for args in _argument_candidates(raw):
            try:
                if len(json.dumps(args, default=str)) <= MAX_REMEMBERED_ARGS:
                    digests.add(digest(args))
            except (TypeError, ValueError):
                continue
            for key in ("command", "cmd"):
                commands |= command_lines(args.get(key), args.get("args"))
        self.raw_digests = frozenset(digests)
        self.raw_commands = frozenset(commands)
        self.raw_names = _names_in(_raw_name_strings(raw))

    def _set_content(self, content: list[Any]) -> None:
        try:
            self.content_digest = digest(content)
        except (TypeError, ValueError):
            self.content_digest = "unhashable"
        texts = [
            item["content"]["text"]
            for item in content
            if isinstance(item, dict)
            and item.get("type") == "content"
            and isinstance(item.get("content"), dict)
            and item["content"].get("type") == "text"
            and isinstance(item["content"].get("text"), str)
        ]
        lines: set[str] = set()
        for text in texts:
            if len(text) > MAX_REMEMBERED_ARGS:
                continue
            for line in text.split("\n"):
                if line.startswith("$ ") and line[2:].strip():
                    lines.add(line[2:].strip())
        self.dollar_lines = frozenset(lines)

    @property
    def shown(self) -> str:
        """A digest of what the card shows (title, kind, ``rawInput``, content): any change is a new card."""
        return digest([self.title, self.kind, self.raw_digest, self.content_digest])

    @property
    def names(self) -> frozenset[str]:
        return _names_in([self.title, self.kind]) | self.meta_names | self.raw_names

    @property
    def commands(self) -> frozenset[str]:
        """The command lines this card shows *as the command*, exactly: a ``$ ...`` line of its text, or its
        ``rawInput`` command when the title is that command and nothing else (``npm test`` or `` `npm test` ``, the
        way agents title a shell call). A command the title only mentions, or one only in the ``rawInput`` (a JSON
        blob under a title that says something else), is not shown as the command: the gate asks on its own."""
        out = set(self.dollar_lines)
        title = self.title.strip()
        if len(title) > 2 and title.startswith("`") and title.endswith("`"):
            title = title[1:-1].replace("\\`", "`").strip()
        if title in self.raw_commands:
            out.add(title)
        return frozenset(out)

    def approval(self, request_id: str, call_id: str | None) -> AgentApproval:
        """What the user allowed, frozen now."""
        return AgentApproval(request_id, call_id, self.names, self.raw_digests, self.commands, self.shown)


def command_lines(command: Any, args: Any = None) -> set[str]:
    """The ways one command line is written exactly: ``npm test`` (a shell line), ``['npm', 'test']`` (shell-quoted
    by ``shlex.join``), ``['bash', '-lc', 'npm test']`` (the line a shell runs)."""
    parts: list[str]
    if isinstance(command, str) and not args:
        line = command.strip()
        return {line} if line and len(command) <= MAX_REMEMBERED_ARGS else set()
    if isinstance(command, str) and isinstance(args, list):
        parts = [command, *args]
    elif isinstance(command, list) and not args:
        parts = list(command)
    else:
        return set()
    if not parts or not all(isinstance(p, str) for p in parts) or sum(map(len, parts)) > MAX_REMEMBERED_ARGS:
        return set()
    out = {shlex.join(parts)}
    shell = shell_line(parts)
    if shell is not None:
        out.add(shell)  # a shell running one command line: the line is what the user read
    return out


def shell_line(argv: list[str]) -> str | None:
    """The command line of ``[sh|bash|zsh|dash|ksh, -c|-lc, LINE]``, else None."""
    if len(argv) == 3 and os.path.basename(argv[0]) in SHELLS and argv[1] in SHELL_FLAGS and argv[2].strip():
        return argv[2].strip()
    return None


@dataclass
class AgentApproval:
    """The user allowed an agent's permission request: good for one call matching what its card showed at the
    moment of the answer, in this turn, until the card changes."""

    request_id: str
    call_id: str | None
    names: frozenset[str] = field(default_factory=frozenset)
    digests: frozenset[str] = field(default_factory=frozenset)
    commands: frozenset[str] = field(default_factory=frozenset)
    #: what the card showed when the user answered (``ShownCard.shown``)
    shown: str = ""

    @property
    def useful(self) -> bool:
        return bool(self.names and self.digests) or bool(self.commands)


def _meta_strings(meta: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for value in meta.values():
        if isinstance(value, dict):
            out.extend(v for v in value.values() if isinstance(v, str))
        elif isinstance(value, str):
            out.append(value)
    return out


def _raw_name_strings(raw: Any) -> list[str]:
    out: list[str] = []
    if isinstance(raw, dict):
        for key in ("tool", "name", "tool_name", "toolName", "invocation"):
            value = raw.get(key)
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, dict):
                out.extend(v for v in value.values() if isinstance(v, str))
        request = raw.get("request")
        if isinstance(request, dict) and isinstance(request.get("message"), str):
            out.append(request["message"])
    return out


def _argument_candidates(raw: Any) -> list[dict[str, Any]]:
    """The arguments a ``rawInput`` may hold: itself, or nested the ways agents nest them."""
    if not isinstance(raw, dict):
        return []
    out = [raw]
    for key in ("arguments", "input", "params", "args"):
        if isinstance(raw.get(key), dict):
            out.append(raw[key])
    invocation = raw.get("invocation")
    if isinstance(invocation, dict) and isinstance(invocation.get("arguments"), dict):
        out.append(invocation["arguments"])
    params = _codex_request(raw).get("tool_params")
    if isinstance(params, dict):
        out.append(params)
    return out


def _codex_request(raw: dict[str, Any]) -> dict[str, Any]:
    """codex-acp asks about an MCP call with ``rawInput.request`` (an elicitation-shaped approval): its ``message``
    names the tool and ``_meta.tool_params`` holds the arguments, both shown in the card's text."""
    request = raw.get("request")
    meta = request.get("_meta") if isinstance(request, dict) else None
    return meta if isinstance(meta, dict) else {}


# -- the project's own tools, as agents name them in their questions --------------------------------------------------
def _own_name_patterns(server: str) -> list[re.Pattern[str]]:
    """How agents name a tool of the MCP server ``server`` (each the whole string, never a part of a longer one)."""
    s = re.escape(server)
    tool = r"(client_[a-z][a-z0-9_]*)"
    return [
        re.compile(rf"mcp__{s}__{tool}"),  # claude-agent-acp (Claude Code's MCP naming)
        re.compile(rf"{s}__{tool}"),  # goose and others: server__tool
        re.compile(rf"{s}_{tool}"),  # opencode, mistral-vibe: server_tool
        re.compile(rf"(?:Tool: )?{s}/{tool}"),  # codex-acp's tool card, fast-agent's request: server/tool
        re.compile(rf"{tool} \({s} MCP Server\)"),  # gemini-cli and qwen-code: the tool's display name
        re.compile(rf'Allow the {s} MCP server to run tool "{tool}"\?'),  # codex-acp's MCP approval
    ]


_OWN_PATTERNS = {MCP_SERVER_NAME: _own_name_patterns(MCP_SERVER_NAME)}


def own_tool_names(text: Any, server: str = MCP_SERVER_NAME) -> set[str]:
    """The project's tool a string names in one of the agents' forms (``mcp__jupyter__client_edit_cell``, ...)."""
    if not isinstance(text, str) or len(text) > 1000:
        return set()
    patterns = _OWN_PATTERNS.get(server) or _own_name_patterns(server)
    out = set()
    for pattern in patterns:
        match = pattern.fullmatch(text.strip())
        if match:
            out.add(match.group(1))
    return out


@dataclass(frozen=True)
class OwnToolCall:
    """An agent's permission request about one of the project's own tools: which tool, and the arguments the
    request carries (None when it carries none, or none in a shape an agent is known to use)."""

    name: str
    arguments: dict[str, Any] | None
    #: named by the client's own convention (``_meta.jupyter_acp.toolName``, the built-in agent's), not by an MCP
    #: server's name: so also a question about a tool lent over the client-tools convention
    declared: bool = False


#: a tool of ours, by its own name
_PLAIN_TOOL = re.compile(r"client_[a-z][a-z0-9_]*")


def own_tool_call(tool_call: Any, server: str = MCP_SERVER_NAME) -> OwnToolCall | None:
    """Which of the project's tools an agent's ``session/request_permission`` toolCall asks about, if any.

    The tool is named, with the MCP server's name, in its title (claude-agent-acp ``mcp__jupyter__client_edit_cell``,
    gemini-cli and qwen-code ``client_edit_cell (jupyter MCP Server)``, opencode ``jupyter_client_edit_cell``,
    fast-agent ``jupyter/client_edit_cell``), in ``_meta.claudeCode.toolName``, or in codex-acp's ``rawInput``
    (``server_name`` and the message "Allow the jupyter MCP server to run tool ..."; or ``server`` and ``tool``),
    or by its own name in ``_meta.jupyter_acp.toolName`` (the built-in agent's, whatever channel lends it). Every name the request gives must be the same tool, else it is no question about one of ours. The arguments
    come from where those agents put them: codex-acp's ``rawInput.request._meta.tool_params``, a ``{server, tool,
    arguments}`` ``rawInput``, or the ``rawInput`` itself."""
    if not isinstance(tool_call, dict):
        return None
    names = own_tool_names(tool_call.get("title"), server)
    meta = tool_call.get("_meta")
    claude = meta.get("claudeCode") if isinstance(meta, dict) else None
    if isinstance(claude, dict):
        names |= own_tool_names(claude.get("toolName"), server)
    ours = meta.get("jupyter_acp") if isinstance(meta, dict) else None
    declared = ours.get("toolName") if isinstance(ours, dict) else None
    if isinstance(declared, str) and _PLAIN_TOOL.fullmatch(declared):
        names.add(declared)
    else:
        declared = None
    raw = tool_call.get("rawInput")
    arguments: Any = raw
    if isinstance(raw, dict):
        request = raw.get("request")
        if raw.get("server_name") == server and isinstance(request, dict):
            names |= own_tool_names(request.get("message"), server)
            arguments = _codex_request(raw).get("tool_params")
        elif raw.get("server") == server and isinstance(raw.get("tool"), str):
            names |= own_tool_names(f"{server}/{raw['tool']}", server)
            arguments = raw.get("arguments")
    if len(names) != 1:
        return None  # none of ours, or names that disagree: asked as the agent asks
    return OwnToolCall(names.pop(), arguments if isinstance(arguments, dict) else None, declared is not None)


@dataclass(frozen=True)
class OwnCardGrant:
    """What the user's "allow" on the project's own card for an agent's request grants at the gate: one call of
    this tool with the arguments the card was made from (their digest), in this turn."""

    tool: str
    digest: str

    def approval(self, request_id: str) -> AgentApproval:
        # no card id: the agent's later updates of its own card change nothing the user saw (the card was ours)
        return AgentApproval(request_id, None, frozenset({self.tool}), frozenset({self.digest}))
