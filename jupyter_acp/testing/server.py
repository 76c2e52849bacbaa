"""A real Jupyter server in a subprocess, with jupyter_acp enabled: for tests, benchmarks, demos."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``jupyter server`` on 127.0.0.1 with its own root, data and runtime dirs."""

    def __init__(
        self,
        root: Path,
        data: Path,
        *,
        agents: dict[str, Any] | None = None,
        token: str = "jupyter-acp-test-token",
        extra_args: list[str] | None = None,
        extension: bool = True,
        extensions: dict[str, bool] | None = None,
    ) -> None:
        self.root, self.data, self.token = Path(root), Path(data), token
        self.agents = agents or {}
        self.extra_args = extra_args or []
        #: False: the same server without jupyter_acp (a floor for start-up figures)
        self.extension = extension
        #: more server extensions to enable (a test's own: ``jupyter_acp.testing.store_faults``)
        self.extensions = extensions or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def start(self, timeout: float = 60) -> None:
        """Start the server and wait until the extension's first route answers."""
        self.start_process()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                break
            try:
                if self.get("agents").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("server did not start: " + (self.data / "server.log").read_text()[-2000:])

    def start_process(self) -> None:
        """Start the server process without waiting for it (benchmarks time the start themselves)."""
        self.port = free_port()
        self.data.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(self.data / "runtime"), "JUPYTER_DATA_DIR": str(self.data)}
        argv = [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            f"--ServerApp.root_dir={self.root}",
            f"--IdentityProvider.token={self.token}",
            "--allow-root",
            f"--JupyterACP.agents={json.dumps(self.agents)}",
            f"--JupyterACP.store_path={self.data / 'store.sqlite'}",
            f"--ServerApp.jpserver_extensions={ {'jupyter_acp': self.extension, **self.extensions}!r}",
            *self.extra_args,
        ]
        log = open(self.data / "server.log", "ab")
        # cwd: the data dir, so files a server writes where it runs (.jupyter_ystore.db) stay there
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=self.data)

    def url(self, *parts: str) -> str:
        return f"{self.base}/jupyter-acp/" + "/".join(parts)

    def get(self, *parts: str, **params: Any) -> httpx.Response:
        return httpx.get(self.url(*parts), params=params, headers=self.headers, timeout=10)

    def post(self, *parts: str, body: Any = None) -> httpx.Response:
        return httpx.post(self.url(*parts), json=body or {}, headers=self.headers, timeout=10)

    def open_session(self, notebook: str, agent: str | None = None) -> dict[str, Any]:
        body = {"notebook": notebook, **({"agent": agent} if agent else {})}
        resp = self.post("sessions", body=body)
        resp.raise_for_status()
        return resp.json()

    def turn(self, sid: str, text: str, timeout: float = 30) -> tuple[str, list[dict[str, Any]]]:
        """Prompt, wait for the turn's end, return (turn_id, all events)."""
        resp = self.post("sessions", sid, "prompt", body={"text": text})
        resp.raise_for_status()
        turn = resp.json()["turn_id"]
        deadline = time.monotonic() + timeout
        pause = 0.01
        while time.monotonic() < deadline:
            # poll the small session state, not the whole transcript; back off so that many
            # waiting callers do not load the server they measure
            if self.get("sessions", sid).json().get("turn_id") != turn:
                events = self.events(sid)
                if any(e["type"] == "turn_ended" and e["turn_id"] == turn for e in events):
                    return turn, events
            time.sleep(pause)
            pause = min(pause * 1.5, 0.25)
        events = self.get("sessions", sid, "events").json()
        raise AssertionError(f"turn did not end: {events[-5:]}")

    def events(self, sid: str, after: int = 0) -> list[dict[str, Any]]:
        """Every event after ``after``, page by page (one ``GET events`` is one page: a long turn spans more)."""
        out: list[dict[str, Any]] = []
        while True:
            page = self.get("sessions", sid, "events", after=after).json()
            if not page:
                return out
            out += page
            after = page[-1]["seq"]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
