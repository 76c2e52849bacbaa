"""Who changed a cell: provenance entries in the cell's own metadata (``metadata.jupyter_acp``).

The record lives in the notebook, as plain nbformat cell metadata, so it survives what the notebook
survives (save, reload, a second browser, ``jupyter nbconvert --to notebook``, git) with no store beside it;
nbformat's schema allows any JSON under a cell's ``metadata``.  The shape::

    "metadata": {"jupyter_acp": {"history": [            # oldest first, the last MAX_ENTRIES kept
        {"by": "agent", "action": "edited",              # inserted | edited | moved | ran
         "agent": {"name": "codex", "version": "0.4.1"},
         "conversation_id": "...", "turn_id": "...", "tool_call_id": "...",
         "session_id": "...", "turn_number": 4,          # optional: "Codex, turn 4" and "Open in the conversation"
         "prompt": "plot the residuals",                 # its first PROMPT_CHARS characters
         "user": "alice", "at": "2025-05-01T12:00:00Z"},
        {"by": "user", "action": "edited", "user": "alice", "at": "2025-05-01T12:03:10Z"}
    ]}}

Entries are written by jupyter-acp only, never by an agent: ``check_agent_metadata`` (and
``check_agent_notebook``) refuse any agent-supplied metadata carrying the key, so a tool that ever lets an
agent set metadata calls it before the gate.  On the live document, ``add_to_ycell`` writes inside the
transaction of the edit it records when called within it (one Y update, the agent's origin: the edit and its
record arrive together in every tab and the turn's undo takes both back); a user's later edit is noted with
``note_user_edit`` under ``PROVENANCE_ORIGIN``, which no undo manager includes.  A user's typing is one
transaction per keystroke, so consecutive edits by the same user are one entry (its time moves on).
``strip_notebook`` / ``strip_ynotebook`` remove every entry ("Remove agent marks from this notebook").
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

from .document import ORIGIN_PREFIX

PROVENANCE_KEY = "jupyter_acp"
#: entries kept per cell (the oldest go first)
MAX_ENTRIES = 10
#: characters of the prompt kept in an entry
PROMPT_CHARS = 200
#: the origin of provenance-only changes (a user's edit noted, marks removed): no undo manager includes it
PROVENANCE_ORIGIN = f"{ORIGIN_PREFIX}-provenance"

Action = Literal["inserted", "edited", "moved", "ran"]
ACTIONS: tuple[Action, ...] = ("inserted", "edited", "moved", "ran")


def now() -> str:
    """UTC, to the second, ISO 8601 with ``Z``: what every entry's ``at`` holds."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class AgentRef:
    name: str
    version: str | None = None


@dataclass(frozen=True)
class AgentChange:
    """One change an agent made to a cell, in one tool call of one turn, for one user's prompt."""

    action: Action
    agent: AgentRef
    conversation_id: str
    turn_id: str
    tool_call_id: str | None
    prompt: str
    user: str | None
    at: str
    session_id: str | None = None
    turn_number: int | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "by": "agent",
            "action": self.action,
            "agent": {"name": self.agent.name, "version": self.agent.version},
            "conversation_id": self.conversation_id,
            "turn_id": self.turn_id,
            "tool_call_id": self.tool_call_id,
            "prompt": self.prompt,
            "user": self.user,
            "at": self.at,
        }
        if self.session_id is not None:
            out["session_id"] = self.session_id
        if self.turn_number is not None:
            out["turn_number"] = self.turn_number
        return out

    def describe(self) -> str:
        """``codex, turn 4: 'plot the residuals' (by alice)``: what the mark's popover says."""
        turn = f"turn {self.turn_number}" if self.turn_number is not None else f"turn {self.turn_id}"
        prompt = self.prompt if len(self.prompt) <= 60 else self.prompt[:59] + "…"
        who = f" (by {self.user})" if self.user else ""
        return f"{self.agent.name}, {turn}: {prompt!r}{who}"


@dataclass(frozen=True)
class UserEdit:
    """A user's own edit of a cell an agent changed before."""

    user: str | None
    at: str
    action: Literal["edited"] = "edited"

    def as_json(self) -> dict[str, Any]:
        return {"by": "user", "action": self.action, "user": self.user, "at": self.at}


