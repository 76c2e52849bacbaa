"""``python -m jupyter_acp.agent [--echo]``: the built-in ACP agent over stdio.

stdout is the wire: only JSON-RPC goes there; every log line goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="jupyter-acp-agent", description=__doc__)
    p.add_argument("--echo", action="store_true", help="answer by echoing the prompt word by word (no model)")
    p.add_argument("--model", default=os.environ.get("JUPYTER_ACP_MODEL", ""), help="litellm model string")
    p.add_argument("--api-base", default=os.environ.get("JUPYTER_ACP_API_BASE", ""), help="model API base URL")
    p.add_argument("--log-level", default=os.environ.get("JUPYTER_ACP_AGENT_LOG", "WARNING"))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    from .server import run

    asyncio.run(run(args))


if __name__ == "__main__":
    main()
