"""``%acp`` / ``%%acp``: the notebook's agent session from inside a cell.

The magic and the sidebar share ONE session: the kernel asks the server extension (through the routes
of ``kernel_api.py``, naming itself by its kernel id and showing the token the server gave this kernel
alone) for *its notebook's* session, prompts it,
and long-polls the session's events, which it renders into the cell's output as they arrive. Where no
server is reachable (plain IPython, a terminal, a kernel on another host) the magic drives an agent
itself from the kernel process (``magic_local.py``) and says once what is missing.

Shapes follow ``%%ai`` (jupyter-ai-magics): ``-f/--format``, ``{name}`` interpolation with unknown
names left as they are, ``-f code`` puts the code in a new cell below, displayed results carry metadata.
What ``%%ai`` lacks is here: streaming, tool calls shown, permission requests answerable from the cell or
the sidebar (whichever answers first wins), interrupt (⏹) cancels the turn, no hard time limit.

Permissions in the cell: a running cell cannot receive comm (widget) messages (they queue behind it on the
shell channel), so buttons cannot work while the cell blocks; the cell asks with ``input()`` (the stdin
channel does work mid-cell) when the frontend allows it. If the sidebar answers first, the input box stays
until Enter, and a late answer is reported as already given.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display
from traitlets import Dict, Float, Unicode

from .protocol.kernel_link import ENV_TOKEN, ENV_URL, HEADER, KERNEL_HEADER

FORMATS = ("markdown", "code", "text", "json", "html", "math")
CONTEXTS = ("none", "cells-above", "selection")
SUBCOMMANDS = ("help", "agents", "list", "use", "status", "history", "reset", "cancel", "fix", "version")

#: Added to the prompt (as an instruction block, not in the user's text) per format, as ``%%ai`` does.
FORMAT_INSTRUCTIONS = {
    "code": "Answer with source code only, in the notebook's language, with no text or explanation before or after it. "
    "It will be put into a new notebook cell as is.",
    "json": "Answer with JSON only, with no text before or after it.",
    "html": "Answer with HTML only, with no text before or after it.",
    "math": "Answer with LaTeX math only, with no text before or after it and no surrounding $ signs.",
    "markdown": "",
    "text": "",
}

HELP = """\
%%acp [AGENT] [-f FORMAT] [--new] [--context cells-above|selection|none] [--timeout S]
<prompt; {name} is replaced by the value of name in the kernel>

    Ask this notebook's agent session (the same one as the Agent sidebar). The answer streams into
    the output. FORMAT: markdown (default), code (puts the code into a new cell below), text, json,
    html, math. --new starts a new session for this notebook first. Interrupt the kernel (⏹) to
    cancel the turn.

%acp PROMPT                one-line prompt (options as above, AGENT as --agent NAME)
%acp help                  this text
%acp agents                the agents you can use
%acp use AGENT             the agent this kernel's prompts go to
%acp status                server, notebook, agent and session
%acp history               this notebook's conversation so far
%acp reset                 a new session for this notebook (the old one stays in the history store)
%acp cancel                cancel the running turn (also one started in the sidebar)
%acp fix                   explain the last error (with its traceback) and propose a fix

