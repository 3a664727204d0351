"""Session ids as shown and typed: the shortest prefix unique among a home's sessions (``%shiro -r 0193ab2c``),
never under 8 characters, whole groups only, and long enough to stay unique while sessions of the same minute
may still start. Worked out with the sessions index (:class:`~shiro_kernel.store.index.SessionIndex`)."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import StoreError
from .index import SessionIndex
from .paths import home

#: the fewest characters of a session id ever shown, as git abbreviates hashes: the first group of a
#: UUIDv7, the top of its millisecond timestamp (it changes every 65.5 s)
MIN_SHORT_ID = 8
#: the group a session id started in the last 65.5 s is shown to (its millisecond): a session started later
#: in the same minute would share its first 8 digits, and a footer's id must still resolve after that
OPEN_SHORT_ID = 13
#: what is shown when the index cannot be read: the timestamp and the first random digits
FALLBACK_SHORT_ID = 18

#: by sessions folder: the length of the shortest prefix of an id unique there (installed by the
#: :class:`~shiro_kernel.store.sessions.SessionStore` of that folder, which asks its index)
_shorteners: dict[str, Callable[[str], int]] = {}
#: by sessions folder: its mtime when the ids below were worked out, and the ids as shown
_shown: dict[str, tuple[int, dict[str, str]]] = {}
_shown_lock = threading.Lock()


def install_shortener(folder: Path, unique_length: Callable[[str], int]) -> None:
    """How :func:`short_id` learns the ids of the sessions in ``folder``."""
    key = os.path.abspath(folder)
    with _shown_lock:
        _shorteners[key] = unique_length
        _shown.pop(key, None)


def short_id(session_id: str) -> str:
    """``0193ab2c``: the id as shown and typed (``%shiro -r 0193ab2c``), among this home's sessions; see
    :func:`shown_id`."""
    return shown_id(home() / "sessions", session_id)


def still_open(session_id: str, now_ms: int | None = None) -> bool:
    """Whether sessions started from now on may still share ``session_id``'s first 8 digits (its 65.5 s
    window of UUIDv7 timestamps has not passed; an id that is not a UUIDv7 counts as closed)."""
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    head = session_id[:MIN_SHORT_ID].lower()
    return len(head) == MIN_SHORT_ID and all(c in "0123456789abcdef" for c in head) and head >= f"{ms >> 16:08x}"


def shown_length(session_id: str, unique: int, now_ms: int | None = None) -> int:
    """How much of ``session_id`` to show, given ``unique`` (the length of its shortest prefix no other
    session starts with): at least :data:`MIN_SHORT_ID`, :data:`OPEN_SHORT_ID` while :func:`still_open`,
    and always whole groups (``0193ab2c`` or ``0193ab2c-1f2a``, never ``0193ab2c-1f``)."""
    floor = OPEN_SHORT_ID if still_open(session_id, now_ms) else MIN_SHORT_ID
    length = max(unique, floor)
    hyphen = session_id.find("-", length) if length < len(session_id) else -1
    if length < len(session_id) and session_id[length] != "-":  # mid-group: to the group's end
        length = hyphen if hyphen != -1 else len(session_id)
    return min(length, len(session_id))


def shown_id(folder: Path, session_id: str) -> str:
    """``session_id`` as shown among the sessions in ``folder`` (:func:`shown_length`): it resolves uniquely
    there, now and after more sessions start. Worked out once per id until the folder changes (one ``stat``
    per call, and one indexed query when not known: never a scan of the index)."""
    key = os.path.abspath(folder)
    try:
        st = os.stat(key)
    except OSError:
        st = None
    if st is None or not stat.S_ISDIR(st.st_mode):  # no sessions yet (or a broken home): none to tell it from
        return session_id[: shown_length(session_id, MIN_SHORT_ID)]
    with _shown_lock:
        known = _shown.get(key)
        if known is not None and known[0] == st.st_mtime_ns and session_id in known[1]:
            return known[1][session_id]
        shorten = _shorteners.get(key)
    if shorten is None:  # no store of this folder made yet in this process
        index = SessionIndex(Path(key))
        shorten = _shorteners.setdefault(key, lambda sid: index.unique_length(sid, MIN_SHORT_ID))
    try:
        unique = shorten(session_id)
    except (StoreError, OSError, sqlite3.Error):  # the index unreadable: the timestamp and random digits
        return session_id[:FALLBACK_SHORT_ID]
    shown = session_id[: shown_length(session_id, unique)]
    with _shown_lock:
        if len(_shown) > 64:  # a process that used many homes (the tests): start over
            _shown.clear()
        known = _shown.get(key)
        if known is None or known[0] != st.st_mtime_ns:
            known = _shown[key] = (st.st_mtime_ns, {})
        known[1][session_id] = shown
    return shown
