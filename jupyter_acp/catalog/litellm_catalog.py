"""What litellm knows: its providers' key variables and models, asked in a subprocess.

litellm takes seconds and a few hundred MB to import, and some providers' checks reach the network; the server
never imports it (its import would cost every server start that much, and
its network checks would run in the server).  ``python -m jupyter_acp.catalog.litellm_catalog`` prints one JSON object:
``{"provider_keys": {provider: [VAR, ...]}, "models": {provider: [model, ...]}}``; the server runs it once, off the
event loop, with an environment holding no provider variable (so every provider's key shows as missing), and
keeps the answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

#: providers whose environment check starts an interactive login (network): not asked
SKIP = {"github_copilot", "chatgpt"}
#: most models suggested per provider
PER_PROVIDER = 200

#: key variables of the providers most users pick, all of which litellm has long known (``tests/test_agent_setup.py``
#: checks each against the live catalog): a Save naming one is checked at once, without waiting for the catalog's
#: first read (litellm's import in a subprocess: 10-20 s on a busy machine, which the first-run form's Save waited
#: for); any other variable is checked against the catalog itself
WELL_KNOWN_KEYS = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "AZURE_API_KEY",
        "CEREBRAS_API_KEY",
        "DEEPINFRA_API_KEY",
        "DEEPSEEK_API_KEY",
        "FIREWORKS_AI_API_KEY",
        "GEMINI_API_KEY",
        "GROQ_API_KEY",
        "HUGGINGFACE_API_KEY",
        "MISTRAL_API_KEY",
        "OPENAI_API_KEY",
        "PERPLEXITYAI_API_KEY",
        "TOGETHERAI_API_KEY",
        "XAI_API_KEY",
    }
)

_cache: dict[str, Any] | None = None
_lock: asyncio.Lock | None = None
_lock_loop: asyncio.AbstractEventLoop | None = None


def is_key_var(name: str) -> bool:
    """A provider *key* variable (not a base URL, region or project)."""
    return name.endswith(("_API_KEY", "_ACCESS_KEY_ID", "_SECRET_ACCESS_KEY", "_API_TOKEN"))


def collect() -> dict[str, Any]:  # pragma: no cover - runs in the subprocess
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import logging

    logging.disable(logging.CRITICAL)
    import litellm

    litellm.suppress_debug_info = True
    provider_keys: dict[str, list[str]] = {}
    models: dict[str, list[str]] = {}
    for provider, names in litellm.models_by_provider.items():
        if provider in SKIP:
            continue
        cost = litellm.model_cost
        listed = sorted(str(m) for m in names if (cost.get(m) or {}).get("mode", "chat") in ("chat", "responses"))
        if not listed:
            continue
        full = [m if m.startswith(provider + "/") else f"{provider}/{m}" for m in listed]
        try:
            check = litellm.validate_environment(model=full[0])
        except Exception:
            continue
        keys = [k for k in check.get("missing_keys") or [] if isinstance(k, str) and is_key_var(k)]
        if keys:
            provider_keys[provider] = keys
            models[provider] = full[:PER_PROVIDER]
    return {"provider_keys": provider_keys, "models": models}


#: the warm-up started by :func:`warm` (kept so the task is not collected while it runs)
_warming: asyncio.Task[dict[str, Any]] | None = None


def warm() -> None:
    """Start reading the catalog in the background, once: the model form is about to be shown, and its Save checks
    the key's variable against the catalog. The first read imports litellm in a subprocess (3-15 s, more on a busy
    machine); started when the form's settings are asked for, it is done, or well under way, by the time the user
    has typed a model and a key, instead of holding their Save."""
    global _warming
    loop = asyncio.get_running_loop()
    if _cache is None and (_warming is None or _warming.get_loop() is not loop):
        _warming = asyncio.ensure_future(catalog())


async def catalog(timeout: float = 120.0) -> dict[str, Any]:
    """litellm's catalog (cached for the server's life); ``{}`` parts when litellm is missing or fails."""
    global _cache, _lock, _lock_loop
    if _cache is not None:
        return _cache
    loop = asyncio.get_running_loop()
    if _lock is None or _lock_loop is not loop:
        # a lock serves one loop: a process that runs servers one after another (a test run) gets a fresh one, not
        # one held forever by a read its earlier loop abandoned when it closed
        _lock, _lock_loop = asyncio.Lock(), loop
    async with _lock:
        if _cache is not None:
            return _cache
        env = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH", "LANG", "TMPDIR") if k in os.environ}
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            __name__,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            stdin=asyncio.subprocess.DEVNULL,
            env=env,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
            data = json.loads(out.decode().strip().splitlines()[-1])
        except (TimeoutError, ValueError, IndexError):
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            return {"provider_keys": {}, "models": {}, "error": "litellm's model list could not be read"}
        _cache = data
        return data


async def knows_key_var(name: str) -> tuple[bool, list[str]]:
    """Whether litellm knows ``name`` as a provider key variable, and (when it does not) the variables it knows, for
    the refusal.  A well-known provider's variable, or one of a catalog already read, is answered without waiting;
    any other waits for the catalog (its first read imports litellm)."""
    if name in WELL_KNOWN_KEYS or (_cache is not None and name in key_vars(_cache)):
        return True, []
    known = key_vars(await catalog())
    return name in known, sorted(known | WELL_KNOWN_KEYS)


def key_vars(cat: dict[str, Any]) -> set[str]:
    return {k for keys in (cat.get("provider_keys") or {}).values() for k in keys}


def suggestions(cat: dict[str, Any], present: set[str], limit: int = 400) -> list[str]:
    """Models of the providers whose every key variable is present."""
    out: list[str] = []
    for provider, keys in (cat.get("provider_keys") or {}).items():
        if keys and all(k in present for k in keys):
            out.extend((cat.get("models") or {}).get(provider, []))
    return out[:limit]


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(json.dumps(collect()) + "\n")
