"""Review and rewind: what a turn changed, kept or discarded cell by cell, and the notebook and kernel put back.

One service, composed into the hub with what it needs (narrow protocols below), never a part of the hub:

* **before a turn's first change** (the gate calls ``before_change`` once it has allowed a tool that changes the
  notebook or the kernel, whatever the policy) the notebook's cells are recorded as the turn's checkpoint, stored
  in ``review.sqlite`` (``store.py``): a server restart loses nothing.  Before the turn first changes the kernel
  (runs cells or code) the kernel's namespace is saved too (``kernels/checkpoint.py``, within
  ``JupyterACPTools.checkpoint_bytes``), under the same id;
* **the policy ``review``** (``JupyterACPTools.permission_policy`` or ``tool_policies``, or a notebook session's own
  pick) lets what a checkpoint can undo go ahead without a card: the notebook tools and runs in its kernel, once
  the checkpoint is taken.  What no checkpoint undoes (a terminal, ``fs/write_text_file``, a kernel restart) is still
  asked; so is a run whose namespace could not be saved (the card says why);
* **at the turn's end** the cells are recorded again; ``turn_ended`` carries ``review: {changes, checkpoint}``;
* **the routes** (``http/review_routes.py``) read the changes (``notebook/diff.py``), keep or discard them, rewind
  the turn (cells and namespace, in the same kernel) and restore any checkpoint; a rewind and a restore first save
  the present as a checkpoint of their own (``undo_checkpoint``), so each can be undone.
* **provenance**: ``stamp`` gives the tool calls of a turn the entry each changed cell records
  (``notebook/provenance.py``): agent, conversation, turn, tool call, prompt, user, time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...kernels import KernelBridge, KernelTimeout, KernelUnavailable
from ...kernels.checkpoint import CheckpointError, checkpoint, restore
from ...notebook import LiveNotebook, Notebook, NotebookError
from ...notebook.diff import CellChange, apply_decisions, notebook_diff
from ...notebook.provenance import Action as ProvenanceAction
from ...notebook.provenance import AgentChange, agent_change
from ...notebook.rewind import cell_key, put_cells
from ...notebook.stamping import Stamp
from ...protocol.actor import Actor
from ..state import HubError
from .store import CheckpointRow, ReviewStore, ReviewStoreError, TurnRow
from .user_edits import UserEditNotes

if TYPE_CHECKING:  # pragma: no cover
    from ..state import NotebookSession

log = logging.getLogger(__name__)

#: tools whose changes a turn's checkpoint of the notebook undoes
NOTEBOOK_TOOLS = frozenset(
    {
        "client_insert_cell",
        "client_edit_cell",
        "client_replace_in_cell",
        "client_delete_cells",
        "client_move_cell",
        "client_clear_outputs",
        "client_execute_cells",
    }
)
#: tools that change the kernel's namespace, which a checkpoint of the kernel undoes
KERNEL_TOOLS = frozenset({"client_execute_cells", "client_execute_code"})
REVIEWED_TOOLS = NOTEBOOK_TOOLS | KERNEL_TOOLS

#: what no checkpoint puts back, said with every rewind and restore (and in the README)
NEVER_RESTORED = [
    "files the code wrote, changed or deleted",
    "network calls and what they changed elsewhere (a database, an API, a message sent)",
    "GPU memory and the state of devices",
    "open connections, files and handles (sockets, database cursors, threads)",
    "variables the checkpoint skipped, each listed with its reason",
    "a kernel restarted since the checkpoint (the namespace is saved inside the kernel process)",
    "what terminals ran",
]

DECISIONS = ("keep", "discard")


# -- what the service needs ------------------------------------------------------------------------
class ConversationRow(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def number(self) -> int: ...

    @property
    def turns(self) -> int: ...


class ConversationLookup(Protocol):
    def conversations(self, session_id: str) -> Sequence[ConversationRow]: ...


class AgentInfo(Protocol):
    @property
    def init_result(self) -> dict[str, Any] | None: ...


class ReviewHost(Protocol):
    """What this asks of the session hub: its events, the notebook's kernel, the agent and the conversation."""

    @property
    def connections(self) -> Mapping[str, AgentInfo]: ...

    @property
    def store(self) -> ConversationLookup: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    async def kernel_id_for(self, notebook: str) -> str | None: ...


