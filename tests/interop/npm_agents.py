"""Real ACP agents from the npm registry, installed once per machine into a cache and reused.

``$JUPYTER_ACP_INTEROP_CACHE`` (default ``~/.cache/jupyter-acp-interop``) holds one directory per
pinned ``package@version``; an install goes to a temporary directory first and is renamed into place
when it worked, under a file lock (parallel workers wait for the first one).  Versions are pinned so
that a new release cannot change what the tests prove; bump them here.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NpmAgent:
    package: str
    version: str
    bin: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


# The @zed-industries builds are the ones real-agents.md describes.  The newer
# @agentclientprotocol/claude-agent-acp (0.101.x) needs node >= 22; @agentclientprotocol/codex-acp (2.x)
# wraps the codex app-server (another ~200 MB download) and is not covered yet.
CODEX = NpmAgent("@zed-industries/codex-acp", "0.16.0", "codex-acp")
CLAUDE = NpmAgent("@zed-industries/claude-agent-acp", "0.23.1", "claude-agent-acp")

#: how long the last install took, per spec ("cached" when it was already there): reported by the tests
INSTALL_TIMES: dict[str, str] = {}


def cache_root() -> Path:
    root = os.environ.get("JUPYTER_ACP_INTEROP_CACHE") or os.path.join(Path.home(), ".cache", "jupyter-acp-interop")
    return Path(root)


class InstallError(RuntimeError):
    pass


def install(agent: NpmAgent, timeout: float = 600) -> Path:
    """The agent's executable, installing the pinned package first when it is not cached."""
    if shutil.which("npm") is None:
        raise InstallError("npm is not installed")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / agent.spec.replace("/", "__")
    exe = target / "node_modules" / ".bin" / agent.bin
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists() and exe.exists():
            INSTALL_TIMES[agent.spec] = "cached"
            return exe
        shutil.rmtree(target, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=".install-", dir=root))
        try:
            (tmp / "package.json").write_text(json.dumps({"name": "interop-agent", "private": True}))
            started = time.monotonic()
            # optional dependencies stay: codex-acp's binary is one (never --omit=optional)
            try:
                proc = subprocess.run(
                    ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", agent.spec],
                    check=False,
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired as exc:
                raise InstallError(f"npm install {agent.spec} took more than {timeout:.0f}s") from exc
            if proc.returncode != 0:
                raise InstallError(f"npm install {agent.spec} failed ({proc.returncode}): {proc.stderr[-2000:]}")
            INSTALL_TIMES[agent.spec] = f"{time.monotonic() - started:.1f}s"
            (tmp / ".complete").write_text(INSTALL_TIMES[agent.spec] + "\n")
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if not exe.exists():
            raise InstallError(f"{agent.spec} installed but has no {agent.bin} executable")
        return exe
