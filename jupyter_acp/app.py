"""The server extension: configuration, wiring, start and stop.

Loading the extension stays cheap (the server's start at most 50 ms slower: a server loads many extensions, and
this one must not be the one the user waits for): at load only the settings,
the routes (their modules import their collaborators lazily) and the event listeners are set up; the session hub,
the transcript store, the tool surface and the agent catalog (pydantic, pycrdt, anyio, ... included) are built in a
background thread (``start.py``). A request that comes before they are ready waits for them without blocking the
event loop; if the build failed every route answers 503 with the reason (and the log has the traceback).
"""

from __future__ import annotations

import atexit
import gc
import os
import time
from typing import TYPE_CHECKING, Any, cast

from jupyter_core.paths import jupyter_config_dir, jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from tornado import web
from traitlets import Bool, Dict, Enum, Float, Integer, List, TraitError, Unicode, default, validate

from ._version import __version__
from .catalog.admin import AUTO_MODES, AdminRules
from .catalog.agents import default_agents, detected_agents
from .http import kernel_routes
from .http.images import image_bytes
from .http.user_routes import handlers
from .start import Background, StartupError, gated

if TYPE_CHECKING:
    from .catalog.credentials import AgentSettingsStore
    from .catalog.mcp_servers import UserMcpServers
    from .catalog.registry import Installer, Registry
    from .catalog.spec import AgentSpec
    from .catalog.user_agents import UserAgents
    from .sessions.hub import SessionHub
    from .sessions.store import TranscriptStore
    from .tools import ToolSurface

CONTENTS_EVENTS = "https://events.jupyter.org/jupyter_server/contents_service/v1"
KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"


