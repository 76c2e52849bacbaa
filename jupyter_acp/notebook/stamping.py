"""What a write of the notebook is handed to record who made it: a ``Stamp`` gives the provenance entry of one change.

The session layer knows the agent, the conversation, the turn, the prompt and the user; the notebook backends know
the cell and the transaction.  A stamp joins the two without either importing the other: the backend calls it with
the action (``inserted``, ``edited``, ``moved``, ``ran``) inside the edit's own transaction and adds the entry it
answers to the cell's ``metadata.jupyter_acp`` (``provenance.py``), so the change and its record arrive together.
"""

from __future__ import annotations

from collections.abc import Callable

from .provenance import Action, AgentChange

#: the provenance entry of one change by an agent, given what it did to the cell
Stamp = Callable[[Action], AgentChange]
