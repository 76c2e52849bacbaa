"""The labextension's TypeScript unit tests (event reducer, upserts, stream reconnect), run by node."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

LABEXT = Path(__file__).resolve().parents[2] / "labextension"


def test_typescript_unit_tests():
    if shutil.which("jlpm") is None or not (LABEXT / "node_modules" / "typescript").exists():
        pytest.skip("the labextension's node_modules are not installed (cd labextension && jlpm install)")
    proc = subprocess.run(["jlpm", "test"], cwd=LABEXT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout
