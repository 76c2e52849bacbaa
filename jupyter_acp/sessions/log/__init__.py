"""The event log: every event of a session stored, then sent to its subscribers, replayed from the last seq a client
saw (``events.py``); its conversations, listed, paged, reset, resumed and forked (``conversations.py``). What it is
stored in is ``sessions/store/``."""
