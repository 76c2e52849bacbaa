"""Agents' commands in Jupyter terminals: a ``terminal/create`` checked (``terminal_plan.py``), the terminals' lives
(``terminals.py``) and their output (``terminal_output.py``); an agent's login in a terminal (``login_terminal.py``)."""
