"""Checkpoints of a kernel's user namespace, taken, restored and discarded from the server (a turn's review and rewind).

The work happens inside the kernel (``snapshot.py``, whose source is sent with each request, as the
summariser's is): the snapshot lives with the kernel, in a private folder on the kernel's side, so it
works alike for a local kernel and one behind a Jupyter Gateway, and the server never holds or unpickles
user data.  What comes back is the manifest, parsed here into typed results and clipped, since a kernel
(running code an agent wrote) is not trusted to answer well-formed JSON.

The request runs as one silent expression on the kernel's **main shell** (``evaluate`` with
``prefer_subshell=False``), never a subshell: a checkpoint read while a cell mutates the objects, or a
restore that assigns into the namespace while a cell runs, would be torn.  On the main shell it waits
its turn behind a running cell and touches neither the execution count nor the history.

Use: ``checkpoint(bridge, kernel_id)`` before a turn first changes the kernel; ``restore(bridge, kernel_id,
checkpoint_id=...)`` to rewind (it checkpoints the present first and answers that id, so a rewind can be
undone by restoring it); ``discard`` when the turn's review is closed.  The budget is the most bytes one
checkpoint saves (``JupyterACPTools.checkpoint_bytes``, default 1 GiB); what does not fit is skipped with
its reason, like what does not pickle.
"""

from __future__ import annotations

import ast
import inspect
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from . import snapshot as _snapshot_module
from .bridge import KernelBridge

#: the most bytes one checkpoint saves, unless told otherwise (``JupyterACPTools.checkpoint_bytes``)
DEFAULT_BUDGET = 1 << 30
#: checkpoints kept per kernel process; older ones are evicted (and named in the answer)
DEFAULT_KEEP = 20

Storage = Literal["auto", "memory", "disk"]

#: what is kept of a kernel's answer: a kernel runs the agent's code and may answer anything
MAX_NAMES = 20_000
MAX_TEXT = 1_000

_SOURCE: str | None = None


class CheckpointError(Exception):
    """The kernel refused or failed a checkpoint request; the text says why (never empty)."""


class Evaluator(Protocol):
    """What is asked of a kernel client: ``client.KernelConnection`` is one."""

    async def evaluate(self, expression: str, *, timeout: float = 30.0, prefer_subshell: bool = True) -> str: ...

    async def kernel_info(self, timeout: float = 10.0) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Skipped:
    """A name a checkpoint did not save, or a restore did not put back, and why."""

    name: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason}


