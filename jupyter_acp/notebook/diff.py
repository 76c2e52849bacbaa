"""What a turn did to a notebook, cell by cell: added, removed, modified, moved (a turn's review).

Given the cells before and after (nbformat-like dicts with ids, as ``Notebook.cells()`` answers), ``notebook_diff``
lists the changes in notebook order; ``apply_decisions`` builds the cells that result from discarding some of
them and keeping the rest, which is what "Keep / Discard per cell and for the whole turn" needs.

Why not nbdime as a library: it installs (4.0.4 on PyPI), but brings GitPython, requests, jinja2, pygments and
colorama into the server for one function; it matches cells by content similarity (a multilevel LCS with
heuristics), not by id, and has no "moved" operation (a moved cell is a removal plus an addition); and its
notebook differ is configured through module-level state (``set_notebook_diff_targets``) that every caller in
the process shares.  Here cells are matched by their ids, which the live document keeps for every cell
(nbformat 4.5), so a move is exact: the cells found in both lists that keep their relative order are the
longest increasing subsequence of their positions (O(n log n)), and the others moved.  nbdime stays the
reference for showing a diff (source lines, outputs), which the panel renders.

Rules:
* a cell in both lists is ``modified`` when its type or source changed, or its outputs did
  (``outputs_changed``; execution counts are ignored: running a cell again to the same result changes no
  output); ``moved`` when it left the relative order, whatever else changed (``before`` and ``after`` then
  show whether its source changed too); metadata (collapse state, timings, provenance) is not reviewed;
* a removed cell is listed where it stood: after the change of the cell that preceded it before the turn;
* cells without an id (an old notebook read from a file) are matched by nothing: removed and added.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ChangeKind = Literal["added", "removed", "modified", "moved"]


@dataclass(frozen=True)
class CellSide:
    cell_type: str
    source: str

    def as_dict(self) -> dict[str, str]:
        return {"cell_type": self.cell_type, "source": self.source}


@dataclass(frozen=True)
class CellChange:
    cell_id: str
    change: ChangeKind
    before: CellSide | None
    after: CellSide | None
    outputs_changed: bool
    #: positions in the lists given (None where the cell is absent)
    before_index: int | None = None
    after_index: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{cell_id, change, before: {cell_type, source} | None, after: ..., outputs_changed}``: the HTTP shape."""
        return {
            "cell_id": self.cell_id,
            "change": self.change,
            "before": self.before.as_dict() if self.before else None,
            "after": self.after.as_dict() if self.after else None,
            "outputs_changed": self.outputs_changed,
        }


