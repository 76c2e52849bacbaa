"""What both sets of routes share: the request models, one way to parse a body, one HubError translation.

The user routes (``user_routes.py``: a logged-in user, the Authorizer) and the kernel routes (``kernel_routes.py``:
a kernel's own token) validate prompts alike and answer the hub's refusals alike.
"""

from __future__ import annotations

import importlib
import json
import re
from typing import TYPE_CHECKING, Any

from tornado import web

from ..sessions.model import HubError


# -- request bodies ------------------------------------------------------------------------------
class LazyBody:
    """A request body's model (in ``bodies.py``) by name: pydantic is imported when a body is first parsed (the
    extension's background build does it before the first request), never while the server starts."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def model(self) -> Any:
        return getattr(importlib.import_module(f"{__package__}.bodies"), self.name)

    def model_validate(self, data: Any) -> Any:
        return self.model.model_validate(data)

    def __repr__(self) -> str:
        return f"LazyBody({self.name!r})"


if TYPE_CHECKING:  # the checker sees the models themselves
    from .bodies import (
        AuthenticateBody,
        ConfigBody,
        CurrentAgentBody,
        EnableBody,
        KernelPromptBody,
        ModeBody,
        OpenSessionBody,
        PermissionBody,
        PromptBody,
        SettingsBody,
    )
else:
    OpenSessionBody = LazyBody("OpenSessionBody")
    PromptBody = LazyBody("PromptBody")
    ModeBody = LazyBody("ModeBody")
    ConfigBody = LazyBody("ConfigBody")
    PermissionBody = LazyBody("PermissionBody")
    KernelPromptBody = LazyBody("KernelPromptBody")
    SettingsBody = LazyBody("SettingsBody")
    AuthenticateBody = LazyBody("AuthenticateBody")
    EnableBody = LazyBody("EnableBody")
    CurrentAgentBody = LazyBody("CurrentAgentBody")


#: the image types a prompt may carry (what browsers paste and models take)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def check_image_block(block: dict[str, Any], n: int = 1) -> None:
    """An ACP image block: one of ``IMAGE_TYPES``, its ``data`` base64 (a ValueError says which rule failed)."""
    mime, data = block.get("mimeType"), block.get("data")
    if mime not in IMAGE_TYPES:
        raise ValueError(
            f"block {n}: image type {str(mime)[:60]!r} is not accepted; send one of {', '.join(IMAGE_TYPES)}"
        )
    if not isinstance(data, str) or not data or len(data) % 4 or not _BASE64.match(data):
        raise ValueError(f"block {n}: an image's 'data' must be base64 (no data: URL prefix, no line breaks)")
    if set(block) - {"type", "mimeType", "data", "uri", "annotations", "_meta"}:
        raise ValueError(f"block {n}: an image block has type, mimeType, data and optionally uri, annotations")


def image_bytes(block: dict[str, Any]) -> int:
    """Decoded size of an image block's base64 data."""
    data = block.get("data")
    if not isinstance(data, str):
        return 0
    return len(data) * 3 // 4 - (2 if data.endswith("==") else 1 if data.endswith("=") else 0)


def parse_body(raw: bytes | None, model: Any) -> Any:
    """A request body as ``model`` (a pydantic model or a ``LazyBody``), or a 400 that says which field is wrong and why."""
    from pydantic import ValidationError  # imported by then (the background build, or the model itself)

    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise web.HTTPError(400, "the body is not JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise web.HTTPError(400, errors) from None


def http_error(exc: HubError) -> web.HTTPError:
    """The hub's refusal as the HTTP error the routes answer (its status, its words)."""
    return web.HTTPError(exc.status, str(exc))


def hub_errors(method: Any) -> Any:
    """Turn a HubError into an HTTP error with the same message."""

    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except HubError as exc:
            raise http_error(exc) from None

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper
