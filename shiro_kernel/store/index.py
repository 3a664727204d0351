"""The session index: one SQLite row per session record, so listing and resolving an id prefix never
read the records themselves.

``sessions/index.sqlite`` (stdlib ``sqlite3``, WAL: readers never wait for a writer; several kernels
write under SQLite's own locking). It is a cache: the records stay the truth, and the index is rebuilt
from them when it is missing, unreadable or stale. Its writes go through the process's queue of that file
(:mod:`.indexqueue`): written at once when the index is free, later when another process holds its write
lock, never waited on by a save; every read here sees the queued rows as if written.

**Staleness.** Every record write is a rename into the sessions folder, which moves the folder's mtime.
With the rows the index stamps the folder's mtime they account for (``meta.folder_mtime``); a reader whose
``stat`` of the folder disagrees with the stamp (and with what this process's queue accounts for) knows
someone changed the folder without the index (an older version, a copy, a deletion, a kernel killed with
rows still queued) and reconciles: it lists the folder and re-reads only the records whose (mtime, size)
differ from their row. One ``stat`` per read otherwise.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptFile, StoreError
from . import files, private
from .indexqueue import Queue, apply, folder_mtime, queue_for

INDEX_NAME = "index.sqlite"
SCHEMA_VERSION = 1
#: a JSON index written by earlier versions; it is not a record (and is removed when seen)
LEGACY_INDEX = "index.json"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    updated_at TEXT NOT NULL,
    created_at TEXT NOT NULL,
    title TEXT NOT NULL,
    messages INTEGER NOT NULL,
    notebook_path TEXT,
    cwd TEXT,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    corrupt INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS sessions_updated ON sessions (updated_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS sessions_notebook ON sessions (notebook_path, updated_at DESC);
CREATE INDEX IF NOT EXISTS sessions_cwd ON sessions (cwd, updated_at DESC);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER);
"""


@dataclass(frozen=True)
class SessionInfo:
    """One row: what listing and resolving need, without reading the record."""

    id: str
    created_at: str
    updated_at: str
    title: str
    messages: int
    notebook_path: str | None
    cwd: str | None


@dataclass(frozen=True)
class Row:
    """A row as stored: the info plus the record file's (mtime, size) and whether it is corrupt."""

    info: SessionInfo
    mtime_ns: int
    size: int
    corrupt: bool = False

    @classmethod
    def broken(cls, session_id: str, st: os.stat_result, known: dict[str, str] | None = None) -> Row:
        """The row of an unreadable record; ``known``: what :func:`~.records.salvage` could still read
        (the notebook it belonged to, above all)."""
        k = known or {}
        info = SessionInfo(
            session_id,
            k.get("createdAt", ""),
            k.get("updatedAt", ""),
            k.get("title", ""),
            0,
            k.get("notebookPath"),
            k.get("cwd"),
        )
        return cls(info, st.st_mtime_ns, st.st_size, True)

    def values(self) -> tuple[object, ...]:
        i = self.info
        return (
            i.id,
            i.updated_at,
            i.created_at,
            i.title,
            i.messages,
            i.notebook_path,
            i.cwd,
            self.mtime_ns,
            self.size,
            int(self.corrupt),
        )


_COLUMNS = "id, created_at, updated_at, title, messages, notebook_path, cwd"
#: how long a read waits for a lock (reads in WAL mode take none but for a moment after a crash)
READ_WAIT = 2.0


def _info(row: tuple[object, ...]) -> SessionInfo:
    sid, created, updated, title, messages, notebook, cwd = row
    return SessionInfo(
        str(sid),
        str(created),
        str(updated),
        str(title),
        int(messages),  # type: ignore[call-overload]
        notebook if isinstance(notebook, str) else None,
        cwd if isinstance(cwd, str) else None,
    )


#: connections opened ahead of their first use (:func:`preopen`, by the warm-up thread), by index path; the
#: first :class:`SessionIndex` of that path takes its connection (SQLite connections here are not bound to
#: the thread that opened them)
_PREOPENED: dict[str, sqlite3.Connection] = {}
_PREOPENED_LOCK = threading.Lock()


