"""The agent's ``fs/*`` in the magic's local mode, under the server's own file rules (``tools/files.py``)."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

from ..protocol.jsonrpc import RpcError
from ..tools.files import FileRefused, FileRules
from ..tools.host import PERMISSION_OPTIONS


async def file_request(client: Any, session: Any, method: str, params: dict[str, Any]) -> Any:
    """``fs/*`` under the same rules as on the server (``tools/files.py``), rooted at the kernel's folder;
    only during a turn; a write asks in the cell like any change."""
    if session is None or session.turn is None:
        raise RpcError(-32602, "refused (rule: outside_turn): agents act only while a prompt runs")
    rules = FileRules.for_folder(os.getcwd())
    path = params.get("path")
    try:
        if method == "fs/read_text_file":
            return {"content": await asyncio.to_thread(rules.read, path, params.get("line"), params.get("limit"))}
        content = params.get("content")
        if not isinstance(content, str):
            raise RpcError(-32602, "content must be a string")
        real = rules.prepare_write(path)
        old = await asyncio.to_thread(rules.current_text, real)
    except FileRefused as exc:
        code = -32002 if exc.missing else -32602
        raise RpcError(code, str(exc), {"rule": exc.rule}) from None
    tool_call = {
        "toolCallId": f"fs-{uuid.uuid4().hex[:8]}",
        "title": f"{'Overwrite' if old is not None else 'Create'} {path}",
        "kind": "edit",
        "status": "pending",
        "rawInput": {"path": path},
        "content": [{"type": "diff", "path": str(path), "oldText": old, "newText": content}],
    }
    outcome = await client._ask(session, tool_call, PERMISSION_OPTIONS)
    if outcome.get("outcome") != "selected" or not str(outcome.get("optionId", "")).startswith("allow"):
        raise RpcError(-32602, f"the user did not allow writing {path}; nothing was written", {"rule": "user_rejected"})
    try:
        await asyncio.to_thread(rules.write, str(path), real, content)
    except FileRefused as exc:
        raise RpcError(-32602, str(exc), {"rule": exc.rule}) from None
    return None