def _source(cell: Mapping[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _side(cell: Mapping[str, Any]) -> CellSide:
    return CellSide(str(cell.get("cell_type", "code")), _source(cell))


def _normal(value: Any) -> Any:
    """An output as compared: no execution count, no transient data, multi-line strings joined, numbers alike."""
    if isinstance(value, Mapping):
        return {k: _normal(v) for k, v in value.items() if k not in ("execution_count", "transient")}
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return "".join(value)
        return [_normal(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def outputs_differ(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    return bool(_normal(before.get("outputs") or []) != _normal(after.get("outputs") or []))


def _keys(cells: Sequence[Mapping[str, Any]], side: str) -> list[str]:
    """One key per cell: its id, made unique (a repeated id gets ``#2``...); no id: a key matched by nothing."""
    seen: dict[str, int] = {}
    out = []
    for i, cell in enumerate(cells):
        cid = cell.get("id")
        key = cid if isinstance(cid, str) and cid else f"\0{side}{i}"
        n = seen.get(key, 0) + 1
        seen[key] = n
        out.append(key if n == 1 else f"{key}#{n}")
    return out


def _shown_id(key: str) -> str:
    return "" if key.startswith("\0") else key


def stable_keys(before: Sequence[str], after: Sequence[str]) -> set[str]:
    """The common keys that keep their relative order: a longest increasing subsequence of their positions
    before, taken in the order after (patience sorting); the common keys left out moved."""
    at = {k: i for i, k in enumerate(before)}
    seq = [k for k in after if k in at]
    tails: list[int] = []  # tails[j]: smallest before-position ending an increasing run of length j + 1
    tail_key: list[str] = []
    prev: dict[str, str | None] = {}
    for k in seq:
        p = at[k]
        j = bisect.bisect_left(tails, p)
        if j == len(tails):
            tails.append(p)
            tail_key.append(k)
        else:
            tails[j] = p
            tail_key[j] = k
        prev[k] = tail_key[j - 1] if j else None
    out: set[str] = set()
    node = tail_key[-1] if tail_key else None
    while node is not None:
        out.add(node)
        node = prev[node]
    return out


def notebook_diff(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> list[CellChange]:
    """The changes from ``before`` to ``after``, in notebook order (see the module's rules)."""
    bkeys, akeys = _keys(before, "b"), _keys(after, "a")
    bat = {k: i for i, k in enumerate(bkeys)}
    aat = {k: i for i, k in enumerate(akeys)}
    stable = stable_keys(bkeys, akeys)
    # removed cells, grouped under the nearest cell before them that is still there (None: the start)
    removed_after: dict[str | None, list[int]] = {}
    anchor: str | None = None
    for i, k in enumerate(bkeys):
        if k in aat:
            anchor = k
        else:
            removed_after.setdefault(anchor, []).append(i)

    def removed(under: str | None) -> list[CellChange]:
        return [
            CellChange(_shown_id(bkeys[i]), "removed", _side(before[i]), None, bool(before[i].get("outputs")), i, None)
            for i in removed_after.get(under, ())
        ]

    out = removed(None)
    for j, k in enumerate(akeys):
        cell = after[j]
        if k not in bat:
            out.append(CellChange(_shown_id(k), "added", None, _side(cell), bool(cell.get("outputs")), None, j))
        else:
            i = bat[k]
            old = before[i]
            b, a = _side(old), _side(cell)
            outputs = outputs_differ(old, cell)
            if k not in stable:
                out.append(CellChange(_shown_id(k), "moved", b, a, outputs, i, j))
            elif b != a or outputs:
                out.append(CellChange(_shown_id(k), "modified", b, a, outputs, i, j))
        out.extend(removed(k))
    return out


def apply_decisions(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], discard: Collection[str]
) -> list[dict[str, Any]]:
    """The cells after discarding the changes of the cells in ``discard`` (ids) and keeping the others.

    A discarded addition is taken out; a discarded modification gets the cell back as it was (source,
    outputs, metadata); a discarded move or removal puts the cell, as it was, right after the nearest cell
    that preceded it before the turn and is in its old place (not added, not moved and kept there),
    or first.  Discarding every change gives ``before`` back; discarding none gives ``after``."""
    bkeys, akeys = _keys(before, "b"), _keys(after, "a")
    bat = {k: i for i, k in enumerate(bkeys)}
    aset = set(akeys)
    stable = stable_keys(bkeys, akeys)
    # a repeated id (``x#2``) goes with its id; cells without one (shown as "") go together
    drop = {k for k in {*bkeys, *akeys} if _shown_id(k).split("#", 1)[0] in discard}
    result: list[tuple[str, dict[str, Any]]] = []
    for j, k in enumerate(akeys):
        if k not in bat:
            if k not in drop:
                result.append((k, copy.deepcopy(dict(after[j]))))
        elif k in drop:
            result.append((k, copy.deepcopy(dict(before[bat[k]]))))
        else:
            result.append((k, copy.deepcopy(dict(after[j]))))
    placed = set(stable)  # cells in their old place, in their old order
    for i, k in enumerate(bkeys):
        if k in stable or k not in drop:
            continue  # unchanged in place, or a kept move or removal
        if k in aset:  # a discarded move: out of where the turn put it
            result = [(rk, c) for rk, c in result if rk != k]
        at = 0
        for prev in reversed(bkeys[:i]):
            if prev in placed:
                at = next(n for n, (rk, _) in enumerate(result) if rk == prev) + 1
                break
        result.insert(at, (k, copy.deepcopy(dict(before[i]))))
        placed.add(k)
    return [c for _, c in result]
