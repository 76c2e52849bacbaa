"""Images in the built-in agent: prompt images and tool images as the model takes them, tool images checked."""

from __future__ import annotations

from typing import Any

from ..protocol.jsonrpc import RpcError
from .limits import check_image, image_size

MAX_TOOL_IMAGES = 4  # per tool result, shown in its card and passed to a vision model
MAX_TOOL_IMAGE_BYTES = 1024 * 1024


def image_parts(images: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Images as chat-completions content parts (``image_url`` with a data URL), as litellm passes them on."""
    return [{"type": "image_url", "image_url": {"url": f"data:{im['mimeType']};base64,{im['data']}"}} for im in images]


def image_notes(images: list[dict[str, Any]], model: str) -> str:
    """What a model without vision reads instead of the images."""
    return "\n".join(
        f"[image: {im['mimeType']}, {im.get('bytes', 0)} bytes; not shown: {model} does not take images]"
        for im in images
    )


def user_message(text: str, images: list[dict[str, Any]], vision: bool, model: str) -> dict[str, Any]:
    if not images:
        return {"role": "user", "content": text}
    if not vision:
        return {"role": "user", "content": "\n".join(p for p in (text, image_notes(images, model)) if p)}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return {"role": "user", "content": parts + image_parts(images)}


def result_images(raw: Any) -> list[dict[str, Any]]:
    """The image blocks of an MCP tool result (PNG, JPEG, GIF, WebP; at most ``MAX_TOOL_IMAGES``, each within
    ``MAX_TOOL_IMAGE_BYTES``), checked as prompt images are."""
    images: list[dict[str, Any]] = []
    content = raw.get("content") if isinstance(raw, dict) else None
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict) or block.get("type") != "image" or len(images) >= MAX_TOOL_IMAGES:
            continue
        try:
            image = check_image(block)
        except RpcError:
            continue
        if image["bytes"] <= MAX_TOOL_IMAGE_BYTES:
            images.append(image)
    return images


def without_image_data(raw: Any) -> Any:
    """The raw result with each image block replaced by a line of text (the image itself is in the update's
    content: once, and no image block with its data cut that a client would show broken)."""
    content = raw.get("content") if isinstance(raw, dict) else None
    if not isinstance(content, list):
        return raw
    blocks = [
        {
            "type": "text",
            "text": f"[{b.get('mimeType', 'image')} image, {image_size(b['data'])} bytes: shown in the card]",
        }
        if isinstance(b, dict) and b.get("type") == "image" and isinstance(b.get("data"), str)
        else b
        for b in content
    ]
    return {**raw, "content": blocks}


def text_only(messages: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """The conversation for a model without vision: image parts (of an earlier model's turns) become notes."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "image_url" for p in content):
            parts = [
                str(p.get("text", ""))
                if isinstance(p, dict) and p.get("type") == "text"
                else f"[an image; not shown: {model} does not take images]"
                for p in content
            ]
            m = {**m, "content": "\n".join(parts)}
        out.append(m)
    return out
