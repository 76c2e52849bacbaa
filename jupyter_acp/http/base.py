"""What both sets of routes share: the request models, one way to parse a body, one HubError translation.

The user routes (``user_routes.py``: a logged-in user, the Authorizer) and the kernel routes (``kernel_routes.py``:
a kernel's own token) validate prompts alike and answer the hub's refusals alike.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from tornado import web

from ..sessions.hub import HubError


# -- request bodies ------------------------------------------------------------------------------
class OpenSessionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    notebook: str
    agent: str | None = None


class PromptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str | None = None
    prompt: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> PromptBody:
        if (self.text is None) == (self.prompt is None):
            raise ValueError("give either 'text' or 'prompt' (a list of ACP content blocks)")
        return self

    def blocks(self) -> list[dict[str, Any]]:
        if self.text is not None:
            return [{"type": "text", "text": self.text}]
        assert self.prompt is not None
        for n, block in enumerate(self.prompt, 1):
            if not isinstance(block.get("type"), str):
                raise ValueError("every content block needs a 'type'")
            if block["type"] == "image":
                check_image_block(block, n)
        return self.prompt


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


class ModeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode_id: str = Field(min_length=1)


class ConfigBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config_id: str = Field(min_length=1)
    value: str | bool


class PermissionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    option_id: str = Field(min_length=1)


class KernelPromptBody(PromptBody):
    """A prompt from the ``%acp`` magic: the kernel names itself, may pick an agent, a new conversation, context."""

    kernel_id: str | None = None
    agent: str | None = None
    new: bool = False
    context: dict[str, Any] | None = None


def parse_body(raw: bytes | None, model: type[BaseModel]) -> Any:
    """A request body as ``model``, or a 400 that says which field is wrong and why."""
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
