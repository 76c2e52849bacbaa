"""The agent catalog: configured agents, the defaults, and the known agents found on PATH."""
