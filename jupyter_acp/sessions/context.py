"""Prompt context the client adds for agents without notebook tools: the cells above the running one.

Used by the ``%acp`` magic's ``--context cells-above``; the notebook as saved, bounded, as an embedded resource
(sent as text to an agent that does not take those, like every embedded resource: ``turns.fit_prompt``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from jupyter_core.utils import ensure_async

from .state import NotebookSession

log = logging.getLogger(__name__)

#: characters of notebook context sent with ``--context cells-above``
CONTEXT_CHARS = 20_000


async def cells_above(serverapp: Any, session: NotebookSession, cell_id: Any) -> str:
    """The notebook's cells above the running one (as saved), for agents without notebook tools."""
    cm = serverapp.contents_manager
    try:
        model = await ensure_async(cm.get(session.notebook, content=True, type="notebook"))
    except Exception as exc:
        log.info("jupyter_acp: no context for %s: %s", session.notebook, exc)
        return ""
    cells = (model.get("content") or {}).get("cells") or []
    ids = [c.get("id") for c in cells]
    if isinstance(cell_id, str) and cell_id in ids:
        cells = cells[: ids.index(cell_id)]
    parts = []
    for i, cell in enumerate(cells):
        source = cell.get("source") or ""
        if isinstance(source, list):
            source = "".join(source)
        if not source.strip():
            continue
        fence = "```python" if cell.get("cell_type") == "code" else "```markdown"
        parts.append(f"Cell {i} ({cell.get('cell_type')}, id {cell.get('id')}):\n{fence}\n{source}\n```")
    text = "\n\n".join(parts)
    if len(text) > CONTEXT_CHARS:
        text = "…" + text[-CONTEXT_CHARS:]
    return text


def context_block(hub: Any, session: NotebookSession, text: str) -> dict[str, Any]:
    """An embedded resource; an agent without ``embeddedContext`` gets its text (``turns.fit_prompt``)."""
    header = f"Cells above the prompt in notebook {session.notebook}:\n\n"
    uri = "file://" + os.path.join(hub.serverapp.root_dir, session.notebook)
    return {"type": "resource", "resource": {"uri": uri, "mimeType": "text/markdown", "text": header + text}}


async def cells_above_block(hub: Any, session: NotebookSession, cell_id: Any) -> dict[str, Any] | None:
    """The content block with the cells above ``cell_id`` (None when there is nothing to add)."""
    text = await cells_above(hub.serverapp, session, cell_id)
    return context_block(hub, session, text) if text else None
