"""Setting an agent up from the panel: its model and key, its login, and enabling an agent found on PATH.

``GET  /jupyter-acp/agents/NAME/settings``      what is set (never a key's value: set / from environment / ...)
``POST /jupyter-acp/agents/NAME/settings``      {model?, api_base?, key_env?, key?, env?}: kept server-side (0600)
                                                for this agent only; the agent restarts (only it)
``GET  /jupyter-acp/agents/NAME/models``        model suggestions from litellm (providers whose keys are present)
``POST /jupyter-acp/agents/NAME/authenticate``  {methodId}: the agent's own login (ACP ``authenticate``)
``POST /jupyter-acp/agents/enable``             {name}: a DETECTED agent's catalog name, never a command; written to
                                                the user's Jupyter config (0600) and usable at once

Reading needs ``read`` on ``jupyter_acp``; every change ``write``; enabling an agent (a new command the server will
run) also ``execute``.  Refusals name the rule and how to change it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from jupyter_core.paths import jupyter_config_dir
from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from tornado import web

from ..acp.connection import AgentError, auth_env_vars, auth_kind
from ..acp.process import BASE_ENV, NEVER_PASS
from ..agents import litellm_catalog
from ..agents.catalog import KNOWN_AGENTS, detected_agents
from ..agents.credentials import SettingsError
from ..protocol.kernel_link import AUTH_RESOURCE
from .base import AuthenticateBody, BaseHandler, EnableBody, SettingsBody, parse_body

if TYPE_CHECKING:  # pydantic stays off the server's start
    from ..agents.catalog import AgentSpec

#: an agent's name in a route
NAME = r"(?P<name>[A-Za-z0-9_.-]{1,64})"
#: the built-in agent's variables behind the form's fields
MODEL_VAR, BASE_VAR = "JUPYTER_ACP_MODEL", "JUPYTER_ACP_API_BASE"
#: the file ``POST /agents/enable`` writes, under the user's Jupyter config dir
ENABLED_FILE = os.path.join("jupyter_server_config.d", "jupyter_acp_agents.json")


def is_builtin(spec: AgentSpec) -> bool:
    """The built-in litellm agent (not its echo mode), however it is named in the configuration."""
    args = spec.args
    return "jupyter_acp.agent" in args and "--echo" not in args


def _unsafe_name(name: str) -> bool:
    return name in NEVER_PASS or name in BASE_ENV or name.startswith(("LD_", "DYLD_", "PYTHON", "JUPYTER_"))


#: a variable name a terminal login may set (anything else is dropped: it would be shell syntax)
SHELL_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def terminal_command(argv: list[str], method: dict[str, Any]) -> str:
    """The shell line a ``terminal`` login method asks for: the agent's own configured command with the method's
    args and env, every word quoted (an agent's args or values never become shell syntax; odd names are dropped)."""
    raw = method.get("env")
    extra: dict[str, Any] = raw if isinstance(raw, dict) else {}
    raw_args = method.get("args")
    args = [str(a) for a in raw_args] if isinstance(raw_args, list) else []
    env = [f"{k}={shlex.quote(str(v))}" for k, v in extra.items() if isinstance(k, str) and SHELL_VAR.match(k)]
    return " ".join([*env, shlex.join([*argv, *args])])


class AgentHandler(BaseHandler):
    """One configured agent, by name."""

    def spec(self, name: str) -> AgentSpec:
        spec = self.extensionapp.agent_specs.get(name)
        if spec is None:
            raise web.HTTPError(404, f"no configured agent {name!r} (GET /jupyter-acp/agents lists them)")
        return spec

    def describe(self, name: str) -> dict[str, Any]:
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
            methods.append(entry)
        builtin = is_builtin(spec)
        names = [MODEL_VAR, BASE_VAR] if builtin else []
        names += [v for m in methods for v in m.get("vars", [])]
        stored = app.agent_settings.values(name)
        if builtin:
            names += [k for k in stored if k not in names]
        settings = app.agent_settings.describe(name, names, os.environ, spec.env)
        return {
            "name": name,
            "builtin": builtin,
            "needs_model": builtin and "--model" not in spec.args and not env.get(MODEL_VAR),
            # the model string is no secret; keys are never answered
            "model": env.get(MODEL_VAR) if builtin else None,
            "settings": settings,
            "auth_methods": methods,
            "state": conn.state if conn else "stopped",
            "store": app.agent_settings.path,
        }


class SettingsHandler(AgentHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        self.send(self.describe(name))

    @web.authenticated
    @authorized
    async def post(self, name: str) -> None:
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
            known = litellm_catalog.key_vars(await litellm_catalog.catalog())
            if body.key_env not in known:
                raise web.HTTPError(
                    400,
                    f"key_env {body.key_env!r} is not a provider key variable litellm knows (rule: only those are "
                    f"kept, e.g. {', '.join(sorted(known)[:4]) or 'OPENAI_API_KEY'}); set others in the server's "
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
            await self.hub.restart_agent(name, f"{', '.join(sorted(changed))} changed from the panel")
            notice = f"agent {name!r} restarted with its new settings; its conversations re-open with the next prompt"
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
        self.spec(name)
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


class EnableHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Enable a known agent found on PATH: the entry is the catalog's, the command resolved now."""
        allowed = await ensure_async(self.authorizer.is_authorized(self, self.current_user, "execute", AUTH_RESOURCE))
        if not allowed:
            raise web.HTTPError(403, "enabling an agent (a new command the server runs) needs 'execute' on jupyter_acp")
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
        found = detected_agents(app.agent_specs)
        if name not in found:
            why = "is not one of the known agents" if name not in KNOWN_AGENTS else "was not found on PATH"
            raise web.HTTPError(
                400,
                f"{name!r} {why} (rule: only a detected agent can be enabled from the panel: "
                f"{', '.join(sorted(found)) or 'none found now'}); install it, or add it to c.JupyterACP.agents",
            )
        entry = {k: KNOWN_AGENTS[name][k] for k in KNOWN_AGENTS[name] if k != "path"}
        from ..agents.catalog import AgentSpec  # pydantic: imported by the background build, off the start

        spec = AgentSpec.model_validate(entry)
        path = write_enabled(name, entry)
        app.agent_specs[name] = spec
        self.log.info("jupyter_acp: agent %r enabled from the panel (%s), written to %s", name, spec.command, path)
        self.send({"name": name, "entry": entry, "path": path, "agents": app.describe_agents()}, 201)


def write_enabled(name: str, entry: dict[str, Any]) -> str:
    """Add ``entry`` to ``<jupyter config dir>/jupyter_server_config.d/jupyter_acp_agents.json`` (0600)."""
    path = os.path.join(jupyter_config_dir(), ENABLED_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data: dict[str, Any] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        pass
    except ValueError as exc:
        raise web.HTTPError(500, f"{path} is not valid JSON ({exc}); fix or remove it, then enable again") from None
    agents = data.setdefault("JupyterACP", {}).setdefault("agents", {})
    agents[name] = entry
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    return path


def handlers() -> list[tuple[str, type]]:
    return [
        (r"/jupyter-acp/agents/enable", EnableHandler),
        (rf"/jupyter-acp/agents/{NAME}/settings", SettingsHandler),
        (rf"/jupyter-acp/agents/{NAME}/models", ModelsHandler),
        (rf"/jupyter-acp/agents/{NAME}/authenticate", AuthenticateHandler),
    ]
