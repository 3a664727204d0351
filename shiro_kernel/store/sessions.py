"""Session records on disk: ``SHIRO_HOME/sessions/<uuidv7>.json`` (see :mod:`~shiro_kernel.store.records`
for the format), with the SQLite index beside them (:mod:`~shiro_kernel.store.index`).

A session with no messages is never written. A record that cannot be parsed is skipped by every listing,
never loaded and never overwritten: saving over it first moves it aside (``<id>.json.corrupt-<time>``).
Saves by several kernels are serialised by a file lock, so a record and its index row always agree.

**Two kernels, one session.** A session is written by one kernel at a time: the kernel that has it open
holds its lease (:mod:`~shiro_kernel.store.lease`). :meth:`SessionStore.take` — how a kernel resumes a
session — forks when the session is open in another live kernel: this kernel continues in a copy with a
new id (saved at once), and the other kernel's record is never touched. As a second guard, for kernels
that cannot hold leases (an older version, a file system without ``flock``), :meth:`SessionStore.save`
never overwrites a record that changed on disk since this store last read or wrote it: it writes the
session under a new id instead (:attr:`SessionStore.moved` says so). Either way no message is lost and
every "Saved N messages" names a record that holds them.

**A read-only record.** A record whose file the user made read-only (its owner's write permission off, or
not writable by this process) is left as it is: renaming over it would succeed (that needs only the
folder's permission), so :meth:`SessionStore.save` checks, and writes the session under a new id instead,
like a record changed elsewhere (:attr:`SessionStore.moved`, with the reason in
:attr:`SessionStore.moved_because`).
"""

from __future__ import annotations

import builtins
import json
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import Ambiguous, CorruptFile, RequestError, StoreError
from ..ids import now_iso, uuid7
from ..session import Session
from ..transcript import Message
from . import files
from .index import Row, SessionIndex, SessionInfo, row_for
from .lease import Busy, Lease, claim
from .paths import home
from .records import check_record, session_from_record, session_to_record
from .short_ids import MIN_SHORT_ID, install_shortener, short_id, shown_id

LIST_LIMIT = 15

_ID_OK = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]*$")


#: what identifies one version of a record file: a save renames a new file (a new inode) into place
Stamp = tuple[int, int, int]


