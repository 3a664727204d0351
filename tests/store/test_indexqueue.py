"""The session index's queued writes (store/indexqueue.py): a save never waits on another process's write
lock; readers see what is queued; a process killed with rows still queued leaves the index stale, and the
next reader reconciles it from the records."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from shiro_kernel.session import Session
from shiro_kernel.store import indexqueue
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.transcript import Message

HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""

#: a process that saves a session while the index is locked, then is killed before its queue is written
SAVE_THEN_DIE = """
import os, signal, sys
from shiro_kernel.session import Session
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.transcript import Message
store = SessionStore()
s = Session(messages=[Message.user("saved while locked")])
store.save(s, model="m")
print(s.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # its queued row never reaches the index
"""


def _rows(index: Path) -> dict[str, int]:
    db = sqlite3.connect(index)
    try:
        return dict(db.execute("SELECT id, messages FROM sessions").fetchall())
    finally:
        db.close()


def _holder(index: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(index)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def _release(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.write("\n")
    holder.stdin.flush()
    holder.wait(30)


def test_a_save_under_a_locked_index_is_queued_seen_and_written_once_free(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    first = Session(messages=[Message.user("first")])
    store.save(first, model="m")
    index = store.index.path
    holder = _holder(index)
    try:
        second = Session(messages=[Message.user("second"), Message.user("more")])
        store.save(second, model="m")  # returns although the write lock is held elsewhere
        assert holder.poll() is None and second.id not in _rows(index)  # not in the file yet
        assert [i.id for i in store.list()] == [second.id, first.id]  # a reader here sees it queued
        assert store.resolve(second.id[:13]) == second.id
        queue = indexqueue.queue_for(index, store.root)
        assert queue.notice() is None  # not said before NOTICE_AFTER seconds of failing
        time.sleep(indexqueue.NOTICE_AFTER + 0.1)
        said = queue.notice()
        assert said is not None and "(it is locked by another process)" in said and queue.notice() is None
    finally:
        _release(holder)
    assert queue.flush(10) and _rows(index) == {first.id: 1, second.id: 2}


def test_rows_a_killed_process_left_queued_are_rebuilt_by_the_next_reader(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = SessionStore(home / "sessions")
    kept = Session(messages=[Message.user("kept")])
    store.save(kept, model="m")
    index = store.index.path
    holder = _holder(index)
    try:
        child = subprocess.run(
            [sys.executable, "-c", SAVE_THEN_DIE],
            env={**os.environ, "SHIRO_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        _release(holder)
    assert child.returncode == -signal.SIGKILL
    lost = child.stdout.strip()
    assert (home / "sessions" / f"{lost}.json").exists() and lost not in _rows(index)  # the record, no row
    fresh = SessionStore(home / "sessions")  # the folder changed behind the index (stamp and queue): reconciled
    assert sorted(i.id for i in fresh.list()) == sorted([kept.id, lost])
    assert indexqueue.queue_for(index, fresh.root).flush(10) and set(_rows(index)) == {kept.id, lost}
