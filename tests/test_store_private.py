"""The transcript store is private to the server's user (folder 0700, files 0600).

Another local user must not read prompts, answers and tool outputs: the store's folder, the database
and SQLite's ``-wal`` / ``-shm`` side files are checked by ``stat`` and by a real second uid (nobody)
trying to read them.  A store found looser is repaired, with a warning in the server log.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import subprocess
import tempfile

import pytest

from .conftest import message_text

NOBODY = 65534


def _open_dir() -> str:
    """A folder every user can traverse (pytest's tmp_path is 0700: useless for this attack)."""
    base = tempfile.mkdtemp(prefix="acp-private-")
    os.chmod(base, 0o755)
    return base


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True, text=True, timeout=30
    )


@pytest.fixture
def store_dir():
    base = _open_dir()
    yield os.path.join(base, "store")
    subprocess.run(["rm", "-rf", base], check=False)


class TestNewStore:
    @pytest.fixture
    def acp_config(self, store_dir):
        return {"store_path": os.path.join(store_dir, "transcripts.sqlite")}

    async def test_another_uid_cannot_read_the_store(self, api, make_notebook, jp_serverapp, store_dir):
        if os.getuid() != 0:
            pytest.skip("switching to a second uid needs root")
        s = await api.open(make_notebook("nb.ipynb"), "echo")
        turn = await api.prompt(s["id"], "a secret prompt")
        events = await api.wait_turn_end(s["id"], turn)
        assert message_text(events, turn) == "a secret prompt"
        db = os.path.join(store_dir, "transcripts.sqlite")
        files = [db, db + "-wal", db + "-shm"]
        assert all(os.path.exists(f) for f in files), "WAL mode: the side files exist while the server runs"
        assert _mode(store_dir) == 0o700, oct(_mode(store_dir))
        for f in files:
            assert _mode(f) == 0o600, (f, oct(_mode(f)))
        for f in files:
            res = _as_nobody("cat", f)
            assert res.returncode != 0 and "Permission denied" in res.stderr, (f, res.returncode, res.stderr)
        res = _as_nobody("ls", store_dir)
        assert res.returncode != 0 and "Permission denied" in res.stderr


class TestLooseStoreRepaired:
    @pytest.fixture
    def acp_config(self, store_dir):
        """A store left behind by an older version: folder 0755, files 0644."""
        os.makedirs(store_dir, mode=0o755)
        os.chmod(store_dir, 0o755)
        db = os.path.join(store_dir, "transcripts.sqlite")
        old = os.umask(0o022)
        try:
            conn = sqlite3.connect(db)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS leftover (x)")
            conn.commit()
            for side in ("-wal", "-shm"):
                # keep them: a crashed server leaves its side files behind
                open(db + side, "ab").close()
            conn.close()
            for side in ("-wal", "-shm"):
                open(db + side, "ab").close()
        finally:
            os.umask(old)
        for f in (db, db + "-wal", db + "-shm"):
            os.chmod(f, 0o644)
        return {"store_path": db}

    async def test_loose_store_is_repaired_with_a_warning(self, jp_serverapp, store_dir, caplog, api, make_notebook):
        caplog.set_level(logging.WARNING)
        db = os.path.join(store_dir, "transcripts.sqlite")
        s = await api.open(make_notebook("nb.ipynb"), "echo")
        turn = await api.prompt(s["id"], "still works")
        await api.wait_turn_end(s["id"], turn)
        assert _mode(store_dir) == 0o700
        for f in (db, db + "-wal", db + "-shm"):
            assert _mode(f) == 0o600, (f, oct(_mode(f)))
        logged = "\n".join(r.getMessage() for r in caplog.get_records("setup") + caplog.get_records("call"))
        assert "readable by other users" in logged and "private now" in logged, logged[-2000:]


def test_a_shared_folder_is_not_closed(tmp_path):
    """A store configured in a folder holding other files: the files are made private, the folder
    (which may be the user's own shared folder) is left alone, and the log says so."""
    from jupyter_acp.sessions.store import TranscriptStore

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    (shared / "notes.txt").write_text("mine")
    store = TranscriptStore(str(shared / "t.sqlite"))
    store.open()
    try:
        assert _mode(str(shared)) == 0o755
        assert _mode(str(shared / "t.sqlite")) == 0o600
        assert store.notices and "other users" in store.notices[0]
    finally:
        store.close()
