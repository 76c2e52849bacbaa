"""The session's wire, declared once: every event the server records and sends (``GET .../events``, the session's
WebSocket), the operations a client sends on that socket, and their answers.

The server writes its events as plain dicts (``EventLog.emit(session, "notice", level=..., text=...)``: a streamed
token costs no model construction), so these models are not on its path: they are what the events are checked
against and what the labextension's types are made from.

- ``python -m jupyter_acp.protocol.wire --ts > labextension/src/wire.ts`` writes the TypeScript interfaces and the
  discriminated union ``AcpEvent`` (``tests/test_wire.py`` fails when the committed file differs);
- ``tests/test_wire.py`` checks that every ``emit(session, "<type>", ...)`` in the package names a type declared here
  with fields declared on it, and that the README's event list names exactly these types;
- ``tests/test_wire_server.py`` drives a real server through turns that make every type and validates every event
  it stores and streams, and every answer of its socket (``validate_event``, ``validate_answer``).

Extra fields are forbidden (``extra="forbid"``): a field the server starts sending without declaring it here fails the
server test, so it gets declared and reaches the TypeScript types. The frontend itself never rejects an event (it
reads stored histories of older servers too); strictness is the tests'.

A field with a default may be absent; unless marked ``NULLABLE`` it is then absent, never ``null`` (the server spreads
``**({"wording": w} if w else {})``): ``WireModel`` refuses an explicit null there, so ``wording?: string`` in the
TypeScript says exactly what arrives. A field without a default is always present (``turn_id: str | None``: present,
maybe null).

Below ``acp/`` in the layers (and ACP's own shapes are the agent's to send, passed on as it sent them), so the ACP
objects an event carries (a ``session/update``, a tool call, permission options, a prompt's content blocks) are typed
loosely as JSON objects.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator
from pydantic.fields import FieldInfo

#: a JSON object the wire carries without typing it here (an ACP object, a schema, a form's answer)
JsonObject = dict[str, Any]


class _Nullable:
    """Marks an optional field that may also arrive as ``null`` (``Annotated[str | None, NULLABLE] = None``)."""

    def __repr__(self) -> str:
        return "NULLABLE"


NULLABLE = _Nullable()


class WireModel(BaseModel):
    """A message of the wire: no undeclared field, and an optional field absent rather than null (see the module)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _absent_not_null(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name)
                if value is None and field is not None and not field.is_required() and not _nullable(field):
                    raise ValueError(f"{name}: an optional field is absent or has a value, never null")
        return data


def _nullable(field: FieldInfo) -> bool:
    return any(m is NULLABLE for m in field.metadata)


# -- who acted ------------------------------------------------------------------------------------------------------
class Actor(WireModel):
    """Who did it (``protocol/actor.py``): a person by their Jupyter identity, or what acted when no person did."""

    kind: Literal["user", "magic", "server", "agent"] = Field(
        description="user: a person; magic: the %%acp magic in a kernel; server: the server itself; agent: the agent"
    )
    username: str | None = Field(default=None, description="user: the identity's username")
    display_name: str | None = Field(default=None, description="user: the name the panel shows")
    color: Annotated[str | None, NULLABLE] = Field(
        default=None, description="user: the identity's colour (a CSS colour or variable); null: none"
    )


def _actor(what: str) -> Any:
    return Field(default=None, description=f"who {what} (absent: not said, e.g. an older server's event)")


# -- the events ----------------------------------------------------------------------------------------------------
class Event(WireModel):
    """What every event carries: its place in the session's history, its type and when the server recorded it."""

    seq: int = Field(description="the session's event number: increasing, never given twice (gaps after a crash)")
    type: str
    ts: float = Field(description="when the server recorded it, seconds since the epoch")
    pinned: bool = Field(
        default=False,
        description="a replay's event older than its page that still matters (a pending permission or question, the "
        "running turn's start), sent first",
    )
    cut: str | None = Field(
        default=None,
        description="the event was larger than JupyterACP.max_event_bytes: only its scalar fields are kept, and this "
        "says what was cut",
    )


class TurnStarted(Event):
    """A prompt was accepted: the user's words (ACP content blocks) open a turn."""

    type: Literal["turn_started"]
    turn_id: str
    prompt: list[JsonObject]
    actor: Actor | None = _actor("sent the prompt")


