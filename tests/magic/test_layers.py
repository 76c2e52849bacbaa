"""The magic's imports point one way: protocol, acp, the agent catalog and (the local backend only) tools, notebook, kernels.

Never the server's sessions, routes or app (what a kernel imports must not drag the server in); no module
of the package over ~400 lines.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import jupyter_acp.magic

MAGIC = os.path.dirname(os.path.abspath(jupyter_acp.magic.__file__))
ALLOWED = {"protocol", "acp", "catalog", "magic"}
LOCAL_ONLY = {"tools", "notebook", "kernels"}
SERVER_SIDE = ("app", "http", "kernel_api", "sessions", "channels", "hub", "handlers", "store", "client")


def imported(path: str) -> list[tuple[int, str]]:
    """(line, jupyter_acp module) of every import in a file of the package, TYPE_CHECKING ones included."""
    base = ["jupyter_acp", "magic"]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] if node.module or not node.level else [f"{target}.{a.name}" for a in node.names]
            out += [(node.lineno, n) for n in names if n.split(".")[0] == "jupyter_acp"]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "jupyter_acp"]
    return out


def violations() -> list[str]:
    bad = []
    for name in sorted(os.listdir(MAGIC)):
        if not name.endswith(".py"):
            continue
        allowed = ALLOWED | (LOCAL_ONLY if name in ("local.py", "local_tools.py", "local_files.py") else set())
        for line, module in imported(os.path.join(MAGIC, name)):
            parts = module.split(".")
            if len(parts) < 2 or parts[1] not in allowed:
                bad.append(f"magic/{name}:{line} imports {module}")
    return bad


def test_the_magic_imports_only_what_it_may():
    assert violations() == []


def test_importing_the_magic_loads_nothing_of_the_server():
    code = (
        "import sys, jupyter_acp.magic, jupyter_acp.magic.local, jupyter_acp.magic.local_tools\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('jupyter_acp.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    server = [m for m in loaded if m.split(".")[1] in SERVER_SIDE]
    assert server == [], server


def test_modules_stay_small():
    sizes = {
        n: sum(1 for _ in open(os.path.join(MAGIC, n), encoding="utf-8"))
        for n in os.listdir(MAGIC)
        if n.endswith(".py")
    }
    assert max(sizes.values()) <= 420, sizes