def preopen(folder: Path) -> None:
    """Open the index of ``folder`` and bring it up to date with the records, for the first ``%shiro`` of a
    kernel to find ready (the warm-up does this right after ``%load_ext``). Does nothing if it exists."""
    index = SessionIndex(folder)
    with _PREOPENED_LOCK:
        if str(index.path) in _PREOPENED or not index.folder.is_dir():
            return
    with index._lock:
        db = index._connect()
        index._reconcile_if_stale(db)
    with _PREOPENED_LOCK:
        if str(index.path) in _PREOPENED:
            db.close()
        else:
            _PREOPENED[str(index.path)] = db


class SessionIndex:
    """The index of the records in ``folder`` (the file ``folder/index.sqlite``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / INDEX_NAME
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()  # one connection, shared by the kernel's threads (autosave timer)
        self._queue: Queue[Row] = queue_for(self.path, self.folder)
        self._memory = False  # an index in memory (a read-only home): written directly, nobody else locks it

    # -- the connection ------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        with _PREOPENED_LOCK:
            ready = _PREOPENED.pop(str(self.path), None)
        if ready is not None:
            self._db = ready
            return ready
        try:
            private.make_dirs(self.folder)
            db = self._open(self.path)
        except sqlite3.OperationalError:  # a read-only home: an index in memory, built from the records
            db, self._memory = self._open(":memory:"), True
        except sqlite3.DatabaseError:  # not a database (corrupt, truncated): set it aside and start over
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            if self.path.exists():
                files.quarantine(self.path)
            db = self._open(self.path)
        except OSError:
            db, self._memory = self._open(":memory:"), True
        self._db = db
        try:
            (self.folder / LEGACY_INDEX).unlink(missing_ok=True)
        except OSError:
            pass
        return db

    @staticmethod
    def _open(path: Path | str) -> sqlite3.Connection:
        if isinstance(path, Path):  # made 0600 before SQLite makes it with the umask's mode (and its -wal, -shm)
            private.create_file(path)
        db = sqlite3.connect(path, timeout=READ_WAIT, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, never corrupt
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:  # nothing to write: opening never waits for another writer's lock
                return db
            if version != 0:  # a newer or foreign layout: rebuild from the records
                db.executescript("DROP TABLE IF EXISTS sessions; DROP TABLE IF EXISTS meta;")
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- writing -------------------------------------------------------------------------------------
    def folder_mtime(self) -> int | None:
        """The records folder's mtime (None when it does not exist): what a caller about to rename a record
        into it passes to :meth:`put` as ``since``."""
        return folder_mtime(self.folder)

    def put(self, row: Row, since: int | None = None) -> None:
        """Upsert one row (queued: see :mod:`.indexqueue`). ``since``: the folder's mtime just before the
        caller renamed the record in; when the index accounted for the folder at that mtime, it now accounts
        for it as it is, and says so in its stamp; else the folder is reconciled first. Raises :class:`StoreError` only when the index cannot be
        opened at all."""
        self._change({row.info.id: row}, since)

    def drop(self, session_id: str, since: int | None = None) -> None:
        self._change({session_id: None}, since)

    def _change(self, changes: Mapping[str, Row | None], since: int | None) -> None:
        with self._lock:
            try:
                db = self._connect()  # the file and its tables exist before the queue writes into them
                known = self._queue.seen if self._queue.seen is not None and not self._memory else self._stamp(db)
            except sqlite3.Error as exc:
                raise StoreError(f"could not update the session index {self.path} ({exc})") from exc
            if since is not None and since == known:
                self._submit(changes, folder_mtime(self.folder))
            else:  # the folder changed without the index before this change (or is new): catch up now, once
                self._submit(changes, None)
                self.reconcile(db)

    def _submit(self, changes: Mapping[str, Row | None], seen: int | None) -> None:
        if self._memory:
            apply(self._connect(), changes, seen, self.folder)
        else:
            self._queue.submit(changes, seen)

    def _stamp(self, db: sqlite3.Connection) -> int | None:
        row = db.execute("SELECT value FROM meta WHERE key = 'folder_mtime'").fetchone()
        return int(row[0]) if row is not None else None

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the queued rows to be written; whether they were."""
        return self._memory or self._queue.flush(timeout)

    def notice(self) -> str | None:
        """The one sentence to tell the user when the index has not been writable for a while (once)."""
        return None if self._memory else self._queue.notice()

    def discard_queued(self) -> None:
        """Forget the queued rows (the index is about to be rebuilt from the records)."""
        self._queue.discard()

    # -- reading -------------------------------------------------------------------------------------
    @contextmanager
    def _reading(self) -> Iterator[tuple[sqlite3.Connection, dict[str, Row | None]]]:
        """The connection, brought up to date with the folder, and the rows still queued (which every read
        lays over what the file holds)."""
        with self._lock:
            try:
                db = self._connect()
                self._reconcile_if_stale(db)
                yield db, ({} if self._memory else self._queue.pending())
            except sqlite3.Error as exc:
                raise StoreError(f"could not read the session index {self.path} ({exc})") from exc

    def newest(self, limit: int | None) -> list[SessionInfo]:
        """Readable sessions, newest ``updatedAt`` first."""
        sql = f"SELECT {_COLUMNS} FROM sessions WHERE corrupt = 0 ORDER BY updated_at DESC, id DESC"
        with self._reading() as (db, queued):
            args: tuple[object, ...] = ()
            if limit is not None:
                sql += " LIMIT ?"
                args = (limit + len(queued),)
            found = [i for i in map(_info, db.execute(sql, args).fetchall()) if i.id not in queued]
        found += [r.info for r in queued.values() if r is not None and not r.corrupt]
        found.sort(key=_newness, reverse=True)
        return found if limit is None else found[:limit]

    def latest_where(self, column: str, values: Iterable[str]) -> SessionInfo | None:
        """The newest readable session whose ``column`` (notebook_path or cwd) is one of ``values``."""
        assert column in ("notebook_path", "cwd")
        wanted = list(dict.fromkeys(values))
        marks = ", ".join("?" * len(wanted))
        with self._reading() as (db, queued):
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM sessions WHERE corrupt = 0 AND {column} IN ({marks}) "
                "ORDER BY updated_at DESC, id DESC LIMIT ?",
                (*wanted, 1 + len(queued)),
            ).fetchall()
        found = [i for i in map(_info, rows) if i.id not in queued]
        found += [r.info for r in queued.values() if r is not None and not r.corrupt and _of(r, column) in wanted]
        return max(found, key=_newness, default=None)

    def all_paths(self, column: str, *, corrupt: bool = False) -> list[str]:
        """The distinct values of ``column`` (for path comparisons that SQL cannot do), of readable
        records (of unreadable ones with ``corrupt``)."""
        assert column in ("notebook_path", "cwd")
        with self._reading() as (db, queued):
            rows = db.execute(
                f"SELECT DISTINCT {column} FROM sessions WHERE corrupt = ? AND {column} IS NOT NULL", (int(corrupt),)
            ).fetchall()
        extra = [_of(r, column) for r in queued.values() if r is not None and r.corrupt == corrupt]
        return list(dict.fromkeys([*(str(r[0]) for r in rows), *(v for v in extra if v is not None)]))

    def get(self, session_id: str) -> Row | None:
        with self._reading() as (db, queued):
            if session_id in queued:
                return queued[session_id]
            rows = db.execute(
                f"SELECT {_COLUMNS}, mtime_ns, size, corrupt FROM sessions WHERE id = ?", (session_id,)
            ).fetchall()
        if not rows:
            return None
        r = rows[0]
        return Row(_info(r[:7]), int(r[7]), int(r[8]), bool(r[9]))

    def unreadable(self) -> list[SessionInfo]:
        """The rows of records that cannot be read (with what could be salvaged of them)."""
        with self._reading() as (db, queued):
            rows = db.execute(f"SELECT {_COLUMNS} FROM sessions WHERE corrupt = 1 ORDER BY id").fetchall()
        found = [i for i in map(_info, rows) if i.id not in queued]
        found += [r.info for r in queued.values() if r is not None and r.corrupt]
        return sorted(found, key=lambda i: i.id)

    def with_prefix(self, prefix: str, limit: int = 50) -> list[str]:
        """Readable ids starting with ``prefix`` (already lowercase), in order; a range scan of the key."""
        with self._reading() as (db, queued):
            rows = db.execute(
                "SELECT id FROM sessions WHERE corrupt = 0 AND id >= ? AND id < ? ORDER BY id LIMIT ?",
                (prefix, prefix + "\U0010ffff", limit + len(queued)),
            ).fetchall()
        found = [str(r[0]) for r in rows if r[0] not in queued]
        found += [sid for sid, r in queued.items() if r is not None and not r.corrupt and sid.startswith(prefix)]
        return sorted(found)[:limit]

    def unique_length(self, session_id: str, minimum: int) -> int:
        """The length of the shortest prefix of ``session_id`` that no other id here starts with, at least
        ``minimum``: one more than its longest common prefix with its neighbours in id order (one indexed
        query; a prefix of every length up to the id itself when the id is not unique at all)."""
        with self._reading() as (db, queued):
            before, after = db.execute(
                "SELECT (SELECT id FROM sessions WHERE id < ?1 ORDER BY id DESC LIMIT 1), "
                "(SELECT id FROM sessions WHERE id > ?1 ORDER BY id LIMIT 1)",
                (session_id,),
            ).fetchone()
        others = [o for o in (before, after) if isinstance(o, str)]
        others += [sid for sid, r in queued.items() if r is not None and sid != session_id]
        longest = max((_common(session_id, o) for o in others), default=0)
        return min(len(session_id), max(minimum, longest + 1))

    # -- staleness -----------------------------------------------------------------------------------
    def _reconcile_if_stale(self, db: sqlite3.Connection) -> None:
        mtime = folder_mtime(self.folder)
        if mtime is None or (not self._memory and self._queue.seen == mtime) or self._stamp(db) == mtime:
            return
        self.reconcile(db)

    def reconcile(self, db: sqlite3.Connection | None = None) -> int:
        """Make the rows match the records on disk: new and changed records are read, rows of deleted
        ones dropped (the changes queued like any other write). Returns how many records were read."""
        from .records import (
            check_record,  # records imports the session model; only needed here
        )

        with self._lock:
            db = db or self._connect()
            seen = folder_mtime(self.folder)  # before listing: a record renamed in meanwhile is not claimed
            known = {str(r[0]): (int(r[1]), int(r[2])) for r in db.execute("SELECT id, mtime_ns, size FROM sessions")}
            for queued_id, queued in ({} if self._memory else self._queue.pending()).items():
                if queued is None:
                    known.pop(queued_id, None)
                else:
                    known[queued_id] = (queued.mtime_ns, queued.size)
            changes: dict[str, Row | None] = {}
            try:
                entries = list(os.scandir(self.folder))
            except OSError:  # no folder (or a file where it should be): no records
                entries = []
            for entry in entries:
                sid = record_id(entry.name)
                if sid is None:
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                if known.pop(sid, None) == (st.st_mtime_ns, st.st_size):
                    continue
                try:
                    changes[sid] = row_for(sid, check_record(files.read_json(Path(entry.path))), st)
                except (CorruptFile, ValueError, TypeError):
                    changes[sid] = Row.broken(sid, st, _salvage(Path(entry.path)))
            read = len(changes)
            changes.update(dict.fromkeys(known))  # what is left of the known rows has no record any more
            self._submit(changes, seen)
        return read