class Documents(Protocol):
    """The notebook access (``notebook.NotebookAccess``)."""

    async def open(self, path: str) -> Notebook: ...

    def cells_with_edits(self, session_id: str) -> dict[str, list[str | None]]: ...

    async def revert_cell(
        self, session_id: str, path: str, cell_id: str, turn_id: str | None = None
    ) -> dict[str, Any]: ...


class CheckpointSettings(Protocol):
    """``JupyterACPTools``: the most bytes one checkpoint of a kernel saves."""

    checkpoint_bytes: int


# -- a turn while it runs --------------------------------------------------------------------------
@dataclass
class TurnState:
    """What the service holds of a running turn (the rest is in the store)."""

    session_id: str
    turn_id: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    checkpoint: CheckpointRow | None = None
    started: float = field(default_factory=time.time)
    #: the notebook as opened for the checkpoint (the live document: read again at the turn's end)
    notebook: Notebook | None = None
    kernel_tried: bool = False
    #: the provenance entry's fixed part, made once per turn
    who: dict[str, Any] | None = None
    #: a change went ahead unasked under the policy ``review``: the turn ends with its review open
    reviewed: bool = False


@dataclass(frozen=True)
class Prepared:
    """What ``before_change`` did: the turn's checkpoint, and why the kernel's namespace was not saved (or None)."""

    checkpoint_id: str
    kernel_saved: bool
    kernel_error: str | None

    def covers(self, name: str) -> bool:
        """Whether the checkpoint undoes ``name``'s changes (there is one; a run needs the namespace saved too)."""
        if not self.checkpoint_id:
            return False
        return name in NOTEBOOK_TOOLS - KERNEL_TOOLS or (name in KERNEL_TOOLS and self.kernel_saved)


