"""Everything under ``SHIRO_HOME`` is private to its owner: folders 0700, files 0600, whatever the umask.

Records, the session index, notes and memories hold prompts, titles, notebook paths and working
directories; another user of the machine must not read them. So every store makes its folders with
:func:`make_dirs` (``Path.mkdir``'s mode is masked by the umask and ignored for parents) and creates
its files with mode 0600, which a umask can only narrow, never widen: ``mkstemp``'s for
:func:`~shiro_kernel.store.files.write_atomic`, ``mode=`` for lock files (filelock then sets it exactly)
and leases, and :func:`create_file` for the SQLite index before SQLite opens it (SQLite gives its
``-wal`` and ``-shm`` the database file's mode). Creating right costs nothing per write: no ``chmod``
but on a folder or an index just made.

A home made by an older version (folders 0755, the index 0644) is tightened once per process by
:func:`tighten_home`, which returns the one notice to show.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

from .paths import home

DIR_MODE = 0o700
FILE_MODE = 0o600
#: the bits :func:`tighten_home` takes away: anything for the group and for others
_OPEN = stat.S_IRWXG | stat.S_IRWXO


def make_dirs(path: Path | str) -> None:
    """Make the folder ``path`` and its missing parents, each 0700; nothing when it exists (then
    FileExistsError only if it is not a folder, as ``Path.mkdir(parents=True, exist_ok=True)``)."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        if parent == os.path.abspath(path):
            raise
        make_dirs(parent)
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:  # made meanwhile, by another thread or kernel
            if not os.path.isdir(path):
                raise
            return
    os.chmod(path, DIR_MODE)  # a umask that masks the owner's own bits


def create_file(path: Path | str) -> bool:
    """Create ``path`` empty and 0600 unless something is there already; True when it was created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    except FileExistsError:
        return False
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True


_tightened: set[str] = set()
_tightened_lock = threading.Lock()


def tighten_home(root: Path | None = None) -> str | None:
    """Make an existing home private, once per home per process: every folder and regular file under
    ``root`` (default ``SHIRO_HOME``) that this user owns loses its group and other permission bits. The
    notice to show when anything changed; None when nothing did, and on every later call.

    It walks the folders top-down by descriptor, tightening a folder before it lists it, so nobody can
    swap an entry meanwhile; symlinks inside are never followed nor changed (``root`` itself is: it is
    where the user pointed ``SHIRO_HOME``), and what another user owns is left alone and not entered.
    Never raises: a folder it cannot read is skipped. A walk of the whole home (~1 ms per 200 entries):
    run it off the ``%load_ext`` path, e.g. ``files.background(tighten_home)`` at the first turn."""
    folder = Path(root) if root is not None else home()
    key = os.path.abspath(folder)
    with _tightened_lock:
        if key in _tightened:
            return None
        _tightened.add(key)
    if sys.platform == "win32":  # no POSIX modes: the user's profile folder is private already
        return None
    try:
        fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # no home yet: everything will be made private
        return None
    counts = [0, 0]  # folders, files
    _tighten_folder(fd, os.geteuid(), counts)
    return _notice(key, *counts)


def _tighten_folder(fd: int, uid: int, counts: list[int]) -> None:
    """Tighten the folder open as ``fd`` (closed here), then what it holds."""
    try:
        st = os.fstat(fd)
        if st.st_uid != uid:
            return
        if st.st_mode & _OPEN:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_OPEN)
            counts[0] += 1
        with os.scandir(fd) as entries:
            names = [e.name for e in entries]
        for name in names:
            try:
                est = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:  # gone meanwhile
                continue
            if est.st_uid != uid or stat.S_ISLNK(est.st_mode):
                continue
            if stat.S_ISDIR(est.st_mode):
                try:
                    child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError:
                    continue
                _tighten_folder(child, uid, counts)
            elif stat.S_ISREG(est.st_mode) and est.st_mode & _OPEN:
                try:  # by name in a folder only we can change now: it is the file we just looked at
                    os.chmod(name, stat.S_IMODE(est.st_mode) & ~_OPEN, dir_fd=fd)
                    counts[1] += 1
                except OSError:
                    continue
    except OSError:
        return
    finally:
        os.close(fd)


def _notice(where: str, folders: int, files: int) -> str | None:
    if not folders and not files:
        return None
    parts = [f"{n} {word}{'' if n == 1 else 's'}" for n, word in ((files, "file"), (folders, "folder")) if n]
    return (
        f"tightened the permissions of {' and '.join(parts)} under {where} "
        "(they were open to other users of this machine)"
    )


__all__ = ["DIR_MODE", "FILE_MODE", "create_file", "make_dirs", "tighten_home"]