def _stamp(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@dataclass
class Taken:
    """What :meth:`SessionStore.take` gives: the session to continue, the lease on it (None where leases
    do not work) and, when it is a copy, the id it was copied from and who holds that one."""

    session: Session
    lease: Lease | None
    forked_from: str | None = None
    holder: str | None = None
    #: how its store shows an id (:meth:`SessionStore.short_id`)
    shown: Callable[[str], str] = short_id

    def note(self) -> str:
        """The line telling the user this kernel continues in a copy ('' when it is not a copy)."""
        if self.forked_from is None:
            return ""
        return (
            f"session {self.shown(self.forked_from)} is open in another kernel ({self.holder}), so this kernel "
            f"continues in a copy, {self.shown(self.session.id)}: each kernel saves its own record and neither "
            "loses messages"
        )


def _read_only(path: Path) -> bool:
    """The user made this record read-only: its owner may not write it, or this process may not (root
    may write anything, so the owner's write bit is what the user set)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return not st.st_mode & stat.S_IWUSR or not os.access(path, os.W_OK)


def _same_path(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    return os.path.normpath(os.path.abspath(os.fspath(a))) == os.path.normpath(os.path.abspath(os.fspath(b)))


class SessionStore:
    """Session records under ``root`` (default ``home()/"sessions"``)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else home() / "sessions"
        self.index = SessionIndex(self.root)
        #: the version of each record this store last read or wrote (the conflict guard of :meth:`save`)
        self._stamps: dict[str, Stamp] = {}
        #: the leases this store holds, by session id
        self._leases: dict[str, Lease] = {}
        #: sessions :meth:`save` wrote under a new id (their record changed elsewhere, or is read-only): old -> new
        self.moved: dict[str, str] = {}
        #: why each of :attr:`moved` was: ``"changed"`` (by another writer) or ``"read-only"``
        self.moved_because: dict[str, str] = {}
        # the ids shown of this folder's sessions are the shortest prefixes unique among them
        install_shortener(self.root, lambda sid: self.index.unique_length(sid, MIN_SHORT_ID))

    def short_id(self, session_id: str) -> str:
        """The id as shown: its shortest prefix unique among this folder's sessions, never under 8 characters
        (:func:`~shiro_kernel.store.short_ids.short_id` is this for the home's sessions folder)."""
        return shown_id(self.root, session_id)

    def path_for(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not _ID_OK.match(session_id):
            raise RequestError(f"not a session id: {session_id!r}")
        return self.root / f"{session_id}.json"

    # -- writing -----------------------------------------------------------------------------------
    def save(self, session: Session, *, model: str | None = None, tail: Sequence[Message] = ()) -> bool:
        """Write the session's record (fresh ``updatedAt``) and its index row; False for a session with no
        messages (nothing is written). Raises :class:`~shiro_kernel.errors.StoreError` when the disk
        refuses (full, read-only); a corrupt record in the way is set aside first.

        A record that another writer changed since this store last read or wrote it, or that is read-only,
        is never overwritten: the session gets a new id (``session.id`` changes, :attr:`moved` records
        old -> new, :attr:`moved_because` why) and is written under it, so both conversations are kept.

        ``tail``: messages recorded after the session's own (:mod:`.writeahead`). The index row is queued
        (:mod:`.indexqueue`): a locked index never holds the save up."""
        if not session.messages:
            return False
        with files.locked(self.root / ".save"):
            path = self.path_for(session.id)
            self._set_aside_if_corrupt(path)  # garbage in the way is no conversation to keep
            why = "changed" if self._changed_elsewhere(session.id, path) else "read-only" if _read_only(path) else ""
            if why:
                old = session.id
                session.id = uuid7()
                self.moved[old], self.moved_because[old] = session.id, why
                path = self.path_for(session.id)
            record = session_to_record(session, model, tail=tail)
            text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
            since = self.index.folder_mtime()
            files.write_atomic(path, text)
            try:
                st = path.stat()
            except OSError as exc:
                raise StoreError(f"could not write {path} ({exc.strerror or type(exc).__name__})") from exc
            self._stamps[session.id] = _stamp(st)
            try:
                self.index.put(row_for(session.id, record, st), since)
            except StoreError:
                pass  # the record is written (it is the truth); a reader finds the index stale and repairs it
        return True

    def _changed_elsewhere(self, session_id: str, path: Path) -> bool:
        known = self._stamps.get(session_id)
        if known is None:
            return False
        try:
            return _stamp(path.stat()) != known
        except FileNotFoundError:
            return False  # deleted meanwhile: nothing to overwrite

    def _set_aside_if_corrupt(self, path: Path) -> None:
        try:
            st = path.stat()
        except FileNotFoundError:
            return
        try:
            known = self.index.get(path.name[:-5])
        except StoreError:  # the index is a cache: without it, read the record to know
            known = None
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
        raw, st = files.read_json_stat(path)
        if raw is None:
            raise RequestError(f'no session matching "{session_id}"')
        try:
            record = check_record(raw)
        except ValueError as exc:
            raise CorruptFile(path, str(exc)) from None
        if st is not None:
            self._stamps[session_id] = _stamp(st)
        return record

    def load(self, session_id: str) -> Session:
        """The session (messages, totals, task list); the errors of :meth:`load_record`."""
        return self._session_of(session_id, self.load_record(session_id))

    def _session_of(self, session_id: str, record: dict[str, Any]) -> Session:
        record.setdefault("id", session_id)
        try:
            return session_from_record(record)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFile(self.path_for(session_id), str(exc)) from None

    # -- which kernel has a session open -------------------------------------------------------------
    def hold(self, session_id: str) -> Lease | Busy | None:
        """Take (or take another reference to) this kernel's lease on ``session_id``: the :class:`Lease`,
        :class:`Busy` when another live kernel holds it, None where leases do not work."""
        lease = self._leases.get(session_id)
        if lease is not None and lease.held:
            return lease.retain()
        got = claim(self.root, session_id, on_free=self._freed)
        if isinstance(got, Lease):
            self._leases[session_id] = got
        return got

    def _freed(self, lease: Lease) -> None:
        if self._leases.get(lease.session_id) is lease:
            del self._leases[lease.session_id]

    def take(self, session_id: str) -> Taken:
        """Load a session to continue it in this kernel, with its lease. When another live kernel has it
        open, the session returned is a copy under a new id (written at once, with its own lease): the
        two kernels then write two records and neither loses the other's messages. Errors as :meth:`load`."""
        record = self.load_record(session_id)
        got = self.hold(session_id)
        if not isinstance(got, Busy):
            return Taken(self._session_of(session_id, record), got)
        copy = self._session_of(session_id, {**record, "id": uuid7(), "createdAt": now_iso()})
        lease = self.hold(copy.id)
        try:
            self.save(copy)
        except StoreError:
            pass  # the autosaver tries again and reports a failure in the footer
        return Taken(copy, lease if isinstance(lease, Lease) else None, session_id, got.holder, self.short_id)

    def set_aside(self, session_id: str) -> Path | None:
        """Move an unreadable record aside (``.corrupt-<time>``) and drop its row; where it went (None
        when it is gone already or the home is read-only: then it stays, and stays unlisted)."""
        path = self.path_for(session_id)
        try:
            with files.locked(self.root / ".save"):
                since = self.index.folder_mtime()
                moved = files.quarantine(path) if path.exists() else None
                self.index.drop(session_id, since)
        except (StoreError, OSError):
            return None
        return moved

    # -- listing -----------------------------------------------------------------------------------
    def list(self, limit: int | None = LIST_LIMIT) -> list[SessionInfo]:
        """The newest ``limit`` sessions, newest ``updatedAt`` first (corrupt records skipped; [] when
        there is no folder). Reads only the index."""
        if not self.root.is_dir():
            return []
        return self.index.newest(limit)

    def latest_for_notebook(
        self, notebook_path: str | os.PathLike[str] | None, cwd: str | os.PathLike[str] | None = None
    ) -> SessionInfo | None:
        """The newest session recorded for this notebook; when the notebook is unknown (``None``, e.g.
        terminal IPython) the newest whose ``cwd`` is ``cwd`` (default: the working directory)."""
        if not self.root.is_dir():
            return None
        column, want = (
            ("notebook_path", notebook_path)
            if notebook_path is not None
            else ("cwd", cwd if cwd is not None else os.getcwd())
        )
        want_s = os.fspath(want)
        normal = os.path.normpath(os.path.abspath(want_s))
        found = self.index.latest_where(column, [want_s, normal])
        if found is not None:
            return found
        # the same path may have been recorded spelled differently (relative, `..`): compare normalised
        spellings = [p for p in self.index.all_paths(column) if _same_path(p, want_s)]
        return self.index.latest_where(column, spellings) if spellings else None

    def unreadable_for_notebook(
        self, notebook_path: str | os.PathLike[str] | None, cwd: str | os.PathLike[str] | None = None
    ) -> builtins.list[CorruptFile]:
        """The records of this notebook that cannot be read — what the automatic resume sets aside and
        reports rather than skip. A broken record is this notebook's when what could be salvaged of it
        names this notebook, or names no notebook but this working directory (or nothing at all)."""
        if not self.root.is_dir():
            return []
        here = os.fspath(cwd if cwd is not None else os.getcwd())
        problems: list[CorruptFile] = []
        for info in self.index.unreadable():
            if info.notebook_path is not None:
                ours = notebook_path is not None and _same_path(info.notebook_path, notebook_path)
            else:
                ours = info.cwd is None or _same_path(info.cwd, here)
            if not ours:
                continue
            try:
                self.load_record(info.id)
            except CorruptFile as exc:
                problems.append(exc)
            except RequestError:
                continue  # gone meanwhile
        return problems

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
            raise Ambiguous(text, matches, [self.short_id(m) for m in matches])
        if not matches:
            raise RequestError(f'no session matching "{prefix}"')
        return matches[0]

    def rebuild_index(self) -> int:
        """Re-read every record into the index; returns how many records there are."""
        if not self.root.is_dir():
            return 0
        with files.locked(self.root / ".save"):
            self.index.discard_queued()
            self.index.close()
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.index.path) + suffix).unlink(missing_ok=True)
            self.index.reconcile()
            self.index.flush(files.LOCK_TIMEOUT)  # an explicit rebuild may wait; the count is right either way
        return len(self.index.newest(None))


__all__ = ["LIST_LIMIT", "Row", "SessionInfo", "SessionStore", "Taken", "short_id"]