class SessionUpdate(Event):
    """An agent's ``session/update`` as it sent it (text chunks of one message that arrive together are joined)."""

    type: Literal["session_update"]
    update: JsonObject = Field(description="the ACP update: sessionUpdate, and its fields")


class PermissionRequest(Event):
    """A question for the user: the agent's ``session/request_permission``, or the gate's own about a tool call."""

    type: Literal["permission_request"]
    request_id: str
    turn_id: str | None
    tool_call: JsonObject = Field(description="the ACP tool call the question is about")
    options: list[JsonObject] = Field(description="ACP permission options: optionId, name, kind (fixed_by_admin)")
    source: Literal["agent", "client"] = Field(description="agent: the agent asked; client: the server's gate asks")
    wording: Literal["client"] | None = Field(
        default=None, description="client: an agent's request the server asks in its own words"
    )


class PermissionResolved(Event):
    """The question's end: the option chosen, or cancelled (with why, when the server cancelled it)."""

    type: Literal["permission_resolved"]
    request_id: str
    option_id: str | None = None
    cancelled: bool | None = None
    reason: str | None = Field(default=None, description="timeout, withdrawn (the agent's $/cancel_request)")
    actor: Actor | None = _actor("answered (a person), or cancelled it (the server, the agent)")


class Review(WireModel):
    """What a turn changed in the notebook, ready for its review."""

    changes: int
    checkpoint: str = Field(description="the checkpoint taken before the turn")
    after: bool = Field(description="the session reviews after each turn (Review after)")


class TurnEnded(Event):
    """The turn's end: the agent's stop reason, or an error and its kind."""

    type: Literal["turn_ended"]
    turn_id: str
    tool_calls_served: int
    tool_channels: list[str] | None = Field(default=None, description="the session's tool channels (mcp-http, ...)")
    review: Review | None = None
    stop_reason: str | None = Field(default=None, description="ACP's stopReason: end_turn, cancelled, ...")
    error: str | None = None
    error_kind: str | None = Field(
        default=None,
        description="needs_login, timeout, agent_error, agent_failed, unsupported_content, shutdown, server_lost, "
        "internal",
    )


class SessionReady(Event):
    """The agent's session is open (new, resumed, loaded or re-seeded), with its modes and options."""

    type: Literal["session_ready"]
    acp_session_id: str | None
    how: str
    modes: JsonObject | None
    config_options: list[JsonObject] | None


class Switched(WireModel):
    """Which switch made a ``session_config``: the panel says it in the conversation ("Mode set to Plan") from the
    state the event carries, whatever state the reader had before (a page of a long history starts anywhere)."""

    kind: Literal["mode", "option"]
    id: str = Field(description="the mode picker ('mode') or the config option's id")
    value: str | bool


class SessionConfig(Event):
    """The session's modes and options after a switch through the API (the whole state, as the agent has it)."""

    type: Literal["session_config"]
    modes: JsonObject | None
    config_options: list[JsonObject] | None
    switched: Switched | None = Field(default=None, description="the switch that made it (absent: an older server)")
    actor: Actor | None = _actor("switched the mode or changed the option")


class Notice(Event):
    """Something the user should know that is not the agent's words: the agent starting or restarted, a history
    reloaded, a store failing, a conversation resumed, a review ready. ``phase`` says which; the other optional
    fields belong to some phases."""

    type: Literal["notice"]
    text: str
    level: str | None = Field(default=None, description="info or warning (absent: info)")
    phase: str | None = None
    turn_id: str | None = Field(default=None, description="reverted, review_ready, rewound, restored, ...")
    conversation_id: str | None = Field(default=None, description="conversation_resumed, _forked, _deleted, ...")
    edits: int | None = Field(default=None, description="reverted: how many edits were undone")
    cell_id: str | None = Field(default=None, description="reverted: the one cell reverted")
    review: Review | None = Field(default=None, description="review_ready")
    checkpoint_id: str | None = Field(default=None, description="rewound, restored")
    undo_checkpoint: str | None = Field(default=None, description="rewound, restored: the checkpoint that undoes it")
    agent: str | None = Field(default=None, description="current_agent: the notebook's agent now")
    previous: str | None = Field(default=None, description="current_agent: the one before")
    by: str | None = Field(default=None, description="current_agent: who changed it (panel, magic, api)")
    method: str | None = Field(default=None, description="request_withdrawn: the agent's request it withdrew")
    events: int | None = Field(default=None, description="store_lost: how many events could not be kept")
    turns: int | list[str] | None = Field(
        default=None, description="store_lost: the turns those events were of; compacted: how many turns"
    )
    bytes: int | None = Field(default=None, description="compacted: how many bytes were dropped")
    actor: Actor | None = _actor("did it: current_agent, reverted, rewound, restored, agent_reconfigured")


