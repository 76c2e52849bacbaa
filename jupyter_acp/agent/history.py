"""Session history on disk: one directory per session under the agent's state dir.

``<state>/sessions/<id>/meta.json`` (cwd, mode, model) and ``messages.jsonl`` (the model's messages,
one per line, appended as they happen).  The state dir is ``<jupyter data dir>/jupyter_acp/agent``,
or ``$JUPYTER_ACP_AGENT_STATE_DIR``.  Session ids are validated (``acp:`` + ``[A-Za-z0-9_-]``) before
any path is built from them.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .limits import MAX_HISTORY_BYTES, MAX_HISTORY_UPDATES, SESSION_PREFIX, is_session_id


class SessionNotFound(LookupError):
    pass


def default_state_dir() -> str:
    env = os.environ.get("JUPYTER_ACP_AGENT_STATE_DIR")
    if env:
        return env
    from jupyter_core.paths import jupyter_data_dir

    return os.path.join(jupyter_data_dir(), "jupyter_acp", "agent")


class HistoryStore:
    def __init__(self, root: str | None = None) -> None:
        self.root = root or default_state_dir()

    def _dir(self, sid: str) -> str:
        if not is_session_id(sid):
            raise SessionNotFound(sid)
        return os.path.join(self.root, "sessions", sid[len(SESSION_PREFIX) :])

    def create(self, sid: str, meta: dict[str, Any]) -> None:
        d = self._dir(sid)
        os.makedirs(d, exist_ok=True)
        self.save_meta(sid, meta)
        open(os.path.join(d, "messages.jsonl"), "a").close()

    def save_meta(self, sid: str, meta: dict[str, Any]) -> None:
        d = self._dir(sid)
        tmp = os.path.join(d, "meta.json.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
        os.replace(tmp, os.path.join(d, "meta.json"))

    def exists(self, sid: str) -> bool:
        try:
            return os.path.isfile(os.path.join(self._dir(sid), "meta.json"))
        except SessionNotFound:
            return False

    def append(self, sid: str, *messages: dict[str, Any]) -> None:
        with open(os.path.join(self._dir(sid), "messages.jsonl"), "a", encoding="utf-8") as fh:
            for m in messages:
                fh.write(json.dumps(m, ensure_ascii=False) + "\n")

    def load(self, sid: str, max_bytes: int = MAX_HISTORY_BYTES) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(meta, messages): at most the last ``max_bytes`` of the history, read from the end.

        A longer conversation is not refused (resuming it must work): the read stops at the budget
        before anything older is parsed or allocated, and starts at the first user message of what
        is kept (the model is never handed a tool result without its call).  Missing:
        ``SessionNotFound``; unreadable or corrupt: ``OSError`` / ``ValueError``."""
        d = self._dir(sid)
        meta_path = os.path.join(d, "meta.json")
        if not os.path.isfile(meta_path):
            raise SessionNotFound(sid)
        with open(meta_path, encoding="utf-8") as fh:
            meta = json.load(fh)
        if not isinstance(meta, dict):
            raise ValueError("session metadata is not an object")
        path = os.path.join(d, "messages.jsonl")
        messages: list[dict[str, Any]] = []
        if not os.path.exists(path):
            return meta, messages
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            cut = size > max_bytes
            if cut:
                fh.seek(size - max_bytes - 1)
                if fh.read(1) != b"\n":
                    fh.readline()  # the rest of a message that starts before the budget
            for line in fh:
                if line.strip():
                    msg = json.loads(line)
                    if isinstance(msg, dict):
                        messages.append(msg)
        if cut:
            first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages))
            messages = messages[first_user:]
        return meta, messages


def history_to_updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only user and assistant text is replayed ("would put words in the agent's mouth" otherwise).

    The replay budget (``MAX_HISTORY_UPDATES`` updates, ``MAX_HISTORY_BYTES`` of JSON) keeps the most
    recent updates: a long conversation replays its tail instead of failing to load."""
    updates: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str) or not content.strip():
            continue
        if role == "user":
            kind = "user_message_chunk"
        elif role == "assistant":
            kind = "agent_message_chunk"
        else:
            continue
        updates.append({"sessionUpdate": kind, "content": {"type": "text", "text": content}})
    kept: list[dict[str, Any]] = []
    total = 0
    for u in reversed(updates[-MAX_HISTORY_UPDATES:]):
        size = len(json.dumps(u, ensure_ascii=False).encode("utf-8"))
        if total + size > MAX_HISTORY_BYTES:
            break
        total += size
        kept.append(u)
    kept.reverse()
    return kept
