"""Which kernel has a session open: one lease per session, so two kernels never write the same record.

A lease is ``sessions/.live/<id>.lock`` held with an exclusive ``flock`` for as long as the session is
current in a kernel (its :class:`~shiro_kernel.store.autosave.Autosaver` owns it). The operating system
drops the lock when the process ends, even on SIGKILL, so a dead kernel never keeps a session. While
the lock is held the file names its holder (``pid 1234 on host since 12:01:02``), which is what another
kernel tells its user when it cannot take the session.

A lease is reference-counted within one :class:`~shiro_kernel.store.sessions.SessionStore`: resuming the
session this kernel already has open takes another reference to the same lock, never a second lock.
Where leases cannot work (a read-only home, a platform without ``flock``) :func:`claim` gives up quietly:
sessions still save, only without this protection.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import files
from .private import FILE_MODE, make_dirs

LIVE_DIR = ".live"


class Lease:
    """An exclusive hold on one session. :meth:`release` drops one reference; the lock and its file go
    when the last one is dropped."""

    def __init__(self, session_id: str, path: Path, fd: int, on_free: Callable[[Lease], None] | None = None) -> None:
        self.session_id = session_id
        self.path = path
        self._fd: int | None = fd
        self._refs = 1
        self._on_free = on_free

    @property
    def held(self) -> bool:
        return self._fd is not None

    def retain(self) -> Lease:
        self._refs += 1
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        self._refs -= 1
        if self._refs > 0:
            return
        fd, self._fd = self._fd, None
        try:  # unlink while still locked: a kernel waiting on the old file re-checks the inode (see claim)
            self.path.unlink(missing_ok=True)
            unlinked = True
        except OSError:
            unlinked = False
        if unlinked:
            # Closing the only descriptor drops the flock and frees the unlinked inode (~0.5 ms on ext4), so it
            # is done on the stores' background thread: no one can reach this inode by its path any more (a
            # kernel claiming the session now opens a new file), so the lock held a moment longer blocks no one.
            try:
                files.background(_close_quietly, fd)
            except RuntimeError:  # the interpreter is exiting (an atexit save): that thread takes no new work
                _close_quietly(fd)
        else:
            _close_quietly(fd)
        if self._on_free is not None:
            self._on_free(self)


class Busy:
    """The session is open in another kernel: ``holder`` says which (as the lease file names it)."""

    def __init__(self, session_id: str, holder: str) -> None:
        self.session_id = session_id
        self.holder = holder


def lease_path(root: Path, session_id: str) -> Path:
    return Path(root) / LIVE_DIR / f"{session_id}.lock"


def _holder_line() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}"


def claim(root: Path, session_id: str, on_free: Callable[[Lease], None] | None = None) -> Lease | Busy | None:
    """Take the lease of ``session_id``: a :class:`Lease` when this process now holds it, :class:`Busy`
    when another process does, None when leases cannot be used here (nothing to hold, nothing known)."""
    if sys.platform == "win32":  # no flock: no leases (sessions still save)
        return None
    import fcntl

    path = lease_path(root, session_id)
    for _ in range(5):  # the holder may unlink the file between our open and our lock: try again
        try:
            make_dirs(path.parent)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        except OSError:
            return None  # a read-only home: saving will fail (and say so) anyway
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            return Busy(session_id, holder or "another kernel")
        except OSError:  # a file system without flock
            os.close(fd)
            return None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # we locked a file its holder had just removed: the lease is the file at the path now
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.write(fd, _holder_line().encode())
        except OSError:
            pass
        return Lease(session_id, path, fd, on_free)
    return None


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""


__all__ = ["LIVE_DIR", "Busy", "Lease", "claim", "lease_path"]