Configuration: %config AcpMagics.default_agent = "echo"; AcpMagics.agents adds agents for the
no-server mode ({"name": {"command": ..., "args": [...]}}).
"""


class AcpError(Exception):
    """A failure the user can act on: shown as one line (a ``UsageError``), without a traceback."""


class ServerGone(AcpError):
    pass


# -- options ---------------------------------------------------------------------------------------
@dataclass
class Options:
    agent: str | None = None
    format: str = "markdown"
    new: bool = False
    context: str = "none"
    timeout: float | None = None
    rest: list[str] = field(default_factory=list)


def parse_options(tokens: list[str], *, positional_agent: bool, stop_at_text: bool) -> Options:
    """Options before the prompt. ``stop_at_text``: the first non-option token starts the prompt."""
    opts = Options()
    i = 0

    def value(name: str) -> str:
        nonlocal i
        if i + 1 >= len(tokens):
            raise AcpError(f"{name} needs a value (see %acp help)")
        i += 1
        return tokens[i]

    while i < len(tokens):
        tok = tokens[i]
        key, eq, inline = tok.partition("=")
        if tok.startswith("-") and len(tok) > 1:
            name = key if eq else tok
            if name in ("-f", "--format"):
                fmt = inline if eq else value(name)
                fmt = {"md": "markdown", "py": "code", "latex": "math"}.get(fmt, fmt)
                if fmt not in FORMATS:
                    raise AcpError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
                opts.format = fmt
            elif name == "--new":
                opts.new = True
            elif name in ("--context", "-c"):
                ctx = inline if eq else value(name)
                if ctx not in CONTEXTS:
                    raise AcpError(f"unknown context {ctx!r}; use one of {', '.join(CONTEXTS)}")
                opts.context = ctx
            elif name == "--no-context":
                opts.context = "none"
            elif name in ("--timeout", "-t"):
                raw = inline if eq else value(name)
                try:
                    opts.timeout = float(raw)
                except ValueError:
                    raise AcpError(f"--timeout takes seconds, not {raw!r}") from None
                if opts.timeout <= 0:
                    raise AcpError("--timeout must be positive")
            elif name in ("-a", "--agent"):
                opts.agent = inline if eq else value(name)
            elif stop_at_text and tok == "--":
                opts.rest = tokens[i + 1 :]
                return opts
            else:
                raise AcpError(f"unknown option {tok!r} (see %acp help)")
        elif positional_agent and opts.agent is None and not opts.rest:
            opts.agent = tok
        elif stop_at_text:
            opts.rest = tokens[i:]
            return opts
        else:
            raise AcpError(f"unexpected {tok!r} after the agent name: the prompt goes in the cell body")
        i += 1
    return opts


# -- interpolation ---------------------------------------------------------------------------------
_FIELD = re.compile(r"(?<!\{)\{([A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\[\]{}]*\])*(?:![rsa])?(?::[^{}]*)?)\}(?!\})")


class _Namespace(dict):
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


def extract_code(text: str) -> str:
    """The code in an answer: the first fenced block if there is one, else the whole text."""
    m = re.search(r"```[^\n`]*\n(.*?)(?:\n)?```", text, re.S)
    return (m.group(1) if m else text).strip("\n")


# -- the server backend ----------------------------------------------------------------------------
def kernel_id() -> str | None:
    """This kernel's id, from its connection file name (``kernel-<id>.json``)."""
    try:
        from ipykernel.connect import get_connection_file

        name = os.path.basename(get_connection_file())
    except Exception:
        return None
    m = re.match(r"kernel-(.+)\.json$", name)
    return m.group(1) if m else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _parent_runtime_info() -> tuple[dict[str, Any], str] | None:
    """The live parent server's ``jupyter_acp-<JPY_PARENT_PID>.json`` and its path, or None."""
    ppid = os.environ.get("JPY_PARENT_PID")
    if not (ppid and ppid.isdigit() and _pid_alive(int(ppid))):
        return None
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        path = os.path.join(jupyter_runtime_dir(), f"jupyter_acp-{ppid}.json")
        with open(path) as fh:
            info = json.load(fh)
        if isinstance(info, dict) and info.get("url") and _pid_alive(int(info.get("pid", ppid))):
            return info, path
    except (OSError, ValueError, TypeError):
        pass
    return None


def discover_server() -> tuple[str, str, str] | None:
    """(url, token, where) of the server that started this kernel, or None.

    The token is this kernel's own (``HMAC(server secret, kernel id)``), which the server put in the
    kernel's environment when it started it.  The runtime file ``jupyter_acp-<JPY_PARENT_PID>.json``
    holds no secret any more (it would be one for every kernel); a token found there is from an older
    server, which handed one out to every kernel, and is used as before (ignored when that pid is gone:
    killed servers leave stale files).
    """
    url, token = os.environ.get(ENV_URL), os.environ.get(ENV_TOKEN)
    if url and token:
        return url, token, "environment"
    found = _parent_runtime_info()
    if found and found[0].get("token"):
        return found[0]["url"], found[0]["token"], found[1]
    return None


def missing_server_reason() -> str:
    """Why no server backend: none found, or found without this kernel's token."""
    found = _parent_runtime_info()
    if found:
        return (
            f"the Jupyter server at {found[0]['url']} runs jupyter_acp, but this kernel has no kernel token "
            f"({ENV_TOKEN}: it was started before the extension, or with another environment); restart the "
            "kernel from Jupyter to connect it"
        )
    return "no jupyter_acp server found"


