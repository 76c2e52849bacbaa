"""The agents' side of a session: the connection to each agent and its ACP sessions (``agent_sessions.py``), the
turns (``turns.py``), the requests an agent sends the client (``acp_client.py``), the tool lists kept in step with
the notebook (``follow.py``) and each notebook's current agent (``current_agent.py``)."""
