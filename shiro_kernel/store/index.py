"""The session index: one SQLite row per session record, so listing and resolving an id prefix never
read the records themselves.

``sessions/index.sqlite`` (stdlib ``sqlite3``, WAL: readers never wait for a writer; several kernels
write under SQLite's own locking with a busy timeout). It is a cache: the records stay the truth, and
the index is rebuilt from them when it is missing, unreadable or stale.

**Staleness.** Every record write is a rename into the sessions folder, which moves the folder's mtime.
After each write through the store the index stamps the folder's mtime it saw (``meta.folder_mtime``);
a reader whose ``stat`` of the folder disagrees with the stamp knows someone changed the folder without
the index (an older version, a copy, a deletion) and reconciles: it lists the folder and re-reads only
the records whose (mtime, size) differ from their row. One ``stat`` per read otherwise.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptFile, StoreError
from . import files, private

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
_UPSERT = (
    "INSERT OR REPLACE INTO sessions (id, updated_at, created_at, title, messages, notebook_path, cwd, "
    "mtime_ns, size, corrupt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


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
            db = self._open(":memory:")
        except sqlite3.DatabaseError:  # not a database (corrupt, truncated): set it aside and start over
            for suffix in ("-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            if self.path.exists():
                files.quarantine(self.path)
            db = self._open(self.path)
        except OSError:
            db = self._open(":memory:")
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
        db = sqlite3.connect(path, timeout=30.0, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, never corrupt
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):  # a newer or foreign layout: rebuild from the records
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
    def put(self, row: Row) -> None:
        """Upsert one row and stamp the folder as seen (the caller just renamed the record into it)."""
        self._write("INSERT", _UPSERT, row.values())

    def drop(self, session_id: str) -> None:
        self._write("DELETE", "DELETE FROM sessions WHERE id = ?", (session_id,))

    def _write(self, what: str, sql: str, args: tuple[object, ...]) -> None:
        with self._lock:
            try:
                db = self._connect()
                with _transaction(db):
                    db.execute(sql, args)
                    self._stamp(db)
            except sqlite3.Error as exc:
                raise StoreError(f"could not update the session index {self.path} ({exc})") from exc

    def _stamp(self, db: sqlite3.Connection) -> None:
        try:
            mtime = os.stat(self.folder).st_mtime_ns
        except FileNotFoundError:
            return
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('folder_mtime', ?)", (mtime,))

    # -- reading -------------------------------------------------------------------------------------
    def newest(self, limit: int | None) -> list[SessionInfo]:
        """Readable sessions, newest ``updatedAt`` first."""
        sql = f"SELECT {_COLUMNS} FROM sessions WHERE corrupt = 0 ORDER BY updated_at DESC, id DESC"
        args: tuple[object, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            args = (limit,)
        return [_info(r) for r in self._query(sql, args)]

    def latest_where(self, column: str, values: Iterable[str]) -> SessionInfo | None:
        """The newest readable session whose ``column`` (notebook_path or cwd) is one of ``values``."""
        assert column in ("notebook_path", "cwd")
        wanted = list(dict.fromkeys(values))
        marks = ", ".join("?" * len(wanted))
        rows = self._query(
            f"SELECT {_COLUMNS} FROM sessions WHERE corrupt = 0 AND {column} IN ({marks}) "
            "ORDER BY updated_at DESC, id DESC LIMIT 1",
            tuple(wanted),
        )
        return _info(rows[0]) if rows else None

    def all_paths(self, column: str, *, corrupt: bool = False) -> list[str]:
        """The distinct values of ``column`` (for path comparisons that SQL cannot do), of readable
        records (of unreadable ones with ``corrupt``)."""
        assert column in ("notebook_path", "cwd")
        return [
            str(r[0])
            for r in self._query(
                f"SELECT DISTINCT {column} FROM sessions WHERE corrupt = ? AND {column} IS NOT NULL", (int(corrupt),)
            )
        ]

    def get(self, session_id: str) -> Row | None:
        rows = self._query(f"SELECT {_COLUMNS}, mtime_ns, size, corrupt FROM sessions WHERE id = ?", (session_id,))
        if not rows:
            return None
        r = rows[0]
        return Row(_info(r[:7]), int(r[7]), int(r[8]), bool(r[9]))  # type: ignore[call-overload]

    def unreadable(self) -> list[SessionInfo]:
        """The rows of records that cannot be read (with what could be salvaged of them)."""
        return [_info(r) for r in self._query(f"SELECT {_COLUMNS} FROM sessions WHERE corrupt = 1 ORDER BY id", ())]

    def with_prefix(self, prefix: str, limit: int = 50) -> list[str]:
        """Readable ids starting with ``prefix`` (already lowercase), in order; a range scan of the key."""
        rows = self._query(
            "SELECT id FROM sessions WHERE corrupt = 0 AND id >= ? AND id < ? ORDER BY id LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit),
        )
        return [str(r[0]) for r in rows]

    def _query(self, sql: str, args: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._lock:
            try:
                db = self._connect()
                self._reconcile_if_stale(db)
                return list(db.execute(sql, args).fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"could not read the session index {self.path} ({exc})") from exc

    # -- staleness -----------------------------------------------------------------------------------
    def _reconcile_if_stale(self, db: sqlite3.Connection) -> None:
        try:
            mtime = os.stat(self.folder).st_mtime_ns
        except FileNotFoundError:
            return
        row = db.execute("SELECT value FROM meta WHERE key = 'folder_mtime'").fetchone()
        if row is not None and row[0] == mtime:
            return
        self.reconcile(db)

    def reconcile(self, db: sqlite3.Connection | None = None) -> int:
        """Make the rows match the records on disk: new and changed records are read, rows of deleted
        ones dropped. Returns how many records were read."""
        from .records import (
            check_record,  # records imports the session model; only needed here
        )

        with self._lock:
            db = db or self._connect()
            with _transaction(db):
                known = {
                    str(r[0]): (int(r[1]), int(r[2]))
                    for r in db.execute("SELECT id, mtime_ns, size FROM sessions").fetchall()
                }
                seen: set[str] = set()
                read = 0
                try:
                    entries = list(os.scandir(self.folder))
                except FileNotFoundError:
                    entries = []
                for entry in entries:
                    sid = record_id(entry.name)
                    if sid is None:
                        continue
                    try:
                        st = entry.stat()
                    except FileNotFoundError:
                        continue
                    seen.add(sid)
                    if known.get(sid) == (st.st_mtime_ns, st.st_size):
                        continue
                    read += 1
                    try:
                        record = check_record(files.read_json(Path(entry.path)))
                        row = row_for(sid, record, st)
                    except (CorruptFile, ValueError, TypeError):
                        row = Row.broken(sid, st, _salvage(Path(entry.path)))
                    db.execute(_UPSERT, row.values())
                gone = [(sid,) for sid in known if sid not in seen]
                db.executemany("DELETE FROM sessions WHERE id = ?", gone)
                self._stamp(db)
        return read


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


class _transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on error): the write lock is taken up front, so two
    kernels never deadlock upgrading a read lock."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


__all__ = ["INDEX_NAME", "Row", "SessionIndex", "SessionInfo", "record_id", "row_for"]