class Audit(Event):
    """An action an agent asked (allowed or refused, and by which rule), or a user's review, rewind or policy."""

    type: Literal["audit"]
    power: str
    action: str = Field(description="the tool's name, or the power's (fs/*, terminal/create, review/keep, ...)")
    channel: str
    decision: Literal["allowed", "refused"]
    rule: str
    turn_id: str | None
    call_ids: list[str]
    message: str | None = Field(default=None, description="a refusal's own words: which rule, and how to change it")
    took_ms: float | None = Field(
        default=None, description="from the call's arrival to its answer, the user's included"
    )
    user: str | None = Field(default=None, description="a user's action: who")
    cell_ids: list[str] | None = Field(default=None, description="review: the cells it put back")
    actor: Actor | None = _actor("acted: a user's review, rewind or policy")


class PolicyChanged(Event):
    """The tools always allowed in this session, and (from the policy route) the session's own policy."""

    type: Literal["policy_changed"]
    always_allowed: list[str]
    policy: Annotated[str | None, NULLABLE] = Field(
        default=None, description="review (Review after); null: the configuration's; absent: not changed"
    )
    actor: Actor | None = _actor("changed it (a person's policy or revoke; absent: an answered card's always)")


class ExitStatus(WireModel):
    """How a terminal's command ended (ACP's TerminalExitStatus)."""

    exitCode: int | None
    signal: str | None


class TerminalOutput(Event):
    """A client terminal's state and the tail of its output (the card that embeds it shows it live)."""

    type: Literal["terminal_output"]
    terminalId: str
    name: str = Field(description="the Jupyter terminal's name")
    command: str
    args: list[str]
    cwd: str
    running: bool
    exitStatus: ExitStatus | None
    released: bool
    output: str = Field(description="a bounded tail")
    truncated: bool
    turn_id: str | None


class ElicitationRequest(Event):
    """An agent's question (``elicitation/create``): a form to fill, or a URL to visit."""

    type: Literal["elicitation_request"]
    elicitation_id: str
    turn_id: str | None
    mode: Literal["form", "url"]
    message: str
    tool_call_id: str | None = None
    requested_schema: JsonObject | None = Field(default=None, description="form: the JSON schema of the answer")
    url: str | None = None
    url_host: str | None = Field(default=None, description="url: the host, as the card shows it")


class ElicitationResolved(Event):
    """The question's end: the user's answer, a cancel (with why), or the agent's ``elicitation/complete``."""

    type: Literal["elicitation_resolved"]
    elicitation_id: str
    action: Literal["accept", "decline", "cancel"]
    content: JsonObject | None = Field(default=None, description="accept on a form: the answer")
    by: str | None = Field(default=None, description="who answered")
    reason: str | None = None
    completed: bool | None = Field(default=None, description="url: the agent said the step is complete")
    actor: Actor | None = _actor("answered")


#: every event the server sends, told apart by ``type`` (in the order the README lists them)
AcpEvent = Annotated[
    TurnStarted
    | SessionUpdate
    | PermissionRequest
    | PermissionResolved
    | TurnEnded
    | SessionReady
    | SessionConfig
    | Notice
    | Audit
    | PolicyChanged
    | TerminalOutput
    | ElicitationRequest
    | ElicitationResolved,
    Field(discriminator="type"),
]
EVENTS: tuple[type[Event], ...] = get_args(get_args(AcpEvent)[0])


def event_type(model: type[Event]) -> str:
    """The ``type`` a model's events carry (its Literal)."""
    (name,) = get_args(model.model_fields["type"].annotation)
    return str(name)


EVENT_TYPES: dict[str, type[Event]] = {event_type(m): m for m in EVENTS}