Entry = AgentChange | UserEdit


def agent_change(
    action: Action,
    *,
    agent_name: str,
    agent_version: str | None,
    conversation_id: str,
    turn_id: str,
    tool_call_id: str | None,
    prompt: str,
    user: str | None,
    session_id: str | None = None,
    turn_number: int | None = None,
    at: str | None = None,
) -> AgentChange:
    """An agent's change, its prompt cut to ``PROMPT_CHARS`` characters."""
    if action not in ACTIONS:
        raise ValueError(f"unknown provenance action {action!r}; one of {', '.join(ACTIONS)}")
    return AgentChange(
        action=action,
        agent=AgentRef(agent_name, agent_version),
        conversation_id=conversation_id,
        turn_id=turn_id,
        tool_call_id=tool_call_id,
        prompt=prompt[:PROMPT_CHARS],
        user=user,
        at=at or now(),
        session_id=session_id,
        turn_number=turn_number,
    )


def user_edit(user: str | None, at: str | None = None) -> UserEdit:
    return UserEdit(user=user, at=at or now())


# -- reading ---------------------------------------------------------------------------------------
def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_entry(raw: Any) -> Entry | None:
    """An entry from its JSON, or None for one that is not well formed (metadata can be edited by hand)."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("at"), str):
        return None
    if raw.get("by") == "user":
        return UserEdit(user=_opt_str(raw.get("user")), at=raw["at"])
    agent = raw.get("agent")
    action = raw.get("action")
    if raw.get("by") != "agent" or not isinstance(agent, Mapping) or not isinstance(agent.get("name"), str):
        return None
    if (
        action not in ACTIONS
        or not isinstance(raw.get("conversation_id"), str)
        or not isinstance(raw.get("turn_id"), str)
    ):
        return None
    number = raw.get("turn_number")
    return AgentChange(
        action=action,
        agent=AgentRef(agent["name"], _opt_str(agent.get("version"))),
        conversation_id=raw["conversation_id"],
        turn_id=raw["turn_id"],
        tool_call_id=_opt_str(raw.get("tool_call_id")),
        prompt=(_opt_str(raw.get("prompt")) or "")[:PROMPT_CHARS],
        user=_opt_str(raw.get("user")),
        at=raw["at"],
        session_id=_opt_str(raw.get("session_id")),
        turn_number=number if isinstance(number, int) and not isinstance(number, bool) else None,
    )


def _as_py(value: Any) -> Any:
    to_py = getattr(value, "to_py", None)  # a pycrdt Map or Array
    return to_py() if callable(to_py) else value


def raw_history(metadata: Mapping[str, Any] | None) -> list[Any]:
    """The entries' JSON as stored (malformed ones included)."""
    if not metadata:
        return []
    value = _as_py(metadata.get(PROVENANCE_KEY))
    if not isinstance(value, Mapping):
        return []
    entries = _as_py(value.get("history"))
    return list(entries) if isinstance(entries, list) else []


def history(metadata: Mapping[str, Any] | None) -> list[Entry]:
    """A cell's entries, oldest first; malformed ones left out."""
    return [e for e in map(parse_entry, raw_history(metadata)) if e is not None]


def last_agent_change(metadata: Mapping[str, Any] | None) -> AgentChange | None:
    """The newest agent entry: what the cell's mark shows."""
    for entry in reversed(history(metadata)):
        if isinstance(entry, AgentChange):
            return entry
    return None


def with_entry(metadata: Mapping[str, Any] | None, entry: Entry) -> dict[str, Any]:
    """The new value of ``metadata[PROVENANCE_KEY]`` with ``entry`` added (the last ``MAX_ENTRIES`` kept;
    a user edit right after the same user's edit replaces it)."""
    entries = raw_history(metadata)
    if isinstance(entry, UserEdit) and entries:
        last = parse_entry(entries[-1])
        if isinstance(last, UserEdit) and last.user == entry.user:
            entries = entries[:-1]
    entries.append(entry.as_json())
    return {"history": entries[-MAX_ENTRIES:]}


