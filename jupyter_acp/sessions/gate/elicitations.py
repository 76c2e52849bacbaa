"""Elicitation (``elicitation/create``, ``elicitation/complete``): an agent asks the user for input.

Handled like a permission request: each one is an ``elicitation_request`` event (replayed to a panel that
reconnects), answered by one route (``http/elicitation_routes.py``) for that session only, timed out with a
notice, cancelled with the turn; its end is an ``elicitation_resolved`` event. Form mode carries a JSON schema
(a flat object of strings, numbers, integers, booleans and enums: what a form can show), and accepted content
is validated against it here before it goes to the agent. URL mode carries an http(s) URL the user opens
(never opened for them); ``elicitation/complete`` closes its card.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

from ...protocol.actor import Actor
from ...protocol.jsonrpc import INVALID_PARAMS, RpcError, withdrawn_by_peer
from ...tools.host import Action
from ..state import HubError, NotebookSession

if TYPE_CHECKING:  # pragma: no cover
    import contextlib

    from ..settings import HubSettings
    from .gate import Gate

log = logging.getLogger(__name__)

#: what the client advertises (``clientCapabilities.elicitation``): both modes are implemented
CAPABILITY: dict[str, dict[str, Any]] = {"form": {}, "url": {}}
METHOD = "elicitation/create"
COMPLETE = "elicitation/complete"

#: bounds on what an agent may put in front of the user
MAX_MESSAGE_CHARS = 4000
MAX_SCHEMA_BYTES = 16 * 1024
MAX_PROPERTIES = 30
MAX_URL_CHARS = 2048
MAX_PENDING = 4
#: accepted URL questions kept per session for their elicitation/complete
MAX_WAITING_URLS = 8
MAX_CONTENT_BYTES = 64 * 1024
#: a form field's types (ACP's elicitation schema: flat, primitive; an array is a multi-select of strings)
FIELD_TYPES = ("string", "number", "integer", "boolean", "array")
ACTIONS = ("accept", "decline", "cancel")


class ElicitationRefused(Exception):
    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass
class PendingElicitation:
    id: str
    session_id: str
    future: asyncio.Future[dict[str, Any]]
    mode: str
    turn_id: str | None
    #: the agent connection that asked (its name and generation): only it may complete a URL elicitation
    agent: tuple[str, int]
    validator: Any = None
    #: the agent's own id of a URL elicitation (``elicitation/complete`` names it)
    agent_elicitation_id: str | None = None
    answered: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def check_schema(schema: Any) -> Any:
    """A form schema within bounds, as a validator (with formats checked); ElicitationRefused says which rule."""
    if not isinstance(schema, dict):
        raise ElicitationRefused("elicitation_schema", "form mode needs requestedSchema, a JSON object schema")
    size = len(json.dumps(schema))
    if size > MAX_SCHEMA_BYTES:
        raise ElicitationRefused(
            "elicitation_size", f"requestedSchema is {size} bytes; at most {MAX_SCHEMA_BYTES} are shown to the user"
        )
    schema = {"type": "object", "properties": {}, **schema}  # ACP's defaults
    if schema["type"] != "object" or not isinstance(schema["properties"], dict):
        raise ElicitationRefused(
            "elicitation_schema", 'requestedSchema must be {"type": "object", "properties": {...}}'
        )
    props = schema["properties"]
    if len(props) > MAX_PROPERTIES:
        raise ElicitationRefused(
            "elicitation_size", f"requestedSchema has {len(props)} fields; a form shows at most {MAX_PROPERTIES}"
        )
    for name, prop in props.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if kind not in FIELD_TYPES:
            raise ElicitationRefused(
                "elicitation_schema",
                f"field {name!r}: type {kind!r} cannot be shown in a form (one of {', '.join(FIELD_TYPES)}, flat)",
            )
        if kind == "array" and not _multi_select(prop.get("items")):
            raise ElicitationRefused(
                "elicitation_schema",
                f"field {name!r}: an array is shown only as a multi-select of strings "
                '(items {"type": "string", "enum": [...]} or {"anyOf": [{"const", "title"}, ...]})',
            )
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in props for r in required):
        raise ElicitationRefused("elicitation_schema", "requestedSchema.required names fields it does not have")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ElicitationRefused(
            "elicitation_schema", f"requestedSchema is not a valid JSON schema: {exc.message}"
        ) from None
    # what the form sends is what the schema names: no field the user was not shown
    closed = {"additionalProperties": False, **schema}
    return Draft202012Validator(closed, format_checker=FormatChecker())


def _multi_select(items: Any) -> bool:
    """A multi-select's items: strings of an enum, or ``anyOf`` titled constants."""
    if not isinstance(items, dict):
        return False
    if items.get("type") == "string" and isinstance(items.get("enum"), list):
        return all(isinstance(v, str) for v in items["enum"])
    options = items.get("anyOf")
    return isinstance(options, list) and all(isinstance(o, dict) and isinstance(o.get("const"), str) for o in options)