_EVENT: TypeAdapter[Event] = TypeAdapter(AcpEvent)


def validate_event(data: Any) -> Event:
    """One event as the server sent it, checked: a declared type, its fields and only those (ValidationError).

    An event cut to ``max_event_bytes`` keeps only its scalar fields: its type must be declared and the fields it
    kept must be that type's, but the ones it lost are not missing."""
    if isinstance(data, dict) and "cut" in data:
        model = EVENT_TYPES.get(str(data.get("type")))
        if model is None:
            return _EVENT.validate_python(data)  # the error names the declared types
        unknown = sorted(set(data) - set(model.model_fields))
        if unknown or not isinstance(data.get("cut"), str):
            raise ValueError(f"a cut {data.get('type')} event with fields {unknown} not of its type")
        return model.model_construct(**data)
    return _EVENT.validate_python(data)


# -- the socket's operations and answers ---------------------------------------------------------------------------
Ref = Annotated[str | int | None, NULLABLE]


class Op(WireModel):
    """An operation a client sends on the session's WebSocket, answered by an object carrying its ``ref``."""

    op: str
    ref: Ref = Field(default=None, description="echoed in the answer: a string of at most 64 characters or an integer")


class PromptOp(Op):
    """As ``POST .../prompt``: ``text`` or ``prompt`` (ACP content blocks), and the prompt's own trace context."""

    op: Literal["prompt"]
    text: str | None = None
    prompt: list[JsonObject] | None = None
    traceparent: str | None = None
    tracestate: str | None = None


class CancelOp(Op):
    """As ``POST .../cancel``."""

    op: Literal["cancel"]


class PermissionOp(Op):
    """As ``POST .../permissions/{request_id}``."""

    op: Literal["permission"]
    request_id: str
    option_id: str


OPS: tuple[type[Op], ...] = (PromptOp, CancelOp, PermissionOp)


def op_name(model: type[Op]) -> str:
    """The ``op`` an operation's frames carry (its Literal)."""
    (name,) = get_args(model.model_fields["op"].annotation)
    return str(name)


class Answer(WireModel):
    """The answer to an operation: ``ok`` and what the route would answer, or why it was refused."""

    ref: Ref = Field(description="the operation's ref (null when it sent none, or one that was not valid)")
    ok: bool


class PromptAnswer(Answer):
    ok: Literal[True]
    turn_id: str


class CancelAnswer(Answer):
    ok: Literal[True]
    cancelled: bool


class PermissionAnswer(Answer):
    ok: Literal[True]
    request_id: str
    option_id: str


class Refused(Answer):
    """An operation refused: the status its route would answer, and which rule refused it and how to change it."""

    ok: Literal[False]
    status: int
    error: str


#: each operation's answer when it succeeds
ANSWERS: dict[str, type[Answer]] = {"prompt": PromptAnswer, "cancel": CancelAnswer, "permission": PermissionAnswer}


class HistoryMoved(WireModel):
    """The first frame of a stream opened past the server's last seq (its store is not the one the client saw):
    the client drops what it holds; the server's history from the start follows."""

    history_moved: Literal[True]
    after: int
    seq: int
    text: str


def validate_answer(op: str, data: Any) -> Answer:
    """An operation's answer checked: ``op``'s own answer when ok, else a refusal."""
    model: type[Answer] = ANSWERS[op] if isinstance(data, dict) and data.get("ok") is True else Refused
    return model.model_validate(data)


# -- TypeScript ----------------------------------------------------------------------------------------------------
TS_HEADER = """\
/**
 * The session's wire, generated from jupyter_acp/protocol/wire.py (the pydantic models the server's events are
 * checked against): do not edit. Made by
 *
 *   python -m jupyter_acp.protocol.wire --ts > labextension/src/wire.ts
 *
 * tests/test_wire.py fails when this file differs from what that command writes now.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */
"""


def _ts_name(model: type[BaseModel]) -> str:
    if model is Event:
        return "IEventBase"
    if issubclass(model, Event):
        return f"I{model.__name__}Event"
    return f"I{model.__name__}"


