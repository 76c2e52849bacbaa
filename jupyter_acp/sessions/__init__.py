"""Sessions: notebook sessions, their turns, permissions and the one gate every agent action passes."""