@dataclass(frozen=True)
class KernelCheckpoint:
    """The manifest of one checkpoint, as the server keeps it (the pickles stay in the kernel)."""

    id: str
    #: names saved, in namespace order
    saved: list[str]
    #: names not saved (modules, classes defined in the notebook, what does not pickle or fit), with reasons
    skipped: list[Skipped]
    #: bytes the checkpoint holds (what a restore would load)
    bytes: int
    #: bytes written anew (the rest is shared with earlier checkpoints of the kernel: unchanged objects)
    written: int = 0
    #: ``memory`` (``/dev/shm`` of the kernel's machine) or ``disk`` (its temp folder)
    storage: str = ""
    #: seconds the kernel spent on it
    seconds: float = 0.0
    #: older checkpoints of this kernel removed to keep ``keep`` of them
    evicted: list[str] | None = None
    created: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{id, saved, skipped: [{name, reason}], bytes, written, storage, seconds}``: the HTTP API's shape."""
        return {
            "id": self.id,
            "saved": list(self.saved),
            "skipped": [s.as_dict() for s in self.skipped],
            "bytes": self.bytes,
            "written": self.written,
            "storage": self.storage,
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class KernelRestore:
    """What a restore did, name by name."""

    #: the checkpoint restored
    checkpoint_id: str
    #: names now as they were at the checkpoint (unchanged ones kept as they are, the rest loaded)
    restored: list[str]
    #: names of the checkpoint's time that are not as they were, with reasons
    not_restored: list[Skipped]
    #: names created after the checkpoint, removed from the namespace
    removed: list[str]
    #: the checkpoint of the namespace just before the restore: restoring it undoes this restore
    undo: KernelCheckpoint
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """``{restored, not_restored: [{name, reason}], removed, undo_checkpoint, undo}``."""
        return {
            "restored": list(self.restored),
            "not_restored": [s.as_dict() for s in self.not_restored],
            "removed": list(self.removed),
            "undo_checkpoint": self.undo.id,
            "undo": self.undo.as_dict(),
        }


def new_checkpoint_id() -> str:
    """A fresh id (the kernel side accepts 1-64 of ``[A-Za-z0-9_-]``)."""
    return uuid.uuid4().hex


def snapshot_source() -> str:
    """The kernel-side module's own source text: what the kernel runs."""
    global _SOURCE
    if _SOURCE is None:
        _SOURCE = inspect.getsource(_snapshot_module)
    return _SOURCE


def snapshot_expression(args: dict[str, Any]) -> str:
    """One expression that runs the kernel-side module in a throw-away namespace on ``get_ipython()``."""
    return "(lambda _g: (exec(%r, _g), _g['answer'](get_ipython(), %r))[1])({'__name__': '_jupyter_acp_snapshot'})" % (
        snapshot_source(),
        args,
    )


# -- asking the kernel -----------------------------------------------------------------------------
async def _client(kernel: KernelBridge | Evaluator, kernel_id: str | None) -> tuple[Evaluator, str]:
    """The kernel client and where the kernel is (said in errors); refuses a kernel that is not Python."""
    if isinstance(kernel, KernelBridge):
        if kernel_id is None:
            raise CheckpointError("a kernel id is needed to checkpoint through the kernel bridge")
        where = kernel.where(kernel_id)
        language = await kernel.language_async(kernel_id)
        conn: Evaluator = await kernel.connection(kernel_id)
    else:
        conn, where = kernel, "the kernel"
        info = await conn.kernel_info()
        language = ((info.get("language_info") or {}).get("name") or "").lower() or None
    if language is not None and language.lower() != "python":
        raise CheckpointError(
            f"checkpoints of a kernel's variables need a Python kernel; {where} runs {language}: "
            "only the notebook's cells can be rewound"
        )
    return conn, where


async def _ask(conn: Evaluator, where: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
    try:
        text = await conn.evaluate(snapshot_expression(args), timeout=timeout, prefer_subshell=False)
    except RuntimeError as exc:  # the kernel-side code raised: its text says why
        raise CheckpointError(f"{args['op']} failed in {where}: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = json.loads(ast.literal_eval(text))
        except Exception:
            raise CheckpointError(f"unexpected answer from {where}: {text[:200]!r}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"unexpected answer from {where}: {text[:200]!r}")
    return data


# -- parsing what the kernel said ------------------------------------------------------------------
def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise CheckpointError(f"the kernel's answer has no text for {what}")
    return value[:MAX_TEXT]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _names(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [v[:MAX_TEXT] for v in value[:MAX_NAMES] if isinstance(v, str)]


def _skips(value: Any) -> list[Skipped]:
    if not isinstance(value, list):
        return []
    out = []
    for v in value[:MAX_NAMES]:
        if isinstance(v, dict) and isinstance(v.get("name"), str):
            out.append(Skipped(v["name"][:MAX_TEXT], str(v.get("reason") or "no reason given")[:MAX_TEXT]))
    return out


def parse_checkpoint(data: dict[str, Any]) -> KernelCheckpoint:
    created = data.get("created")
    return KernelCheckpoint(
        id=_text(data.get("id"), "the checkpoint id"),
        saved=_names(data.get("saved")),
        skipped=_skips(data.get("skipped")),
        bytes=_int(data.get("bytes")),
        written=_int(data.get("written")),
        storage=str(data.get("storage") or "")[:20],
        seconds=_float(data.get("seconds")),
        evicted=_names(data.get("evicted")),
        created=_float(created) if created is not None else None,
    )


def parse_restore(data: dict[str, Any]) -> KernelRestore:
    undo = data.get("undo")
    if not isinstance(undo, dict):
        raise CheckpointError("the kernel's answer to a restore has no undo checkpoint")
    return KernelRestore(
        checkpoint_id=_text(data.get("id"), "the checkpoint id"),
        restored=_names(data.get("restored")),
        not_restored=_skips(data.get("not_restored")),
        removed=_names(data.get("removed")),
        undo=parse_checkpoint(undo),
        seconds=_float(data.get("seconds")),
    )


# -- the API ---------------------------------------------------------------------------------------
async def checkpoint(
    kernel: KernelBridge | Evaluator,
    kernel_id: str | None = None,
    *,
    checkpoint_id: str | None = None,
    budget: int = DEFAULT_BUDGET,
    storage: Storage = "auto",
    keep: int = DEFAULT_KEEP,
    timeout: float = 300.0,
) -> KernelCheckpoint:
    """Save the kernel's user namespace, variable by variable, within ``budget`` bytes.

    ``kernel`` is the ``KernelBridge`` (with ``kernel_id``) or a kernel client (``KernelConnection``).
    Raises ``CheckpointError`` (the kernel refused: not Python, no IPython namespace, a folder that is
    not private...), ``KernelUnavailable`` or ``KernelTimeout`` (the kernel's own, with their reasons)."""
    conn, where = await _client(kernel, kernel_id)
    args = {
        "op": "checkpoint",
        "id": checkpoint_id or new_checkpoint_id(),
        "budget": int(budget),
        "storage": storage,
        "keep": int(keep),
    }
    return parse_checkpoint(await _ask(conn, where, args, timeout))


async def restore(
    kernel: KernelBridge | Evaluator,
    kernel_id: str | None = None,
    *,
    checkpoint_id: str,
    undo_id: str | None = None,
    budget: int = DEFAULT_BUDGET,
    storage: Storage = "auto",
    keep: int = DEFAULT_KEEP,
    timeout: float = 300.0,
) -> KernelRestore:
    """Put the namespace of ``checkpoint_id`` back in the same kernel.

    First checkpoints the present (as ``undo_id``, or a fresh id; ``result.undo``): restoring that undoes
    this restore.  Names created after the checkpoint are removed (``result.removed``); names the
    checkpoint did not save are left as they are (``result.not_restored``, with reasons)."""
    conn, where = await _client(kernel, kernel_id)
    args = {
        "op": "restore",
        "id": checkpoint_id,
        "undo_id": undo_id or new_checkpoint_id(),
        "budget": int(budget),
        "storage": storage,
        "keep": int(keep),
    }
    return parse_restore(await _ask(conn, where, args, timeout))


async def discard(
    kernel: KernelBridge | Evaluator,
    kernel_id: str | None = None,
    *,
    checkpoint_ids: Sequence[str],
    timeout: float = 60.0,
) -> list[str]:
    """Remove checkpoints from the kernel's side; answers the ids that were there (and are gone now)."""
    conn, where = await _client(kernel, kernel_id)
    data = await _ask(conn, where, {"op": "discard", "ids": list(checkpoint_ids)}, timeout)
    return _names(data.get("discarded"))


async def list_checkpoints(
    kernel: KernelBridge | Evaluator, kernel_id: str | None = None, *, timeout: float = 60.0
) -> list[KernelCheckpoint]:
    """The checkpoints the kernel holds, oldest first (none after a kernel restart)."""
    conn, where = await _client(kernel, kernel_id)
    data = await _ask(conn, where, {"op": "list"}, timeout)
    rows = data.get("checkpoints")
    return [parse_checkpoint(r) for r in rows[:MAX_NAMES] if isinstance(r, dict)] if isinstance(rows, list) else []
