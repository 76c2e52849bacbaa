"""``{name}`` in a prompt: the kernel's values, with ``str.format`` rules as ``%%ai`` has them."""

from __future__ import annotations

import re
from typing import Any

_FIELD = re.compile(r"(?<!\{)\{([A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\[\]{}]*\])*(?:![rsa])?(?::[^{}]*)?)\}(?!\})")


class _Namespace(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> Any:
        raise KeyError(key)


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """``{name}`` (and ``{df.shape}``, ``{In[3]}``, ``{x!r}``, ``{x:.2f}``) from the kernel; the rest untouched."""
    ns = _Namespace(namespace)

    def sub(m: re.Match[str]) -> str:
        try:
            return m.group(0).format_map(ns)
        except Exception:
            return m.group(0)

    return _FIELD.sub(sub, text)
