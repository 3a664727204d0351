"""The one place for writing files: atomic writes, file locks, and reading JSON that may be corrupt.

* :func:`write_atomic` writes a temporary file in the same folder, fsyncs it and renames it over the
  target, so a reader (or a kernel killed mid-write) sees the old file or the new one, never half.
* :func:`locked` is an exclusive cross-process lock (``filelock``) on ``<file>.lock`` for stores shared
  by several kernels: read-modify-write under it and nobody loses an update.
* :func:`read_json` tells "missing" from "corrupt"; a corrupt file is set aside as
  ``<name>.corrupt-<time>`` by :func:`quarantine` before anything overwrites it.

What these make is private (folders 0700, files and lock files 0600, see :mod:`.private`), except a
file written with an explicit ``mode`` (a user's file, written by a tool).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..errors import CorruptFile, StoreError
from .private import FILE_MODE, make_dirs

T = TypeVar("T")
_worker: concurrent.futures.ThreadPoolExecutor | None = None
_worker_lock = threading.Lock()


def background(fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
    """Run ``fn(*args)`` on the stores' one background thread: work a turn need not wait for (the prompt
    history; the warm-up starts the thread) runs while the model answers. In order; finished at exit."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="shiro-store")
        return _worker.submit(fn, *args)


#: seconds to wait for another kernel holding a store's lock
LOCK_TIMEOUT = 30.0


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically. Raises :class:`StoreError` (what failed, where) when the
    disk refuses: full, read-only, no permission.

    Without ``mode`` (the stores) the file is 0600 (``mkstemp``'s mode: a umask can only take bits away)
    and any folder made for it 0700. With ``mode`` (a user's file) the file gets ``mode`` and missing folders
    the umask's permissions."""
    path = Path(path)
    # a lone surrogate (a model's "\\udce9", a name from os.listdir) cannot be UTF-8: written as its escape,
    # which in a JSON record is the same string again when read
    raw = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    try:
        if mode is None:
            make_dirs(path.parent)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StoreError(f"could not write {path} ({_why(exc)})") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise StoreError(f"could not write {path} ({_why(exc)})") from exc
        raise


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    """The parsed file; ``None`` when it does not exist; :class:`CorruptFile` when it cannot be parsed."""
    return read_json_stat(path)[0]


def read_json_stat(path: Path) -> tuple[Any, os.stat_result | None]:
    """:func:`read_json` and the ``stat`` of the very file that was read (None when it does not exist):
    a writer renaming a new version in meanwhile cannot make the two disagree."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            raw = fh.read()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise CorruptFile(Path(path), _why(exc)) from None
    try:
        return json.loads(raw.decode("utf-8")), st
    except UnicodeDecodeError as exc:
        raise CorruptFile(Path(path), str(exc)) from None
    except json.JSONDecodeError as exc:
        raise CorruptFile(Path(path), f"{exc.msg} at line {exc.lineno}") from None


def quarantine(path: Path) -> Path:
    """Move a corrupt file aside (never delete it) and return where it went."""
    target = Path(path).with_name(f"{Path(path).name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while target.exists():
        target = target.with_name(f"{target.name}-{n}")
        n += 1
    os.replace(path, target)
    return target


_locks: dict[tuple[str, float], Any] = {}
_locks_guard = threading.Lock()


def _lock_for(name: str, timeout: float) -> Any:
    """One ``FileLock`` per lock file and timeout, kept (building one costs more than taking it; its state
    is per thread, so threads share it safely)."""
    from filelock import FileLock

    with _locks_guard:
        lock = _locks.get((name, timeout))
        if lock is None:
            if len(_locks) > 256:  # a process that touched many projects: start over
                _locks.clear()
            lock = _locks[(name, timeout)] = FileLock(name, timeout=timeout, mode=FILE_MODE)
        return lock


@contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive lock on ``<path>.lock`` (0600; works across processes and threads). Raises
    :class:`StoreError` when the lock file cannot be made (a read-only home) or another kernel holds
    the lock for longer than ``timeout`` seconds."""
    from filelock import Timeout

    path = Path(path)
    lock = _lock_for(str(path) + ".lock", timeout)
    try:
        make_dirs(path.parent)
        lock.acquire()
    except Timeout:
        raise StoreError(f"{path} is locked by another kernel for more than {timeout:g} s") from None
    except OSError as exc:
        raise StoreError(f"could not lock {path} ({_why(exc)})") from exc
    try:
        yield
    finally:
        lock.release()
