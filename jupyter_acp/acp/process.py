"""An agent subprocess: curated environment, own process group, drained stderr, clean shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import os
import shutil
import signal
from collections import deque
from collections.abc import Iterable, Mapping

log = logging.getLogger(__name__)

#: Variables every agent needs to run at all.
BASE_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "NODE_PATH",
    "NODE_OPTIONS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NO_PROXY",
    "no_proxy",
)
#: Provider settings the user configured: these pass so agents can reach their models.
PROVIDER_PATTERNS = ("*_API_KEY", "*_API_BASE", "*_BASE_URL", "JUPYTER_ACP_*", "LC_*", "XDG_*", "*_PROXY", "*_proxy")
#: Never passed, whatever a pattern says: the server's token and the kernels' secret.
NEVER_PASS = ("JUPYTER_TOKEN", "JPY_API_TOKEN", "JUPYTERHUB_API_TOKEN", "JUPYTER_ACP_TOKEN", "JUPYTER_ACP_URL")


def curated_env(
    source: Mapping[str, str],
    *,
    passthrough: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    secrets: Iterable[str] = (),
) -> dict[str, str]:
    """The environment an agent gets: basics, provider settings, its configured extras; no tokens.

    ``secrets`` are values (not names) that must never appear: a variable holding one is dropped.
    """
    secret_values = {s for s in secrets if s}
    patterns = PROVIDER_PATTERNS + tuple(passthrough)
    env: dict[str, str] = {}
    for key, value in source.items():
        if key in NEVER_PASS or value in secret_values:
            continue
        if key in BASE_ENV or any(fnmatch.fnmatchcase(key, pat) for pat in patterns):
            env[key] = value
    for key, value in (extra or {}).items():
        if key not in NEVER_PASS:
            env[key] = value
    return env


def resolve_command(command: str) -> str | None:
    """Absolute path of an agent command, or None when it is not installed."""
    if os.path.isabs(command):
        return command if os.access(command, os.X_OK) else None
    return shutil.which(command)


class AgentProcess:
    """The subprocess behind one agent connection."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, *, stderr_bytes: int = 64 * 1024) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self._stderr_budget = stderr_bytes
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self.proc: asyncio.subprocess.Process | None = None
        self._drain_task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc else None

    async def start(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,  # own process group: we can end the agent and its children
            limit=1 << 20,
        )
        assert self.proc.stdout and self.proc.stdin and self.proc.stderr
        self._drain_task = asyncio.ensure_future(self._drain_stderr(self.proc.stderr))
        return self.proc.stdout, self.proc.stdin

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        """Keep reading stderr so a chatty agent never blocks; keep only the tail."""
        while True:
            chunk = await stream.read(1 << 16)
            if not chunk:
                return
            self._stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > self._stderr_budget and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())
            if self._stderr_size > self._stderr_budget:
                only = self._stderr.pop()[-self._stderr_budget :]
                self._stderr.append(only)
                self._stderr_size = len(only)

    def stderr_tail(self, lines: int = 20) -> str:
        text = b"".join(self._stderr).decode("utf-8", "replace")
        return "\n".join(text.rstrip().splitlines()[-lines:])

    async def wait(self) -> int:
        assert self.proc
        return await self.proc.wait()

    async def stop(self, grace: float = 2.0) -> None:
        """Close stdin, give the agent ``grace`` seconds, then end its whole process group."""
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None and proc.stdin and not proc.stdin.is_closing():
            with contextlib.suppress(Exception):
                proc.stdin.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
        if proc.returncode is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), grace)
        # Whatever the leader did, nothing of its group may outlive it.
        self._signal_group(signal.SIGKILL)
        if proc.returncode is None:
            await proc.wait()
        if self._drain_task:
            self._drain_task.cancel()

    def _signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def kill_now(self) -> None:
        """Synchronous last resort at interpreter exit."""
        self._signal_group(signal.SIGKILL)