def _common(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _newness(info: SessionInfo) -> tuple[str, str]:
    return (info.updated_at, info.id)


def _of(row: Row, column: str) -> str | None:
    value: str | None = getattr(row.info, column)
    return value


def _salvage(path: Path) -> dict[str, str]:
    from .records import salvage

    try:
        with open(path, "rb") as fh:
            return salvage(fh.read(65536).decode("utf-8", "replace"))
    except OSError:
        return {}


def record_id(name: str) -> str | None:
    """The session id of a record file name, None for anything else in the folder."""
    if not name.endswith(".json") or name.startswith(".") or name == LEGACY_INDEX:
        return None
    return name[:-5]


def row_for(session_id: str, record: dict[str, object], st: os.stat_result) -> Row:
    nb, cwd, messages = record.get("notebookPath"), record.get("cwd"), record.get("messages")
    info = SessionInfo(
        session_id,
        str(record.get("createdAt") or ""),
        str(record.get("updatedAt") or ""),
        str(record.get("title") or "untitled"),
        len(messages) if isinstance(messages, list) else 0,
        nb if isinstance(nb, str) else None,
        cwd if isinstance(cwd, str) else None,
    )
    return Row(info, st.st_mtime_ns, st.st_size)


__all__ = ["INDEX_NAME", "Row", "SessionIndex", "SessionInfo", "record_id", "row_for"]
