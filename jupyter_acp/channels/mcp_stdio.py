"""``python -m jupyter_acp.channels.mcp_stdio``: the loopback MCP tool host, for agents that only take stdio servers.

Each line on stdin (a JSON-RPC message) is POSTed to the host named by ``JUPYTER_ACP_MCP_URL`` with
the bearer in ``JUPYTER_ACP_MCP_BEARER``; each answer is written to stdout as one line.  Errors of the
transport become JSON-RPC errors, so the agent always gets an answer to a request.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

from . import SHIM_BEARER_ENV, SHIM_URL_ENV


def forward(url: str, bearer: str, line: bytes) -> bytes | None:
    request = urllib.request.Request(
        url,
        data=line,
        method="POST",
        headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as resp:
            body = resp.read()
            return body if resp.status != 204 and body else None
    except urllib.error.HTTPError as exc:
        body = exc.read()
        reason = f"tool host answered HTTP {exc.code}"
    except OSError as exc:
        body, reason = b"", f"tool host unreachable: {exc}"
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("id") is None:
        return None
    try:
        err = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        err = {"code": -32603, "message": reason}
    return json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": err}).encode()


def main() -> None:
    url, bearer = os.environ.get(SHIM_URL_ENV), os.environ.get(SHIM_BEARER_ENV)
    if not url or not bearer:
        sys.stderr.write(f"jupyter_acp.channels.mcp_stdio: {SHIM_URL_ENV} and {SHIM_BEARER_ENV} must be set\n")
        sys.exit(2)
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        answer = forward(url, bearer, line.strip())
        if answer is not None:
            sys.stdout.buffer.write(answer.replace(b"\n", b" ") + b"\n")
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
