"""Agents from the ACP Agent Registry: the list the agent picker shows, and installing one (``catalog/registry.py``).

``GET  /jupyter-acp/registry``           ``[{id, name, version, description, distribution, installed, enabled, ...}]``:
                                         ``distribution`` is how this server would install it (npx, uvx, binary),
                                         ``install_line`` and ``runs`` say what that runs, ``reason`` why it cannot
``GET  /jupyter-acp/registry/{id}``      one entry, with ``install``: the running or last install's progress
                                         (``state`` installing | installed | enabled | failed, ``step``, ``lines``)
``POST /jupyter-acp/registry/install``   ``{id}``: ``202``; the agent is installed into the user's prefix, then enabled
                                         (the same step as the panel's "Enable …"), usable at once

Installing needs ``execute`` on ``jupyter_acp`` besides ``write`` (``BaseHandler.require_execute``): it downloads a
program and makes the server run it.  A request names a registry id only, never a package or a command: what runs is
the registry's entry, shown before, the same for every user of this server.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..catalog.registry import Install, Plan, RegistryError, plan
from .agent_routes import STORED, enable_entry
from .base import BaseHandler, RegistryInstallBody, parse_body

log = logging.getLogger(__name__)

#: a registry id in a route (the registry's own rule)
AGENT_ID = r"(?P<agent_id>[a-z][a-z0-9-]{0,63})"


class RegistryBase(BaseHandler):
    def _plan(self, entry: dict[str, Any]) -> tuple[Plan | None, str | None]:
        try:
            return plan(entry, npm=shutil.which("npm") is not None), None
        except RegistryError as exc:
            return None, str(exc)

    def describe(self, entry: dict[str, Any], source: str) -> dict[str, Any]:
        registry, installer = self.extensionapp.agent_registry()
        agent_id = entry["id"]
        the_plan, reason = self._plan(entry)
        prefix = installer.prefix(agent_id)
        done = installer.installed(agent_id)
        job = installer.installs.get(agent_id)
        dist = entry.get("distribution")
        return {
            "id": agent_id,
            "name": entry.get("name"),
            "version": entry.get("version"),
            "description": entry.get("description") or "",
            "repository": entry.get("repository"),
            "license": entry.get("license"),
            "distributions": sorted(dist) if isinstance(dist, dict) else [],
            "distribution": the_plan.kind if the_plan else None,
            "install_line": the_plan.install_line(prefix) if the_plan else None,
            "runs": the_plan.run_line(prefix) if the_plan else None,
            "dropped_env": the_plan.dropped_env if the_plan else [],
            "installable": the_plan is not None,
            "reason": reason,
            "installed": done is not None,
            "installed_version": done.get("version") if done else None,
            "enabled": agent_id in self.extensionapp.agent_specs,
            "install": job.describe() if job else None,
            "source": source,
        }

    async def find(self, agent_id: str) -> tuple[dict[str, Any], str]:
        registry, _ = self.extensionapp.agent_registry()
        listing = await registry.listing()
        entry = next((a for a in listing.agents if a["id"] == agent_id), None)
        if entry is None:
            raise web.HTTPError(404, f"the ACP registry ({listing.source}) lists no agent {agent_id!r}")
        return entry, listing.source


class RegistryHandler(RegistryBase):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """The registry's agents (``?refresh=1`` reads the registry again rather than the list kept 10 minutes)."""
        registry, _ = self.extensionapp.agent_registry()
        listing = await registry.listing(fresh=self.get_query_argument("refresh", None) is not None)
        self.send([self.describe(entry, listing.source) for entry in listing.agents])


class RegistryEntryHandler(RegistryBase):
    @web.authenticated
    @authorized
    async def get(self, agent_id: str) -> None:
        self.send(self.describe(*await self.find(agent_id)))


class RegistryInstallHandler(RegistryBase):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        await self.require_execute(
            "installing an agent from the ACP registry (a program the server downloads and runs)"
        )
        body: RegistryInstallBody = parse_body(self.request.body, RegistryInstallBody)
        entry, source = await self.find(body.id)
        app = self.extensionapp
        _, installer = app.agent_registry()
        if installer.running(body.id):
            raise web.HTTPError(
                409, f"agent {body.id!r} is being installed; GET jupyter-acp/registry/{body.id} says how far"
            )
        why = app.admin_rules.agent(body.id, "enabling")
        if why:  # the admin does not let users add this agent: nothing is downloaded
            raise web.HTTPError(403, why)
        if body.id in app.agent_specs:
            raise web.HTTPError(
                409,
                f"an agent named {body.id!r} is already configured (rule: an install never replaces a configured agent); "
                "remove it from your Jupyter configuration to install it again",
            )
        the_plan, reason = self._plan(entry)
        if the_plan is None:
            raise web.HTTPError(400, f"{entry.get('name') or body.id} cannot be installed here: {reason}")
        job = Install(body.id, str(entry.get("version")), the_plan.kind)
        installer.start(job, install_and_enable(app, job, entry, the_plan))
        log.info("jupyter_acp: installing %r %s from the ACP registry (%s)", body.id, job.version, the_plan.kind)
        self.send(self.describe(entry, source), 202)


async def install_and_enable(app: Any, job: Install, entry: dict[str, Any], the_plan: Plan) -> None:
    """Install, then enable (the panel's "Enable …" step); every end is the job's state, never an exception."""
    _, installer = app.agent_registry()
    try:
        agent = await installer.install(job, entry, the_plan)
        job.state, job.step = "installed", "enable"
        enable_entry(app, job.agent_id, agent)
        job.lines.append(f"enabled: {agent['command']} (kept with your agents, {STORED})")
        job.state, job.step = "enabled", "done"
        log.info("jupyter_acp: agent %r installed from the ACP registry and enabled", job.agent_id)
    except RegistryError as exc:
        job.state, job.error = "failed", str(exc)
    except web.HTTPError as exc:  # enabling was refused (the admin's allow-list) or could not be kept
        job.state, job.error = "failed", f"installed, but not enabled: {exc.log_message}"
    except asyncio.CancelledError:
        job.state, job.error = "failed", "the server stopped during the install (nothing was kept)"
        raise
    except Exception as exc:  # the install's own failure is an answer, never a crash of the server
        log.exception("jupyter_acp: installing %r failed", job.agent_id)
        job.state, job.error = "failed", f"{type(exc).__name__}: {exc}"[:1200]
    finally:
        job.ended = time.time()


def handlers() -> list[tuple[str, type]]:
    return [
        (r"/jupyter-acp/registry", RegistryHandler),
        (r"/jupyter-acp/registry/install", RegistryInstallHandler),
        (rf"/jupyter-acp/registry/{AGENT_ID}", RegistryEntryHandler),
    ]