class ServerBackend:
    """The notebook's session in the Jupyter server (shared with the sidebar)."""

    mode = "server"

    def __init__(self, url: str, token: str, kid: str, where: str = "") -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.token = token
        self.kernel_id = kid
        self.where = where
        self.session_id: str | None = None
        self.session_agent: str | None = None

    def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None, timeout: float = 60.0) -> Any:
        url = self.url + "jupyter-acp/kernel/" + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header(HEADER, self.token)
        req.add_header(KERNEL_HEADER, self.kernel_id)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read() or b"{}").get("message") or exc.reason
            except ValueError:
                message = exc.reason
            err = AcpError(f"{message} (HTTP {exc.code})")
            err.status = exc.code  # type: ignore[attr-defined]
            raise err from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerGone(f"the Jupyter server at {self.url} cannot be reached ({reason})") from None
        return json.loads(raw) if raw else None

    def whoami(self) -> dict[str, Any]:
        return self.call("GET", "whoami", params={"kernel_id": self.kernel_id})

    def agents(self) -> list[dict[str, Any]]:
        return [a for a in self.call("GET", "agents") if a.get("configured", True)]

    def open(self, agent: str | None, new: bool = False) -> dict[str, Any]:
        session = self.call("POST", "session", {"kernel_id": self.kernel_id, "agent": agent, "new": new})
        self.session_id, self.session_agent = session["id"], session["agent"]
        return session

    def current(self, agent: str | None) -> dict[str, Any] | None:
        """This notebook's session with ``agent`` (default agent when None), without creating it."""
        who = self.whoami()
        name = agent or who.get("default_agent")
        for s in who.get("sessions", []):
            if s["agent"] == name:
                return s
        return None

    def prompt(self, agent: str | None, new: bool, text: str, extra: list[dict[str, Any]], context: dict[str, Any] | None) -> dict[str, Any]:
        blocks = [{"type": "text", "text": text}, *extra]
        body = {"kernel_id": self.kernel_id, "agent": agent, "new": new, "prompt": blocks, "context": context}
        res = self.call("POST", "prompt", body)
        self.session_id, self.session_agent = res["session"]["id"], res["session"]["agent"]
        return res

    def events(self, session_id: str, after: int, wait: float) -> dict[str, Any]:
        return self.call(
            "GET", f"sessions/{session_id}/events", params={"after": after, "wait": wait}, timeout=wait + 30
        )

    def cancel(self, session_id: str) -> bool:
        return bool(self.call("POST", f"sessions/{session_id}/cancel").get("cancelled"))

    def answer(self, session_id: str, request_id: str, option_id: str) -> None:
        self.call("POST", f"sessions/{session_id}/permissions/{request_id}", {"option_id": option_id})

    def describe(self) -> str:
        return f"server {self.url} (found in {self.where}), kernel {self.kernel_id}"


