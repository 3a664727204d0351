"""Session records on disk: ``SHIRO_HOME/sessions/<uuidv7>.json`` (see :mod:`~shiro_kernel.store.records`
for the format), with the SQLite index beside them (:mod:`~shiro_kernel.store.index`).

A session with no messages is never written. A record that cannot be parsed is skipped by every listing,
never loaded and never overwritten: saving over it first moves it aside (``<id>.json.corrupt-<time>``).
Saves by several kernels are serialised by a file lock, so a record and its index row always agree.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import Ambiguous, CorruptFile, RequestError
from ..session import Session
from . import files
from .ids import short_id
from .index import Row, SessionIndex, SessionInfo, row_for
from .paths import home
from .records import check_record, session_from_record, session_to_record

LIST_LIMIT = 15

_ID_OK = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]*$")


def _same_path(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    return os.path.normpath(os.path.abspath(os.fspath(a))) == os.path.normpath(os.path.abspath(os.fspath(b)))


class SessionStore:
    """Session records under ``root`` (default ``home()/"sessions"``)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else home() / "sessions"
        self.index = SessionIndex(self.root)

    def path_for(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not _ID_OK.match(session_id):
            raise RequestError(f"not a session id: {session_id!r}")
        return self.root / f"{session_id}.json"

    # -- writing -----------------------------------------------------------------------------------
    def save(self, session: Session, *, model: str | None = None) -> bool:
        """Write the session's record (fresh ``updatedAt``) and its index row; False for a session with no
        messages (nothing is written). Raises :class:`~shiro_kernel.errors.StoreError` when the disk
        refuses (full, read-only); a corrupt record in the way is set aside first."""
        if not session.messages:
            return False
        record = session_to_record(session, model)
        path = self.path_for(session.id)
        text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
        with files.locked(self.root / ".save"):
            self._set_aside_if_corrupt(path)
            files.write_atomic(path, text)
            self.index.put(row_for(session.id, record, path.stat()))
        return True

    def _set_aside_if_corrupt(self, path: Path) -> None:
        try:
            st = path.stat()
        except FileNotFoundError:
            return
        known = self.index.get(path.name[:-5])
        if known is not None and (known.mtime_ns, known.size) == (st.st_mtime_ns, st.st_size) and not known.corrupt:
            return  # the record we wrote last: known to be readable
        try:
            check_record(files.read_json(path))
        except (CorruptFile, ValueError):
            files.quarantine(path)

    # -- reading one -------------------------------------------------------------------------------
    def load_record(self, session_id: str) -> dict[str, Any]:
        """The raw record. Raises :class:`RequestError` when there is none and
        :class:`~shiro_kernel.errors.CorruptFile` when it cannot be parsed."""
        path = self.path_for(session_id)
        raw = files.read_json(path)
        if raw is None:
            raise RequestError(f'no session matching "{session_id}"')
        try:
            return check_record(raw)
        except ValueError as exc:
            raise CorruptFile(path, str(exc)) from None

    def load(self, session_id: str) -> Session:
        """The session (messages, totals, task list); the errors of :meth:`load_record`."""
        record = self.load_record(session_id)
        record.setdefault("id", session_id)
        try:
            return session_from_record(record)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFile(self.path_for(session_id), str(exc)) from None

    def set_aside(self, session_id: str) -> Path | None:
        """Move an unreadable record aside (``.corrupt-<time>``) and drop its row; where it went."""
        path = self.path_for(session_id)
        with files.locked(self.root / ".save"):
            moved = files.quarantine(path) if path.exists() else None
            self.index.drop(session_id)
        return moved

    # -- listing -----------------------------------------------------------------------------------
    def list(self, limit: int | None = LIST_LIMIT) -> list[SessionInfo]:
        """The newest ``limit`` sessions, newest ``updatedAt`` first (corrupt records skipped; [] when
        there is no folder). Reads only the index."""
        if not self.root.is_dir():
            return []
        return self.index.newest(limit)

    def latest_for_notebook(self, notebook_path: str | os.PathLike[str] | None,
                            cwd: str | os.PathLike[str] | None = None) -> SessionInfo | None:
        """The newest session recorded for this notebook; when the notebook is unknown (``None``, e.g.
        terminal IPython) the newest whose ``cwd`` is ``cwd`` (default: the working directory)."""
        if not self.root.is_dir():
            return None
        column, want = (("notebook_path", notebook_path) if notebook_path is not None
                        else ("cwd", cwd if cwd is not None else os.getcwd()))
        want_s = os.fspath(want)
        # the same path may have been recorded spelled differently (relative, `..`): compare normalised
        spellings = [want_s, *(p for p in self.index.all_paths(column) if p != want_s and _same_path(p, want_s))]
        return self.index.latest_where(column, spellings)

    def resolve(self, prefix: str) -> str:
        """The full id for an exact id or a unique prefix. Raises :class:`RequestError` when nothing
        matches and :class:`~shiro_kernel.errors.Ambiguous` when several sessions do."""
        text = (prefix or "").strip()
        if not text or not _ID_OK.match(text) or not self.root.is_dir():
            raise RequestError(f'no session matching "{prefix}"')
        row = self.index.get(text)
        if row is not None and not row.corrupt:
            return text
        matches = self.index.with_prefix(text.lower())
        if len(matches) > 1:
            raise Ambiguous(text, matches)
        if not matches:
            raise RequestError(f'no session matching "{prefix}"')
        return matches[0]

    def rebuild_index(self) -> int:
        """Re-read every record into the index; returns how many records there are."""
        if not self.root.is_dir():
            return 0
        with files.locked(self.root / ".save"):
            self.index.close()
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.index.path) + suffix).unlink(missing_ok=True)
            self.index.reconcile()
        return len(self.index.newest(None))


__all__ = ["LIST_LIMIT", "Row", "SessionInfo", "SessionStore", "short_id"]
