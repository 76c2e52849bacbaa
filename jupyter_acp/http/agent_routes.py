"""Setting an agent up from the panel: its model and key, its login, and enabling an agent found on PATH.

``GET  /jupyter-acp/agents/NAME/settings``      what is set (never a key's value: set / from environment / ...)
``POST /jupyter-acp/agents/NAME/settings``      {model?, api_base?, key_env?, key?, env?}: kept server-side (0600)
                                                for this agent only; it restarts only if it runs with other
                                                settings (``notice`` says what restarted)
``GET  /jupyter-acp/agents/NAME/models``        model suggestions from litellm (providers whose keys are present)
``POST /jupyter-acp/agents/NAME/authenticate``  {methodId}: the agent's own login (ACP ``authenticate``)
``POST /jupyter-acp/agents/NAME/logout``        the agent's own logout (ACP ``logout``, where it offers it)
``POST /jupyter-acp/agents/NAME/login-terminal`` {methodId}: the agent's ``terminal`` login started in a Jupyter
                                                terminal (its argument list, its environment); answers its name
``POST /jupyter-acp/agents/enable``             {name}: a DETECTED agent's catalog name, never a command; kept with
                                                the user's own agents (``catalog/user_agents.py``: apart from an admin's
                                                presets, so both survive a restart) and usable at once

Reading needs ``read`` on ``jupyter_acp``; every change ``write`` and ``execute``: each changes where an
agent sends the user's data (model, API base, key, an agent's login, which may be to another account) or what the
server runs (an agent's command, its login command), so a collaborator with ``write`` only, who may prompt and
answer, cannot send the owner's key and prompts to a host of theirs (``BaseHandler.require_execute``).  Refusals
name the rule and how to change it.

What the server's admin fixed (``catalog/admin.py``: the agents users may enable or log in to, the built-in agent's
model form, provider keys kept on the server) is refused with the setting that fixed it, and answered as
``fixed_by_admin`` (field -> reason) so that the panel greys the control and says why. No answer names the files
that hold the settings (they hold keys): they are "stored on the server".
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..acp.connection import AgentError, auth_env_vars, auth_kind
from ..acp.process import BASE_ENV, NEVER_PASS
from ..catalog import litellm_catalog
from ..catalog.agents import KNOWN_AGENTS, detected_agents
from ..catalog.credentials import SettingsError
from ..catalog.user_agents import UserAgentsError
from .base import AuthenticateBody, BaseHandler, EnableBody, SettingsBody, acting, parse_body

if TYPE_CHECKING:  # pydantic stays off the server's start
    from ..catalog.agents import AgentSpec
    from ..sessions.connections.agent_sessions import Restarted

#: an agent's name in a route
NAME = r"(?P<name>[A-Za-z0-9_.-]{1,64})"
#: the built-in agent's variables behind the form's fields
MODEL_VAR, BASE_VAR = "JUPYTER_ACP_MODEL", "JUPYTER_ACP_API_BASE"
#: what the answers say of where settings and enabled agents are kept (never a path: the files hold keys)
STORED = "stored on the server"


def is_builtin(spec: AgentSpec) -> bool:
    """The built-in litellm agent (not its echo mode), however it is named in the configuration."""
    args = spec.args
    return "jupyter_acp.agent" in args and "--echo" not in args


def _unsafe_name(name: str) -> bool:
    return name in NEVER_PASS or name in BASE_ENV or name.startswith(("LD_", "DYLD_", "PYTHON", "JUPYTER_"))


def terminal_command(argv: list[str], method: dict[str, Any]) -> str:
    """What the card shows of a ``terminal`` login: the agent's configured command with the method's args and env,
    quoted, control characters escaped (it is shown, never typed: ``POST .../login-terminal`` starts it)."""
    from ..sessions.terminals import login_terminal  # the tools' modules with it: off the server's start

    return login_terminal.command_line(argv, method)


def restart_notice(name: str, done: Restarted) -> str:
    """What a Save says it restarted: the agent and how many conversations, or that nothing needed to."""
    if not done.process:
        return (
            f"settings of agent {name!r} saved; it was not running with other ones, so nothing restarted: they apply "
            "from its next prompt"
        )
    n = done.conversations
    if done.waiting:
        turns = f"{done.waiting} running turn{'s' if done.waiting != 1 else ''}"
        said = f"agent {name!r} restarts with its new settings when its {turns} end{'s' if done.waiting == 1 else ''}"
        return said + (f"; {n} open conversation{'s' if n != 1 else ''} then re-open with the next prompt" if n else "")
    said = f"agent {name!r} restarted with its new settings"
    if n:
        said += f"; {n} open conversation{'s' if n != 1 else ''} re-open{'s' if n == 1 else ''} with the next prompt"
    if done.turns:
        said += f" ({done.turns} running turn{'s' if done.turns != 1 else ''} ended)"
    return said


class AgentHandler(BaseHandler):
    """One configured agent, by name."""

    def spec(self, name: str) -> AgentSpec:
        spec: AgentSpec | None = self.extensionapp.agent_specs.get(name)
        if spec is None:
            raise web.HTTPError(404, f"no configured agent {name!r} (GET /jupyter-acp/agents lists them)")
        return spec

    def fixed_by_admin(self, name: str, builtin: bool) -> dict[str, str]:
        """What the admin fixed for this agent, field -> the reason (the panel greys those fields)."""
        rules = self.extensionapp.admin_rules
        fixed: dict[str, str] = {}
        if builtin and (why := rules.model()):
            fixed["model"] = fixed["api_base"] = why
        if why := rules.keys():
            fixed["key"] = why
        if why := rules.agent(name, "logging in to"):
            fixed["login"] = why
        return fixed

    def refuse(self, why: str | None) -> None:
        """403 with the admin's reason, when there is one."""
        if why:
            raise web.HTTPError(403, why)

    def describe(self, name: str) -> dict[str, Any]:
        from ..sessions.terminals import login_terminal  # the tools' modules with it: off the server's start

        app = self.extensionapp
        spec = self.spec(name)
        conn = self.hub.connections.get(name)
        env = app.agent_env(spec)
        methods = []
        for m in conn.auth_methods if conn else []:
            kind = auth_kind(m)
            entry: dict[str, Any] = {
                "id": m.get("id"),
                "name": m.get("name") or m.get("id"),
                "description": m.get("description") or "",
                "kind": kind,
            }
            if kind == "env_var":
                entry["vars"] = [v for v in auth_env_vars(m) if not _unsafe_name(v)]
            if kind == "terminal":
                entry["command"] = terminal_command(spec.argv, m)
                try:
                    login_terminal.plan(name, spec.argv, m)
                except login_terminal.LoginRefused as exc:
                    entry["refused"] = str(exc)  # the card says why instead of offering the terminal
            methods.append(entry)
        builtin = is_builtin(spec)
        names = [MODEL_VAR, BASE_VAR] if builtin else []
        names += [v for m in methods for v in m.get("vars", [])]
        stored = app.agent_settings.values(name)
        if builtin:
            names += [k for k in stored if k not in names]
        settings = app.agent_settings.describe(name, names, os.environ, spec.env)
        fixed = self.fixed_by_admin(name, builtin)
        unused = {k for k in app.agent_settings.values(name) if k not in app.usable_settings(stored)}
        for var in unused:  # kept in the file, not used while the admin's rule holds
            if settings.get(var) == "set":
                settings[var] = "set, not used (fixed by admin)"
        return {
            "name": name,
            "builtin": builtin,
            "needs_model": builtin and "--model" not in spec.args and not env.get(MODEL_VAR),
            # the model string is no secret; keys are never answered
            "model": env.get(MODEL_VAR) if builtin else None,
            "settings": settings,
            "auth_methods": methods,
            "state": conn.state if conn else "stopped",
            # ACP ``logout`` is offered (known once the agent answered initialize): the card's "Log out"
            "logout": bool(conn and conn.supports_logout),
            "stored": STORED,
            "fixed_by_admin": fixed,
        }