# -- rendering -------------------------------------------------------------------------------------
class TurnView:
    """One turn in the cell's output: streamed in place, then shown in the requested format."""

    def __init__(self, shell: Any, fmt: str, metadata: dict[str, Any]) -> None:
        self.shell = shell
        self.fmt = fmt
        self.metadata = metadata
        self.interactive = getattr(shell, "kernel", None) is not None
        self.text: list[str] = []
        self.thinking = False
        self.tools: dict[str, dict[str, Any]] = {}
        self.permissions: dict[str, dict[str, Any]] = {}
        self.notices: list[str] = []
        self.plan: list[dict[str, Any]] = []
        self.footer: str | None = None
        self.handle: Any = None
        self._last_render = 0.0
        self._dirty = False
        self._printed = 0  # terminal mode: characters of answer already printed

    # events
    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "session_update":
            self._update(event.get("update") or {})
        elif kind == "notice":
            level = event.get("level", "info")
            if event.get("phase") == "agent_starting":
                return
            self.notices.append(("⚠️ " if level in ("warning", "error") else "ℹ️ ") + str(event.get("text", "")))
            self._line(self.notices[-1])
        elif kind == "permission_request":
            tc = event.get("tool_call") or {}
            self.permissions[event["request_id"]] = {
                "title": tc.get("title") or tc.get("kind") or "a tool call",
                "options": event.get("options") or [],
                "answer": None,
            }
            self._line(self._permission_line(event["request_id"]))
        elif kind == "permission_resolved":
            p = self.permissions.get(event.get("request_id"))
            if p is not None:
                p["answer"] = "cancelled" if event.get("cancelled") else event.get("option_id")
                self._line(self._permission_line(event["request_id"]))
        self._dirty = True
        self.render()

    def _update(self, upd: dict[str, Any]) -> None:
        kind = upd.get("sessionUpdate")
        content = upd.get("content")
        if kind == "agent_message_chunk" and isinstance(content, dict):
            if content.get("type") == "text":
                self.text.append(content.get("text", ""))
                if not self.interactive:
                    sys.stdout.write(content.get("text", ""))
                    sys.stdout.flush()
            else:
                self.text.append(f"[{content.get('type')}]")
        elif kind == "agent_thought_chunk":
            self.thinking = True
        elif kind in ("tool_call", "tool_call_update"):
            tid = str(upd.get("toolCallId"))
            entry = self.tools.setdefault(tid, {"title": "tool call", "status": "pending", "kind": ""})
            for key in ("title", "status", "kind"):
                if upd.get(key):
                    entry[key] = upd[key]
            if kind == "tool_call":
                self._line(self._tool_line(entry))
        elif kind == "plan":
            self.plan = list(upd.get("entries") or [])

    def _tool_line(self, t: dict[str, Any]) -> str:
        mark = {"completed": "✓", "failed": "✗", "in_progress": "…"}.get(t["status"], "·")
        return f"🔧 {t['title']} {mark} {t['status']}"

    def _permission_line(self, rid: str) -> str:
        p = self.permissions[rid]
        opts = ", ".join(f"[{o.get('optionId')}] {o.get('name', '')}" for o in p["options"])
        if p["answer"]:
            return f"🔐 permission for {p['title']}: {p['answer']}"
        return f"🔐 permission asked for {p['title']}: {opts} (answer here or in the Agent sidebar)"

    def _line(self, text: str) -> None:
        if not self.interactive:
            if self._printed_text():
                sys.stdout.write("\n")
            print(text, flush=True)

    def _printed_text(self) -> bool:
        return bool(self.text)

    # output
    def answer(self) -> str:
        return "".join(self.text)

    def _header_lines(self) -> list[str]:
        lines = list(self.notices)
        lines += [self._tool_line(t) for t in self.tools.values()]
        for entry in self.plan:
            mark = {"completed": "☑", "in_progress": "▶"}.get(entry.get("status", ""), "☐")
            lines.append(f"{mark} {entry.get('content', '')}")
        lines += [self._permission_line(rid) for rid in self.permissions]
        return lines

    def bundle(self, final: bool = False) -> dict[str, Any]:
        head = self._header_lines()
        answer = self.answer()
        if not answer and self.thinking and not final:
            answer_md, answer_txt = "_thinking…_", "thinking…"
        else:
            answer_md = answer_txt = answer
        tail = [self.footer] if self.footer else []
        md_head = "\n".join(f"- {h}" for h in head)
        md = "\n\n".join(p for p in (md_head, answer_md, *(f"_{t}_" for t in tail)) if p)
        txt = "\n".join(p for p in (*head, answer_txt, *tail) if p)
        return {"text/plain": txt, "text/markdown": md}

    def render(self, force: bool = False) -> None:
        if not self.interactive or not self._dirty:
            return
        now = time.monotonic()
        if not force and now - self._last_render < 0.1:
            return
        self._last_render, self._dirty = now, False
        if self.handle is None:
            self.handle = display(self.bundle(), raw=True, metadata=self.metadata, display_id=True)
        else:
            self.handle.update(self.bundle(), raw=True, metadata=self.metadata)

    def finish(self, footer: str | None = None) -> None:
        """The final output, in the requested format."""
        self.footer = footer
        answer = self.answer()
        if not self.interactive:
            if answer and not answer.endswith("\n"):
                sys.stdout.write("\n")
            if footer:
                print(footer, flush=True)
            if self.fmt == "code" and answer and not footer:
                self.shell.set_next_input(extract_code(answer), replace=False)
            return
        bundle = self.bundle(final=True)
        if footer is None and answer:
            head = self._header_lines()
            md_head = "\n".join(f"- {h}" for h in head)
            txt_head = "\n".join(head)
            if self.fmt == "code":
                self.shell.set_next_input(extract_code(answer), replace=False)
                note = "Code from the agent inserted in a new cell below ⬇️"
                bundle = {"text/plain": "\n".join(p for p in (txt_head, note) if p), "text/markdown": "\n\n".join(p for p in (md_head, f"_{note}_") if p)}
            elif self.fmt == "text":
                bundle = {"text/plain": bundle["text/plain"]}
            elif self.fmt == "html":
                bundle = {"text/plain": bundle["text/plain"], "text/html": answer}
            elif self.fmt == "math":
                body = answer.strip().strip("$").strip()
                bundle = {"text/plain": answer, "text/latex": f"$$\n{body}\n$$"}
            elif self.fmt == "json":
                try:
                    bundle = {"text/plain": answer, "application/json": json.loads(extract_code(answer))}
                except ValueError:
                    self.notices.append("⚠️ the answer is not valid JSON; shown as text")
                    bundle = self.bundle(final=True)
        self._dirty = True
        if self.handle is None:
            self.handle = display(bundle, raw=True, metadata=self.metadata, display_id=True)
        else:
            self.handle.update(bundle, raw=True, metadata=self.metadata)


