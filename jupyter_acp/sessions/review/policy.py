"""What the policy ``review`` decides for one tool or power: run under the turn's checkpoint, or still ask.

``review`` ("Review after") lets a turn change what its checkpoint can put back, without a card: the notebook's cells
(insert, edit, replace, delete, move, clear outputs, run) and the kernel's namespace (runs of cells or code).  What no
checkpoint undoes is asked as under ``ask``: a command in a terminal, ``fs/write_text_file``, a restart of the kernel.
Tools that only read run unasked, as under every policy but ``deny``.
"""

from __future__ import annotations

from .service import REVIEWED_TOOLS

REVIEW = "review"


def resolve_review(name: str, rule: str, *, destructive: bool) -> tuple[str, str]:
    """(``review`` | ``ask`` | ``auto``, the rule that decided it) for ``name`` under a ``review`` policy set by ``rule``."""
    if name in REVIEWED_TOOLS:
        return REVIEW, rule
    if not destructive:
        return "auto", f"{rule}: {name} only reads"
    return "ask", f"{rule}, but no checkpoint can undo {name}, so it is asked"
