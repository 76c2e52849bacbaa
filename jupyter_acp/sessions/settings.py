"""The settings the session hub reads, as a protocol: the app (``JupyterACP``) provides them; the hub never
imports the app."""

from __future__ import annotations

from typing import Any, Protocol

from ..catalog.admin import AdminRules
from ..catalog.agents import AgentSpec


class HubSettings(Protocol):
    serverapp: Any
    agent_specs: dict[str, AgentSpec]
    max_frame_bytes: int
    max_event_bytes: int
    max_session_bytes: int
    agent_start_timeout: float
    agent_log_bytes: int
    max_sessions_per_agent: int
    max_concurrent_turns: int
    turn_idle_timeout: float
    permission_timeout: float
    cancel_grace: float
    store_retry_interval: float
    reseed_history_chars: int
    replay_page_bytes: int
    replay_page_events: int
    kernel_start_wait: float
    terminal_output_bytes: int
    max_terminals_per_session: int

    @property
    def default_agent_name(self) -> str: ...

    @property
    def admin_rules(self) -> AdminRules: ...

    def agent_env(self, spec: AgentSpec) -> dict[str, str]: ...

    def user_mcp_servers(self, conn: Any) -> list[dict[str, Any]]: ...
