"""Limits and validation of what a client sends (the Moltis rules, with its numbers).

Each refusal is an ``invalid_params`` error naming the limit; nothing here logs a payload.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..protocol.jsonrpc import INVALID_PARAMS, RpcError

MAX_FRAME_BYTES = 4 * 1024 * 1024  # a bigger incoming line ends the connection
MAX_PROMPT_BYTES = 1024 * 1024
MAX_PROMPT_BLOCKS = 256
MAX_SESSIONS = 64  # per connection
MAX_CONCURRENT_OPERATIONS = 4  # session set-ups and prompts in flight, per connection
MAX_TURN_UPDATE_BYTES = 8 * 1024 * 1024
MAX_HISTORY_BYTES = 8 * 1024 * 1024
MAX_HISTORY_UPDATES = 10_000
MAX_TOOL_VALUE_BYTES = 64 * 1024
MAX_MCP_SERVERS = 16
MAX_MCP_ARGS = 256
MAX_MCP_ENV = 256
MAX_MCP_SETUP_BYTES = 1024 * 1024
MAX_IMAGE_BYTES = 3 * 1024 * 1024  # the images of one prompt together, decoded (a frame holds 4 MiB)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")

SESSION_PREFIX = "acp:"
_SESSION_ID = re.compile(r"^acp:[A-Za-z0-9_-]{1,128}$")


def invalid(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, message)


def is_session_id(value: Any) -> bool:
    return isinstance(value, str) and bool(_SESSION_ID.match(value))


def image_size(data: str) -> int:
    """Decoded size of base64 ``data`` (without decoding it)."""
    n = len(data)
    return n * 3 // 4 - (2 if data.endswith("==") else 1 if data.endswith("=") else 0)


_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def check_image(block: dict[str, Any]) -> dict[str, Any]:
    """An ACP image block as ``{"mimeType", "data", "bytes"}``, or an ``invalid_params`` naming what is wrong."""
    mime, data = block.get("mimeType"), block.get("data")
    if mime not in IMAGE_TYPES:
        raise invalid(f"image type {str(mime)[:40]!r} is not one of {', '.join(IMAGE_TYPES)}")
    if not isinstance(data, str) or not data or len(data) % 4 or not _BASE64.match(data):
        raise invalid("an image block's data must be base64")
    return {"mimeType": mime, "data": data, "bytes": image_size(data)}


def prompt_text(
    blocks: Any, *, joiner: str = "\n", text_only: bool = False, images: list[dict[str, Any]] | None = None
) -> str:
    """The prompt as one text: text blocks, resource links (their uri) and embedded text resources.

    With ``images`` (a list to fill), image blocks are accepted: each is checked (``check_image``) and
    appended, and together they stay within ``MAX_IMAGE_BYTES``; without it an image is refused.
    """
    if not isinstance(blocks, list):
        raise invalid("prompt must be a list of content blocks")
    if len(blocks) > MAX_PROMPT_BLOCKS:
        raise invalid(f"prompt has {len(blocks)} blocks; the limit is {MAX_PROMPT_BLOCKS}")
    parts: list[str] = []
    image_bytes = 0
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            if not text_only:
                parts.append(block["uri"])
        elif (
            kind == "resource"
            and isinstance(block.get("resource"), dict)
            and isinstance(block["resource"].get("text"), str)
        ):
            if not text_only:
                res = block["resource"]
                parts.append(f"<resource uri={res.get('uri', '')!r}>\n{res['text']}\n</resource>")
        elif kind == "image" and images is not None:
            image = check_image(block)
            image_bytes += image["bytes"]
            if image_bytes > MAX_IMAGE_BYTES:
                raise invalid(f"the prompt's images exceed {MAX_IMAGE_BYTES} bytes")
            images.append(image)
        else:
            raise invalid("prompt contains content the agent did not advertise")
    text = joiner.join(parts)
    size = len(text.encode("utf-8"))
    if size > MAX_PROMPT_BYTES:
        raise invalid(f"prompt is {size} bytes; the limit is {MAX_PROMPT_BYTES}")
    return text


def check_cwd(cwd: Any) -> str:
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise invalid("cwd must be an absolute path")
    real = os.path.realpath(cwd)
    if not os.path.isdir(real):
        raise invalid("cwd must be an existing directory")
    return real


@dataclass
class McpServerSpec:
    """One client-supplied MCP server, validated.  Its repr never shows env values or headers."""

    name: str
    kind: str  # "stdio" | "http"
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        where = self.command if self.kind == "stdio" else self.url.split("?")[0]
        return f"McpServerSpec(name={self.name!r}, kind={self.kind!r}, at={where!r}, env={len(self.env)} vars)"


def _pairs(items: Any, what: str, limit: int) -> dict[str, str]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise invalid(f"MCP {what} must be a list")
    if len(items) > limit:
        raise invalid(f"MCP server has more than {limit} {what}")
    out: dict[str, str] = {}
    for item in items:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("name"), str)
            or not isinstance(item.get("value"), str)
        ):
            raise invalid(f"MCP {what} entries are {{name, value}} strings")
        name = item["name"]
        if not name or "=" in name or "\0" in name:
            raise invalid(f"MCP {what} name is empty or contains '=' or NUL")
        if name in out:
            raise invalid(f"duplicate MCP {what} name")
        out[name] = item["value"]
    return out


def check_mcp_servers(servers: Any, *, http_ok: bool = True) -> list[McpServerSpec]:
    if servers is None:
        return []
    if not isinstance(servers, list):
        raise invalid("mcpServers must be a list")
    if len(servers) > MAX_MCP_SERVERS:
        raise invalid(f"more than {MAX_MCP_SERVERS} MCP servers")
    specs: list[McpServerSpec] = []
    names: set[str] = set()
    total = 0
    for entry in servers:
        if not isinstance(entry, dict):
            raise invalid("an MCP server entry must be an object")
        name = entry.get("name")
        name = name.strip() if isinstance(name, str) else ""
        if not name:
            raise invalid("an MCP server needs a non-empty name")
        if name in names:
            raise invalid(f"duplicate MCP server name {name!r}")
        names.add(name)
        kind = entry.get("type") or "stdio"
        if kind == "stdio":
            command = entry.get("command")
            if not isinstance(command, str) or not os.path.isabs(command):
                raise invalid(f"MCP server {name!r}: command must be an absolute path")
            args = entry.get("args") or []
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise invalid(f"MCP server {name!r}: args must be strings")
            if len(args) > MAX_MCP_ARGS:
                raise invalid(f"MCP server {name!r} has more than {MAX_MCP_ARGS} args")
            env = _pairs(entry.get("env"), "env", MAX_MCP_ENV)
            if any("\0" in s for s in [command, *args, *env.values()]):
                raise invalid(f"MCP server {name!r}: NUL byte in command, args or env")
            total += len(name) + len(command) + sum(len(a) for a in args) + sum(len(k) + len(v) for k, v in env.items())
            specs.append(McpServerSpec(name=name, kind="stdio", command=command, args=list(args), env=env))
        elif kind == "http" and http_ok:
            url = entry.get("url")
            if not isinstance(url, str) or not re.match(r"^https?://", url):
                raise invalid(f"MCP server {name!r}: url must be http(s)")
            headers = _pairs(entry.get("headers"), "headers", MAX_MCP_ENV)
            total += len(name) + len(url) + sum(len(k) + len(v) for k, v in headers.items())
            specs.append(McpServerSpec(name=name, kind="http", url=url, headers=headers))
        else:
            raise invalid(f"MCP server {name!r}: transport {kind!r} is not supported (stdio and http are)")
        if total > MAX_MCP_SETUP_BYTES:
            raise invalid(f"MCP setup data exceeds {MAX_MCP_SETUP_BYTES} bytes")
    return specs