class SettingsHandler(AgentHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        described = self.describe(name)
        if described.get("needs_model"):
            litellm_catalog.warm()  # the model form is shown next: its Save should not wait for litellm's import
        self.send(described)

    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        await self.require_execute(f"changing agent {name!r}'s settings (where it sends your prompts and keys)")
        spec = self.spec(name)
        body: SettingsBody = parse_body(self.request.body, SettingsBody)
        changes: dict[str, str | None] = {}
        builtin = is_builtin(spec)
        if (body.model, body.api_base, body.key_env, body.key) != (None, None, None, None) and not builtin:
            raise web.HTTPError(
                400,
                f"model, api_base and key are settings of the built-in agent; agent {name!r} takes only the "
                "variables its login methods name (env)",
            )
        rules = self.extensionapp.admin_rules
        if body.model is not None or body.api_base is not None:
            self.refuse(rules.model())
        if body.key is not None or body.key_env is not None or body.env:
            self.refuse(rules.keys())
        if body.env:
            self.refuse(rules.agent(name, "logging in to"))
        if body.model is not None:
            changes[MODEL_VAR] = body.model.strip() or None
        if body.api_base is not None:
            base = body.api_base.strip()
            if base and urlparse(base).scheme not in ("http", "https"):
                raise web.HTTPError(400, "api_base must be an http:// or https:// URL (or empty to remove it)")
            changes[BASE_VAR] = base or None
        if body.key is not None or body.key_env is not None:
            if not body.key_env:
                raise web.HTTPError(400, "a key needs key_env: the provider's variable, e.g. OPENAI_API_KEY")
            known, some = await litellm_catalog.knows_key_var(body.key_env)
            if not known:
                raise web.HTTPError(
                    400,
                    f"key_env {body.key_env!r} is not a provider key variable litellm knows (rule: only those are "
                    f"kept, e.g. {', '.join(some[:4]) or 'OPENAI_API_KEY'}); set others in the server's "
                    "environment or in the agent's configured env",
                )
            changes[body.key_env] = body.key or None
        if body.env:
            asked = {v for m in self.describe(name)["auth_methods"] for v in m.get("vars", [])}
            for var, value in body.env.items():
                if var not in asked or _unsafe_name(var):
                    raise web.HTTPError(
                        400,
                        f"agent {name!r} does not ask for {var!r} (rule: only variables its env_var login methods "
                        f"name are kept: {', '.join(sorted(asked)) or 'none'})",
                    )
                changes[var] = value or None
        if not changes:
            raise web.HTTPError(400, "nothing to set: give model, api_base, key_env with key, or env")
        shadowed = [k for k in changes if k in os.environ or k in spec.env]
        try:
            changed = self.extensionapp.agent_settings.update(name, changes)
        except SettingsError as exc:
            raise web.HTTPError(400, str(exc)) from None
        notice = ""
        if changed:
            done = await self.hub.restart_agent(
                name, f"{', '.join(sorted(changed))} changed from the panel", actor=acting(self)
            )
            notice = restart_notice(name, done)
        if shadowed:
            notice += (" " if notice else "") + (
                f"{', '.join(sorted(shadowed))} set in the server's environment or the agent's configuration "
                "wins over the panel's value (rule: the environment wins); unset it there to use this one"
            )
        self.send({**self.describe(name), "changed": sorted(changed), "notice": notice})


class ModelsHandler(AgentHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        """litellm models of the providers whose key variables this agent has (environment, config or panel)."""
        spec = self.spec(name)
        if not is_builtin(spec):
            raise web.HTTPError(400, f"agent {name!r} is not the built-in agent: its models are its own")
        cat = await litellm_catalog.catalog()
        env = self.extensionapp.agent_env(spec)
        present = {k for k, v in env.items() if v}
        keys = sorted(litellm_catalog.key_vars(cat))
        self.send(
            {
                "suggestions": litellm_catalog.suggestions(cat, present),
                "key_vars": keys,
                "provider_keys": cat.get("provider_keys") or {},
                "present": sorted(k for k in keys if k in present),
                "error": cat.get("error"),
            }
        )


class AuthenticateHandler(AgentHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        await self.require_execute(f"logging agent {name!r} in (the account it works for)")
        self.spec(name)
        self.refuse(self.extensionapp.admin_rules.agent(name, "logging in to"))
        body: AuthenticateBody = parse_body(self.request.body, AuthenticateBody)
        conn = self.hub.connection(name)
        try:
            await conn.authenticate(body.methodId)
        except AgentError as exc:
            raise web.HTTPError(400, str(exc)) from None
        for session in self.hub._sessions_of(name):
            self.hub.emit(
                session,
                "notice",
                level="info",
                text=f"logged in to agent {name!r}; send your prompt again",
                phase="agent_logged_in",
            )
        self.send({**self.describe(name), "authenticated": True})


class LogoutHandler(AgentHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        """The agent logs out of its account (ACP ``logout``); its sessions ask for a login when next opened.

        Needs ``execute`` as logging in does: which account an agent works for is the owner's choice, and a
        collaborator with ``write`` must not be able to drop it (then offer their own login on the card)."""
        await self.require_execute(f"logging agent {name!r} out (the account it works for)")
        self.spec(name)
        # an agent the admin does not let users log in to is not theirs to log out of either (no way back)
        self.refuse(self.extensionapp.admin_rules.agent(name, "logging out of"))
        conn = self.hub.connection(name)
        try:
            await conn.ensure_started()  # whether it offers logout is known once it answered initialize
            if not conn.supports_logout:
                raise web.HTTPError(
                    409,
                    f"agent {name!r} offers no logout (agentCapabilities.auth.logout); log out with the agent's own "
                    "command in a terminal",
                )
            await conn.logout()
        except AgentError as exc:
            raise web.HTTPError(502, str(exc)) from None
        for session in self.hub._sessions_of(name):
            self.hub.emit(
                session,
                "notice",
                level="info",
                text=f"logged out of agent {name!r}; it asks you to log in again when it next needs to",
                phase="agent_logged_out",
            )
        self.send({**self.describe(name), "logged_out": True})


class LoginTerminalHandler(AgentHandler):
    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        """``{methodId}``: start the agent's ``terminal`` login in a Jupyter terminal (from its argument list, with the
        agent's environment; ``sessions/terminals/login_terminal.py``) and answer its ``name``, which the panel opens."""
        await self.require_execute(f"starting agent {name!r}'s login command in a terminal")
        from ..sessions.terminals import login_terminal  # the tools' modules with it: off the server's start

        spec = self.spec(name)
        self.refuse(self.extensionapp.admin_rules.agent(name, "logging in to"))
        body: AuthenticateBody = parse_body(self.request.body, AuthenticateBody)
        conn = self.hub.connection(name)
        try:
            if not any(m.get("id") == body.methodId for m in conn.auth_methods):
                await conn.ensure_started()  # its login methods are known once it answered initialize
        except AgentError as exc:
            raise web.HTTPError(400, str(exc)) from None
        method = next((m for m in conn.auth_methods if m.get("id") == body.methodId), None)
        if method is None:
            offered = ", ".join(str(m.get("id")) for m in conn.auth_methods) or "none"
            raise web.HTTPError(400, f"agent {name!r} offers no login method {body.methodId!r} (it offers: {offered})")
        if auth_kind(method) != "terminal":
            raise web.HTTPError(
                400,
                f"login method {body.methodId!r} of agent {name!r} is of type {auth_kind(method)!r}, not 'terminal' "
                "(an 'agent' method is POST .../authenticate, an 'env_var' one POST .../settings {env})",
            )
        try:
            started = login_terminal.start(self.hub, name, spec, method)
        except login_terminal.LoginRefused as exc:
            raise web.HTTPError(409 if exc.rule == "terminals_disabled" else 400, str(exc)) from None
        self.send({"name": started.name, "reused": started.reused}, 200 if started.reused else 201)


class EnableHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Enable a known agent found on PATH: the entry is the catalog's, the command resolved now."""
        await self.require_execute("enabling an agent (a new command the server runs)")
        body: EnableBody = parse_body(self.request.body, EnableBody)
        extra = sorted(set(body.model_extra or {}))
        if extra:
            raise web.HTTPError(
                400,
                f"only 'name' may be given, not {', '.join(extra)} (rule: a request names a detected agent, never a "
                "command; to run any other command add it to c.JupyterACP.agents in your Jupyter config)",
            )
        app = self.extensionapp
        name = body.name
        if name in app.agent_specs:
            raise web.HTTPError(409, f"agent {name!r} is already configured")
        why = app.admin_rules.agent(name, "enabling")
        if why:
            raise web.HTTPError(403, why)
        found = detected_agents(app.agent_specs)
        if name not in found:
            why = "is not one of the known agents" if name not in KNOWN_AGENTS else "was not found on PATH"
            raise web.HTTPError(
                400,
                f"{name!r} {why} (rule: only a detected agent can be enabled from the panel: "
                f"{', '.join(sorted(found)) or 'none found now'}); install it, or add it to c.JupyterACP.agents",
            )
        entry = {k: KNOWN_AGENTS[name][k] for k in KNOWN_AGENTS[name] if k != "path"}
        enable_entry(app, name, entry)
        self.log.info(
            "jupyter_acp: agent %r enabled from the panel (%s), kept with your agents", name, entry["command"]
        )
        self.send({"name": name, "entry": entry, "stored": STORED, "agents": app.describe_agents()}, 201)


def enable_entry(app: Any, name: str, entry: dict[str, Any]) -> None:
    """Make ``entry`` the agent ``name``, now and at the next starts, kept with the user's own agents
    (``catalog/user_agents.py``: apart from an admin's presets, so both stay after a restart).

    The one step "enable this entry": the panel's "Enable …" and a registry install both take it, so where enabled
    agents are kept, and the admin's allow-list, are this function's business, not its callers'. Raises
    ``HTTPError`` (403 naming the admin's setting, 500 when the file cannot be written)."""
    from ..catalog.agents import AgentSpec  # pydantic: imported by the background build, off the start

    why = app.admin_rules.agent(name, "enabling")
    if why:
        raise web.HTTPError(403, why)
    spec = AgentSpec.model_validate(entry)
    try:
        app.user_agents.set(name, entry)
    except UserAgentsError as exc:
        raise web.HTTPError(500, f"{exc}; then enable again") from None
    app.agent_specs[name] = spec
    app.agent_origins[name] = "user"


def handlers() -> list[tuple[str, type]]:
    return [
        (r"/jupyter-acp/agents/enable", EnableHandler),
        (rf"/jupyter-acp/agents/{NAME}/settings", SettingsHandler),
        (rf"/jupyter-acp/agents/{NAME}/models", ModelsHandler),
        (rf"/jupyter-acp/agents/{NAME}/authenticate", AuthenticateHandler),
        (rf"/jupyter-acp/agents/{NAME}/logout", LogoutHandler),
        (rf"/jupyter-acp/agents/{NAME}/login-terminal", LoginTerminalHandler),
    ]
