"""The request bodies (pydantic models), imported when the first body is parsed, never at the server's start.

``base.py`` names them (``base.PromptBody`` is a ``LazyBody``); the extension's background build imports this module
before the first request is served, so no request waits for pydantic.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .images import check_image_block


# -- user and kernel routes (base.py) --------------------------------------------------------------
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


class ModeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode_id: str = Field(min_length=1)


class ConfigBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config_id: str = Field(min_length=1)
    value: str | bool


class ForkBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    turn_id: str = Field(min_length=1, max_length=64)


class PermissionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    option_id: str = Field(min_length=1)


class KernelPromptBody(PromptBody):
    """A prompt from the ``%acp`` magic: the kernel names itself, may pick an agent, a new conversation, context."""

    kernel_id: str | None = None
    agent: str | None = None
    new: bool = False
    context: dict[str, Any] | None = None


# -- agent set-up routes (agent_routes.py) ---------------------------------------------------------
class SettingsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = Field(default=None, max_length=300)
    api_base: str | None = Field(default=None, max_length=2048)
    key_env: str | None = Field(default=None, max_length=64)
    key: str | None = Field(default=None, max_length=4096)
    env: dict[str, str] | None = None


class AuthenticateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    methodId: str = Field(min_length=1, max_length=200)


class EnableBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1, max_length=64)


class RegistryInstallBody(BaseModel):
    """``POST jupyter-acp/registry/install``: a registry entry's id, never a command or a package."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z][a-z0-9-]{0,63}$")


# -- the notebook's current agent (current_agent_routes.py) -------------------------------------------
class CurrentAgentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str | None = None
    #: who changes it, as the notice says: the panel's picker, or anyone else through the API
    by: Literal["panel", "api"] = "api"
