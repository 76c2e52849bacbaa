"""A question an agent asks (``elicitation/create``) during a ``%%acp`` turn: the cell says where to answer it."""

from __future__ import annotations

from jupyter_acp.magic.view import TurnView


def test_a_question_in_a_magic_turn_points_to_the_panel(capsys):
    view = TurnView(shell=None, fmt="markdown", metadata={})
    view.feed({"type": "elicitation_request", "elicitation_id": "e1", "mode": "form", "message": "Which column?"})
    view.feed({"type": "elicitation_resolved", "elicitation_id": "e1", "action": "decline"})
    out = capsys.readouterr().out
    assert "the agent asks: Which column?. Answer it in the Agent panel." in out
    assert "answered: decline" in out
    assert len(view.notices) == 2
