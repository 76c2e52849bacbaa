"""What both sets of routes share: the request models, one way to parse a body, one HubError translation.

The user routes (``user_routes.py``: a logged-in user, the Authorizer) and the kernel routes (``kernel_routes.py``:
a kernel's own token) validate prompts alike and answer the hub's refusals alike.
"""

from __future__ import annotations

import json
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
        for block in self.prompt:
            if not isinstance(block.get("type"), str):
                raise ValueError("every content block needs a 'type'")
        return self.prompt


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
