"""A turn's notebook diff (``notebook/diff.py``): changes in notebook order, moves found by id, and what
discarding some of them gives; checked on examples and on generated notebooks (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_acp.notebook.diff import apply_decisions, notebook_diff, stable_keys


def cell(cid: str, source: str = "", cell_type: str = "code", outputs: list[Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"id": cid, "cell_type": cell_type, "source": source, "metadata": {}}
    if cell_type == "code":
        c.update(outputs=outputs or [], execution_count=None)
    return c


def kinds(changes: Any) -> list[tuple[str, str]]:
    return [(c.cell_id, c.change) for c in changes]


def test_each_kind_of_change_is_listed_in_notebook_order():
    before = [cell("a", "1"), cell("b", "2"), cell("c", "3"), cell("d", "4"), cell("e", "5")]
    out = [{"output_type": "stream", "name": "stdout", "text": "hi\n"}]
    after = [cell("a", "1"), cell("d", "4"), cell("n", "new"), cell("b", "2", outputs=out), cell("e", "five")]
    changes = notebook_diff(before, after)
    assert kinds(changes) == [("d", "moved"), ("n", "added"), ("b", "modified"), ("c", "removed"), ("e", "modified")]
    by_id = {c.cell_id: c for c in changes}
    assert by_id["b"].outputs_changed and by_id["b"].before == by_id["b"].after
    assert by_id["e"].as_dict() == {
        "cell_id": "e",
        "change": "modified",
        "before": {"cell_type": "code", "source": "5"},
        "after": {"cell_type": "code", "source": "five"},
        "outputs_changed": False,
    }
    assert by_id["c"].after is None and by_id["n"].before is None


def test_a_cell_moved_and_edited_is_a_move_that_shows_both_sources():
    before = [cell("a", "x = 1"), cell("b"), cell("c")]
    after = [cell("b"), cell("c"), cell("a", "x = 2")]
    (change,) = notebook_diff(before, after)
    assert change.change == "moved" and change.before and change.after
    assert (change.before.source, change.after.source) == ("x = 1", "x = 2")


def test_an_execution_count_alone_is_no_change_but_a_type_change_is():
    run1 = [{"output_type": "execute_result", "execution_count": 1, "data": {"text/plain": ["4"]}, "metadata": {}}]
    run2 = [{"output_type": "execute_result", "execution_count": 7.0, "data": {"text/plain": "4"}, "metadata": {}}]
    assert notebook_diff([cell("a", "2+2", outputs=run1)], [cell("a", "2+2", outputs=run2)]) == []
    assert kinds(notebook_diff([cell("a", "# t")], [cell("a", "# t", "markdown")])) == [("a", "modified")]


def test_removed_cells_at_the_start_come_first_and_duplicate_ids_do_not_break_it():
    before = [cell("x"), cell("a"), cell("a", "dup")]
    after = [cell("a")]
    assert kinds(notebook_diff(before, after)) == [("x", "removed"), ("a#2", "removed")]


# -- generated notebooks ---------------------------------------------------------------------------
IDS = [f"c{i}" for i in range(12)]


@st.composite
def turns(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A notebook and what a turn made of it: cells removed, edited, re-run, moved, added."""
    ids = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=8))
    before = [cell(i, draw(st.sampled_from(["", "a", "b"])), draw(st.sampled_from(["code", "markdown"]))) for i in ids]
    kept = [c for c in before if draw(st.booleans()) or draw(st.booleans())]
    after = []
    for c in draw(st.permutations(kept)):
        c = dict(c)
        if draw(st.integers(0, 3)) == 0:
            c["source"] = c["source"] + "!"
        if c["cell_type"] == "code" and draw(st.integers(0, 3)) == 0:
            c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "out"}]
        after.append(c)
    for n in range(draw(st.integers(0, 3))):
        after.insert(draw(st.integers(0, len(after))), cell(f"new{n}", "added"))
    return before, after


def same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    return [(c["id"], c["cell_type"], c["source"], c.get("outputs")) for c in a] == [
        (c["id"], c["cell_type"], c["source"], c.get("outputs")) for c in b
    ]


@settings(max_examples=300, deadline=None)
@given(turns())
def test_discarding_every_change_gives_the_notebook_before_and_keeping_all_gives_after(turn):
    before, after = turn
    ids = {c.cell_id for c in notebook_diff(before, after)}
    assert same(apply_decisions(before, after, ids), before)
    assert same(apply_decisions(before, after, set()), after)
    assert notebook_diff(before, before) == [] and notebook_diff(after, after) == []


@settings(max_examples=300, deadline=None)
@given(turns(), st.data())
def test_discarding_some_changes_leaves_exactly_the_others(turn, data):
    before, after = turn
    changes = notebook_diff(before, after)
    discard = {c.cell_id for c in changes if data.draw(st.booleans())}
    result = apply_decisions(before, after, discard)
    left = {c.cell_id: c for c in notebook_diff(before, result)}
    full = {c.cell_id: c for c in changes}
    for cid, c in full.items():
        if cid in discard:
            assert cid not in left, (cid, c, left.get(cid))
        elif c.change in ("added", "removed"):
            assert left[cid].change == c.change
        elif c.change == "modified":
            assert left[cid].change in ("modified", "moved") and left[cid].after == c.after
    assert set(left) <= set(full) - discard
    moved_left = sum(1 for c in left.values() if c.change == "moved")
    assert moved_left <= sum(1 for cid, c in full.items() if c.change == "moved" and cid not in discard)
    # what is left to review, applied in turn, ends where the turn ended
    assert same(apply_decisions(before, result, set()), result)


@settings(max_examples=300, deadline=None)
@given(turns())
def test_the_changes_follow_the_order_of_the_notebook_after_and_moves_are_fewest(turn):
    before, after = turn
    changes = notebook_diff(before, after)
    positions = [c.after_index for c in changes if c.after_index is not None]
    assert positions == sorted(positions)
    common = [c["id"] for c in after if c["id"] in {b["id"] for b in before}]
    order = {c["id"]: i for i, c in enumerate(before)}
    # no longer ordered subset exists than the cells kept in place (brute force on these small lists)
    best = 0
    for mask in range(1 << len(common)):
        pick = [order[c] for i, c in enumerate(common) if mask >> i & 1]
        if pick == sorted(pick):
            best = max(best, len(pick))
    assert len(stable_keys([c["id"] for c in before], [c["id"] for c in after])) == best
    assert sum(1 for c in changes if c.change == "moved") == len(common) - best
