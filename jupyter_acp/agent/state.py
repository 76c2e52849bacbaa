"""The built-in agent's state: a session, a turn, the lazy litellm import, the modes."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from .tools import McpConnection, Tool

NO_MODEL_MESSAGE = (
    "No model is configured for the built-in agent. Set it in the Agent panel's form (a litellm model string such "
    "as `openai/gpt-4o-mini` and its key; no restart needed), or set JUPYTER_ACP_MODEL (with OPENAI_API_KEY, or "
    "`ollama/llama3` with OLLAMA_API_BASE) before starting Jupyter, or pick the `echo` agent to try things out."
)

MODES = [
    {"id": "ask", "name": "Ask", "description": "Ask before running a tool that can change things"},
    {"id": "auto", "name": "Auto", "description": "Run tools without asking, unless a tool source always asks"},
]
MODE_IDS = {m["id"] for m in MODES}


class UpdateBudgetExceeded(Exception):
    pass


@dataclass
class Turn:
    sent_bytes: int = 0
    limit_exceeded: bool = False
    partial_text: str = ""


@dataclass
class Session:
    id: str
    cwd: str
    mode: str = "ask"
    model: str = ""
    #: the model was picked for this conversation (``session/set_config_option``): it keeps it when re-opened;
    #: otherwise it follows the agent's configured model (changed from the panel, the agent restarted)
    model_picked: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: dict[str, Tool] = field(default_factory=dict)
    mcp: list[McpConnection] = field(default_factory=list)
    always_allowed: set[str] = field(default_factory=set)
    cost: float = 0.0  # USD spent by this session's model calls (as litellm prices them), since it opened
    cancelled: bool = False
    turn_task: asyncio.Task[Any] | None = None

    def meta(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "mode": self.mode,
            "model": self.model,
            "model_picked": self.model_picked,
            "cost": self.cost,
        }


class LitellmLoader:
    """litellm imported once, in a daemon thread, after ``initialize`` has answered."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self.module: Any = None
        self.error: BaseException | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="litellm-import", daemon=True)
            self._thread.start()

    def _load(self) -> None:
        try:
            import litellm

            litellm.suppress_debug_info = True
            litellm.drop_params = True
            litellm.set_verbose = False
            for name in ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router", "litellm", "httpx", "httpcore", "openai"):
                logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger(name).level))
            self.module = litellm
        except BaseException as exc:
            self.error = exc
        finally:
            self._done.set()

    async def get(self) -> Any:
        self.start()
        while not self._done.is_set():  # noqa: ASYNC110 - a threading.Event set by the import thread
            await asyncio.sleep(0.02)
        if self.error is not None:
            raise RuntimeError(f"litellm could not be imported: {self.error}")
        return self.module