class JupyterACP(ExtensionApp):
    """Drive ACP agents, one agent session per notebook, with the notebook as the agent's tools."""

    name = "jupyter_acp"
    description = __doc__
    load_other_extensions = True

    agents = Dict(
        default_value={},
        config=True,
        help="""Agents by name, added to (or replacing) the defaults 'builtin' and 'echo'.
        Each entry: {"command": "codex-acp", "args": [], "env": {}, "passthrough_env": [],
        "title": "", "tool_channel": "auto", "client_tools_discovery": "request"}.
        Set an entry to None to remove a default agent. In a JupyterHub image these are the admin's presets: the
        agents a user enables from the panel are kept apart (<data dir>/jupyter_acp/user_agents.json) and added
        to them at each start.""",
    )
    allowed_user_agents = List(
        Unicode(),
        default_value=None,
        allow_none=True,
        config=True,
        help="""Agents users may enable from the panel, switch off in their user_agents.json, or log in to (the
        agent's own login, a login terminal, a login variable): a list of names, [] for none. None (the default):
        any. A refusal names this setting.""",
    )
    builtin_model_form = Bool(
        True,
        config=True,
        help="""Offer the built-in agent's model form (model, API base). False: the admin fixes the model and
        endpoint (JUPYTER_ACP_MODEL / JUPYTER_ACP_API_BASE in the server's environment, or the agent's configured
        env), the form shows them greyed with the reason, and values set from the panel are refused and not
        used.""",
    )
    user_provider_keys = Bool(
        True,
        config=True,
        help="""Let users keep provider keys on the server from the panel (the model form's key, an agent's login
        variable). False: keys come from the server's environment only; the fields are greyed with the reason,
        setting one is refused and keys stored before are not used.""",
    )
    user_policies = List(
        Enum(["ask", "auto", "deny", "review"]),
        default_value=["ask", "auto", "deny", "review"],
        config=True,
        help="""Policy values users may pick for a notebook session: 'auto' is a permission card's "Always allow"
        and a session mode listed in auto_modes, 'deny' an agent's "Always reject", 'review' a notebook session's "Review
        after" (changes go ahead under the turn's checkpoint, reviewed after). 'ask' is always allowed. The
        gate's own policy is JupyterACPTools.permission_policy / tool_policies (server configuration).""",
    )
    auto_modes = List(
        Unicode(),
        default_value=list(AUTO_MODES),
        config=True,
        help="""Session modes (or config options of category 'mode') that let an agent act without asking:
        switching to one picks the policy 'auto' (see user_policies).""",
    )
    default_agent = Unicode("builtin", config=True, help="Agent used when a request names none.")
    mcp_servers: List[Any] = List(
        default_value=[],
        config=True,
        help="""The user's own MCP servers, passed to every agent's session/new (load, resume) beside the notebook's
        own server, in Jupyter AI's mcp_settings.json shape: stdio {"name", "command", "args", "env": [{"name",
        "value"}]} or {"type": "http", "name", "url", "headers": [{"name", "value"}]}. HTTP ones go only to agents
        that advertise mcpCapabilities.http. <data dir>/jupyter_acp/mcp_settings.json ({"mcp_servers": [...]},
        0600) adds the user's own; an entry named here first wins.""",
    )
    registry_url = Unicode(
        config=True,
        help="The ACP Agent Registry's index (registry.json) the agent picker lists, a URL or a local path (a mirror, "
        "an enterprise list). Default: the public registry; when it cannot be read, the copy shipped with the "
        "package answers (and says so).",
    )
    registry_install_timeout = Float(
        900.0, config=True, help="Seconds one step of installing a registry agent (npm, pip, a download) may take."
    )

    @default("registry_url")
    def _default_registry_url(self) -> str:
        from .catalog.registry import REGISTRY_URL

        return REGISTRY_URL

    kernel_server_url = Unicode(
        "",
        config=True,
        help="This server's URL as the notebook's kernels reach it (the %acp magic's way in), e.g. "
        "http://jupyter-alice.hub.svc:8888/user/alice/ when kernels run behind a gateway on other hosts. "
        "Default: the server's own URL (right for local kernels). Gateway kernels get it, with their own token, "
        "as KERNEL_JUPYTER_ACP_URL / KERNEL_JUPYTER_ACP_TOKEN.",
    )
    store_path = Unicode(
        "", config=True, help="SQLite file of transcripts. Default: <jupyter data dir>/jupyter_acp/transcripts.sqlite"
    )
    max_frame_bytes = Integer(16 * 1024 * 1024, config=True, help="Largest message accepted from an agent.")
    max_prompt_bytes = Integer(1024 * 1024, config=True, help="Largest prompt (text and embedded resources).")
    max_prompt_blocks = Integer(256, config=True, help="Most content blocks in one prompt.")
    max_image_bytes = Integer(
        1024 * 1024,
        config=True,
        help="Largest total size of the images in one prompt (decoded bytes; they do not count in max_prompt_bytes).",
    )
    max_sessions_per_agent = Integer(
        64,
        config=True,
        help="Most agent sessions open at once in one agent process; past it the least recently used idle "
        "notebook's agent session is closed, and resumed (or re-seeded) when that notebook is used again.",
    )
    max_concurrent_turns = Integer(
        8, config=True, help="Most turns running at once on one agent process; more wait their turn (a notice says so)."
    )
    kernel_start_wait = Float(
        10.0,
        config=True,
        help="Seconds a prompt waits for the notebook's kernel while it is starting (it keeps its tools).",
    )
    turn_idle_timeout = Float(
        300.0, config=True, help="Seconds an agent may stay silent during a turn before the turn is ended."
    )
    permission_timeout = Float(600.0, config=True, help="Seconds a permission request waits before it is cancelled.")
    cancel_grace = Float(5.0, config=True, help="Seconds an agent has to end a turn after session/cancel.")
    agent_start_timeout = Float(60.0, config=True, help="Seconds an agent has to answer initialize.")
    agent_log_bytes = Integer(64 * 1024, config=True, help="Tail of each agent's stderr kept for error reports.")
    store_retry_interval = Float(
        5.0, config=True, help="Seconds between attempts to save history while the store fails."
    )
    reseed_history_chars = Integer(
        8000, config=True, help="History carried into a new agent session when the old one could not be reloaded."
    )
    max_event_bytes = Integer(
        256 * 1024,
        config=True,
        help="Largest stored event (its JSON): longer text fields are cut, the cut marked '… [cut: N MiB not kept]'.",
    )
    max_session_bytes = Integer(
        64 * 1024 * 1024,
        config=True,
        help="History kept per notebook session; past it, when a turn ends, the oldest turns' agent updates are "
        "dropped (prompts and turn ends stay; a notice says how much went). 0: no cap.",
    )
    replay_page_bytes = Integer(
        1024 * 1024,
        config=True,
        help="Largest page of history sent at once (WebSocket replay, GET events; at least one event); "
        "older pages are fetched on demand with events?before=SEQ.",
    )
    replay_page_events = Integer(5000, config=True, help="Most events in one page of history.")
    stream_replay_bytes = Integer(
        256 * 1024,
        config=True,
        help="What opening a conversation sends at once (the session WebSocket's replay): its latest events, up to "
        "about this many bytes (at least one event). The panel draws the latest of them; older ones come in pages "
        "(replay_page_bytes) as the user scrolls up. Larger: more history at once, a later first paint "
        "(bench/panel_history.py, panel bound to last answer shown: with 1 MiB, 344 ms at 300 turns and 810 ms at "
        "2,000, growing with the history; with 256 KiB, 259-301 ms at either).",
    )
    terminal_output_bytes = Integer(
        1024 * 1024,
        config=True,
        help="Most output kept per agent terminal (terminal/create's outputByteLimit is capped at it; the oldest "
        "output goes first, cut at a character boundary).",
    )
    max_terminals_per_session = Integer(
        8, config=True, help="Most agent terminals one notebook session may run at once (terminal/create)."
    )
    socket_recheck_interval = Float(
        60.0,
        config=True,
        help="Seconds between two questions to the Authorizer about an open socket: the session stream (read) and "
        "the frontend bridge (write) of a user who lost that right are closed (1008, the reason naming the rule) "
        "within this time. Whatever it says, every operation a socket sends is checked when it arrives.",
    )

    kernel_routes_through_proxy = Bool(
        False,
        config=True,
        help="Serve the kernel routes (jupyter-acp/kernel/..., the %acp magic's way in) to requests that came "
        "through a proxy (X-Forwarded-*, Forwarded or X-Real-IP headers). Off: kernels reach this server directly, "
        "at kernel_server_url or the server's own URL, so such a request is refused (403) before its kernel token "
        "is looked at. Turn it on only if kernel_server_url is an address behind a proxy (a gateway's kernels "
        "that reach this server through one).",
    )

    @validate("socket_recheck_interval")
    def _positive_interval(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if not value > 0:
            raise TraitError(f"JupyterACP.socket_recheck_interval must be more than 0 seconds (got {value!r})")
        return value

    max_agent_requests = Integer(
        32,
        config=True,
        help="Most requests one agent may have under way at once to the client (files, tools, permissions, "
        "terminals, questions; over MCP, per notebook session): each holds memory until it is answered, so past "
        "it the next is refused at once, naming this setting.",
    )
    max_pending_permissions = Integer(
        4,
        config=True,
        help="Most permission requests of an agent (session/request_permission) waiting for the user at once in "
        "one notebook session; past it the next is refused, naming this setting.",
    )
    max_read_bytes = Integer(
        8 * 1024 * 1024,
        config=True,
        help="Largest fs/read_text_file: a whole file, or the lines asked of one (line and limit read a part of a "
        "larger file).",
    )
    max_read_bytes_per_turn = Integer(
        32 * 1024 * 1024,
        config=True,
        help="Bytes of files an agent may read with fs/read_text_file during one turn (reads under way count "
        "what they may read); past it reads are refused until the next prompt.",
    )

    @default("store_path")
    def _default_store_path(self) -> str:
        return os.path.join(jupyter_data_dir(), "jupyter_acp", "transcripts.sqlite")

    startup_delay = Float(
        0.0,
        config=True,
        help="Testing: seconds the background start waits before it builds the hub (a slow start, simulated); "
        "requests wait for it meanwhile.",
    )
    freeze_gc = Bool(
        True,
        config=True,
        help="Once the extension has started, move every object alive then (the server's and the extensions' "
        "modules, classes and settings) out of Python's cyclic garbage collector (gc.freeze): a full collection "
        "then walks only what was made since, and stops the server's loop for milliseconds instead of the "
        "~130 ms measured on a JupyterLab server, which stalled every stream and kernel socket. The price: an "
        "object of that moment that later becomes part of a garbage cycle is not reclaimed until the extension "
        "stops. Off: the interpreter's own behaviour.",
    )
    startup_wait = Float(
        120.0,
        config=True,
        help="Seconds a request waits for the extension's background start before it is answered 503 (retry).",
    )

    #: the hub, tools, store, agent settings and catalog once built (``_built``)
    _built_parts: dict[str, Any] | None = None
    #: where each agent came from: default, configuration (an admin's presets) or user (``user_agents.json``)
    agent_origins: dict[str, str] = {}
    #: the ACP registry's list and its installer, made when first asked (``agent_registry``)
    _registry: tuple[Registry, Installer] | None = None

    # -- wiring ----------------------------------------------------------------------------------
    # At load only what registering needs; the rest in a thread (start.py). Whatever touches the hub, the tools,
    # the store or the agent catalog before they are ready blocks until they are (see ``_built``): the routes never
    # do (they await ``background.ready()`` first).
    def initialize_settings(self) -> None:
        assert self.serverapp is not None
        self._stopping = False
        self._kernel_events_before_ready = 0
        self.background = Background(
            self.log,
            self.serverapp.io_loop,
            self._prepare,
            self._finish,
            lambda: self.startup_wait,
            discard=lambda prepared: prepared["store"].close(),
        )
        atexit.register(self._kill_agents_now)
        # listeners at load, so that no event is missed; they wait for the hub (renames) or are replayed to it
        self._listen_for_renames()
        self._listen_for_kernels()
        self.background.start()

    def _prepare(self) -> dict[str, Any]:
        """In the start thread: the imports a request needs and the blocking I/O (the store's file)."""
        if self.startup_delay > 0:
            time.sleep(self.startup_delay)
        fault = os.environ.get("JUPYTER_ACP_TEST_STARTUP_FAULT")
        if fault:  # tests: a start that fails
            raise RuntimeError(fault)
        from .catalog.credentials import AgentSettingsStore
        from .catalog.user_agents import UserAgents
        from .http import bodies  # noqa: F401 - pydantic and the request models, before the first request
        from .sessions import hub  # noqa: F401 - the hub and everything it uses
        from .sessions.store import TranscriptStore
        from .tools import registry, services  # noqa: F401

        # per-agent settings set from the panel (a model, a key) and the agents the user enabled: 0600, next to the
        # store in its private folder
        private = os.path.dirname(self.store_path if os.path.isabs(self.store_path) else self._default_store_path())
        user_agents = UserAgents(private, self.log)
        user_agents.migrate(jupyter_config_dir())
        specs = self._load_agent_specs(user_agents)
        if self.default_agent not in specs:
            self.log.warning("JupyterACP.default_agent %r is not configured", self.default_agent)
        store = TranscriptStore(self.store_path)
        store.open()
        from .catalog.mcp_servers import UserMcpServers

        return {
            "agent_specs": specs,
            "store": store,
            "agent_settings": AgentSettingsStore(private),
            "user_agents": user_agents,
            "user_mcp_servers": UserMcpServers(self.mcp_servers, private),
        }

    def _finish(self, prepared: dict[str, Any]) -> dict[str, Any]:
        """On the server's loop: the tool surface and the hub (they belong to the loop)."""
        from .sessions.hub import SessionHub
        from .tools.registry import build_tool_surface
        from .tools.services import JupyterACPTools

        store = prepared["store"]
        if self._stopping:
            store.close()
            raise RuntimeError("the server stopped before the extension had started")
        try:
            tools = build_tool_surface(self.serverapp, JupyterACPTools(parent=self))
            built = {**prepared, "tools": tools}
            self._built_parts = built  # the hub's constructor asks the app for settings (agent_specs, ...)
            built["hub"] = hub = SessionHub(self, store, tools)
        except BaseException:
            self._built_parts = None
            store.close()
            raise
        hub.follower.listen(cast(Any, self.serverapp).event_logger)
        if self._kernel_events_before_ready:  # kernels that started (or stopped) while the hub was being built
            hub.follower.kernel_changed()
        self.log.info(
            "jupyter_acp %s: agents %s (default %r), transcripts in %s",
            __version__,
            ", ".join(self.agent_specs),
            self.default_agent,
            self.store_path,
        )
        if self.freeze_gc:
            gc.freeze()  # no collect first: that would stop the loop for the very pause this avoids
        return built

    def _built(self, name: str) -> Any:
        parts = getattr(self, "_built_parts", None)
        if parts is None or name not in parts:
            parts = self.background.require()
        return parts[name]

    @property
    def hub(self) -> SessionHub:
        return cast("SessionHub", self._built("hub"))

    @property
    def tools(self) -> ToolSurface:
        return cast("ToolSurface", self._built("tools"))

    @property
    def store(self) -> TranscriptStore:
        return cast("TranscriptStore", self._built("store"))

    @property
    def agent_settings(self) -> AgentSettingsStore:
        return cast("AgentSettingsStore", self._built("agent_settings"))

    @property
    def user_agents(self) -> UserAgents:
        return cast("UserAgents", self._built("user_agents"))

    @property
    def admin_rules(self) -> AdminRules:
        """The admin's controls as they are set now."""
        allowed = self.allowed_user_agents
        return AdminRules(
            allowed_user_agents=None if allowed is None else tuple(allowed),
            builtin_model_form=self.builtin_model_form,
            user_provider_keys=self.user_provider_keys,
            user_policies=("ask", *(p for p in self.user_policies if p != "ask")),
            auto_modes=tuple(self.auto_modes),
        )

    @property
    def agent_specs(self) -> dict[str, AgentSpec]:
        return cast("dict[str, AgentSpec]", self._built("agent_specs"))

    @agent_specs.setter
    def agent_specs(self, value: dict[str, AgentSpec]) -> None:
        self._built("agent_specs")
        cast(dict, self._built_parts)["agent_specs"] = value

    def _kill_agents_now(self) -> None:
        parts = getattr(self, "_built_parts", None)
        if parts and "hub" in parts:
            parts["hub"].kill_agents_now()

    def initialize_handlers(self) -> None:
        def background(handler: Any) -> Background:
            return cast(JupyterACP, handler.extensionapp).background

        for route in [*handlers(), *kernel_routes.handlers()]:
            self.handlers.append((route[0], gated(route[1], background), *route[2:]))

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        kernel_routes.start(self)

    def _listen_for_renames(self) -> None:
        """A renamed notebook (or folder) keeps its conversation: follow the contents service (from load on; a
        rename while the hub is being built waits for it, in order)."""

        async def on_contents_event(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            if data.get("action") == "rename" and data.get("source_path") and data.get("path"):
                try:
                    await self.background.ready()
                except StartupError as exc:
                    self.log.warning("jupyter_acp: rename of %s not followed: %s", data["source_path"], exc)
                    return
                self.hub.rename(data["source_path"], data["path"])

        try:
            cast(Any, self.serverapp).event_logger.add_listener(schema_id=CONTENTS_EVENTS, listener=on_contents_event)
        except Exception as exc:  # an older server without the schema: renames just don't follow
            self.log.warning("jupyter_acp: renames will not be followed (%s)", exc)

    def _listen_for_kernels(self) -> None:
        """Kernel starts and stops before the hub is ready: counted, told to its tool-list follower once it is
        (which then listens itself)."""

        async def on_kernel_event(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            if not self.background.done and data.get("action") in ("start", "restart", "shutdown"):
                self._kernel_events_before_ready += 1

        try:
            cast(Any, self.serverapp).event_logger.add_listener(schema_id=KERNEL_ACTIONS, listener=on_kernel_event)
        except Exception as exc:  # the follower says so too, once it listens
            self.log.debug("jupyter_acp: kernel events not followed before start (%s)", exc)

    def _load_agent_specs(self, user_agents: UserAgents) -> dict[str, AgentSpec]:
        """The defaults, the configuration's agents (an admin's presets) and the user's own (enabled from the
        panel, or switched off), merged: ``catalog/user_agents.py``."""
        from .catalog.user_agents import merge

        specs, self.agent_origins = merge(
            default_agents(), self.agents or {}, user_agents.load(), self.allowed_user_agents, self.log
        )
        return specs

    @property
    def default_agent_name(self) -> str:
        return self.default_agent if self.default_agent in self.agent_specs else next(iter(self.agent_specs))

    async def stop_extension(self) -> None:
        kernel_routes.stop(self)
        if self._registry is not None:
            await self._registry[1].stop()  # an install still running ends with the server (its folder removed)
        self._stopping = True  # a start still running closes its store when it ends
        parts = getattr(self, "_built_parts", None) or {}
        hub = parts.get("hub")
        if hub is not None:
            await hub.stop()
        tools = parts.get("tools")
        if tools is not None:
            await tools.close()  # kernel clients, subshells
        store = parts.get("store")
        if store is not None:
            store.close()
        if self.freeze_gc and parts:
            gc.unfreeze()  # a process that goes on (tests, an embedding app) collects this server's objects again

    # -- what the hub asks -----------------------------------------------------------------------
    def agent_env(self, spec: AgentSpec) -> dict[str, str]:
        from .acp.process import curated_env

        token = getattr(cast(Any, self.serverapp).identity_provider, "token", "") or ""
        # values set from the panel for THIS agent only, where neither the environment nor its config sets them
        name = next((n for n, s in self.agent_specs.items() if s is spec), None)
        stored = self.agent_settings.env_for(name, os.environ, spec.env) if name else {}
        stored = self.usable_settings(stored)
        return curated_env(os.environ, passthrough=spec.passthrough_env, extra={**stored, **spec.env}, secrets=[token])

    def usable_settings(self, stored: dict[str, str]) -> dict[str, str]:
        """The values set from the panel that the admin's controls still let count: none of the model and API base
        once ``builtin_model_form`` is off, no key once ``user_provider_keys`` is off (kept in the file, unused)."""
        from .catalog.credentials import BUILTIN_VARS

        rules = self.admin_rules
        return {
            k: v for k, v in stored.items() if (rules.model() is None if k in BUILTIN_VARS else rules.keys() is None)
        }

    def agent_registry(self) -> tuple[Registry, Installer]:
        """The ACP registry's list and the installer of its agents (under ``<private folder>/registry``)."""
        if self._registry is None:
            from .catalog.registry import Installer, Registry

            folder = os.path.dirname(self.store_path if os.path.isabs(self.store_path) else self._default_store_path())
            self._registry = (
                Registry(self.registry_url),
                Installer(os.path.join(folder, "registry"), timeout=self.registry_install_timeout),
            )
        return self._registry

    def user_mcp_servers(self, conn: Any) -> list[dict[str, Any]]:
        """The user's own MCP servers this agent can take (``catalog/mcp_servers.py``), stdio ones with the basics of
        its curated environment: what session set-up adds beside the notebook's own server."""
        spec = self.agent_specs.get(conn.name)
        servers = cast("UserMcpServers", self._built("user_mcp_servers"))
        return servers.for_agent(conn.mcp_capabilities, self.agent_env(spec) if spec is not None else {})

    def check_prompt(self, blocks: list[dict[str, Any]]) -> None:
        if len(blocks) > self.max_prompt_blocks:
            raise web.HTTPError(413, f"prompt has {len(blocks)} blocks; the limit is {self.max_prompt_blocks}")
        size = images = 0
        for block in blocks:
            if block.get("type") == "image":
                images += image_bytes(block)
                continue
            for key in ("text", "data", "blob"):
                value = block.get(key)
                if isinstance(value, str):
                    size += len(value.encode())
            resource = block.get("resource")
            if isinstance(resource, dict):
                for key in ("text", "blob"):
                    value = resource.get(key)
                    if isinstance(value, str):
                        size += len(value.encode())
        if size > self.max_prompt_bytes:
            raise web.HTTPError(413, f"prompt is {size} bytes; the limit is {self.max_prompt_bytes}")
        if images > self.max_image_bytes:
            raise web.HTTPError(
                413,
                f"the prompt's images are {images} bytes; the limit is {self.max_image_bytes} "
                "(JupyterACP.max_image_bytes): send a smaller image or raise the limit",
            )

    def describe_agents(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name, spec in self.agent_specs.items():
            conn = self.hub.connections.get(name)
            out.append(
                {
                    "name": name,
                    "title": spec.title or name,
                    "configured": True,
                    "default": name == self.default_agent_name,
                    "available": spec.resolved() is not None,
                    "command": spec.command,
                    "tool_channel": spec.tool_channel,
                    "state": conn.state if conn else "stopped",
                    "origin": self.agent_origins.get(name, "configuration"),
                    "error": conn.last_error if conn else None,
                    "agent_info": conn.agent_info if conn else None,
                    # what a prompt may carry (image, audio, embeddedContext): null until the agent has started
                    "prompt_capabilities": conn.prompt_capabilities if conn and conn.init_result else None,
                }
            )
        rules = self.admin_rules
        for name, entry in detected_agents(self.agent_specs).items():
            config = {k: entry[k] for k in ("command", "args", "title", "tool_channel")}
            fixed = rules.agent(name, "enabling")
            out.append(
                {
                    **({"fixed_by_admin": fixed} if fixed else {}),
                    "name": name,
                    "title": entry["title"],
                    "configured": False,
                    "default": False,
                    "available": True,
                    "command": entry["path"],
                    "tool_channel": entry["tool_channel"],
                    "state": "not_configured",
                    "suggested_config": {"JupyterACP": {"agents": {name: config}}},
                }
            )
        return out
