"""Agents from the ACP Agent Registry: its list, what installing one runs, and the install into a per-user prefix.

The registry is one JSON file (``{"version", "agents": [...], "extensions": [...]}``; each agent ``{id, name,
version, description, distribution: {npx | uvx | binary}}``), read from ``c.JupyterACP.registry_url`` (the public
one by default; a path or ``file://`` URL works too, for a mirror or a test) and cached a few minutes.  When it cannot
be read, the copy shipped in this package (``registry.json`` beside this module, the public list's shape with the
entries confirmed when it was written) answers, and says so: a machine offline still lists agents.

Installing (``Installer``) puts an agent under ``<private folder>/registry/<id>/`` (the user's data dir, beside the
transcripts), never on the system:

``npx``     ``npm install --prefix DIR PACKAGE``; the agent is DIR/node_modules/.bin/CMD (the package's own bin, or the
            entry's ``cmd``)
``uvx``     a virtual environment DIR/venv of this server's Python, ``pip install PACKAGE`` into it; the agent is its
            bin/CMD (the entry's ``cmd``, else the package's name, as uvx runs it)
``binary``  only when the manifest gives the archive's ``sha256`` (the public schema allows it): downloaded over
            https (http only from this machine), checked, unpacked without leaving DIR; without a checksum the
            install is refused, naming the rule (a binary nobody can verify does not run here)

The installers run in their own process group with the basics of the environment (``PATH``, ``HOME``, proxies,
``npm_config_*``, ``PIP_*``): no provider key, no server token; their output becomes the install's progress
(``Install.lines``), bounded.  An entry's ``env`` may not set what changes how programs load (``LD_*``, ``PATH``,
``PYTHON*``, ``NODE_OPTIONS``, ``JUPYTER_*``, ...): such a variable is dropped and the plan says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import signal
import sys
import tarfile
import time
import urllib.request
import zipfile
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..acp.process import BASE_ENV, NEVER_PASS

log = logging.getLogger(__name__)

#: the public registry's index (the protocol's own CDN)
REGISTRY_URL = "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json"
#: the copy shipped with the package
SHIPPED = Path(__file__).with_name("registry.json")
#: how long a fetched list is kept, and the most a list or an archive may weigh
CACHE_SECONDS = 600.0
MAX_LIST_BYTES = 8 * 1024 * 1024
MAX_ARCHIVE_BYTES = 1024 * 1024 * 1024
#: an agent id (the registry's own rule) and a package spec we pass to npm or pip
AGENT_ID = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
PACKAGE = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[A-Za-z0-9][A-Za-z0-9._~-]*([@=<>!~]=?[A-Za-z0-9.*+_-]+)?$")
COMMAND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
#: lines of an installer's output kept as progress, and their length
PROGRESS_LINES = 40
LINE_CHARS = 400


def platform_key() -> str:
    """This machine in the registry's words: ``linux-x86_64``, ``darwin-aarch64``, ``windows-x86_64``, ..."""
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "windows"}.get(platform.system(), platform.system())
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{system}-{machine}"


def unsafe_env_name(name: str) -> bool:
    """A variable a registry entry may not set: it changes how programs load, or it is ours."""
    return (
        name in NEVER_PASS
        or name in BASE_ENV
        or name.startswith(("LD_", "DYLD_", "PYTHON", "JUPYTER_", "NODE_", "npm_config_", "PIP_"))
        or not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", name)
    )


class RegistryError(ValueError):
    """Why an entry cannot be installed here (the user's words: the rule and what to do)."""


@dataclass
class Plan:
    """What installing an entry runs, and the agent it gives."""

    kind: str  # npx | uvx | binary
    package: str  # the npm or PyPI spec, or the archive's URL
    cmd: str | None  # the command to run after the install (None: the package's own, found when installed)
    args: list[str]
    env: dict[str, str]
    sha256: str | None = None
    dropped_env: list[str] = field(default_factory=list)

    def install_line(self, prefix: str) -> str:
        if self.kind == "npx":
            return f"npm install --prefix {prefix} {self.package}"
        if self.kind == "uvx":
            return f"{Path(sys.executable).name} -m venv {prefix}/venv && {prefix}/venv/bin/pip install {self.package}"
        return f"download {self.package} (sha256 {self.sha256}) into {prefix}"

    def run_line(self, prefix: str) -> str:
        if self.kind == "npx":
            where = f"{prefix}/node_modules/.bin/{self.cmd or npm_name(self.package).rsplit('/', 1)[-1]}"
        elif self.kind == "uvx":
            where = f"{prefix}/venv/bin/{self.cmd or pypi_name(self.package)}"
        else:
            where = f"{prefix}/{(self.cmd or '').removeprefix('./')}"
        return " ".join([where, *self.args])


