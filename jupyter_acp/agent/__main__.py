"""``python -m jupyter_acp.agent [--echo] [--model M]``: the built-in ACP agent over stdio.

stdout is the wire: before anything else the real stdout is set aside for JSON-RPC and file
descriptor 1 is pointed at stderr, so a stray ``print`` (ours, litellm's, a child's) can never corrupt
the protocol.  Logs go to stderr and never carry prompts or tool payloads.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

#: loggers that would print prompts, requests or environment values at DEBUG: held at WARNING
QUIET_LOGGERS = (
    "LiteLLM",
    "LiteLLM Proxy",
    "LiteLLM Router",
    "litellm",
    "httpx",
    "httpcore",
    "httpx2",
    "openai",
    "mcp",
    "aiohttp",
    "asyncio",
    "jupyter_acp.protocol.jsonrpc",
)


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="jupyter-acp-agent", description=__doc__)
    p.add_argument("--echo", action="store_true", help="answer by echoing the prompt word by word (no model)")
    p.add_argument("--model", default=os.environ.get("JUPYTER_ACP_MODEL", ""), help="litellm model string")
    p.add_argument(
        "--models",
        default=os.environ.get("JUPYTER_ACP_MODELS", ""),
        help="comma-separated models offered in the model option",
    )
    p.add_argument("--api-base", default=os.environ.get("JUPYTER_ACP_API_BASE", ""), help="model API base URL")
    p.add_argument(
        "--api-key",
        default=os.environ.get("JUPYTER_ACP_API_KEY", ""),
        help="model API key (prefer the provider's own variable, e.g. OPENAI_API_KEY)",
    )
    p.add_argument(
        "--mode",
        choices=["ask", "auto"],
        default=os.environ.get("JUPYTER_ACP_AGENT_MODE", "ask"),
        help="initial session mode",
    )
    p.add_argument(
        "--client-tools-permission",
        choices=["ask", "auto"],
        default="auto",
        help="client tools: 'ask' always asks before a tool that is not read-only, 'auto' unless in auto mode",
    )
    p.add_argument("--mcp-permission", choices=["ask", "auto"], default="ask", help="the same, for MCP tools")
    p.add_argument(
        "--trust-mcp-annotations",
        action="store_true",
        help="run MCP tools annotated read-only without asking (default: every MCP tool asks)",
    )
    p.add_argument(
        "--max-concurrent",
        type=int,
        default=4,
        help="session operations (set-ups and prompts) in flight at once; more are refused (Moltis: 4)",
    )
    p.add_argument(
        "--max-turn-requests",
        type=int,
        default=int(_env_float("JUPYTER_ACP_MAX_TURN_REQUESTS", 25)),
        help="model round trips per turn",
    )
    p.add_argument(
        "--vision",
        choices=["auto", "yes", "no"],
        default=os.environ.get("JUPYTER_ACP_VISION", "auto")
        if os.environ.get("JUPYTER_ACP_VISION") in ("auto", "yes", "no")
        else "auto",
        help="does the model take images: auto asks litellm (supports_vision); yes/no for models litellm does not know",
    )
    p.add_argument(
        "--context-window",
        type=int,
        default=int(_env_float("JUPYTER_ACP_CONTEXT_WINDOW", 0)),
        help="the model's context window in tokens, for models litellm does not know (0: ask litellm)",
    )
    p.add_argument("--tool-timeout", type=float, default=_env_float("JUPYTER_ACP_TOOL_TIMEOUT", 120.0))
    p.add_argument("--mcp-start-timeout", type=float, default=30.0)
    p.add_argument("--model-timeout", type=float, default=_env_float("JUPYTER_ACP_MODEL_TIMEOUT", 600.0))
    p.add_argument(
        "--state-dir", default=None, help="session history (default: Jupyter data dir, or $JUPYTER_ACP_AGENT_STATE_DIR)"
    )
    p.add_argument("--echo-delay", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--log-level", default=os.environ.get("JUPYTER_ACP_AGENT_LOG", "WARNING"))
    return p.parse_args(argv)


def _reserve_stdout() -> object:
    """Set the real stdout aside for the wire and point fd 1 (and ``sys.stdout``) at stderr."""
    try:
        wire_fd = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # pragma: no cover - no fd 1: nothing to protect
        return sys.stdout
    sys.stdout = sys.stderr
    return os.fdopen(wire_fd, "wb", buffering=0)


def main(argv: list[str] | None = None) -> None:
    wire_out = _reserve_stdout()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = parse_args(argv)
    args.wire_out = wire_out
    level = getattr(logging, str(args.log_level).upper(), logging.WARNING)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(levelname)s %(name)s: %(message)s")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, level))
    import warnings

    warnings.simplefilter("default" if level <= logging.DEBUG else "ignore")
    logging.getLogger("jupyter_acp.agent").info("jupyter-acp-agent starting (%s)", "echo" if args.echo else "model")
    from .server import run

    code = 0
    try:
        asyncio.run(run(args))
    except KeyboardInterrupt:
        code = 130
    finally:
        sys.stderr.flush()
    # a daemon thread may still be importing litellm: leave without waiting for it
    os._exit(code)


if __name__ == "__main__":
    main()
