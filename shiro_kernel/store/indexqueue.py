"""The session index's writes, queued: a save never waits on another process's lock of ``index.sqlite``.

The records are the truth and the index a cache (:mod:`.index`), so a row may follow its record a moment
later. Each change (a row to upsert, an id to drop, the folder mtime the rows account for) is put into the
:class:`Queue` of its index file — one per file, shared by the whole process — and tried at once, waiting at
most :data:`DIRECT_WAIT` for SQLite's write lock: with the index free (always, but for a moment now and
then) it is committed before the caller goes on, as if written directly. When another process holds the
lock for longer (a long transaction, a ``sqlite3`` shell left inside ``BEGIN``), the caller goes on at once
and a daemon thread keeps trying (:data:`ATTEMPT_WAIT` per attempt), so the rows catch up within a moment of
the lock's release; while the outage lasts, a change does not even try (the thread has it). Meanwhile the
readers of this process see the queued rows (:meth:`Queue.pending`): ``/sessions`` right after a save lists
it. When writing has failed for :data:`NOTICE_AFTER` seconds, :meth:`Queue.notice` gives the one sentence to
tell the user, once per outage.

**The folder stamp.** ``meta.folder_mtime`` says "the rows account for every record as of this folder mtime"
(see :mod:`.index`). A change carries the mtime it accounts for (``seen``, or None when unknown); the stamp
is written with the rows only when the folder still has that mtime, so rows that never made it (a process
killed with its queue full) leave the stamp behind, and the next reader reconciles.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

#: the longest a caller (a save at a turn's end) waits for another process's write lock
DIRECT_WAIT = 0.1
#: how long one attempt of the queue's thread waits for the lock before it tries again
ATTEMPT_WAIT = 0.25
#: after failing for this many seconds, :meth:`Queue.notice` says so (once, until writing works again)
NOTICE_AFTER = 2.0
#: the longest pause between attempts that failed for another reason than the lock (a disk error)
MAX_PAUSE = 10.0

UPSERT = (
    "INSERT OR REPLACE INTO sessions (id, updated_at, created_at, title, messages, notebook_path, cwd, "
    "mtime_ns, size, corrupt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
STAMP = "INSERT OR REPLACE INTO meta (key, value) VALUES ('folder_mtime', ?)"


class Values(Protocol):
    """A row as :mod:`.index` makes it: its column values, in :data:`UPSERT`'s order."""

    def values(self) -> tuple[object, ...]: ...


R = TypeVar("R", bound=Values)


def folder_mtime(folder: Path) -> int | None:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None