def _ts_type(tp: Any) -> str:
    """A Python annotation as TypeScript."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _ts_type(get_args(tp)[0])
    if tp is Any:
        return "any"
    if tp is type(None):
        return "null"
    if tp is str:
        return "string"
    if tp is bool:
        return "boolean"
    if tp in (int, float):
        return "number"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _ts_name(tp)
    if origin is Literal:
        return " | ".join(json.dumps(v).replace('"', "'") for v in get_args(tp))
    if origin in (Union, types.UnionType):
        return " | ".join(_ts_type(a) for a in get_args(tp))
    if origin is list:
        inner = _ts_type(get_args(tp)[0])
        return f"({inner})[]" if " | " in inner else f"{inner}[]"
    if origin is dict:
        return f"{{ [key: string]: {_ts_type(get_args(tp)[1])} }}"
    raise TypeError(f"no TypeScript for {tp!r}")


def _doc(text: str | None, indent: str = "") -> list[str]:
    if not text:
        return []
    words = text.replace("``", "`").split()
    out, line = [], ""
    for word in words:
        if line and len(indent) + 3 + len(line) + 1 + len(word) > 118:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    out.append(line)
    if len(out) == 1 and len(indent) + 7 + len(out[0]) <= 120:
        return [f"{indent}/** {out[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {x}" for x in out), f"{indent} */"]


def _ts_interface(model: type[BaseModel], base: type[BaseModel] | None) -> list[str]:
    hints = typing.get_type_hints(model, include_extras=True)
    # a field of its own, or one it narrows (``type``'s Literal, an answer's ``ok``)
    own = [
        n
        for n, f in model.model_fields.items()
        if base is None or n not in base.model_fields or f.annotation != base.model_fields[n].annotation
    ]
    head = f"export interface {_ts_name(model)}" + (f" extends {_ts_name(base)}" if base is not None else "") + " {"
    out = [*_doc(model.__doc__), head]
    for name in own:
        field = model.model_fields[name]
        tp = hints[name]
        optional = not field.is_required()
        if optional and not _nullable(field):
            tp = _without_none(tp)
        out += _doc(field.description, "  ")
        out.append(f"  {name}{'?' if optional else ''}: {_ts_type(tp)};")
    out.append("}")
    return out


def _without_none(tp: Any) -> Any:
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        return rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007
    return tp


def _union(name: str, members: list[str], doc: str) -> list[str]:
    """``export type NAME = A | B;`` on one line when it fits, else one member a line (as prettier writes it)."""
    line = f"export type {name} = {' | '.join(members)};"
    if len(line) <= 120:
        return [*_doc(doc), line]
    return [*_doc(doc), f"export type {name} =", *(f"  | {m}" for m in members[:-1]), f"  | {members[-1]};"]


def typescript() -> str:
    """The wire as TypeScript: an interface per model, the union ``AcpEvent`` and the list of event types."""
    out = [TS_HEADER]
    out += [*_ts_interface(Event, None), ""]
    for nested in (Actor, Review, ExitStatus, Switched):
        out += [*_ts_interface(nested, None), ""]
    for event in EVENTS:
        out += [*_ts_interface(event, Event), ""]
    names = [_ts_name(m) for m in EVENTS]
    out += [*_union("AcpEvent", names, "Every event the server sends, told apart by `type`."), ""]
    out.append("/** Every event type, in the README's order. */")
    out.append("export const EVENT_TYPES = [")
    out += [f"  '{event_type(m)}'," for m in EVENTS[:-1]]
    out += [f"  '{event_type(EVENTS[-1])}'", "] as const;", ""]
    out += ["export type AcpEventType = AcpEvent['type'];", ""]
    out += [*_ts_interface(Op, None), ""]
    for op in OPS:
        out += [*_ts_interface(op, Op), ""]
    out += [*_union("SocketOp", [_ts_name(m) for m in OPS], "An operation a client sends on the session's socket."), ""]
    out += [*_ts_interface(Answer, None), ""]
    answers: list[type[Answer]] = [*ANSWERS.values(), Refused]
    for answer in answers:
        out += [*_ts_interface(answer, Answer), ""]
    out += [*_ts_interface(HistoryMoved, None)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args != ["--ts"]:
        sys.exit("usage: python -m jupyter_acp.protocol.wire --ts > labextension/src/wire.ts")
    sys.stdout.write(typescript())


if __name__ == "__main__":
    main()
