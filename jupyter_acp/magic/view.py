"""What a turn shows in the cell: the streamed answer, tool calls, plan, notices, permission prompts.

In a notebook the output is one display, updated in place and shown at the end in the requested format
(``-f code`` puts the code in a new cell below); in a terminal (plain IPython) the answer is printed as it arrives.
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

from IPython.display import display

from .errors import AcpError


def extract_code(text: str) -> str:
    """The code in an answer: the first fenced block if there is one, else the whole text."""
    m = re.search(r"```[^\n`]*\n(.*?)(?:\n)?```", text, re.S)
    return (m.group(1) if m else text).strip("\n")


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
        elif kind == "elicitation_request":
            # the cell has no form of its own: the question waits in the Agent panel (the turn waits with it)
            question = str(event.get("message") or "a question")[:200]
            self.notices.append(f"❓ the agent asks: {question}. Answer it in the Agent panel.")
            self._line(self.notices[-1])
        elif kind == "elicitation_resolved":
            self.notices.append(f"❓ answered: {event.get('action', 'done')}")
            self._line(self.notices[-1])
        elif kind == "permission_resolved":
            rid: Any = event.get("request_id")
            p = self.permissions.get(rid)
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
                bundle = {
                    "text/plain": "\n".join(p for p in (txt_head, note) if p),
                    "text/markdown": "\n\n".join(p for p in (md_head, f"_{note}_") if p),
                }
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


def ask_permission(shell: Any, backend: Any, sid: str, event: dict[str, Any], view: TurnView) -> None:
    """Ask in the cell when the frontend can answer ``input()``; the sidebar can answer either way."""
    kernel = getattr(shell, "kernel", None)
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
