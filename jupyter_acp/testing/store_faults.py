"""A server extension for tests only: the transcript store of a real server process made to fail, and to work again.

    ServerProcess(..., extensions=FAULTS)  then  POST /jupyter-acp-testing/store {"fail": true | false}

A failing store refuses every commit as a full disk does (SQLite's "database or disk is full": the transaction rolled
back, the error of the store failing, not of one row). Chosen over ``PRAGMA max_page_count`` alone because a small
event can still fit in a page SQLite has free: a test that must know the store failed needs every write to fail.
In-process tests use :func:`fill_the_disk` (the file may not grow, and the room left in it is taken). Never enabled
outside tests.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from tornado import web


def fill_the_disk(db: sqlite3.Connection) -> None:
    """SQLITE_FULL, as a full disk gives it, for the next write that needs a page (``db``: the store's own autocommit
    connection): the file may not grow (``max_page_count``) and its free pages are taken by a filler table (rows down
    to one byte). The room left inside the pages the store's own tables already use stays: a few small events may
    still fit there, so a test that must see the store fail writes one that cannot (``BIG_PROMPT``: a prompt of
    100 KB needs overflow pages of its own).  Undo with ``PRAGMA max_page_count = 1073741823``."""
    db.execute("CREATE TABLE IF NOT EXISTS test_filler (b BLOB)")
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")
    for size in (4096, 512, 64, 8, 1):
        try:
            while True:
                db.execute("INSERT INTO test_filler VALUES (zeroblob(?))", (size,))
        except sqlite3.OperationalError as exc:
            if "full" not in str(exc):
                raise


#: a prompt whose ``turn_started`` needs new pages (overflow pages of its own): it cannot fit in the room left inside
#: the store's pages after :func:`fill_the_disk`, so the store fails for sure
BIG_PROMPT = "go " + "x" * 100_000

#: ``ServerProcess(extensions=FAULTS)`` loads this extension next to jupyter_acp
FAULTS = {"jupyter_acp.testing.store_faults": True}


class StoreFaultHandler(JupyterHandler):
    @web.authenticated
    def post(self) -> None:
        from jupyter_acp.sessions.store import StoreError

        fail = bool(json.loads(self.request.body or b"{}").get("fail"))
        store = self.settings["jupyter_acp"].hub.store
        if fail and "commit" not in vars(store):
            real = type(store).commit.__get__(store)

            def commit() -> None:
                if store._dirty:
                    store._rollback()
                    raise StoreError("could not save the transcript: database or disk is full (a test's fault)")
                real()

            store.commit = commit
        elif not fail:
            vars(store).pop("commit", None)
        self.finish({"failing": "commit" in vars(store)})


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "jupyter_acp.testing.store_faults"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    serverapp.web_app.add_handlers(".*$", [(r"/jupyter-acp-testing/store", StoreFaultHandler)])
