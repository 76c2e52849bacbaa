"""Helpers shared by the tool tests (import them; never import conftest)."""

from __future__ import annotations

import asyncio
import time
from typing import Any


def text(result: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in result["content"] if b.get("type") == "text")


async def wait_until(predicate, timeout: float = 20.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: ``jupyter kernelgateway`` with TCP_NODELAY on its WebSockets: stock jupyter_server / the gateway
#: leave Nagle on for kernel WebSockets, and each round trip then waits ~40 ms for a delayed ACK.
NODELAY_GATEWAY = """
import tornado.websocket as w
_detach = w.WebSocketHandler._detach_stream
def _nodelay(self):
    stream = _detach(self)
    stream.set_nodelay(True)
    return stream
w.WebSocketHandler._detach_stream = _nodelay
from kernel_gateway import launch_instance
launch_instance()
"""


class KernelGateway:
    """A real ``jupyter kernelgateway`` (PyPI ``jupyter_kernel_gateway``) on 127.0.0.1, as a
    subprocess; its kernels are its own children, found by kernel id for the kill tests.
    ``nodelay=True`` runs it with TCP_NODELAY on its WebSockets (benchmarks: see ``NODELAY_GATEWAY``)."""

    def __init__(self, port: int | None = None, *, nodelay: bool = False, auth_token: str | None = None) -> None:
        self.nodelay = nodelay
        self.auth_token = auth_token
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: Any = None
        self.log_path: str | None = None

    def start(self, timeout: float = 60.0) -> None:
        import os
        import subprocess
        import sys
        import tempfile
        import urllib.request

        fd, self.log_path = tempfile.mkstemp(prefix="kernelgateway-", suffix=".log")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *(["-c", NODELAY_GATEWAY] if self.nodelay else ["-m", "kernel_gateway"]),
                "--KernelGatewayApp.ip=127.0.0.1",
                f"--KernelGatewayApp.port={self.port}",
                "--JupyterWebsocketPersonality.list_kernels=True",
                "--KernelGatewayApp.port_retries=0",
                *([f"--KernelGatewayApp.auth_token={self.auth_token}"] if self.auth_token else []),
            ],
            stdout=fd,
            stderr=fd,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(fd)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter kernelgateway exited ({self.proc.returncode}): {self.log()[-2000:]}")
            try:
                headers = {"Authorization": f"token {self.auth_token}"} if self.auth_token else {}
                with urllib.request.urlopen(urllib.request.Request(self.url + "/api", headers=headers), timeout=2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"jupyter kernelgateway did not answer in {timeout:g} s: {self.log()[-2000:]}"
                    ) from None
                time.sleep(0.1)

    def log(self) -> str:
        try:
            with open(self.log_path or "", encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def kernel_pid(self, kernel_id: str) -> int | None:
        """The pid of the gateway's kernel process for kernel_id (its connection file names the id)."""
        import os

        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmd = fh.read().decode(errors="replace")
            except OSError:
                continue
            if f"kernel-{kernel_id}.json" in cmd and "ipykernel" in cmd:
                return int(entry)
        return None

    def stop(self) -> None:
        import os
        import signal

        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the gateway and its kernels (its own session)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(10)
        except Exception:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