def apply(db: sqlite3.Connection, changes: Mapping[str, Values | None], seen: int | None, folder: Path) -> bool:
    """Write ``changes`` (an upsert per row, a delete per None) and, when the folder still has the mtime
    ``seen``, the stamp, in one ``BEGIN IMMEDIATE`` transaction; whether the stamp was written."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for sid, row in changes.items():
            if row is None:
                db.execute("DELETE FROM sessions WHERE id = ?", (sid,))
            else:
                db.execute(UPSERT, row.values())
        stamped = seen is not None and folder_mtime(folder) == seen
        if stamped:
            db.execute(STAMP, (seen,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return stamped


def _locked(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Queue(Generic[R]):
    """What is waiting to be written into the index file ``path`` (of the records in ``folder``)."""

    def __init__(self, path: Path, folder: Path) -> None:
        self.path, self.folder = Path(path).absolute(), Path(folder)
        self._cond = threading.Condition()
        self._pending: dict[str, R | None] = {}
        #: the folder mtime that the index and this queue together account for (None: not known)
        self.seen: int | None = None
        self._stamped: int | None = None  # the last ``seen`` written as the stamp
        self._apply_lock = threading.Lock()  # one writer at a time, so a newer row is never overwritten
        self._thread: threading.Thread | None = None
        #: since when writing fails (monotonic seconds; None while it works), and why
        self.failing_since: float | None = None
        self.error: sqlite3.Error | None = None
        self._told = False

    # -- what readers see ----------------------------------------------------------------------------
    def pending(self) -> dict[str, R | None]:
        """The rows not written yet (None: an id to drop), the newest change of each id."""
        with self._cond:
            return dict(self._pending)

    def _work(self) -> bool:
        return bool(self._pending) or (self.seen is not None and self.seen != self._stamped)

    # -- writing -------------------------------------------------------------------------------------
    def submit(self, changes: Mapping[str, R | None], seen: int | None) -> None:
        """Queue ``changes`` (accounting for the folder as of mtime ``seen``, None when unknown) and write
        them now if the index is free within :data:`DIRECT_WAIT`; else the thread writes them later."""
        with self._cond:
            self._pending.update(changes)
            self.seen = seen
            outage = self.failing_since is not None
        if outage or not self._attempt(DIRECT_WAIT):
            self._start()

    def _attempt(self, wait: float) -> bool:
        """One try at writing everything queued, waiting up to ``wait`` seconds for the write lock; True
        when nothing is left to write."""
        if not self._apply_lock.acquire(timeout=wait):
            return False
        try:
            with self._cond:
                batch, seen = dict(self._pending), self.seen
                if not self._work():
                    return True
            try:
                # a connection per attempt (~0.1 ms): none is left open for every home a process touched
                # mode=rw: never make the file (the index makes it, private, with its tables)
                db = sqlite3.connect(
                    f"{self.path.as_uri()}?mode=rw",
                    uri=True,
                    timeout=wait,
                    check_same_thread=False,
                    isolation_level=None,
                )
                try:
                    db.execute("PRAGMA synchronous=NORMAL")
                    stamped = apply(db, batch, seen, self.folder)
                finally:
                    db.close()
            except sqlite3.Error as exc:
                with self._cond:
                    if self.failing_since is None:
                        self.failing_since = time.monotonic()
                    self.error = exc
                return False
            with self._cond:
                for sid, row in batch.items():
                    if sid in self._pending and self._pending[sid] is row:
                        del self._pending[sid]
                if seen is not None and self.seen == seen:  # else a newer change came meanwhile
                    if stamped:
                        self._stamped = seen
                    else:  # the folder changed behind us: not known any more (the next reader reconciles)
                        self.seen = None
                self.failing_since, self.error, self._told = None, None, False
                self._cond.notify_all()
                return not self._work()
        finally:
            self._apply_lock.release()

    def _start(self) -> None:
        with self._cond:
            if self._thread is None and self._work():
                self._thread = threading.Thread(target=self._run, name="shiro-index", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        pause = 0.0
        while True:
            with self._cond:
                if pause:
                    self._cond.wait(pause)
                if not self._work():
                    self._thread = None
                    return
            if self._attempt(ATTEMPT_WAIT) or self.error is None or _locked(self.error):
                pause = 0.0  # done, or the lock: SQLite's own waiting paces the attempts
            else:
                pause = min(max(pause * 2, 0.5), MAX_PAUSE)  # a disk error or a broken file: back off

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for everything queued to be written; whether it was."""
        deadline = time.monotonic() + timeout
        self._start()
        with self._cond:
            while self._work():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def notice(self) -> str | None:
        """The sentence to tell the user once writing has failed for :data:`NOTICE_AFTER` seconds: once per
        outage, None otherwise."""
        with self._cond:
            since, error = self.failing_since, self.error
            if since is None or error is None or self._told or time.monotonic() - since < NOTICE_AFTER:
                return None
            self._told = True
        why = "it is locked by another process" if _locked(error) else f"it cannot be written: {error}"
        return (
            f"the session index {self.path} has not been updated for {time.monotonic() - since:.0f} s ({why}); "
            "the session records are saved, and the index catches up in the background once it can be written"
        )

    def discard(self) -> None:
        """Forget what is queued (the index file is about to be rebuilt from the records)."""
        with self._apply_lock, self._cond:
            self._pending.clear()
            self.seen = self._stamped = None
            self._cond.notify_all()


_QUEUES: dict[str, Queue[Any]] = {}
_QUEUES_LOCK = threading.Lock()


def queue_for(path: Path, folder: Path) -> Queue[Any]:
    """The process's one queue for the index file ``path``."""
    with _QUEUES_LOCK:
        queue = _QUEUES.get(str(path))
        if queue is None:
            queue = _QUEUES[str(path)] = Queue[Any](path, folder)
        return queue


def _after_fork() -> None:  # a forked child starts with no queue (its parent's thread is not there)
    global _QUEUES_LOCK
    _QUEUES.clear()
    _QUEUES_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


__all__ = ["ATTEMPT_WAIT", "DIRECT_WAIT", "NOTICE_AFTER", "Queue", "apply", "folder_mtime", "queue_for"]