def _copy_cells(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(json.dumps(cells, default=str))
    return out


def prompt_of(blocks: Sequence[Any]) -> str:
    """The prompt's text (its text blocks, joined), as a provenance entry keeps its start."""
    parts = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(p for p in parts if isinstance(p, str)).strip()


class ReviewService:
    """Turns' checkpoints, their review and rewind, and the provenance of agents' changes (see the module)."""

    def __init__(
        self,
        host: ReviewHost,
        documents: Documents,
        kernels: KernelBridge,
        settings: CheckpointSettings,
        store: ReviewStore,
    ) -> None:
        self.host = host
        self.documents = documents
        self.kernels = kernels
        self.settings = settings
        self.store = store
        self._turns: dict[str, TurnState] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        #: users' later edits of the cells agents changed, noted in their provenance
        self.user_edits = UserEditNotes()

    @property
    def budget(self) -> int:
        value = getattr(self.settings, "checkpoint_bytes", 1 << 30)
        return value if isinstance(value, int) and value >= 0 else 1 << 30

    # -- a session's own policy ----------------------------------------------------------------------
    def session_policy(self, session_id: str) -> str | None:
        try:
            return self.store.policy(session_id)
        except ReviewStoreError as exc:
            log.warning("%s", exc)
            return None

    def set_session_policy(self, session: NotebookSession, policy: str | None) -> None:
        try:
            self.store.set_policy(session.id, policy)
        except ReviewStoreError as exc:
            raise HubError(str(exc), 500) from None

    # -- before a change ------------------------------------------------------------------------------
    def _state(self, session: NotebookSession) -> TurnState | None:
        turn = session.turn
        if turn is None:
            return None
        state = self._turns.get(turn.id)
        if state is None:
            state = self._turns[turn.id] = TurnState(session.id, turn.id)
        return state

    def went_ahead(self, session: NotebookSession) -> None:
        """A change went ahead unasked under ``review``: the turn's end says so (``review.after``), and the panel
        opens its review then; a turn whose changes were all asked for ends with the review only offered."""
        state = self._state(session)
        if state is not None:
            state.reviewed = True

    async def before_change(self, session: NotebookSession, name: str) -> Prepared | None:
        """Record the turn's checkpoint before its first change of the notebook, and save the kernel's namespace
        before its first change of the kernel; None for a tool that changes neither, or outside a turn."""
        if name not in REVIEWED_TOOLS:
            return None
        state = self._state(session)
        if state is None:
            return None
        async with state.lock:
            cp = state.checkpoint
            if cp is None:
                try:
                    nb = await self.documents.open(session.notebook)
                    cells = _copy_cells(nb.cells())
                except Exception as exc:  # the call goes on (or is asked, under review): its own read says why
                    log.warning("the notebook %s could not be read for a checkpoint: %s", session.notebook, exc)
                    return Prepared("", False, f"the notebook could not be read: {exc}")
                cp = CheckpointRow(
                    id=uuid.uuid4().hex,
                    session_id=session.id,
                    turn_id=state.turn_id,
                    kind="turn",
                    notebook=session.notebook,
                    cells=cells,
                )
                state.checkpoint, state.notebook = cp, nb
                if isinstance(nb, LiveNotebook):
                    self.user_edits.follow(nb.doc)
                self._save(cp, TurnRow(state.turn_id, session.id, session.notebook, cp.id, state.started))
            if name in KERNEL_TOOLS and not state.kernel_tried:
                state.kernel_tried = True
                await self._save_kernel(session, cp)
                self._save(cp)
            return Prepared(cp.id, cp.kernel is not None, cp.kernel_error)

    async def _save_kernel(self, session: NotebookSession, cp: CheckpointRow) -> None:
        kid = await self.host.kernel_id_for(session.notebook)
        if kid is None:
            cp.kernel_error = "the notebook has no kernel"
            return
        if self.budget == 0:
            cp.kernel_error = "checkpoints of the kernel are off (JupyterACPTools.checkpoint_bytes = 0)"
            return
        try:
            kc = await checkpoint(self.kernels, kid, checkpoint_id=cp.id, budget=self.budget)
        except (CheckpointError, KernelUnavailable, KernelTimeout) as exc:
            cp.kernel_error = str(exc) or type(exc).__name__
            log.info("no checkpoint of kernel %s for turn %s: %s", kid, cp.turn_id, cp.kernel_error)
            return
        except Exception as exc:  # a checkpoint never breaks the call it precedes: the run goes on, or is asked
            log.exception("the checkpoint of kernel %s for turn %s failed", kid, cp.turn_id)
            cp.kernel_error = f"the checkpoint failed: {exc!r}"
            return
        cp.kernel_id, cp.kernel, cp.kernel_error = kid, kc.as_dict(), None

    def _save(self, cp: CheckpointRow, turn: TurnRow | None = None) -> None:
        try:
            self.store.save_checkpoint(cp)
            if turn is not None:
                self.store.save_turn(turn)
        except ReviewStoreError as exc:  # the call goes on; the turn cannot be reviewed or rewound, the log says why
            log.error("%s: turn %s cannot be reviewed or rewound", exc, cp.turn_id)

    # -- provenance ------------------------------------------------------------------------------------
    def stamp(self, session: NotebookSession, tool_call_id: str | None) -> Stamp | None:
        """The provenance of the changes of one tool call in the running turn (None outside a turn)."""
        turn = session.turn
        state = self._state(session)
        if turn is None or state is None:
            return None
        if state.who is None:
            state.who = self._who(session, turn)
        who = state.who

        def entry(action: ProvenanceAction) -> AgentChange:
            return agent_change(action, tool_call_id=tool_call_id, **who)

        return entry

    def _who(self, session: NotebookSession, turn: Any) -> dict[str, Any]:
        conn = self.host.connections.get(session.agent)
        info = ((conn.init_result if conn is not None else None) or {}).get("agentInfo") or {}
        name = info.get("title") or info.get("name") or session.agent
        version = info.get("version") if isinstance(info.get("version"), str) else None
        conversation_id, stored = f"{session.id}:{session.conversation}", 0
        try:
            for c in self.host.store.conversations(session.id):
                if c.number == session.conversation:
                    conversation_id, stored = c.id, c.turns
        except Exception:  # the transcript store failing costs the entry its conversation id, never the edit
            log.debug("the conversation of %s could not be read", session.id, exc_info=True)
        # the turn's own turn_started (and its row) may still wait to be stored: events are written in bursts, and
        # a fast agent's first change comes before it (the first turn would have no number: "a turn at 05:48")
        waiting = sum(1 for e in session.outbox if e.get("type") == "turn_started")
        waiting += sum(
            1 for e, _, n in session.unsaved if n == session.conversation and e.get("type") == "turn_started"
        )
        number = (stored + waiting) or None
        return {
            "agent_name": str(name),
            "agent_version": version,
            "conversation_id": conversation_id,
            "turn_id": turn.id,
            "prompt": str(getattr(turn, "prompt", "") or ""),
            "user": getattr(turn, "user", None),
            "session_id": session.id,
            "turn_number": number,
        }

    # -- the turn's end -------------------------------------------------------------------------------
    def turn_ended(self, session: NotebookSession, turn_id: str) -> dict[str, Any] | None:
        """The turn's end: its cells recorded; answers ``{changes, checkpoint}`` for ``turn_ended`` when the turn
        changed something and the notebook is the live document (else a ``notice`` follows, once they are read)."""
        state = self._turns.pop(turn_id, None)
        if state is None or state.checkpoint is None:
            return None
        cp = state.checkpoint
        nb = state.notebook
        if isinstance(nb, LiveNotebook):
            after = _copy_cells(nb.cells())
            self._end(session.id, cp, state, after)
            return {"changes": len(notebook_diff(cp.cells, after)), "checkpoint": cp.id, "after": state.reviewed}
        task = asyncio.ensure_future(self._end_later(session, cp, state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    def _end(self, session_id: str, cp: CheckpointRow, state: TurnState, after: list[dict[str, Any]] | None) -> None:
        try:
            self.store.save_turn(
                TurnRow(state.turn_id, session_id, cp.notebook, cp.id, state.started, time.time(), after)
            )
        except ReviewStoreError as exc:
            log.error("%s: the end of turn %s is not recorded", exc, state.turn_id)

    async def _end_later(self, session: NotebookSession, cp: CheckpointRow, state: TurnState) -> None:
        try:
            after: list[dict[str, Any]] | None = _copy_cells((await self.documents.open(cp.notebook)).cells())
        except NotebookError as exc:
            log.warning("the cells of %s at the end of turn %s could not be read: %s", cp.notebook, cp.turn_id, exc)
            after = None
        self._end(session.id, cp, state, after)
        n = len(notebook_diff(cp.cells, after)) if after is not None else 0
        self.host.emit(
            session,
            "notice",
            level="info",
            phase="review_ready",
            turn_id=cp.turn_id,
            review={"changes": n, "checkpoint": cp.id, "after": state.reviewed},
            text=f"the turn's {n} change{'' if n == 1 else 's'} can be reviewed",
        )

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.user_edits.close()
        self.store.close()

    # -- reading a turn -------------------------------------------------------------------------------
    def _turn(self, session: NotebookSession, turn_id: str) -> tuple[TurnRow, CheckpointRow]:
        try:
            row = self.store.turn(turn_id)
            cp = self.store.checkpoint(row.checkpoint_id) if row is not None else None
        except ReviewStoreError as exc:
            raise HubError(str(exc), 500) from None
        if row is None or row.session_id != session.id or cp is None:
            raise HubError(
                f"no record of turn {turn_id!r} in this notebook session: the turn changed neither the notebook nor "
                "the kernel (or it is another session's)",
                404,
            )
        return row, cp

    def touches_kernel(
        self, session: NotebookSession, turn_id: str | None = None, checkpoint_id: str | None = None
    ) -> bool:
        """Whether rewinding the turn (or restoring the checkpoint) puts a kernel's namespace back."""
        if turn_id is not None:
            return self._turn(session, turn_id)[1].kernel is not None
        return self._checkpoint(session, checkpoint_id or "").kernel is not None

    async def _after(self, session: NotebookSession, row: TurnRow) -> list[dict[str, Any]]:
        """The cells at the turn's end (the present while it runs, or when they were not recorded)."""
        if row.ended is not None and row.after is not None:
            return row.after
        try:
            return _copy_cells((await self.documents.open(session.notebook)).cells())
        except NotebookError as exc:
            raise HubError(f"the notebook could not be read: {exc}", 409) from None

    @staticmethod
    def _checkpoint_shape(cp: CheckpointRow) -> dict[str, Any]:
        kernel = None
        if cp.kernel is not None:
            kernel = {k: cp.kernel.get(k) for k in ("saved", "skipped", "bytes")}
        out: dict[str, Any] = {"id": cp.id, "kernel": kernel}
        if cp.kernel is None and cp.kernel_error:
            out["kernel_error"] = cp.kernel_error
        return out

    async def changes(self, session: NotebookSession, turn_id: str) -> dict[str, Any]:
        """``{turn_id, changes: [...], checkpoint: {id, kernel} | None, decided: [{cell_id, decision}]}``: the
        changes not decided yet, in notebook order."""
        row, cp = self._turn(session, turn_id)
        return self._shape(row, cp, notebook_diff(cp.cells, await self._after(session, row)))

    def _shape(self, row: TurnRow, cp: CheckpointRow, changes: list[CellChange]) -> dict[str, Any]:
        return {
            "turn_id": row.turn_id,
            "changes": [c.as_dict() for c in changes if c.cell_id not in row.decisions],
            "checkpoint": self._checkpoint_shape(cp),
            "decided": [{"cell_id": k, "decision": v} for k, v in row.decisions.items()],
            "running": row.ended is None,
        }

    # -- keep, discard ---------------------------------------------------------------------------------
    async def review(
        self,
        session: NotebookSession,
        turn_id: str,
        decision: str,
        cell_id: str | None,
        user: str,
        actor: Actor | None = None,
    ) -> dict[str, Any]:
        """Keep or discard one change (``cell_id``) or every change left; answers the changes left to review.

        A discarded change puts that cell back as it was before the turn (an added cell goes, a removed one comes
        back where it stood, a moved one goes back): the agent's edits of a cell the user edited since are undone
        with the per-cell undo, which keeps the user's edit; where that undo is gone (a server restart) such a cell
        is not touched and ``not_discarded`` says why."""
        if decision not in DECISIONS:
            raise HubError(f"decision is one of {', '.join(DECISIONS)}, not {decision!r}", 400)
        row, cp = self._turn(session, turn_id)
        if row.ended is None:
            raise HubError(f"turn {turn_id!r} is still running: review it once it has ended", 409)
        after = await self._after(session, row)
        left = [c for c in notebook_diff(cp.cells, after) if c.cell_id not in row.decisions]
        if cell_id is not None:
            chosen = [c for c in left if c.cell_id == cell_id]
            if not chosen:
                decided = row.decisions.get(cell_id)
                raise HubError(
                    f"cell {cell_id!r} has no change of turn {turn_id!r} left to review"
                    + (f" (it was decided: {decided})" if decided else ""),
                    409,
                )
        else:
            chosen = left
        done: list[str] = []
        refused: list[dict[str, str]] = []
        for change in chosen:
            if decision == "discard":
                why = await self._discard(session, row, cp.cells, after, change)
                if why is not None:
                    if cell_id is not None:
                        raise HubError(why, 409)
                    refused.append({"cell_id": change.cell_id, "reason": why})
                    continue
            row.decisions[change.cell_id] = decision
            done.append(change.cell_id)
        try:
            self.store.save_turn(row)
        except ReviewStoreError as exc:
            raise HubError(str(exc), 500) from None
        self.audit(
            session,
            f"review/{decision}",
            turn_id,
            user,
            f"{user} chose {decision} for {len(done)} change(s) of turn {turn_id}"
            + (f"; {len(refused)} not discarded" if refused else ""),
            cell_ids=done,
            actor=actor,
        )
        out = await self.changes(session, turn_id)
        out["decision"] = decision
        out["applied"] = done
        if refused:
            out["not_discarded"] = refused
        return out

    async def _discard(
        self,
        session: NotebookSession,
        row: TurnRow,
        before: list[dict[str, Any]],
        after: list[dict[str, Any]],
        change: CellChange,
    ) -> str | None:
        """Discard one change in the notebook as it is now; the reason when it cannot be, else None."""
        cid = change.cell_id
        try:
            nb = await self.documents.open(session.notebook)
            now = _copy_cells(nb.cells())
            here = next((c for c in now if c.get("id") == cid), None)
            there = next((c for c in after if c.get("id") == cid), None)
            edited_since = (
                here is not None and there is not None and _src(here) != _src(there) and change.change != "removed"
            )
            if edited_since:
                turns = self.documents.cells_with_edits(session.id).get(cid, [])
                if row.turn_id in turns:
                    await self.documents.revert_cell(session.id, session.notebook, cid, row.turn_id)
                    return None
                return (
                    f"cell {cid!r} was edited after the turn and the agent's edits of it can no longer be undone "
                    "alone (the server restarted since, or they were reverted): discarding would lose those edits. "
                    "Edit the cell yourself, or rewind the whole turn"
                )
            target = apply_decisions(before, now, {cid})
            await put_cells(nb, target)
        except NotebookError as exc:
            return f"cell {cid!r} could not be put back: {exc}"
        return None

    # -- rewind, restore -------------------------------------------------------------------------------
    def _checkpoint(self, session: NotebookSession, checkpoint_id: str) -> CheckpointRow:
        try:
            cp = self.store.checkpoint(checkpoint_id)
        except ReviewStoreError as exc:
            raise HubError(str(exc), 500) from None
        if cp is None or cp.session_id != session.id:
            raise HubError(f"no checkpoint {checkpoint_id!r} in this notebook session", 404)
        return cp

    async def rewind(
        self, session: NotebookSession, turn_id: str, user: str, actor: Actor | None = None
    ) -> dict[str, Any]:
        """The notebook and the kernel's namespace as they were before turn ``turn_id``; itself a checkpoint."""
        if session.turn is not None and session.turn.id == turn_id:
            raise HubError(f"turn {turn_id!r} is still running: stop it first, then rewind it", 409)
        _, cp = self._turn(session, turn_id)
        return await self._put_back(session, cp, user, "rewind", actor)

    async def restore_checkpoint(
        self, session: NotebookSession, checkpoint_id: str, user: str, actor: Actor | None = None
    ) -> dict[str, Any]:
        """The notebook and namespace of any checkpoint of the session (a rewind's undo, a turn's); itself one."""
        if session.turn is not None:
            raise HubError("a turn is running in this notebook session: stop it first, then restore", 409)
        return await self._put_back(session, self._checkpoint(session, checkpoint_id), user, "restore", actor)

    async def _put_back(
        self, session: NotebookSession, cp: CheckpointRow, user: str, what: str, actor: Actor | None = None
    ) -> dict[str, Any]:
        try:
            nb = await self.documents.open(session.notebook)
            present = _copy_cells(nb.cells())
        except NotebookError as exc:
            raise HubError(f"the notebook could not be read: {exc}", 409) from None
        cells_differ = bool(notebook_diff(present, cp.cells)) or any(
            cell_key(a) != cell_key(b) for a, b in zip(present, cp.cells, strict=False)
        )
        kid = await self.host.kernel_id_for(session.notebook) if cp.kernel is not None else None
        if not cells_differ and cp.kernel is None:
            raise HubError(
                f"nothing to {what}: the notebook is as it was at checkpoint {cp.id} and "
                + (
                    f"the turn did not change the kernel ({cp.kernel_error})"
                    if cp.kernel_error
                    else "the checkpoint holds no kernel namespace"
                ),
                409,
            )
        undo_id = uuid.uuid4().hex
        undo = CheckpointRow(undo_id, session.id, cp.turn_id, "undo", session.notebook, present)
        kernel: dict[str, Any] | None = None
        if cp.kernel is not None:
            kernel = await self._restore_kernel(cp, kid, undo)
            if not kernel["restored"] and not cells_differ:
                reasons = "; ".join(sorted({n["reason"] for n in kernel["not_restored"]}))[:500]
                raise HubError(
                    f"nothing to {what}: the notebook is as it was at checkpoint {cp.id}, and its kernel namespace "
                    f"cannot be put back ({reasons})",
                    409,
                )
        try:
            restored_cells = await put_cells(nb, _copy_cells(cp.cells)) if cells_differ else []
        except NotebookError as exc:
            raise HubError(f"the cells could not be put back: {exc}", 409) from None
        self._save(undo)
        result = {
            "turn_id": cp.turn_id,
            "checkpoint_id": cp.id,
            "restored_cells": restored_cells,
            "kernel": kernel,
            "undo_checkpoint": undo_id,
            "never_restored": NEVER_RESTORED,
        }
        names = len(kernel["restored"]) if kernel else 0
        self.audit(
            session,
            f"review/{what}",
            cp.turn_id,
            user,
            f"{user} {'rewound turn ' + cp.turn_id if what == 'rewind' else 'restored checkpoint ' + cp.id}: "
            f"{len(restored_cells)} cell(s) and {names} variable(s) put back; undo with checkpoint {undo_id}",
            cell_ids=restored_cells,
            actor=actor,
        )
        self.host.emit(
            session,
            "notice",
            level="info",
            phase="rewound" if what == "rewind" else "restored",
            turn_id=cp.turn_id,
            checkpoint_id=cp.id,
            undo_checkpoint=undo_id,
            text=(
                f"{'rewound to before the turn' if what == 'rewind' else 'restored a checkpoint'}: "
                f"{len(restored_cells)} cell(s) and {names} variable(s) put back; it can be undone"
            ),
            **({"actor": actor} if actor else {}),
        )
        return result

    async def _restore_kernel(self, cp: CheckpointRow, kid: str | None, undo: CheckpointRow) -> dict[str, Any]:
        saved = list((cp.kernel or {}).get("saved") or [])

        def none_restored(reason: str) -> dict[str, Any]:
            return {"restored": [], "not_restored": [{"name": n, "reason": reason} for n in saved], "removed": []}

        if kid is None:
            return none_restored("the notebook has no kernel now: start it and the namespace cannot come back")
        if kid != cp.kernel_id:
            return none_restored(
                f"the notebook's kernel is another one now ({kid}, the checkpoint is in {cp.kernel_id}): "
                "a checkpoint lives in its kernel's process"
            )
        try:
            kr = await restore(self.kernels, kid, checkpoint_id=cp.id, undo_id=undo.id, budget=self.budget)
        except (CheckpointError, KernelUnavailable, KernelTimeout) as exc:
            return none_restored(str(exc) or type(exc).__name__)
        undo.kernel_id, undo.kernel = kid, kr.undo.as_dict()
        return {
            "restored": kr.restored,
            "not_restored": [s.as_dict() for s in kr.not_restored],
            "removed": kr.removed,
        }

    # -- "Remove agent marks" --------------------------------------------------------------------------
    async def strip_marks(self, session: NotebookSession, user: str, actor: Actor | None = None) -> dict[str, Any]:
        """Remove every provenance entry from the session's notebook (before sharing it); ``{cells}`` cleaned."""
        from ...notebook import FileNotebook
        from ...notebook.provenance import strip_notebook, strip_ynotebook

        try:
            nb = await self.documents.open(session.notebook)
        except NotebookError as exc:
            raise HubError(f"the notebook could not be read: {exc}", 409) from None
        if isinstance(nb, LiveNotebook):
            n = strip_ynotebook(nb.doc)
        elif isinstance(nb, FileNotebook):
            n = strip_notebook(nb.model["content"])
            if n:
                await nb._save()
        else:
            raise HubError(
                "the notebook is open in a tab without real-time collaboration: remove the marks from the tab "
                "(or enable collaboration)",
                409,
            )
        self.audit(
            session, "review/strip_marks", None, user, f"{user} removed the agent marks of {n} cell(s)", actor=actor
        )
        return {"notebook": session.notebook, "cells": n}

    # -- audit -----------------------------------------------------------------------------------------
    def audit(
        self,
        session: NotebookSession,
        action: str,
        turn_id: str | None,
        user: str,
        message: str,
        *,
        cell_ids: Sequence[str] = (),
        actor: Actor | None = None,
    ) -> None:
        self.host.emit(
            session,
            "audit",
            message=message,
            power="review",
            action=action,
            channel="http",
            decision="allowed",
            rule=f"the user {user!r} has write on jupyter_acp",
            turn_id=turn_id,
            call_ids=[],
            user=user,
            cell_ids=list(cell_ids),
            **({"actor": actor} if actor else {}),
        )


def _src(cell: Mapping[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


__all__ = [
    "KERNEL_TOOLS",
    "NEVER_RESTORED",
    "NOTEBOOK_TOOLS",
    "REVIEWED_TOOLS",
    "Prepared",
    "ReviewService",
]