def npm_name(spec: str) -> str:
    """``@scope/name@1.2`` -> ``@scope/name``."""
    at = spec.find("@", 1)
    return spec if at < 0 else spec[:at]


def pypi_name(spec: str) -> str:
    """``name==1.2`` -> ``name``."""
    return re.split(r"[=<>!~\[ ;]", spec, maxsplit=1)[0]


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) < 4096 for v in value):
        raise RegistryError(f"the entry's {what} are not a list of strings")
    return list(value)


def _env(value: Any) -> tuple[dict[str, str], list[str]]:
    if value is None:
        return {}, []
    if not isinstance(value, dict):
        raise RegistryError("the entry's env is not an object")
    env = {str(k): str(v) for k, v in value.items() if not unsafe_env_name(str(k))}
    return env, sorted(str(k) for k in value if unsafe_env_name(str(k)))


def plan(entry: dict[str, Any], *, npm: bool, key: str | None = None) -> Plan:
    """How this machine installs the entry: npx (when npm is here), else uvx, else a checked binary."""
    dist = entry.get("distribution")
    if not isinstance(dist, dict) or not dist:
        raise RegistryError("the entry has no distribution")
    why: list[str] = []
    for kind in ("npx", "uvx"):
        spec = dist.get(kind)
        if not isinstance(spec, dict):
            continue
        if kind == "npx" and not npm:
            why.append("npx: npm is not installed on the server")
            continue
        package = spec.get("package")
        if not isinstance(package, str) or not PACKAGE.match(package):
            raise RegistryError(f"the {kind} package {str(package)[:80]!r} is not a package name this client passes")
        cmd = spec.get("cmd")
        if cmd is not None and (not isinstance(cmd, str) or not COMMAND.match(cmd)):
            raise RegistryError(f"the {kind} cmd {str(cmd)[:80]!r} is not a plain command name")
        env, dropped = _env(spec.get("env"))
        return Plan(kind, package, cmd, _strings(spec.get("args"), "args"), env, dropped_env=dropped)
    binaries = dist.get("binary")
    if isinstance(binaries, dict):
        key = key or platform_key()
        target = binaries.get(key)
        if not isinstance(target, dict):
            why.append(f"binary: none for {key} (it has {', '.join(sorted(binaries)) or 'none'})")
        else:
            url, sha, cmd = target.get("archive"), target.get("sha256"), target.get("cmd")
            if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
                raise RegistryError(
                    f"the registry gives no sha256 for its {key} archive (rule: a downloaded binary runs here only "
                    "when the manifest gives its checksum, which is checked); install it yourself and add it to "
                    "c.JupyterACP.agents"
                )
            if not isinstance(url, str) or not _download_allowed(url):
                raise RegistryError("the binary's archive is not an https:// URL (http only from this machine)")
            if not isinstance(cmd, str) or not _relative(cmd):
                raise RegistryError("the binary's cmd is not a path inside its archive")
            env, dropped = _env(target.get("env"))
            return Plan("binary", url, cmd, _strings(target.get("args"), "args"), env, sha.lower(), dropped)
    raise RegistryError("no distribution this server can install: " + ("; ".join(why) or "none of npx, uvx, binary"))


