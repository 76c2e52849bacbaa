"""The server backend: the notebook's session in the Jupyter server that started this kernel.

Discovery (the server's URL and this kernel's own token, from the environment the server gave the kernel, or a
runtime file of an older server) and the HTTP client of the kernel routes (``/jupyter-acp/kernel/…``): whoami,
agents, session, prompt, events (long poll, or the latest page with ``before``), cancel, permission answers.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..protocol.kernel_link import (
    ENV_TOKEN,
    ENV_URL,
    GATEWAY_ENV_TOKEN,
    GATEWAY_ENV_URL,
    HEADER,
    KERNEL_HEADER,
    RUNTIME_PREFIX,
)
from .errors import AcpError, ServerGone


def kernel_id() -> str | None:
    """This kernel's id, from its connection file name (``kernel-<id>.json``), else ``KERNEL_ID`` (what
    Enterprise Gateway's kernel launchers set, whose connection files are named otherwise)."""
    try:
        from ipykernel.connect import get_connection_file

        name = os.path.basename(get_connection_file())
    except Exception:
        name = ""
    m = re.match(r"kernel-(.+)\.json$", name)
    if m:
        return m.group(1)
    return os.environ.get("KERNEL_ID") or None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _parent_runtime_info() -> tuple[dict[str, Any], str] | None:
    """The live parent server's ``jupyter_acp-<JPY_PARENT_PID>.json`` and its path, or None."""
    ppid = os.environ.get("JPY_PARENT_PID")
    if not (ppid and ppid.isdigit() and _pid_alive(int(ppid))):
        return None
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        path = os.path.join(jupyter_runtime_dir(), f"{RUNTIME_PREFIX}{ppid}.json")
        with open(path) as fh:
            info = json.load(fh)
        if isinstance(info, dict) and info.get("url") and _pid_alive(int(info.get("pid", ppid))):
            return info, path
    except (OSError, ValueError, TypeError):
        pass
    return None


def discover_server() -> tuple[str, str, str] | None:
    """(url, token, where) of the server that started this kernel, or None.

    ``JUPYTER_ACP_URL`` / ``JUPYTER_ACP_TOKEN``, or their ``KERNEL_``-prefixed spelling in a gateway kernel.  The token is this kernel's own (``HMAC(server secret, kernel id)``), which the server put in the
    kernel's environment when it started it.  The runtime file ``jupyter_acp-<JPY_PARENT_PID>.json``
    holds no secret any more (it would be one for every kernel); a token found there is from an older
    server, which handed one out to every kernel, and is used as before (ignored when that pid is gone:
    killed servers leave stale files).
    """
    url, token = os.environ.get(ENV_URL), os.environ.get(ENV_TOKEN)
    if url and token:
        return url, token, "environment"
    # a kernel behind a Jupyter Gateway: the gateway passes on only KERNEL_* variables of the start request
    url, token = os.environ.get(GATEWAY_ENV_URL), os.environ.get(GATEWAY_ENV_TOKEN)
    if url and token:
        return url, token, f"environment ({GATEWAY_ENV_URL}: a gateway kernel)"
    found = _parent_runtime_info()
    if found and found[0].get("token"):
        return found[0]["url"], found[0]["token"], found[1]
    return None


def missing_server_reason() -> str:
    """Why no server backend: none found, or found without this kernel's token."""
    found = _parent_runtime_info()
    if found:
        return (
            f"the Jupyter server at {found[0]['url']} runs jupyter_acp, but this kernel has no kernel token "
            f"({ENV_TOKEN}: it was started before the extension, or with another environment); restart the "
            "kernel from Jupyter to connect it"
        )
    return "no jupyter_acp server found"


class ServerBackend:
    """The notebook's session in the Jupyter server (shared with the sidebar)."""

    mode = "server"

    def __init__(self, url: str, token: str, kid: str, where: str = "") -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.token = token
        self.kernel_id = kid
        self.where = where
        self.session_id: str | None = None
        self.session_agent: str | None = None

    def call(
        self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None, timeout: float = 60.0
    ) -> Any:
        url = self.url + "jupyter-acp/kernel/" + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header(HEADER, self.token)
        req.add_header(KERNEL_HEADER, self.kernel_id)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read() or b"{}").get("message") or exc.reason
            except ValueError:
                message = exc.reason
            err = AcpError(f"{message} (HTTP {exc.code})")
            err.status = exc.code
            raise err from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerGone(f"the Jupyter server at {self.url} cannot be reached ({reason})") from None
        return json.loads(raw) if raw else None

    def whoami(self) -> dict[str, Any]:
        return self.call("GET", "whoami", params={"kernel_id": self.kernel_id})

    def agents(self) -> list[dict[str, Any]]:
        return [a for a in self.call("GET", "agents") if a.get("configured", True)]

    def open(self, agent: str | None, new: bool = False) -> dict[str, Any]:
        session = self.call("POST", "session", {"kernel_id": self.kernel_id, "agent": agent, "new": new})
        self.session_id, self.session_agent = session["id"], session["agent"]
        return session

    def current(self, agent: str | None) -> dict[str, Any] | None:
        """This notebook's session with ``agent`` (default agent when None), without creating it."""
        who = self.whoami()
        name = agent or who.get("default_agent")
        for s in who.get("sessions", []):
            if s["agent"] == name:
                return s
        return None

    def prompt(
        self, agent: str | None, new: bool, text: str, extra: list[dict[str, Any]], context: dict[str, Any] | None
    ) -> dict[str, Any]:
        blocks = [{"type": "text", "text": text}, *extra]
        body = {"kernel_id": self.kernel_id, "agent": agent, "new": new, "prompt": blocks, "context": context}
        res = self.call("POST", "prompt", body)
        self.session_id, self.session_agent = res["session"]["id"], res["session"]["agent"]
        return res

    def events(self, session_id: str, after: int, wait: float) -> dict[str, Any]:
        return self.call(
            "GET", f"sessions/{session_id}/events", params={"after": after, "wait": wait}, timeout=wait + 30
        )

    def page_before(self, session_id: str, before: int) -> list[dict[str, Any]]:
        """The newest page of the session's history before ``before``, oldest first (the server bounds a page)."""
        return self.call("GET", f"sessions/{session_id}/events", params={"before": before})["events"]

    def cancel(self, session_id: str) -> bool:
        return bool(self.call("POST", f"sessions/{session_id}/cancel").get("cancelled"))

    def answer(self, session_id: str, request_id: str, option_id: str) -> None:
        self.call("POST", f"sessions/{session_id}/permissions/{request_id}", {"option_id": option_id})

    def describe(self) -> str:
        return f"server {self.url} (found in {self.where}), kernel {self.kernel_id}"
