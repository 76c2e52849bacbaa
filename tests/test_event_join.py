"""A streamed answer's chunks of one burst are joined into one event: the text is whole, the rows few."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_acp.sessions.log.events import JOIN_LIMIT, EventLog
from jupyter_acp.sessions.state import NO_RUN_END, NotebookSession

from .conftest import message_text, scripted

CHUNKS = 3000


@pytest.fixture
def acp_agents():
    return {"stream": scripted("stream", "--chunks", str(CHUNKS))}


def _store(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_acp"].hub.store


async def test_a_burst_of_chunks_is_stored_and_sent_as_few_events(api, make_notebook, jp_serverapp):
    s = await api.open(make_notebook("nb.ipynb"), "stream")
    turn = await api.prompt(s["id"], "go")
    events = await api.wait_turn_end(s["id"], turn)
    assert message_text(events, turn) == " ".join(map(str, range(CHUNKS))), "every chunk's text, in order"
    updates = [e for e in events if e["type"] == "session_update"]
    assert len(updates) < CHUNKS / 10, f"{len(updates)} events for {CHUNKS} chunks: bursts were not joined"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "no gap in the sequence"
    assert _store(jp_serverapp).read(s["id"]) == events, "the store holds what was sent"


class _Log(EventLog):
    """The event log alone: emit and seal, no loop, no store (it never reads its hub here)."""

    def __init__(self) -> None:
        super().__init__(hub=None)  # type: ignore[arg-type]

    def schedule_flush(self, soon: bool = False) -> None:
        pass


def _session() -> NotebookSession:
    session = NotebookSession.__new__(NotebookSession)
    session.seq, session.outbox, session.merging, session.merged_chars, session.turn = 0, [], None, 0, None
    session.run_end = NO_RUN_END  # one run of reserved seqs
    return session


def _chunk(text: str, kind: str = "agent_message_chunk", **more: Any) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}, **more}


def _texts(log: _Log, session: NotebookSession) -> list[tuple[str, str]]:
    log.seal(session)
    return [
        (e["update"]["sessionUpdate"], e["update"]["content"]["text"]) if "update" in e else (e["type"], e["text"])
        for e in session.outbox
    ]


def test_only_plain_text_chunks_of_one_message_join():
    log, s = _Log(), _session()
    for text in ("a", "b", "c"):
        log.emit_update(s, _chunk(text))
    log.emit_update(s, _chunk("t1", "agent_thought_chunk"))  # another kind
    log.emit_update(s, _chunk("t2", "agent_thought_chunk"))
    log.emit_update(s, _chunk("m1", messageId="m"))  # another message
    log.emit_update(s, _chunk("m2", messageId="m"))
    log.emit_update(s, _chunk("n1", messageId="n"))
    log.emit_update(s, _chunk("w", _meta={"k": 2}))  # three keys, but not the same three
    annotated = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x", "annotations": {}}}
    log.emit_update(s, annotated)  # more than text: kept as the agent sent it
    log.emit_update(s, _chunk("y"))
    log.emit_update(s, _chunk("z", _meta={"k": 1}))  # extra keys: its own event
    log.emit(s, "notice", text="between")
    log.emit_update(s, _chunk("after"))
    assert _texts(log, s) == [
        ("agent_message_chunk", "abc"),
        ("agent_thought_chunk", "t1t2"),
        ("agent_message_chunk", "m1m2"),
        ("agent_message_chunk", "n1"),
        ("agent_message_chunk", "w"),
        ("agent_message_chunk", "x"),
        ("agent_message_chunk", "y"),
        ("agent_message_chunk", "z"),
        ("notice", "between"),
        ("agent_message_chunk", "after"),
    ]
    assert [e["seq"] for e in s.outbox] == list(range(1, 11))
    assert s.outbox[5]["update"]["content"] == {"type": "text", "text": "x", "annotations": {}}
    assert s.outbox[7]["update"]["_meta"] == {"k": 1}


def test_a_joined_event_stays_under_the_limit():
    log, s = _Log(), _session()
    piece = "x" * 1000
    for _ in range(JOIN_LIMIT // 1000 * 3):
        log.emit_update(s, _chunk(piece))
    log.seal(s)
    sizes = [len(e["update"]["content"]["text"]) for e in s.outbox]
    assert max(sizes) <= JOIN_LIMIT and len(sizes) >= 3
    assert sum(sizes) == 1000 * (JOIN_LIMIT // 1000 * 3)
