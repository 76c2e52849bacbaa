"""The session's wire, declared once (``jupyter_acp/protocol/wire.py``), against what says it elsewhere: the generated
TypeScript, every ``emit`` in the package, the README's event list.

The server half (``test_wire_server.py``) validates what a real server sends against the same models.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jupyter_acp.protocol import wire

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "jupyter_acp"
WIRE_TS = REPO / "labextension" / "src" / "wire.ts"
#: the methods that record an event: ``emit(session, TYPE, **fields)``, and the hub's ``_record`` (an earlier
#: conversation's event, ``_record(session, conversation, TYPE, ...)``)
RECORDERS = {"emit": 1, "_record": 2}


def test_the_committed_wire_ts_is_what_the_models_generate_now():
    generated = subprocess.run(
        [sys.executable, "-m", "jupyter_acp.protocol.wire", "--ts"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert generated == wire.typescript()
    assert WIRE_TS.read_text() == generated, (
        "labextension/src/wire.ts differs from the models: run "
        "`python -m jupyter_acp.protocol.wire --ts > labextension/src/wire.ts` and commit it"
    )


def emitted() -> list[tuple[str, int, str, list[str]]]:
    """Every event recorded in the package's source with a literal type: (file, line, type, literal field names)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "labextension" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            at = RECORDERS.get(node.func.attr)
            if at is None or len(node.args) <= at:
                continue
            kind = node.args[at]
            if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
                fields = [k.arg for k in node.keywords if k.arg is not None]
                out.append((str(path.relative_to(REPO)), node.lineno, kind.value, fields))
    return out


def test_every_event_the_source_emits_is_declared_with_its_fields():
    """An ``emit(session, "new_kind", ...)`` or a field the models do not have fails here, before any server runs.

    Fields spread from a dict (``**outcome``) cannot be read off the source: the server test checks those."""
    found = emitted()
    assert len(found) >= 40, f"the scan found only {len(found)} emits (60 when written): is RECORDERS still right?"
    problems = []
    for where, line, kind, fields in found:
        model = wire.EVENT_TYPES.get(kind)
        if model is None:
            problems.append(f"{where}:{line}: event type {kind!r} is not declared in jupyter_acp/protocol/wire.py")
            continue
        unknown = [f for f in fields if f not in model.model_fields]
        if unknown:
            problems.append(f"{where}:{line}: {kind} fields {unknown} are not declared on wire.{model.__name__}")
    assert not problems, "\n".join(problems)
    unused = set(wire.EVENT_TYPES) - {kind for _, _, kind, _ in found}
    assert not unused, f"declared event types nothing emits (drop them, or emit them): {sorted(unused)}"


def readme_events() -> dict[str, list[str]]:
    """The README's event list (the paragraph that starts ``Events:``): each type named at the top level (not in a
    parenthesis: ``store_lost {events, turns}`` is a notice's phase) with the fields its braces name."""
    text = (REPO / "README.md").read_text()
    start = text.index("\nEvents: ")
    paragraph = text[start : text.index("\n\n", start)]
    events: dict[str, list[str]] = {}
    depth = 0
    for n, part in enumerate(paragraph.split("`")):
        if n % 2 == 0:  # outside a code span
            depth += part.count("(") - part.count(")")
            continue
        m = re.fullmatch(r"([a-z_]+) \{(.*)\}", " ".join(part.split()))
        if m and depth == 0:
            events[m.group(1)] = _top_level_names(m.group(2))
    return events


def _top_level_names(inside: str) -> list[str]:
    """``turn_id, stop_reason | error, review?: {changes, checkpoint}`` -> turn_id, stop_reason, error, review."""
    flat, depth = "", 0
    for ch in inside:
        depth += ch in "{(" and 1 or ch in "})" and -1 or 0
        flat += ch if depth == 0 and ch not in "})" else ""
    return [m.group(0) for m in (re.match(r"[A-Za-z_]+", p.strip()) for p in re.split(r"[,|]", flat)) if m]


def test_the_readme_lists_exactly_the_declared_events_with_their_fields():
    listed = readme_events()
    assert list(listed) and set(listed) == set(wire.EVENT_TYPES), (
        f"README's event list: missing {sorted(set(wire.EVENT_TYPES) - set(listed))}, "
        f"not declared {sorted(set(listed) - set(wire.EVENT_TYPES))}"
    )
    for kind, fields in listed.items():
        model = wire.EVENT_TYPES[kind]
        unknown = [f for f in fields if f not in model.model_fields]
        assert not unknown, f"the README gives {kind} fields {unknown} that wire.{model.__name__} does not declare"


def test_the_socket_ops_declared_are_the_ones_the_server_serves_with_their_routes_bodies():
    """The socket validates an op's fields with its route's body model: the declared op has those fields, plus
    ``op``, ``ref`` and what the socket takes itself (a prompt's trace context, a permission's request id)."""
    from jupyter_acp.http.bodies import PermissionBody, PromptBody
    from jupyter_acp.http.session_socket import StreamHandler

    declared = [wire.op_name(m) for m in wire.OPS]
    assert sorted(declared) == sorted(StreamHandler._ops) == sorted(wire.ANSWERS)
    own = {"op", "ref"}
    assert set(wire.PromptOp.model_fields) == own | {"traceparent", "tracestate"} | set(PromptBody.model_fields)
    assert set(wire.PermissionOp.model_fields) == own | {"request_id"} | set(PermissionBody.model_fields)
    assert set(wire.CancelOp.model_fields) == own


# -- the models themselves ------------------------------------------------------------------------------------------
def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"seq": 1, "type": kind, "ts": 1.5, **fields}


def test_an_event_of_an_undeclared_type_or_with_an_undeclared_field_is_refused():
    wire.validate_event(ev("notice", text="hello", level="info"))
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        wire.validate_event(ev("surprise", text="hello"))
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        wire.validate_event(ev("notice", text="hello", colour="red"))
    with pytest.raises(ValidationError, match="turn_id"):
        wire.validate_event(ev("turn_started", prompt=[]))


def test_an_optional_field_is_absent_or_a_value_never_null_unless_declared_nullable():
    request = ev(
        "permission_request", request_id="r1", turn_id=None, tool_call={}, options=[], source="client"
    )  # turn_id: always there, maybe null
    wire.validate_event(request)
    with pytest.raises(ValidationError, match="never null"):
        wire.validate_event({**request, "wording": None})
    wire.validate_event(ev("policy_changed", always_allowed=[], policy=None))  # null: the configuration's policy


def test_a_cut_event_keeps_its_type_and_only_its_own_scalar_fields():
    cut = ev("session_update", update={"sessionUpdate": "agent_message_chunk"}, cut="[cut: an event of 3 MiB]")
    assert isinstance(wire.validate_event(cut), wire.SessionUpdate)
    stub = ev("turn_started", turn_id="t1", cut="[cut: an event of 3 MiB not kept]")  # its prompt went
    assert isinstance(wire.validate_event(stub), wire.TurnStarted)
    with pytest.raises(ValueError, match="not of its type"):
        wire.validate_event({**stub, "colour": "red"})


def test_answers_are_checked_against_their_op():
    wire.validate_answer("prompt", {"ref": "p1", "ok": True, "turn_id": "t1"})
    wire.validate_answer("cancel", {"ref": 3, "ok": False, "status": 400, "error": "cancel takes no fields"})
    with pytest.raises(ValidationError):
        wire.validate_answer("cancel", {"ref": 3, "ok": True, "turn_id": "t1"})
