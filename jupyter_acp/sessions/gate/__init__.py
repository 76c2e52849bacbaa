"""The one gate every agent action passes (``gate.py``), what the user allowed (``approvals.py``), the permission
cards (``permissions.py``, and ``own_tools.py`` for the project's own tools) and the agents' questions to the user
(``elicitations.py``)."""
