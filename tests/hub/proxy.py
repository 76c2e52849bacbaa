"""configurable-http-proxy from the npm registry, installed once per machine into the interop agents' cache.

JupyterHub starts it as its proxy (``c.ConfigurableHTTPProxy.command``). The version is pinned, like the agents of
``tests/interop/npm_agents.py``, so that a new release cannot change what the hub tests prove; bump it here.
``python -m tests.hub.proxy`` installs it (``scripts/test.sh`` does) and prints the executable's path.
"""

from __future__ import annotations

import sys

from tests.interop.npm_agents import InstallError, NpmAgent, install

CHP = NpmAgent("configurable-http-proxy", "5.3.0", "configurable-http-proxy")


def main() -> int:
    try:
        print(install(CHP))
    except InstallError as exc:
        print(f"{CHP.spec} could not be installed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