def _download_allowed(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme == "https" or (
        parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost", "::1")
    )


def _relative(path: str) -> bool:
    """A path that stays inside the folder it is relative to (no absolute path, no ``..`` out of it)."""
    norm = os.path.normpath(path)
    return bool(path) and not os.path.isabs(path) and norm != "." and not norm.startswith("..")


def _inside(root: str, relative: str) -> bool:
    base = os.path.realpath(root)
    target = os.path.realpath(os.path.join(base, relative))
    return not os.path.isabs(relative) and (target == base or target.startswith(base + os.sep)) and target != base


def check_list(raw: Any) -> list[dict[str, Any]]:
    """The agents of a registry document whose id, name and version are usable (others skipped with a log line)."""
    agents = raw.get("agents") if isinstance(raw, dict) else None
    if not isinstance(agents, list):
        raise ValueError("the document has no agents list")
    out = []
    seen: set[str] = set()
    for entry in agents:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not AGENT_ID.match(entry["id"]):
            log.warning("jupyter_acp: a registry entry without a usable id skipped")
            continue
        if entry["id"] in seen or not isinstance(entry.get("name"), str) or not isinstance(entry.get("version"), str):
            log.warning("jupyter_acp: registry entry %r skipped (a second one, or no name or version)", entry["id"])
            continue
        seen.add(entry["id"])
        out.append(entry)
    return out


def _read_url(url: str, timeout: float) -> bytes:
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme == "file" else url
        with open(path, "rb") as fh:
            return fh.read(MAX_LIST_BYTES + 1)
    if parsed.scheme not in ("http", "https"):
        raise ValueError(f"{parsed.scheme}: is not a scheme the registry is read from (https, http, file)")
    request = urllib.request.Request(url, headers={"User-Agent": "jupyter-acp", "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return resp.read(MAX_LIST_BYTES + 1)


@dataclass
class Listing:
    agents: list[dict[str, Any]]
    #: where the list came from: the URL, or the shipped copy and why
    source: str
    fetched: float


class Registry:
    """The registry's list, fetched off the event loop and kept ``CACHE_SECONDS``."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url or REGISTRY_URL
        self.timeout = timeout
        self._listing: Listing | None = None
        self._lock = asyncio.Lock()

    async def listing(self, *, fresh: bool = False) -> Listing:
        async with self._lock:
            now = time.monotonic()
            if self._listing is not None and not fresh and now - self._listing.fetched < CACHE_SECONDS:
                return self._listing
            try:
                raw = await asyncio.to_thread(_read_url, self.url, self.timeout)
                if len(raw) > MAX_LIST_BYTES:
                    raise ValueError(f"it is larger than {MAX_LIST_BYTES} bytes")
                self._listing = Listing(check_list(json.loads(raw)), self.url, now)
            except Exception as exc:  # offline, a proxy, a broken mirror: the shipped copy answers
                reason = f"{type(exc).__name__}: {exc}"[:300]
                log.warning(
                    "jupyter_acp: the ACP registry at %s could not be read (%s); the shipped copy", self.url, reason
                )
                shipped = check_list(json.loads(SHIPPED.read_text(encoding="utf-8")))
                self._listing = Listing(shipped, f"the copy shipped with jupyter-acp ({self.url}: {reason})", now)
            return self._listing

    async def entry(self, agent_id: str) -> dict[str, Any] | None:
        return next((a for a in (await self.listing()).agents if a["id"] == agent_id), None)


# -- installing ------------------------------------------------------------------------------------------------------
def installer_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """What npm, pip and the download see: the basics, proxies and the certificates that reach them (a company's
    TLS proxy), the package managers' own settings; no provider key."""
    keep = {k: v for k, v in environ.items() if k in BASE_ENV and k not in NEVER_PASS}
    for k, v in environ.items():
        if (
            k.lower() in ("http_proxy", "https_proxy", "all_proxy")
            or k in ("NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE")
            or k.startswith(("npm_config_", "NPM_CONFIG_", "PIP_"))
        ):
            keep[k] = v
    return keep


@dataclass
class Install:
    """One install's progress (what ``GET jupyter-acp/registry/{id}`` shows)."""

    agent_id: str
    version: str
    kind: str
    state: str = "installing"  # installing | installed | enabled | failed
    step: str = ""
    error: str | None = None
    started: float = field(default_factory=time.time)
    ended: float | None = None
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=PROGRESS_LINES))
    task: asyncio.Task[Any] | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "step": self.step,
            "error": self.error,
            "version": self.version,
            "distribution": self.kind,
            "started": self.started,
            "ended": self.ended,
            "lines": list(self.lines),
        }


