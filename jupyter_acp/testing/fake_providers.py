"""Fake model servers in the wire formats of real agents: the OpenAI **Responses** API and the
Anthropic **Messages** API, both streamed as SSE, scripted by the rules of :mod:`.fake_model`.

Real third-party ACP agents (codex-acp, claude-agent-acp) run their own tool loop against their own
provider; pointed at one of these servers on 127.0.0.1 they run offline and deterministically:

- codex-acp: ``CODEX_HOME/config.toml`` with a model provider ``base_url = <FakeResponses.url>`` and
  ``wire_api = "responses"`` (see :func:`codex_config`).
- claude-agent-acp: ``ANTHROPIC_BASE_URL=<FakeAnthropic.base>`` and any ``ANTHROPIC_API_KEY``.

The rules are exactly :class:`.fake_model.FakeModel`'s (``match``, ``role``, ``tool``, ``arguments``,
``text`` with ``{last}``, ``times``, ``status``, ``chunk``, ``delay``, ``reasoning`` is ignored): each
request is first translated into the chat-completions shape (its messages, the last one's role
``user`` or ``tool``, the names of the offered tools) and handed to the same rule engine, whose answer
is then written back in the provider's own event stream.  Tool names are matched by regex, so a rule
``"tool": "client_notebook_outline$"`` finds the tool whatever prefix the agent gives its MCP tools
(``mcp__jupyter__client_notebook_outline``, ``jupyter__client_notebook_outline``, ...).

Every request body is kept in ``.requests`` (the raw provider body) and every path asked for, known or
not, in ``.paths``: agents call more than the one endpoint (token counting, model lists, probes).

``python -m jupyter_acp.testing.fake_providers --api responses|anthropic --port N --script rules.json``
serves one from the command line.

The servers live one per wire format, :mod:`.fake_responses` and :mod:`.fake_anthropic`, on
:mod:`.fake_provider_base`; this module names them all and serves one from the command line.
"""

from __future__ import annotations

import argparse

from .fake_anthropic import FakeAnthropic
from .fake_model import load_script, serve_until_interrupted
from .fake_responses import FakeResponses, codex_config

__all__ = ["FakeAnthropic", "FakeResponses", "codex_config", "main"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m jupyter_acp.testing.fake_providers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--api", choices=["responses", "anthropic"], required=True)
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--script", help="JSON file of rules")
    args = p.parse_args(argv)
    rules = load_script(args.script) if args.script else []
    cls = FakeResponses if args.api == "responses" else FakeAnthropic
    serve_until_interrupted(
        lambda: cls(rules, port=args.port),
        lambda m: f"fake {args.api} API listening on {m.url if args.api == 'responses' else m.base}",
    )


if __name__ == "__main__":
    main()