# -- the magics ------------------------------------------------------------------------------------
@magics_class
class AcpMagics(Magics):
    """``%acp`` and ``%%acp``."""

    default_agent = Unicode("", config=True, help="Agent used when a prompt names none (empty: the server's default).")
    agents = Dict(
        default_value={},
        config=True,
        help="Agents for the no-server mode, added to 'builtin' and 'echo': {name: {command, args, env}}.",
    )
    poll_wait = Float(10.0, config=True, help="Seconds one long poll of the server may wait for events.")

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._backend: Any = None
        self._agent: str | None = None  # set by %acp use
        self._said_local = False

    # -- backend -----------------------------------------------------------------------------------
    @property
    def backend(self) -> Any:
        if self._backend is None:
            found = discover_server()
            kid = kernel_id()
            if found and kid:
                self._backend = ServerBackend(found[0], found[1], kid, found[2])
            else:
                from .magic_local import LocalBackend

                self._backend = LocalBackend(self)
                missing = missing_server_reason() if not found else "this kernel has no kernel id"
                self._notice_once(
                    f"jupyter_acp: {missing}, so the agent runs inside this kernel: no notebook cells, "
                    "no sidebar; variables of this kernel are its tools."
                )
        return self._backend

    def _notice_once(self, text: str) -> None:
        if not self._said_local:
            self._said_local = True
            print(text, file=sys.stderr, flush=True)

    def _fallback_to_local(self, why: str) -> None:
        from .magic_local import LocalBackend

        self._backend = LocalBackend(self)
        self._notice_once(f"jupyter_acp: {why}; the agent runs inside this kernel from now on (no notebook cells, no sidebar).")

    def agent_for(self, explicit: str | None) -> str | None:
        return explicit or self._agent or self.default_agent or None

    # -- entry point -------------------------------------------------------------------------------
    @line_cell_magic
    def acp(self, line: str = "", cell: str | None = None) -> Any:
        try:
            return self._acp(line, cell)
        except AcpError as exc:
            raise UsageError(f"%acp: {exc}") from None

    def _acp(self, line: str, cell: str | None) -> Any:
        if cell is not None:
            try:
                tokens = shlex.split(line)
            except ValueError as exc:
                raise AcpError(f"cannot read the options: {exc}") from None
            opts = parse_options(tokens, positional_agent=True, stop_at_text=False)
            if not cell.strip():
                raise AcpError("the prompt is empty: write it in the cell body, below %%acp")
            return self.run_prompt(cell.strip(), opts)
        stripped = line.strip()
        word, _, rest = stripped.partition(" ")
        rest = rest.strip()
        if not stripped or word in ("help", "-h", "--help"):
            return self._show(HELP)
        if word == "version":
            from . import __version__

            return self._show(f"jupyter_acp {__version__}")
        if word in ("agents", "list"):
            return self.cmd_agents()
        if word == "use":
            return self.cmd_use(rest)
        if word == "status":
            return self.cmd_status()
        if word == "history":
            return self.cmd_history()
        if word == "reset":
            return self.cmd_reset()
        if word == "cancel":
            return self.cmd_cancel()
        if word == "fix":
            return self.cmd_fix(rest)
        opts = parse_options(stripped.split(), positional_agent=False, stop_at_text=True)
        if not opts.rest:
            raise AcpError("the prompt is empty (see %acp help)")
        # keep the user's spacing: the prompt is the line after the options
        prompt = stripped
        for tok in stripped.split()[: len(stripped.split()) - len(opts.rest)]:
            prompt = prompt[prompt.index(tok) + len(tok) :]
        return self.run_prompt(prompt.strip(), opts)

    def _show(self, text: str, markdown: str | None = None) -> None:
        if getattr(self.shell, "kernel", None) is not None:
            display({"text/plain": text, "text/markdown": markdown or f"```\n{text}\n```"}, raw=True)
        else:
            print(text)

    def _call(self, fn: Any, *args: Any) -> Any:
        """A backend call; if the server is gone before anything started, fall back to the local agent."""
        try:
            return fn(*args)
        except ServerGone as exc:
            if isinstance(self._backend, ServerBackend):
                self._fallback_to_local(str(exc))
                return getattr(self._backend, fn.__name__)(*args)
            raise

    # -- subcommands -------------------------------------------------------------------------------
    def cmd_agents(self) -> None:
        agents = self._call(self.backend.agents)
        current = self.agent_for(None)
        lines, rows = [], ["| agent | title | state |", "|---|---|---|"]
        for a in agents:
            mark = " (default)" if a.get("default") else ""
            mark += " ← in use" if current == a["name"] else ""
            state = a.get("state", "")
            if a.get("error"):
                state += f": {a['error']}"
            if not a.get("available", True):
                state = "not installed"
            lines.append(f"{a['name']}{mark}: {a.get('title', '')} [{state}]")
            rows.append(f"| `{a['name']}`{mark} | {a.get('title', '')} | {state} |")
        self._show("\n".join(lines), "\n".join(rows))

    def cmd_use(self, name: str) -> None:
        if not name:
            raise AcpError("which agent? %acp use AGENT (see %acp agents)")
        names = [a["name"] for a in self._call(self.backend.agents)]
        if name not in names:
            raise AcpError(f"no agent named {name!r}; the agents are: {', '.join(names)}")
        self._agent = name
        self._show(f"%acp prompts of this kernel now go to {name!r}")

    def _session(self) -> dict[str, Any] | None:
        return self._call(self.backend.current, self.agent_for(None))

    def cmd_status(self) -> None:
        backend = self.backend
        info: dict[str, Any] = {"mode": backend.mode, "where": backend.describe()}
        if isinstance(backend, ServerBackend):
            who = self._call(backend.whoami)
            info["notebook"] = who.get("notebook")
            info["default_agent"] = who.get("default_agent")
        info["agent"] = self.agent_for(None) or info.get("default_agent")
        session = self._session()
        info["session"] = session
        lines = [f"mode: {info['mode']} ({info['where']})"]
        if info.get("notebook"):
            lines.append(f"notebook: {info['notebook']}")
        lines.append(f"agent: {info['agent']}")
        if session:
            lines.append(f"session: {session['id']} ({session['state']}, {session.get('last_seq', 0)} events)")
            if session.get("error"):
                lines.append(f"last error: {session['error']}")
        else:
            lines.append("session: none yet (the first prompt opens it)")
        self._show("\n".join(lines), "\n\n".join(f"**{line.split(':', 1)[0]}**:{line.split(':', 1)[1]}" for line in lines))

    def cmd_history(self) -> None:
        session = self._session()
        if session is None:
            return self._show("no conversation yet in this notebook")
        events = self._call(self.backend.events, session["id"], 0, 0)["events"]
        turns: list[list[str]] = []
        for e in events:
            if e["type"] == "notice" and e.get("phase") == "session_reset":
                turns = []  # the agent forgot what came before: so does the history
            elif e["type"] == "turn_started":
                text = " ".join(b.get("text", "") for b in e.get("prompt", []) if b.get("type") == "text")
                turns.append([text, ""])
            elif e["type"] == "session_update" and turns:
                upd = e.get("update") or {}
                content = upd.get("content") or {}
                if upd.get("sessionUpdate") == "agent_message_chunk" and content.get("type") == "text":
                    turns[-1][1] += content.get("text", "")
            elif e["type"] == "turn_ended" and turns and e.get("error"):
                turns[-1][1] += f"\n[error: {e['error']}]"
        if not turns:
            return self._show(f"session {session['id']}: no prompts yet")
        txt = "\n\n".join(f"You: {p}\n{session['agent']}: {a}" for p, a in turns)
        md = "\n\n".join(f"**You:** {p}\n\n**{session['agent']}:** {a}" for p, a in turns)
        self._show(f"session {session['id']}\n\n" + txt, f"_session {session['id']}_\n\n" + md)

    def cmd_reset(self) -> None:
        session = self._call(self.backend.open, self.agent_for(None), True)
        self._show(f"new conversation with {session['agent']!r} in this notebook's session {session['id']}")

    def cmd_cancel(self) -> None:
        session = self._session()
        if session is None or not self._call(self.backend.cancel, session["id"]):
            return self._show("nothing to cancel: no turn is running")
        self._show("cancelled the running turn")

    def cmd_fix(self, rest: str) -> None:
        etype, value, tb = getattr(sys, "last_type", None), getattr(sys, "last_value", None), getattr(sys, "last_traceback", None)
        if value is None:
            raise AcpError("no error to explain yet: %acp fix explains the last exception raised in this kernel")
        tb_text = "".join(traceback.format_exception(etype, value, tb))
        tb_text = re.sub(r"\x1b\[[0-9;]*m", "", tb_text)
        inputs = self.shell.user_ns.get("In") or []
        code = inputs[-2] if len(inputs) >= 2 else ""
        opts = parse_options(rest.split(), positional_agent=False, stop_at_text=False) if rest else Options()
        prompt = "Explain the following error and propose a fix.\n\n"
        if code:
            prompt += f"The code that ran:\n```python\n{code}\n```\n\n"
        prompt += f"The error:\n```\n{tb_text[-6000:]}\n```"
        self.run_prompt(prompt, opts, interpolate_=False)

    # -- a prompt ----------------------------------------------------------------------------------
    def _cell_id(self) -> str | None:
        kernel = getattr(self.shell, "kernel", None)
        try:
            parent = kernel.get_parent("shell") if kernel is not None else None
        except Exception:
            parent = None
        return ((parent or {}).get("metadata") or {}).get("cellId")

    def run_prompt(self, text: str, opts: Options, interpolate_: bool = True) -> None:
        if interpolate_:
            text = interpolate(text, self.shell.user_ns)
        agent = self.agent_for(opts.agent)
        extra: list[dict[str, Any]] = []
        instruction = FORMAT_INSTRUCTIONS.get(opts.format)
        if instruction:
            extra.append(
                {
                    "type": "resource",
                    "resource": {"uri": f"jupyter-acp:instructions/format/{opts.format}", "mimeType": "text/plain", "text": instruction},
                }
            )
        context = None
        if opts.context == "cells-above":
            context = {"kind": "cells-above", "cell_id": self._cell_id()}
        elif opts.context == "selection":
            raise AcpError("--context selection is not available from the magic yet; use cells-above or none")
        res = self._call(self.backend.prompt, agent, opts.new, text, extra, context)
        session, turn_id, after = res["session"], res["turn_id"], res["after"]
        meta = {
            "jupyter_acp": {
                "agent": session["agent"],
                "session_id": session["id"],
                "turn_id": turn_id,
                "notebook": session.get("notebook"),
                "format": opts.format,
            }
        }
        view = TurnView(self.shell, opts.format, meta)
        self._follow(session["id"], turn_id, after, view, opts.timeout)

    def _follow(self, sid: str, turn_id: str, after: int, view: TurnView, timeout: float | None) -> None:
        backend = self.backend
        started = time.monotonic()
        cancelling: float | None = None
        footer: str | None = None
        asked: set[str] = set()
        seen = [after]  # the last seq shown, advanced event by event (an interrupt mid-batch repeats nothing)
        while True:
            now = time.monotonic()
            wait = self.poll_wait
            if timeout is not None and cancelling is None:
                left = timeout - (now - started)
                if left <= 0:
                    cancelling = now
                    footer = f"timed out after {timeout:g} s (--timeout); the turn was cancelled"
                    self._safe_cancel(backend, sid)
                    continue
                wait = min(wait, max(left, 0.05))
            if cancelling is not None:
                if now - cancelling > 15:
                    view.finish(footer or "cancelled; the agent did not confirm")
                    return
                wait = 1.0
            # ⏹ (SIGINT) may land while we wait for events or while we show them: either way it cancels
            try:
                try:
                    res = backend.events(sid, seen[0], wait)
                except ServerGone as exc:
                    view.finish(f"the Jupyter server went away mid-answer; what arrived is shown above ({exc})")
                    raise ServerGone(f"the Jupyter server went away mid-answer: {exc}") from None
                if self._show_events(backend, sid, turn_id, res["events"], view, asked, cancelling, footer, seen):
                    return
            except KeyboardInterrupt:
                if cancelling is not None:
                    view.finish("stopped waiting; the turn may still be running (%acp cancel)")
                    return
                cancelling = time.monotonic()
                footer = "cancelled"
                self._safe_cancel(backend, sid)

    def _show_events(
        self, backend: Any, sid: str, turn_id: str, events: list[dict[str, Any]], view: TurnView,
        asked: set[str], cancelling: float | None, footer: str | None, seen: list[int],
    ) -> bool:
        """Feed one batch of events to the view; True once the turn has ended (and the view finished)."""
        for event in events:
            seen[0] = max(seen[0], event["seq"])
            if event.get("type") == "turn_started" and event.get("turn_id") != turn_id:
                continue
            view.feed(event)
            if event.get("type") == "permission_request" and event.get("turn_id") == turn_id:
                pending = event["request_id"]
                if pending not in asked:
                    asked.add(pending)
                    self._ask_permission(backend, sid, event, view)
            if event.get("type") == "turn_ended" and event.get("turn_id") == turn_id:
                view.render(force=True)
                if event.get("error") and not (cancelling and event.get("stop_reason") == "cancelled"):
                    msg = event["error"]
                    view.finish(f"error: {msg}")
                    kind = event.get("error_kind")
                    prefix = "the agent needs a login" if kind == "needs_login" else "the turn failed"
                    raise AcpError(f"{prefix}: {msg}")
                stop = event.get("stop_reason")
                if cancelling is not None or stop == "cancelled":
                    view.finish(footer or "cancelled")
                elif stop not in (None, "end_turn"):
                    view.finish(f"the agent stopped: {stop}")
                else:
                    view.finish()
                return True
        view.render()
        return False

    def _safe_cancel(self, backend: Any, sid: str) -> None:
        try:
            backend.cancel(sid)
        except AcpError:
            pass

    def _ask_permission(self, backend: Any, sid: str, event: dict[str, Any], view: TurnView) -> None:
        """Ask in the cell when the frontend can answer ``input()``; the sidebar can answer either way."""
        kernel = getattr(self.shell, "kernel", None)
        can_ask = bool(getattr(kernel, "_allow_stdin", False)) if kernel is not None else sys.stdin.isatty()
        if not can_ask:
            return
        view.render(force=True)
        options = event.get("options") or []
        listing = " ".join(f"[{i + 1}] {o.get('name') or o.get('optionId')}" for i, o in enumerate(options))
        try:
            raw = input(f"Allow? {listing} (Enter: leave it to the sidebar): ").strip()
        except (EOFError, KeyboardInterrupt):
            return
        if not raw:
            return
        chosen = None
        if raw.isdigit() and 1 <= int(raw) <= len(options):
            chosen = options[int(raw) - 1]
        else:
            for o in options:
                if raw.lower() in (str(o.get("optionId", "")).lower(), str(o.get("name", "")).lower()):
                    chosen = o
        if chosen is None:
            view.notices.append(f"⚠️ {raw!r} is not one of the options; answer in the sidebar")
            return
        try:
            backend.answer(sid, event["request_id"], chosen["optionId"])
        except AcpError as exc:
            if getattr(exc, "status", None) == 404:
                view.notices.append("ℹ️ already answered elsewhere")
            else:
                raise


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(AcpMagics)
