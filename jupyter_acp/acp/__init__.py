"""The ACP client: the wire, the agent process, and one connection per configured agent."""
