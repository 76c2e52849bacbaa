"""How cells and outputs are shown to a model: bounded text, images as MCP image blocks."""

from __future__ import annotations

import difflib
from typing import Any

from ..kernels import clip, strip_ansi

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 1_500_000


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return "" if value is None else str(value)


def output_summary(outputs: list[dict[str, Any]]) -> str:
    """One line: the kinds of outputs, with the error's name."""
    parts = []
    for o in outputs:
        kind = o.get("output_type", "?")
        if kind == "stream":
            parts.append(o.get("name", "stream"))
        elif kind == "error":
            parts.append(f"error({o.get('ename', '')})")
        elif kind in ("display_data", "execute_result"):
            data = o.get("data") or {}
            mimes = [m for m in data if m != "text/plain"] or list(data)
            parts.append(("result" if kind == "execute_result" else "display") + f"[{','.join(mimes[:3])}]")
        else:
            parts.append(kind)
    return ", ".join(parts)


def head_tail(text: str, budget: int) -> str:
    """Keep the start and the end (a traceback's end is what matters), note the cut."""
    if len(text) <= budget:
        return text
    keep = max(budget // 2, 1)
    return f"{text[:keep]}\n… [{len(text) - 2 * keep} characters cut] …\n{text[-keep:]}"


def render_outputs(
    outputs: list[dict[str, Any]], budget: int, images: list[dict[str, Any]] | None, max_images: int = 4
) -> str:
    """Text of the outputs; images appended to ``images`` as MCP image blocks (when given)."""
    lines: list[str] = []
    for o in outputs:
        kind = o.get("output_type")
        if kind == "stream":
            lines.append(f"[{o.get('name', 'stdout')}]\n{clip(strip_ansi(_text(o.get('text'))), budget)}")
        elif kind == "error":
            tb = strip_ansi("\n".join(_text(t) for t in o.get("traceback") or []))
            head = f"[error] {o.get('ename', '')}: {strip_ansi(_text(o.get('evalue')))}"
            lines.append(head + ("\n" + head_tail(tb, budget) if tb else ""))
        elif kind in ("display_data", "execute_result"):
            data = o.get("data") or {}
            label = "result" if kind == "execute_result" else "display"
            image_mime = next((m for m in IMAGE_TYPES if m in data), None)
            if image_mime is not None:
                payload = _text(data[image_mime]).replace("\n", "")
                if images is None:
                    lines.append(f"[{label}] {image_mime} image (not included here; read the cell to see it)")
                elif len(payload) * 3 // 4 > MAX_IMAGE_BYTES:
                    lines.append(f"[{label}] {image_mime} image of {len(payload) * 3 // 4} bytes: too large to include")
                elif len(images) >= max_images:
                    lines.append(f"[{label}] {image_mime} image omitted (at most {max_images} images per answer)")
                else:
                    images.append({"type": "image", "data": payload, "mimeType": image_mime})
                    lines.append(f"[{label}] {image_mime} image (attached as image #{len(images)})")
                if "text/plain" in data:
                    lines.append(clip(_text(data["text/plain"]), min(budget, 300)))
                continue
            for mime in ("text/plain", "text/markdown", "application/json", "text/latex", "text/html"):
                if mime in data:
                    body = data[mime]
                    text = _text(body) if mime != "application/json" else str(body)
                    note = "" if mime == "text/plain" else f" ({mime})"
                    lines.append(f"[{label}{note}]\n{clip(strip_ansi(text), budget)}")
                    break
            else:
                lines.append(f"[{label}] {', '.join(data) or 'empty'}")
        else:
            lines.append(f"[{kind}]")
    return "\n".join(lines)


def image_refs(images: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """References to the image blocks added since ``start`` (1-based, as the text says "image #n").

    Agents that hand their model only ``structuredContent`` still learn an image is there and which
    image content block it is.
    """
    return [{"type": "image", "mime": im.get("mimeType"), "index": n} for n, im in enumerate(images[start:], start + 1)]


def error_of(outputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first error output's name and value (its traceback is in the rendered outputs)."""
    for o in outputs:
        if o.get("output_type") == "error":
            return {"ename": strip_ansi(_text(o.get("ename"))), "evalue": strip_ansi(_text(o.get("evalue")))}
    return None


def short_diff(old: str, new: str, budget: int = 2000) -> str:
    diff = "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=1))
    return clip(diff, budget) if diff else "(no change)"


def first_line(source: str, width: int = 100) -> str:
    line = source.lstrip("\n").split("\n", 1)[0]
    return line if len(line) <= width else line[:width] + "…"