class Installer:
    """Installs registry agents under ``root`` (one directory per agent id), one install per id at a time."""

    MARKER = ".jupyter-acp-install.json"

    def __init__(self, root: str, *, timeout: float = 900.0) -> None:
        self.root = root
        self.timeout = timeout
        self.installs: dict[str, Install] = {}

    def prefix(self, agent_id: str) -> str:
        return os.path.join(self.root, agent_id)

    def installed(self, agent_id: str) -> dict[str, Any] | None:
        """What a finished install left (its version and the agent's entry), or None."""
        try:
            with open(os.path.join(self.prefix(agent_id), self.MARKER), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return None
        entry = data.get("entry") if isinstance(data, dict) else None
        if not isinstance(entry, dict) or not os.access(str(entry.get("command")), os.X_OK):
            return None
        return data

    def start(self, job: Install, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` (the install and what follows it) in the background, as this id's install."""
        self.installs[job.agent_id] = job
        job.task = asyncio.ensure_future(work)

    async def stop(self) -> None:
        """End the installs still running (the server stops): each removes its unfinished folder."""
        tasks = [j.task for j in self.installs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def running(self, agent_id: str) -> bool:
        job = self.installs.get(agent_id)
        return job is not None and job.task is not None and not job.task.done()

    async def install(self, job: Install, entry: dict[str, Any], the_plan: Plan) -> dict[str, Any]:
        """Run the plan; the agent's ``c.JupyterACP.agents`` entry (command, args, env, title) when it worked."""
        prefix = self.prefix(job.agent_id)
        await asyncio.to_thread(self._fresh_dir, prefix)
        try:
            if the_plan.kind == "npx":
                command = await self._npm(job, the_plan, prefix)
            elif the_plan.kind == "uvx":
                command = await self._pip(job, the_plan, prefix)
            else:
                command = await self._binary(job, the_plan, prefix)
        except BaseException:
            await asyncio.to_thread(shutil.rmtree, prefix, True)
            raise
        agent = {
            "command": command,
            "args": the_plan.args,
            "env": the_plan.env,
            "title": f"{entry.get('name') or job.agent_id} {job.version} (ACP registry)",
        }
        marker = {"id": job.agent_id, "version": job.version, "distribution": the_plan.kind, "entry": agent}
        await asyncio.to_thread(_write_json, os.path.join(prefix, self.MARKER), marker)
        return agent

    @staticmethod
    def _fresh_dir(prefix: str) -> None:
        shutil.rmtree(prefix, ignore_errors=True)
        os.makedirs(prefix, mode=0o700)

    async def _run(self, job: Install, step: str, argv: list[str], cwd: str) -> None:
        """One installer command in its own process group; its output lines become progress."""
        job.step = step
        job.lines.append(f"$ {step}")
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=installer_env(os.environ),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None

        async def read() -> None:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    job.lines.append(line[:LINE_CHARS])

        try:
            await asyncio.wait_for(asyncio.gather(read(), proc.wait()), self.timeout)
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise RegistryError(f"{step} took more than {self.timeout:g} s and was stopped") from None
        if proc.returncode != 0:
            tail = " | ".join(list(job.lines)[-3:])
            raise RegistryError(f"{step} failed with exit code {proc.returncode}: {tail}"[:1200])

    async def _npm(self, job: Install, the_plan: Plan, prefix: str) -> str:
        npm = shutil.which("npm")
        if npm is None:
            raise RegistryError("npm is not installed on the server (an npx agent is installed with it)")
        await asyncio.to_thread(_write_json, os.path.join(prefix, "package.json"), {"name": "agent", "private": True})
        argv = [npm, "install", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=warn", the_plan.package]
        await self._run(job, f"npm install {the_plan.package}", argv, prefix)
        bin_dir = os.path.join(prefix, "node_modules", ".bin")
        name = the_plan.cmd or _npm_bin(prefix, npm_name(the_plan.package))
        command = os.path.join(bin_dir, name)
        if not os.access(command, os.X_OK):
            raise RegistryError(f"{the_plan.package} installed but has no command {name!r} in node_modules/.bin")
        return command

    async def _pip(self, job: Install, the_plan: Plan, prefix: str) -> str:
        venv = os.path.join(prefix, "venv")
        await self._run(job, "create a virtual environment", [sys.executable, "-m", "venv", venv], prefix)
        python = os.path.join(venv, "bin", "python")
        argv = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", the_plan.package]
        await self._run(job, f"pip install {the_plan.package}", argv, prefix)
        name = the_plan.cmd or pypi_name(the_plan.package)
        command = os.path.join(venv, "bin", name)
        if not os.access(command, os.X_OK):
            raise RegistryError(f"{the_plan.package} installed but has no command {name!r} in its environment")
        return command

    async def _binary(self, job: Install, the_plan: Plan, prefix: str) -> str:
        job.step = f"download {the_plan.package}"
        job.lines.append(f"$ {job.step}")
        archive = os.path.join(prefix, ".download")
        digest = await asyncio.wait_for(asyncio.to_thread(_download, the_plan.package, archive), self.timeout)
        if digest != the_plan.sha256:
            raise RegistryError(
                f"the archive's sha256 is {digest}, not the manifest's {the_plan.sha256} (rule: a binary runs only when "
                "its checksum matches); nothing was unpacked"
            )
        job.lines.append(f"sha256 {digest}: as the manifest says")
        job.step = "unpack"
        return await asyncio.to_thread(_unpack, archive, prefix, the_plan.package, the_plan.cmd or "")


def _write_json(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


def _npm_bin(prefix: str, package: str) -> str:
    """The command an npx entry runs without ``cmd``: the package's only bin, or the one named as the package."""
    try:
        with open(os.path.join(prefix, "node_modules", package, "package.json"), encoding="utf-8") as fh:
            bins = json.load(fh).get("bin")
    except (OSError, ValueError):
        bins = None
    base = package.rsplit("/", 1)[-1]
    if isinstance(bins, dict) and bins:
        return base if base in bins or len(bins) > 1 else next(iter(bins))
    return base


def _download(url: str, dest: str) -> str:
    """Fetch ``url`` into ``dest`` (at most ``MAX_ARCHIVE_BYTES``); its sha256."""
    sha = hashlib.sha256()
    size = 0
    request = urllib.request.Request(url, headers={"User-Agent": "jupyter-acp"})
    with urllib.request.urlopen(request, timeout=60) as resp, open(dest, "wb") as out:
        while chunk := resp.read(1 << 20):
            size += len(chunk)
            if size > MAX_ARCHIVE_BYTES:
                raise RegistryError(f"the archive is larger than {MAX_ARCHIVE_BYTES} bytes")
            sha.update(chunk)
            out.write(chunk)
    return sha.hexdigest()


def _unpack(archive: str, prefix: str, url: str, cmd: str) -> str:
    """Unpack into ``prefix`` (nothing outside it, no links out of it, no devices: tarfile's ``data`` filter); the
    command, made executable."""
    name = urlparse(url).path.lower()
    if name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar")):
        if not hasattr(tarfile, "data_filter"):  # Python before 3.11.4 cannot refuse links and paths out of it
            raise RegistryError(
                "this Python cannot unpack an archive safely (3.11.4 or later can): install it yourself"
            )
        with tarfile.open(archive) as tar:
            tar.extractall(prefix, filter="data")
    elif name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                if not _inside(prefix, member.rstrip("/") or "."):
                    raise RegistryError(f"the archive holds {member!r}, outside its folder: refused")
            zf.extractall(prefix)
    else:  # a raw binary: it is the command
        if not _inside(prefix, cmd):
            raise RegistryError("the binary's cmd is not a path inside its folder")
        target = os.path.join(prefix, cmd)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(archive, target)
    if os.path.exists(archive):
        os.unlink(archive)
    command = os.path.realpath(os.path.join(prefix, cmd))
    if not _inside(prefix, cmd) or not os.path.isfile(command):
        raise RegistryError(f"the archive has no {cmd!r}")
    os.chmod(command, os.stat(command).st_mode | 0o700)
    return command