def check_url(url: Any) -> str:
    """An http(s) URL with a host, within bounds: the host the card spells out."""
    if not isinstance(url, str) or not url:
        raise ElicitationRefused("elicitation_url", "url mode needs a url")
    if len(url) > MAX_URL_CHARS:
        raise ElicitationRefused("elicitation_size", f"the url is {len(url)} characters; at most {MAX_URL_CHARS}")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        host, parts = None, None
    if parts is None or parts.scheme not in ("http", "https"):
        raise ElicitationRefused("elicitation_url", "only http and https URLs are shown to the user")
    if not host or any(c.isspace() for c in url):
        raise ElicitationRefused("elicitation_url", "the url has no host (or holds spaces)")
    return host


def content_errors(validator: Any, content: Any) -> list[str]:
    """What is wrong with accepted content, field by field (empty: valid)."""
    if not isinstance(content, dict):
        return ["content: an object of the form's fields is required to accept"]
    out = []
    for err in sorted(validator.iter_errors(content), key=lambda e: list(e.path)):
        if err.validator == "additionalProperties":
            extra = sorted(set(content) - set(validator.schema.get("properties", {})))
            out.append(f"field {', '.join(map(repr, extra))}: not a field of this form")
        elif err.validator == "required":
            out.append(f"field {err.message.split(' is a required')[0]}: required")
        else:
            where = ".".join(str(p) for p in err.path) or "content"
            out.append(f"field {where!r}: {err.message[:200]}")
    return out


class QuestionHub(Protocol):
    """What the agents' questions ask of the session hub: the sessions and their event log, the gate's audit, the
    mark that a request is being served (the agent waits on the user), how long a question waits."""

    @property
    def app(self) -> HubSettings: ...

    @property
    def sessions(self) -> dict[str, NotebookSession]: ...

    @property
    def gate(self) -> Gate: ...

    def emit(self, session: NotebookSession, type_: str, **data: Any) -> dict[str, Any]: ...

    def serving(self, session: NotebookSession) -> contextlib.AbstractContextManager[None]: ...


