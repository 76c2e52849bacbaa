"""The run plan's analysis (``tools/run_plan.py``) on its own: the names a cell defines and uses, and which cells
are stale given the kernel's history."""

from __future__ import annotations

import pytest

from jupyter_acp.tools.run_plan import cell_facts, plan


@pytest.mark.parametrize(
    ("source", "defines", "uses"),
    [
        ("import pandas as pd\ndf = pd.read_csv('a.csv')", {"pd", "df"}, set()),
        ("x = x + 1", {"x"}, {"x"}),
        ("df['total'] = df.a + rate", {"df"}, {"df", "rate"}),
        ("df.dropna(inplace=True)", {"df"}, {"df"}),
        ("for i in range(n):\n    rows.append(i)", {"i", "rows"}, {"n", "rows"}),
        ("with open(path) as fh:\n    text = fh.read()", {"fh", "text"}, {"path"}),
        ("def f(a):\n    return a + helper() + scale\ndef helper():\n    return 1", {"f", "helper"}, {"scale"}),
        ("[v * k for v in values]", set(), {"values", "k"}),
        ("class Model(Base):\n    size = default_size", {"Model"}, {"Base", "default_size"}),
        ("def bump():\n    global counter\n    counter += 1", {"bump", "counter"}, set()),
        ("try:\n    import fast\nexcept ImportError as err:\n    fast = None", {"fast", "err"}, set()),
        ("%load_ext autoreload\n%autoreload 2\nready = True", {"ready"}, set()),
        ("%%time\nresult = compute(data)", {"result"}, {"compute", "data"}),
        ("listing = !ls", {"listing"}, set()),
        ("print(len(values))", set(), {"values"}),
    ],
)
def test_a_cell_defines_and_uses_these_names(source, defines, uses):
    facts = cell_facts(source)
    assert (set(facts.defines), set(facts.uses), facts.uncertain) == (defines, uses, ())


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("%run other.py", "%run"),
        ("exec(code)", "exec()"),
        ("from m import *", "import *"),
        ("def broken(:", "parse"),
        ("%store -r x", "%store"),
    ],
)
def test_a_cell_the_analysis_cannot_see_through_says_why(source, why):
    assert any(why in u for u in cell_facts(source).uncertain), cell_facts(source)


def cell(cid, source, count):
    return {"id": cid, "cell_type": "code", "source": source, "execution_count": count}


NOTEBOOK = [
    cell("c1", "import pandas as pd", 1),
    cell("c2", "raw = pd.read_csv('a.csv')", 2),
    cell("c3", "df = raw.dropna()", 3),
    cell("c4", "n = 5", 4),
    cell("c5", "df.head(n)", 5),
    cell("c6", "mean = df.mean()", 6),
    {"id": "m1", "cell_type": "markdown", "source": "# notes"},
    cell("c7", "report = f'{n}'", 7),
    cell("c9", "print(mean)", 8),
]
RAN = {
    1: "import pandas as pd",
    2: "raw = pd.read_csv('a.csv')",
    3: "df = raw",
    4: "n = 5",
    5: "df.head(n)",
    6: "mean = df.mean()",
    7: "report = f'{n}'",
    8: "print(mean)",
}


def test_an_edited_cell_and_what_uses_its_names_are_stale_in_notebook_order():
    p = plan(NOTEBOOK, RAN)
    assert [(s.cell_id, s.why, s.names) for s in p.steps] == [
        ("c3", "edited", ()),
        ("c5", "uses", ("df",)),
        ("c6", "uses", ("df",)),
        ("c9", "uses", ("mean",)),
    ]
    assert p.summary() == "Run 4 cells: c3 edited; c5, c6 use `df`; c9 uses `mean`"
    assert plan(NOTEBOOK, {**RAN, 3: "df = raw.dropna()"}).steps == []


def test_a_cell_run_before_a_name_it_uses_was_redefined_is_stale():
    cells = [cell("a", "x = 1", 9), cell("b", "y = x + 1", 2)]
    p = plan(cells, {2: "y = x + 1", 9: "x = 1"})
    assert [(s.cell_id, s.why, s.source_cell) for s in p.steps] == [("b", "older", "a")]


def test_after_a_restart_every_cell_that_ran_is_stale_and_without_history_the_plan_says_so():
    cells = [cell("a", "x = 1", 1), cell("b", "print(x)", 2)]
    assert [s.why for s in plan(cells, {}).steps] == ["restarted", "restarted"]
    blind = plan(cells, None)
    assert blind.steps == [] and "history could not be read" in blind.text()


def test_a_never_run_cell_joins_the_plan_only_as_an_input_and_a_redefinition_restores_the_name():
    cells = [cell("a", "x = 1", None), cell("b", "y = x + 1", 2), cell("c", "y = 5", 1), cell("d", "z = 0", None)]
    p = plan(cells, {2: "y = x + 2", 1: "y = 5"})
    assert [(s.cell_id, s.why) for s in p.steps] == [("a", "input"), ("b", "edited"), ("c", "restores")]
    assert p.never_run == ["d"]


def test_an_uncertain_cell_in_the_way_makes_what_follows_stale_and_says_so():
    cells = [cell("a", "base = 2", 1), cell("b", "%run setup.py", 2), cell("c", "print(anything)", 3)]
    p = plan(cells, {1: "base = 1", 2: "%run setup.py", 3: "print(anything)"})
    assert [s.cell_id for s in p.steps] == ["a", "b", "c"]
    assert p.uncertain == ["b: `%run` may define or use any name"]
    assert "b, c may use any name" in p.summary()


def test_a_cell_using_a_name_defined_only_below_it_is_warned_about():
    cells = [
        cell("a", "seed = 1", 1),
        cell("b", "print(helper(seed))", 2),
        cell("c", "def helper(v):\n    return v", 3),
    ]
    p = plan(cells, {1: "seed = 0", 2: "print(helper(seed))", 3: "def helper(v):\n    return v"})
    assert [s.cell_id for s in p.steps] == ["a", "b"]
    assert p.warnings == ["b uses `helper`, defined only in cells below it: top to bottom it would fail"]
