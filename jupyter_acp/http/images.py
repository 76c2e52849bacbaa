"""Image blocks in a prompt: which types are taken and how big they are (the body models check them, the app
bounds them); apart from ``base`` so the models (``bodies``) import it without importing the routes' helpers."""

from __future__ import annotations

import re
from typing import Any

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