class Questions:
    """The agents' questions to the user, a service the session hub holds (``hub.questions``)."""

    def __init__(self, hub: QuestionHub) -> None:
        self.hub = hub
        #: pending (and URL ones accepted and awaiting completion) by our id, for every session
        self.pending: dict[str, PendingElicitation] = {}

    def waiting(self, session: NotebookSession) -> set[str]:
        """Our ids of this session's questions nobody answered yet (a replay sends their cards first)."""
        return {k for k, p in self.pending.items() if p.session_id == session.id and not p.answered}

    async def ask(self, session: NotebookSession, agent: tuple[str, int], params: dict[str, Any]) -> Any:
        """``elicitation/create``: checked, shown to the user, answered (or cancelled) as the ACP result."""
        mode = params.get("mode", "form")
        action = Action(METHOD, METHOD, {"mode": mode}, "acp")
        try:
            shown = self._card(session, mode, params)
        except ElicitationRefused as exc:
            self.hub.gate.audit(session, action, "refused", exc.rule, str(exc))
            raise RpcError(INVALID_PARAMS, str(exc), {"rule": exc.rule}) from None
        eid = secrets.token_hex(16)  # unguessable: only who was shown the card can answer it
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        pending = PendingElicitation(
            eid,
            session.id,
            fut,
            mode,
            session.turn.id if session.turn else None,
            agent,
            validator=shown.pop("_validator", None),
            agent_elicitation_id=str(params["elicitationId"])
            if mode == "url" and params.get("elicitationId")
            else None,
        )
        self.pending[eid] = pending
        self.hub.emit(session, "elicitation_request", elicitation_id=eid, turn_id=pending.turn_id, mode=mode, **shown)
        timeout = self.hub.app.permission_timeout
        try:
            with self.hub.serving(session):  # the agent waits on the user, not hangs
                result = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            result = {"action": "cancel"}
            self._resolve(session, pending, "cancel", reason="timeout")
            self.hub.emit(
                session,
                "notice",
                level="warning",
                text=f"the agent's question was not answered within {timeout:g} s and was cancelled "
                "(JupyterACP.permission_timeout sets how long questions wait)",
            )
        except asyncio.CancelledError:
            # the agent withdrew it (``$/cancel_request``): the card closes, unanswerable from now on
            if withdrawn_by_peer() and not pending.answered:
                self.pending.pop(eid, None)
                self._resolve(session, pending, "cancel", reason="withdrawn")
            raise
        if mode == "url" and result.get("action") == "accept" and pending.agent_elicitation_id:
            # an accepted URL one waits for elicitation/complete (the step may end after the turn): a few per session
            waiting = [k for k, p in self.pending.items() if p.session_id == session.id and p.answered]
            for old in waiting[:-MAX_WAITING_URLS]:
                self.pending.pop(old, None)
        else:
            self.pending.pop(eid, None)
        return result

    def _card(self, session: NotebookSession, mode: Any, params: dict[str, Any]) -> dict[str, Any]:
        if session.turn is None:
            raise ElicitationRefused(
                "elicitation_outside_turn",
                "elicitation/create is answered only during a turn of this session (the user watches the "
                "conversation then); ask while answering a prompt",
            )
        mine = [p for p in self.pending.values() if p.session_id == session.id and not p.answered]
        if len(mine) >= MAX_PENDING:
            raise ElicitationRefused(
                "elicitation_pending", f"{MAX_PENDING} questions already wait for the user; wait for their answers"
            )
        message = params.get("message", "")
        if not isinstance(message, str):
            raise ElicitationRefused("elicitation_message", "message must be a string")
        if len(message) > MAX_MESSAGE_CHARS:
            raise ElicitationRefused(
                "elicitation_size", f"the message is {len(message)} characters; at most {MAX_MESSAGE_CHARS}"
            )
        card: dict[str, Any] = {"message": message}
        call = params.get("toolCallId")
        if isinstance(call, str) and len(call) <= 200:
            card["tool_call_id"] = call
        if mode == "form":
            card["_validator"] = check_schema(params.get("requestedSchema"))
            card["requested_schema"] = params["requestedSchema"]
        elif mode == "url":
            card["url_host"] = check_url(params.get("url"))
            card["url"] = params["url"]
            eid = params.get("elicitationId")
            if not isinstance(eid, str) or not eid or len(eid) > 200:
                raise ElicitationRefused("elicitation_url", "url mode needs an elicitationId (a string)")
        else:
            raise ElicitationRefused("elicitation_mode", f"mode {str(mode)[:40]!r} is not one of form, url")
        return card

    def answer(
        self,
        session: NotebookSession,
        eid: str,
        action: str,
        content: Any = None,
        *,
        by: str | None = None,
        actor: Actor | None = None,
    ) -> None:
        """The user's answer (the route): validated against the form's schema before the agent sees it."""
        pending = self.pending.get(eid)
        if pending is None or pending.session_id != session.id or pending.answered:
            raise HubError(f"no pending question {eid!r} in this session (answered, cancelled or expired)", 404)
        if action not in ACTIONS:
            raise HubError(f"action is one of {', '.join(ACTIONS)}", 400)
        result: dict[str, Any] = {"action": action}
        if action == "accept" and pending.mode == "form":
            if content is not None and len(json.dumps(content)) > MAX_CONTENT_BYTES:
                raise HubError(f"content is larger than {MAX_CONTENT_BYTES} bytes", 413)
            errors = content_errors(pending.validator, content)
            if errors:
                raise HubError("the answer does not fit the form: " + "; ".join(errors), 400)
            result["content"] = content
        elif content is not None:
            raise HubError("content goes only with accept, on a form", 400)
        if not pending.future.done():
            pending.future.set_result(result)
        self._resolve(session, pending, action, content=result.get("content"), by=by, actor=actor)

    def _resolve(self, session: NotebookSession, pending: PendingElicitation, action: str, **data: Any) -> None:
        pending.answered = True
        self.hub.emit(
            session,
            "elicitation_resolved",
            elicitation_id=pending.id,
            action=action,
            **{k: v for k, v in data.items() if v is not None},
        )

    def complete(self, agent: tuple[str, int], params: Any) -> None:
        """``elicitation/complete`` from this agent connection: the URL card closes (unknown ids change nothing)."""
        agent_eid = params.get("elicitationId") if isinstance(params, dict) else None
        for eid, pending in list(self.pending.items()):
            if pending.agent == agent and pending.agent_elicitation_id == agent_eid and agent_eid is not None:
                session = self.hub.sessions.get(pending.session_id)
                self.pending.pop(eid, None)
                if session is None:
                    return
                if not pending.answered and not pending.future.done():
                    # closed before the user chose: nobody accepted anything
                    pending.future.set_result({"action": "cancel"})
                    self._resolve(session, pending, "cancel", completed=True)
                else:
                    self.hub.emit(session, "elicitation_resolved", elicitation_id=eid, action="accept", completed=True)
                return
        log.debug("elicitation/complete for unknown id %r ignored", agent_eid)

    def cancel_pending(self, session: NotebookSession, reason: str = "cancelled") -> None:
        """The turn ended or was cancelled (or the agent left): its questions are cancelled, their cards say so.
        Accepted URL questions stay for their ``elicitation/complete`` (bounded: ``MAX_WAITING_URLS``)."""
        for eid, pending in list(self.pending.items()):
            if pending.session_id != session.id or pending.answered:
                continue
            self.pending.pop(eid, None)
            if not pending.future.done():
                pending.future.set_result({"action": "cancel"})
                self._resolve(session, pending, "cancel", reason=reason)
