"""What the built-in agent knows of its model: vision, context window, cost; and the ``usage_update`` it sends.

At ``initialize`` litellm is not imported yet (it takes seconds): whether the model takes images is read from
litellm's own model map (the JSON file it ships) without importing it.  After a model call, litellm is loaded
and answers the context window (``get_model_info``) and the cost (``completion_cost``).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from typing import Any

log = logging.getLogger("jupyter_acp.agent")

MODEL_MAP_FILE = "model_prices_and_context_window_backup.json"
_model_map: dict[str, Any] | None = None


def _load_model_map() -> dict[str, Any]:
    global _model_map
    if _model_map is None:
        _model_map = {}
        try:
            spec = importlib.util.find_spec("litellm")  # finds the package, imports nothing
            roots = list(spec.submodule_search_locations or []) if spec is not None else []
            for root in roots:
                path = os.path.join(root, MODEL_MAP_FILE)
                if os.path.isfile(path):
                    with open(path, encoding="utf-8") as fh:
                        data = json.load(fh)
                    if isinstance(data, dict):
                        _model_map = data
                    break
        except (OSError, ValueError, ImportError) as exc:
            log.warning("litellm's model map could not be read: %s", type(exc).__name__)
    return _model_map


def model_facts(model: str) -> dict[str, Any]:
    """litellm's entry for ``model`` (``openai/gpt-4o-mini`` or ``gpt-4o-mini``), ``{}`` when it has none."""
    if not model:
        return {}
    table = _load_model_map()
    for key in (model, model.split("/", 1)[-1]):
        entry = table.get(key)
        if isinstance(entry, dict):
            return entry
    return {}


def vision_default(choice: str, model: str) -> bool:
    """Whether to advertise ``promptCapabilities.image``: ``yes``/``no`` as configured, else what litellm says."""
    if choice in ("yes", "no"):
        return choice == "yes"
    return model_facts(model).get("supports_vision") is True


def session_vision(litellm: Any, choice: str, model: str) -> bool:
    """Whether the session's (current) model gets images: the configured choice, else litellm's supports_vision."""
    if choice in ("yes", "no"):
        return choice == "yes"
    try:
        return bool(litellm.supports_vision(model=model))
    except Exception:
        return model_facts(model).get("supports_vision") is True


def context_window(litellm: Any, model: str, configured: int = 0) -> int:
    """The model's context window in tokens (``configured`` wins), 0 when unknown."""
    if configured > 0:
        return configured
    info: Any = None
    try:
        info = litellm.get_model_info(model=model)
    except Exception:
        info = model_facts(model)
    for key in ("max_input_tokens", "max_tokens"):
        value = (info or {}).get(key) if isinstance(info, dict) else getattr(info, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def call_cost(litellm: Any, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The call's cost in USD from litellm's prices, ``None`` when litellm has no price for the model."""
    try:
        response = litellm.ModelResponse(
            model=model,
            usage=litellm.Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
        )
        cost = litellm.completion_cost(completion_response=response, model=model)
    except Exception:
        return None
    return float(cost) if isinstance(cost, (int, float)) else None


def tokens(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a litellm ``Usage`` (object or dict), ``None`` without them."""
    if usage is None:
        return None

    def get(name: str) -> int:
        value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
        return value if isinstance(value, int) and value >= 0 else 0

    prompt, completion = get("prompt_tokens"), get("completion_tokens")
    if prompt == 0 and completion == 0:
        return None
    return prompt, completion


def usage_update(
    litellm: Any, model: str, usage: Any, spent: float, configured_window: int = 0
) -> tuple[dict[str, Any] | None, float]:
    """The ``usage_update`` after a model call, and the session's cost so far.

    ``used`` = this call's prompt + completion tokens (the context), ``size`` = the context window (0 when
    unknown), ``cost`` = ``spent`` plus this call's cost, in USD, when litellm prices the model.
    """
    counted = tokens(usage)
    if counted is None:
        return None, spent
    prompt, completion = counted
    update: dict[str, Any] = {
        "sessionUpdate": "usage_update",
        "used": prompt + completion,
        "size": context_window(litellm, model, configured_window),
    }
    cost = call_cost(litellm, model, prompt, completion)
    if cost is not None:
        spent += cost
        update["cost"] = {"amount": round(spent, 8), "currency": "USD"}
    return update, spent
