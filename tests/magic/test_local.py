"""The magic without a server (plain IPython), server discovery, and a server lost mid-answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from jupyter_acp import magic

pytestmark = pytest.mark.timeout(120)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_ipython(code: str, tmp_path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_ACP_", "JPY_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH", "")) if p)
    env["HOME"] = str(tmp_path)
    env.update(env_extra)
    script = tmp_path / "script.ipy"
    script.write_text(textwrap.dedent(code))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "IPython",
            "--no-banner",
            "--colors=NoColor",
            "--HistoryManager.enabled=False",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
        env=env,
    )


def test_plain_ipython_drives_the_agent_itself(tmp_path):
    proc = run_ipython(
        """
        %load_ext jupyter_acp
        x = 42
        %acp --agent echo hello {x} and {unknown}
        %acp use echo
        %acp status
        %acp history
        %acp -f code print({x})
        print("next input:", repr(get_ipython().rl_next_input))
        %acp agents
        """,
        tmp_path,
    )
    out, err = proc.stdout, proc.stderr
    assert "hello 42 and {unknown}" in out, (out, err)
    assert err.count("the agent runs inside this kernel") == 1, err
    assert "no notebook cells, no sidebar" in err
    assert "mode: local" in out and "agent: echo" in out
    assert "You: hello 42 and {unknown}" in out
    assert "next input: 'print(42)'" in out
    assert "echo ← in use" in out


def test_server_lost_mid_answer_keeps_what_arrived(tmp_path):
    proc = run_ipython(
        """
        %load_ext jupyter_acp
        from jupyter_acp.magic import ServerGone
        m = get_ipython().magics_manager.registry["AcpMagics"]

        class Gone:
            mode = "server"
            calls = 0
            def prompt(self, agent, new, text, extra, context):
                return {"turn_id": "t1", "after": 0, "session": {"id": "s1", "agent": "echo", "notebook": "nb.ipynb"}}
            def events(self, sid, after, wait):
                self.calls += 1
                if self.calls > 1:
                    raise ServerGone("connection refused")
                chunk = lambda i, t: {"seq": i, "type": "session_update", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": t}}}
                return {"events": [{"seq": 1, "type": "turn_started", "turn_id": "t1"}, chunk(2, "partial "), chunk(3, "answer")]}
            def cancel(self, sid):
                return False

        m._backend = Gone()
        %acp hello
        print("after the error")
        """,
        tmp_path,
    )
    assert "partial answer" in proc.stdout, (proc.stdout, proc.stderr)
    assert "went away mid-answer" in proc.stdout + proc.stderr
    assert "UsageError" in proc.stderr and "Traceback" not in proc.stderr


def test_discovery_env_then_runtime_file_and_stale_files(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_ACP_URL", "http://127.0.0.1:1/")
    monkeypatch.setenv("JUPYTER_ACP_TOKEN", "s3cret")
    assert magic.discover_server() == ("http://127.0.0.1:1/", "s3cret", "environment")
    monkeypatch.delenv("JUPYTER_ACP_URL")
    monkeypatch.delenv("JUPYTER_ACP_TOKEN")
    monkeypatch.delenv("JPY_PARENT_PID", raising=False)
    assert magic.discover_server() is None
    # a live parent: its runtime file is used
    me = os.getpid()
    (tmp_path / f"jupyter_acp-{me}.json").write_text(json.dumps({"url": "http://h:1/", "token": "t", "pid": me}))
    monkeypatch.setenv("JPY_PARENT_PID", str(me))
    assert magic.discover_server() == ("http://h:1/", "t", str(tmp_path / f"jupyter_acp-{me}.json"))
    # a killed server leaves its file behind: ignored
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"jupyter_acp-{dead.pid}.json").write_text(
        json.dumps({"url": "http://h:2/", "token": "t", "pid": dead.pid})
    )
    monkeypatch.setenv("JPY_PARENT_PID", str(dead.pid))
    assert magic.discover_server() is None


def test_interpolation_and_options():
    ns = {"name": "world", "df": {"a": 1}, "n": 3.14159}
    # str.format rules, as %%ai: {df[a]} indexes, quotes and expressions are left alone
    text = "hi {name} {df[a]} {df['a']} {n:.2f} {nope} {{name}} {1+1}"
    assert magic.interpolate(text, ns) == "hi world 1 {df['a']} 3.14 {nope} {{name}} {1+1}"
    assert magic.interpolate('json {"a": 1}', ns) == 'json {"a": 1}'
    opts = magic.parse_options(
        ["echo", "-f", "code", "--new", "--timeout=5"], positional_agent=True, stop_at_text=False
    )
    assert (opts.agent, opts.format, opts.new, opts.timeout) == ("echo", "code", True, 5.0)
    opts = magic.parse_options("-f md explain this -f".split(), positional_agent=False, stop_at_text=True)
    assert opts.format == "markdown" and opts.rest == ["explain", "this", "-f"]
    with pytest.raises(magic.AcpError, match="unknown option"):
        magic.parse_options(["--bogus"], positional_agent=True, stop_at_text=False)
    assert magic.extract_code("Here:\n```python\nx = 1\n```\nbye") == "x = 1"
    # IPython's magic_arguments underneath, argparse's words replaced by the magic's own
    for tokens, message in (
        (["-f"], "-f needs a value (see %acp help)"),
        (["echo", "--format"], "--format needs a value (see %acp help)"),
        (["-f", "yaml"], "unknown format 'yaml'; use one of markdown, code, text, json, html, math"),
        (["--context", "all"], "unknown context 'all'; use one of none, cells-above, selection"),
        (["-t", "0"], "--timeout must be positive"),
        (["-t", "soon"], "--timeout takes seconds, not 'soon'"),
        (["--form", "code"], "unknown option '--form' (see %acp help)"),
        (["echo", "hello"], "unexpected 'hello' after the agent name: the prompt goes in the cell body"),
    ):
        with pytest.raises(magic.AcpError) as err:
            magic.parse_options(tokens, positional_agent=True, stop_at_text=False)
        assert str(err.value) == message
    opts = magic.parse_options(["-c", "cells-above", "--", "-f", "x"], positional_agent=False, stop_at_text=True)
    assert opts.context == "cells-above" and opts.rest == ["-f", "x"] and opts.format == "markdown"


def test_local_mode_files_follow_the_same_rules_and_writes_ask(tmp_path):
    """Without a server, the agent's fs/* is still confined (the kernel's folder, no Jupyter dirs, no hidden
    files, no .ipynb) and a write is asked in the cell: unanswered here, so nothing is written."""
    (tmp_path / "visible.txt").write_text("visible text")
    (tmp_path / ".secret").write_text("hidden")
    (tmp_path / "nb.ipynb").write_text("{}")
    fs_agent = {"command": sys.executable, "args": ["-m", "jupyter_acp.testing.agents", "fs"], "title": "fs"}
    proc = run_ipython(
        f"""
        %load_ext jupyter_acp
        get_ipython().find_magic('acp').__self__.agents = {{"fs": {fs_agent!r}}}
        %acp use fs
        %acp --timeout 20 read {tmp_path / "visible.txt"}
        %acp --timeout 20 read {tmp_path / ".secret"}
        %acp --timeout 20 read /etc/passwd
        %acp --timeout 20 write {tmp_path / "nb.ipynb"} pwned
        %acp --timeout 3 write {tmp_path / "new.txt"} planted
        """,
        tmp_path,
    )
    out, err = proc.stdout, proc.stderr
    assert "ok: visible text" in out, (out, err)
    assert "ok: hidden" not in out and ".secret is hidden" in out, out
    assert "root:" not in out and "outside the server root" in out, out
    assert "it is a notebook" in out, out
    assert (tmp_path / "nb.ipynb").read_text() == "{}"
    assert not (tmp_path / "new.txt").exists()
