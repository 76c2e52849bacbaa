"""What the tool lists and answers need to know of a kernel without a round trip to it: its name, language,
state and where it runs (this server or a gateway). A mixin of ``KernelBridge``: the bridge's connection and
lifecycle code stays apart from these lookups, which read jupyter_server's kernel manager (and, for a gateway
kernel's language, the gateway's kernel spec, cached)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from jupyter_core.utils import ensure_async

from .gateway import is_gateway_manager
from .messages import describe

log = logging.getLogger(__name__)


class KernelFacts:
    """Kernel name, language, execution state and location, read from jupyter_server's kernel manager."""

    serverapp: Any
    _languages: dict[str, str | None]
    _spec_languages: dict[str, tuple[float, str | None]]

    @property
    def km(self) -> Any:
        return self.serverapp.kernel_manager

    # -- what the tool lists need, without a round trip to the kernel -----------------------------
    def _manager(self, kernel_id: str) -> Any:
        return self.km.get_kernel(kernel_id)

    def kernel_name(self, kernel_id: str) -> str | None:
        try:
            kernel = self._manager(kernel_id)
        except Exception:
            return None
        if is_gateway_manager(kernel):
            return (getattr(kernel, "kernel", None) or {}).get("name") or None
        return getattr(kernel, "kernel_name", None)

    def language(self, kernel_id: str) -> str | None:
        """The kernel's language, from its kernel spec (a kernel id keeps its spec)."""
        if kernel_id in self._languages:
            return self._languages[kernel_id]
        try:
            kernel = self._manager(kernel_id)
            name = self.kernel_name(kernel_id)
            if is_gateway_manager(kernel):
                language = self._gateway_spec_language(name)
            else:
                spec = self.serverapp.kernel_spec_manager.get_kernel_spec(name)
                language = (spec.language or "").lower() or None
        except Exception as exc:
            log.debug("language of kernel %s unknown: %s", kernel_id, exc)
            return None
        if len(self._languages) > 1000:
            self._languages.clear()
        self._languages[kernel_id] = language
        return language

    async def language_async(self, kernel_id: str) -> str | None:
        """``language`` without blocking the event loop: a gateway's kernel spec is fetched with the
        gateway spec manager's own async client.  Tool availability should call this one."""
        if kernel_id in self._languages:
            return self._languages[kernel_id]
        try:
            kernel = self._manager(kernel_id)
        except Exception:
            return None
        if is_gateway_manager(kernel):
            name = self.kernel_name(kernel_id)
            try:
                spec = await ensure_async(self.serverapp.kernel_spec_manager.get_kernel_spec(name))
                language = (
                    ((spec or {}).get("spec") or {}).get("language")
                    if isinstance(spec, dict)
                    else getattr(spec, "language", None)
                )
                language = (language or "").lower() or None
            except Exception as exc:
                log.warning("the gateway's kernel spec %s could not be read: %s", name, describe(exc))
                return None
            if name:
                self._spec_languages[name] = (time.monotonic(), language)
            self._languages[kernel_id] = language
            return language
        return self.language(kernel_id)

    def _gateway_spec_language(self, name: str | None) -> str | None:
        """A gateway kernel spec's language.  The gateway's spec manager is async and this question is
        asked synchronously (tool lists), so it is fetched once per spec name with a short blocking GET
        (cached; a failure is retried after a minute)."""
        if not name:
            return None
        hit = self._spec_languages.get(name)
        if hit is not None and (hit[1] is not None or time.monotonic() - hit[0] < 60):
            return hit[1]
        import urllib.request

        from jupyter_server.gateway.gateway_client import GatewayClient
        from jupyter_server.utils import url_escape, url_path_join

        gw = GatewayClient.instance()
        url = url_path_join(gw.url or "", gw.kernelspecs_endpoint, url_escape(name))
        headers = dict(gw.load_connection_args().get("headers") or {})
        language = None
        try:
            req = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(req, timeout=5) as resp:
                model = json.loads(resp.read())
            language = ((model.get("spec") or {}).get("language") or "").lower() or None
        except Exception as exc:
            log.warning("the gateway's kernel spec %s could not be read from %s: %s", name, url, describe(exc))
        self._spec_languages[name] = (time.monotonic(), language)
        return language

    def execution_state(self, kernel_id: str) -> str | None:
        try:
            return getattr(self._manager(kernel_id), "execution_state", None)
        except Exception:
            return None

    def is_remote(self, kernel_id: str) -> bool:
        try:
            return is_gateway_manager(self._manager(kernel_id))
        except Exception:
            return False

    # -- connections -------------------------------------------------------------------------------
    def _where(self, kernel: Any) -> str:
        if not is_gateway_manager(kernel):
            return "the local kernel"
        from jupyter_server.gateway.gateway_client import GatewayClient

        return f"the kernel behind the gateway {GatewayClient.instance().url}"

    def where(self, kernel_id: str) -> str:
        """``the local kernel`` or ``the kernel behind the gateway URL``: said in every failure."""
        try:
            return self._where(self._manager(kernel_id))
        except Exception:
            return "the kernel"
