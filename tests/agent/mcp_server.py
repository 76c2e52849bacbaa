"""A small MCP server for the agent's tests: ``python mcp_server.py stdio`` or ``... http PORT``."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("agent-test")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def env_keys() -> str:
    """The names of this server's environment variables."""
    return ",".join(sorted(os.environ))


#: written to the server's stderr at start: the agent keeps an MCP child's stderr out of its logs
STDERR_SENTINEL = "mcp-child-stderr-7f3a"

if __name__ == "__main__":
    print(STDERR_SENTINEL, file=sys.stderr, flush=True)
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