# -- writing ---------------------------------------------------------------------------------------
def add_to_cell(cell: MutableMapping[str, Any], entry: Entry) -> None:
    """Add ``entry`` to an nbformat cell dict (its ``metadata`` made when missing)."""
    metadata = cell.get("metadata")
    if not isinstance(metadata, MutableMapping):
        metadata = cell["metadata"] = {}
    metadata[PROVENANCE_KEY] = with_entry(metadata, entry)


def _ymetadata(ycell: Any) -> Any:
    from pycrdt import Map

    metadata = ycell.get("metadata")
    if not isinstance(metadata, Map):
        metadata = Map({})
        ycell["metadata"] = metadata
        metadata = ycell["metadata"]
    return metadata


def add_to_ycell(ycell: Any, entry: Entry, *, origin: str) -> None:
    """Add ``entry`` to a cell of the live document (a pycrdt ``Map`` of ``YNotebook.ycells``).

    Called inside the transaction of the edit it records (``LiveNotebook._txn``) with that edit's origin, the
    write joins the transaction (pycrdt hands back the open one for the same origin, and refuses another):
    one Y update.  Called alone, it opens a transaction with ``origin`` (``PROVENANCE_ORIGIN`` for a change
    that only records)."""
    with ycell.doc.transaction(origin=origin):
        metadata = _ymetadata(ycell)
        metadata[PROVENANCE_KEY] = with_entry(metadata, entry)


def note_user_edit(ycell: Any, user: str | None, *, at: str | None = None, origin: str = PROVENANCE_ORIGIN) -> bool:
    """Note a user's edit of a cell an agent changed before (True when noted).  Cells without agent entries
    are left alone: provenance says what agents did, and then who changed their work since."""
    metadata = ycell.get("metadata")
    if metadata is None or last_agent_change(metadata) is None:
        return False
    add_to_ycell(ycell, user_edit(user, at), origin=origin)
    return True


def strip_notebook(nb: MutableMapping[str, Any]) -> int:
    """Remove every provenance entry from an nbformat notebook dict; answers the number of cells cleaned."""
    n = 0
    for cell in nb.get("cells") or ():
        metadata = cell.get("metadata") if isinstance(cell, MutableMapping) else None
        if isinstance(metadata, MutableMapping) and PROVENANCE_KEY in metadata:
            del metadata[PROVENANCE_KEY]
            n += 1
    return n


def strip_ynotebook(ynotebook: Any, *, origin: str = PROVENANCE_ORIGIN) -> int:
    """Remove every provenance entry from the live document, in one transaction; answers the cells cleaned."""
    n = 0
    with ynotebook.ydoc.transaction(origin=origin):
        for ycell in ynotebook.ycells:
            metadata = ycell.get("metadata")
            if metadata is not None and PROVENANCE_KEY in metadata:
                del metadata[PROVENANCE_KEY]
                n += 1
    return n


# -- what agents may not write ---------------------------------------------------------------------
class ProvenanceForgery(ValueError):
    """An agent tried to write ``metadata.jupyter_acp``; ``rule`` names the rule for the refusal."""

    rule = "provenance_is_jupyter_acps"


def check_agent_metadata(metadata: Any, *, where: str = "a cell") -> None:
    """Refuse agent-supplied cell (or notebook) metadata that carries ``jupyter_acp``: the record of who
    changed what is written by jupyter-acp alone, so an agent can neither erase its traces nor pass its
    work off as the user's.  Any spelling of the key counts (``Jupyter_ACP`` would be ignored by readers
    but still mislead a human)."""
    if not isinstance(metadata, Mapping):
        return
    for key in metadata:
        if isinstance(key, str) and key.strip().lower().replace("-", "_") == PROVENANCE_KEY:
            raise ProvenanceForgery(
                f"the metadata given for {where} has the key {key!r}, which only jupyter-acp writes (who changed "
                "the cell, in which turn, for which prompt); an agent cannot set or change it. Leave it out."
            )


def check_agent_notebook(nb: Mapping[str, Any]) -> None:
    """``check_agent_metadata`` on a whole notebook an agent hands over (its metadata and every cell's)."""
    check_agent_metadata(nb.get("metadata"), where="the notebook")
    cells: Iterable[Any] = nb.get("cells") or ()
    for i, cell in enumerate(cells):
        if isinstance(cell, Mapping):
            check_agent_metadata(cell.get("metadata"), where=f"cell {cell.get('id', i)!r}")
