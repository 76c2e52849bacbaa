"""The checks are listed once (``scripts/lint.sh``): pre-commit runs each by its name, ``scripts/test.sh`` runs them
all before the tests and ``.ci/run`` runs ``scripts/test.sh``; a check added to one list and not the other fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def lint_checks() -> list[str]:
    match = re.search(r"^CHECKS=\(([^)]*)\)$", (ROOT / "scripts/lint.sh").read_text(), re.M)
    assert match, "scripts/lint.sh lists its checks in CHECKS=(...)"
    return match.group(1).split()


def test_pre_commit_runs_every_check_of_the_lint_script_by_its_name():
    hooks = [
        h for repo in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"] for h in repo["hooks"]
    ]
    assert [h["id"] for h in hooks] == lint_checks()
    for hook in hooks:
        assert re.fullmatch(rf"bash scripts/lint\.sh (--fix )?{hook['id']}", hook["entry"]), hook
        assert hook.get("pass_filenames") is False, f"{hook['id']} checks the tree, not the files given"


def test_mypy_is_one_of_the_checks():
    assert "mypy" in lint_checks()


def test_ci_runs_the_test_script_which_runs_every_check():
    ci = (ROOT / ".ci/run").read_text()
    assert re.search(r"^bash scripts/test\.sh\b", ci, re.M)
    test_sh = (ROOT / "scripts/test.sh").read_text()
    assert re.search(r"^bash scripts/lint\.sh$", test_sh, re.M), "test.sh runs every check (no names given)"


def test_the_lint_script_refuses_a_check_it_does_not_have():
    out = subprocess.run(["bash", "scripts/lint.sh", "no-such-check"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2
    assert "no check named 'no-such-check'" in out.stderr and "mypy" in out.stderr


def collected(marker: str, *files: str) -> set[str]:
    """The tests of ``files`` that ``-m marker`` selects (collection only)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker, *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode in (0, 5), out.stdout + out.stderr  # 5: nothing selected
    return {line for line in out.stdout.splitlines() if "::" in line}


def test_each_test_is_marked_by_its_folder_and_the_fixtures_it_uses():
    files = ("tests/test_checks.py", "tests/test_startup.py", "tests/browser/test_labextension_unit.py")
    unit, server, browser = (collected(m, *files) for m in ("unit", "server", "browser"))
    assert "tests/test_checks.py::test_mypy_is_one_of_the_checks" in unit
    # no fixture: a unit test, in a module of server tests
    assert "tests/test_startup.py::test_loading_the_extension_imports_nothing_heavy" in unit
    assert "tests/test_startup.py::test_a_request_before_the_build_is_answered" in server  # jp_serverapp, via api
    assert browser and all(t.startswith("tests/browser/") for t in browser)
    assert not (unit & server or unit & browser or server & browser)
    everything = collected("unit or server or browser or interop", *files)
    assert everything == unit | server | browser


def test_the_fast_run_is_defined_by_markers_and_the_full_run_lists_the_slowest_tests():
    test_sh = (ROOT / "scripts/test.sh").read_text()
    assert 'pytest -m "not browser and not interop and not hub"' in test_sh and "--ignore" not in test_sh
    # the full run: the same split by markers, two streams at once, each listing its slowest tests
    assert re.search(r'^python -m pytest --durations=\d+ -m "browser or interop or hub" "\$@" .*&$', test_sh, re.M)
    assert re.search(
        r'^python -m pytest --durations=\d+ -m "not browser and not interop and not hub" "\$@"', test_sh, re.M
    )
