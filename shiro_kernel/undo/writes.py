"""The files a step's Python writes, removes, renames or truncates, seen as it does so, so that undo can put them
back: a ``python`` or ``notebook_run`` step has no list of the files it will touch (``df.to_csv(...)``,
``os.remove(...)``, ``shutil.rmtree(...)`` are decided by the code), so the kernel watches while the step runs.

Python's audit hooks (PEP 578) announce each ``open`` and each ``os.remove`` / ``os.rename`` / ``os.truncate`` /
``shutil.rmtree`` *before* it happens; while a step is watched (:func:`watch`, on the thread that runs it), the
first time it is about to change a file inside the project that file's bytes (or its absence) are handed to the
step's keeper (:meth:`~.journal.Journal.keep_file`), within ``Shiro.undo_max_mb``. What Python does not announce is
not seen: a file written by C code of its own (some HDF5 and Parquet writers), by a subprocess (``!rm``), or by
another thread the code started. Files outside the project (a library's cache, the temp folder) are left alone.

An audit hook cannot be taken out again, so one is added, on the first watched step, for the kernel's life; outside
a watched step it returns at its first test.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: hands over a file that is about to change: its real path (inside the project)
Keeper = Callable[[Path], None]

#: the open flags that change a file
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


class _Watch:
    def __init__(self, root: Path, keep: Keeper) -> None:
        self.root = root
        self.keep = keep
        self.busy = False  # inside the keeper: its own reads are not the step's


_watches: dict[int, _Watch] = {}  # thread ident → the step watched on it
_installed = False
_install_lock = threading.Lock()


def watch(root: Path, keep: Keeper) -> Callable[[], None]:
    """From now until the function it gives back is called, each file under ``root`` that the code running on this
    thread is about to change is first handed to ``keep`` (see the module)."""
    _install()
    ident = threading.get_ident()
    _watches[ident] = _Watch(Path(os.path.realpath(root)), keep)

    def stop() -> None:
        _watches.pop(ident, None)

    return stop


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _watches:
        return
    watch = _watches.get(threading.get_ident())
    if watch is None or watch.busy:
        return
    paths = _changed(event, args)
    if not paths:
        return
    watch.busy = True
    try:
        for raw in paths:
            for path in _files(raw, event == "shutil.rmtree"):
                if path == watch.root or watch.root in path.parents:
                    watch.keep(path)
    except Exception:  # the step's own call goes on whatever the keeper met
        pass
    finally:
        watch.busy = False


def _changed(event: str, args: tuple[Any, ...]) -> list[Any]:
    """The paths an audited event is about to change (none for one that only reads, or works on a descriptor)."""
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(mode, str):
            writes = any(c in mode for c in "wax+")
        else:
            writes = isinstance(flags, int) and bool(flags & _WRITING)
        return [path] if writes else []
    if event == "os.truncate":
        return [args[0]]
    if event == "os.remove" or event == "shutil.rmtree":
        return [args[0]] if _no_dir_fd(args, 1) else []
    if event == "os.rename":  # os.replace too
        return [args[0], args[1]] if _no_dir_fd(args, 2) and _no_dir_fd(args, 3) else []
    return []


def _no_dir_fd(args: tuple[Any, ...], index: int) -> bool:
    """Whether the event's path is not relative to a folder descriptor (``-1``, or None, when it is not)."""
    return len(args) <= index or args[index] is None or args[index] == -1


def _files(raw: Any, tree: bool) -> list[Path]:
    """The real path(s) ``raw`` names: the file itself, or every file under a folder about to be removed."""
    if isinstance(raw, int) or raw is None:
        return []
    try:
        path = Path(os.path.realpath(os.fsdecode(os.fspath(raw))))
    except (TypeError, ValueError):
        return []
    if not tree:
        return [] if path.is_dir() else [path]
    if not path.is_dir():
        return [path]
    found: list[Path] = []
    for folder, _dirs, names in os.walk(path):
        found.extend(Path(folder, name) for name in names)
    return found


__all__ = ["Keeper", "watch"]
