"""Debounced autosave of the current session (the seed's 400 ms), off the caller's thread.

Every ``session.changed()`` restarts a ``delay`` countdown; when it runs out the record is written on the
autosave thread, never on the caller's. One daemon thread keeps the countdowns of every autosaver in the
process (:class:`_Clock`): a change starts no thread, it only sets a deadline. A long burst of changes (a long tool loop) is written at least every
``max_wait`` seconds, so a kernel that dies mid-turn loses at most that much. A failed write on the timer
thread is handed to ``on_error`` (it never raises there); :meth:`Autosaver.flush` raises it instead.

What a write has to tell the user — the session saved under a new id because its record changed elsewhere
or is read-only, the index not writable for a while — :meth:`Autosaver.take_notes` gives once.

The autosaver owns the session's lease (:mod:`~shiro_kernel.store.lease`): one handed over with
:meth:`Autosaver.adopt` (a resumed session), else taken before the first write; :meth:`Autosaver.close`
gives it back.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable

from ..errors import StoreError
from ..session import Session
from ..transcript import Message
from .lease import Lease
from .sessions import SessionStore

AUTOSAVE_DELAY = 0.4
#: a long tool loop keeps restarting the debounce; past this many seconds of changes it writes anyway
AUTOSAVE_MAX_WAIT = 5.0


class _Clock:
    """The countdowns of every autosaver, on one daemon thread started on first use: ``schedule`` sets a
    saver's deadline (waking the thread), and the thread calls the saver's ``_fire`` when it is due."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[Autosaver, float] = {}
        self._thread: threading.Thread | None = None

    def schedule(self, saver: Autosaver, deadline: float) -> None:
        with self._cond:
            self._due[saver] = deadline
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="shiro-autosave", daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, saver: Autosaver) -> None:
        with self._cond:
            self._due.pop(saver, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    due = [saver for saver, at in self._due.items() if at <= now]
                    if due:
                        for saver in due:
                            del self._due[saver]
                        break
                    self._cond.wait(min(self._due.values()) - now if self._due else None)
            for saver in due:
                saver._fire()


_clock = _Clock()


class Autosaver:
    """Saves ``session`` into ``store`` after changes. ``writes`` counts successful writes and
    ``saved_messages`` is the message count of the last one (what a footer may truthfully call saved).

    ``close()`` cancels the countdown, writes if the session has messages and stops listening (called
    at shutdown; registered with ``atexit`` unless ``at_exit`` is False)."""

    def __init__(
        self,
        store: SessionStore,
        session: Session,
        model_getter: Callable[[], str],
        delay: float = AUTOSAVE_DELAY,
        *,
        at_exit: bool = True,
        on_error: Callable[[StoreError], None] | None = None,
    ) -> None:
        self.store = store
        self.session = session
        self.model_getter = model_getter
        self.delay = delay
        self.max_wait = AUTOSAVE_MAX_WAIT
        self.on_error = on_error or (lambda exc: None)
        self.writes = 0
        self.saved_messages = 0
        #: the last write's failure, until a write succeeds (what a footer must say instead of "Saved")
        self.error: StoreError | None = None
        #: this kernel's hold on the session (see :mod:`~shiro_kernel.store.lease`); None until taken
        self.lease: Lease | None = None
        #: ids the session was saved away from because another writer changed their record (old ids)
        self.moved_from: list[str] = []
        self._first_change = 0.0
        self._scheduled = False  # a countdown is running (on the clock)
        self._deadline = 0.0
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._closed = False
        #: changed since the last write (a saver that has written and seen no change since writes nothing
        #: more on close: ``--new`` / ``/clear`` right after a turn cost no second write)
        self._dirty = False
        #: what every write adds after the session's messages while they still end with the message given
        #: (the results of a batch of calls still running: :mod:`~shiro_kernel.store.writeahead`)
        self._tail: tuple[Message, list[Message]] | None = None
        session.listeners.append(self._on_change)
        self._at_exit = at_exit
        if at_exit:
            atexit.register(self.close)

    @property
    def pending(self) -> bool:
        """A write is scheduled."""
        return self._scheduled

    def _on_change(self, _session: Session) -> None:
        if self._closed:
            return
        self._dirty = True
        with self._lock:
            now = time.monotonic()
            if not self._scheduled:
                self._scheduled = True
                self._first_change = now
                self._deadline = now + self.delay
                _clock.schedule(self, self._deadline)
            else:  # the clock wakes at the earlier deadline and waits out the rest (see _fire)
                self._deadline = min(now + self.delay, self._first_change + self.max_wait)

    def _fire(self) -> None:
        """On the clock's thread, at a deadline: write, unless the countdown was cancelled or restarted."""
        with self._lock:
            if not self._scheduled:
                return  # cancelled
            remaining = self._deadline - time.monotonic()
            if remaining > 0.001:  # changed again since: wait out the rest of the countdown
                _clock.schedule(self, self._deadline)
                return
            self._scheduled = False
        try:
            self._write()
        except StoreError as exc:  # never raise on the clock's thread
            self.on_error(exc)

    def _cancel(self) -> None:
        with self._lock:
            if self._scheduled:
                self._scheduled = False
                _clock.cancel(self)

    def adopt(self, lease: Lease | None) -> None:
        """Own ``lease`` (taken by :meth:`SessionStore.take` for this session); released by :meth:`close`."""
        with self._save_lock:
            if self.lease is not None and self.lease is not lease:
                self.lease.release()
            self.lease = lease

    def _hold(self) -> None:
        sid = self.session.id
        if self.lease is not None and self.lease.held and self.lease.session_id == sid:
            return
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        got = self.store.hold(sid)
        self.lease = got if isinstance(got, Lease) else None

    def _write(self) -> bool:
        with self._save_lock:
            if self.session.messages:
                self._hold()
            before = self.session.id
            count = len(self.session.messages)
            self._dirty = False  # a change from now on is after this write's snapshot
            tail = self._tail
            extra = (
                tail[1] if tail is not None and self.session.messages and self.session.messages[-1] is tail[0] else []
            )
            try:
                written = self.store.save(self.session, model=self.model_getter(), tail=extra)
            except BaseException as exc:
                self._dirty = True
                if isinstance(exc, StoreError):
                    self.error = exc
                raise
            self.error = None
            if self.session.id != before:  # saved as a copy: the old record changed elsewhere
                self.moved_from.append(before)
                self._hold()
            if written:
                self.writes += 1
                self.saved_messages = count
            return written

    def flush(self) -> bool:
        """Write now (cancelling the countdown); False when there was nothing to write. Raises
        :class:`~shiro_kernel.errors.StoreError` when the write failed."""
        self._cancel()
        return self._write()

    def write_ahead(self, after: Message, tail: list[Message]) -> None:
        """Write now, with ``tail`` after the session's messages, and keep adding it to every write while the
        session still ends with ``after`` (a turn about to run, or having run, a call that changes something:
        the record holds the call and what is known of its result before and after it runs). Raises
        :class:`~shiro_kernel.errors.StoreError` when the write failed."""
        self._tail = (after, tail)
        self.flush()

    def take_notes(self) -> list[str]:
        """What to tell the user after a write, each said once: a session saved under a new id (why, and
        under which) and the index not updated for a while (:meth:`SessionIndex.notice`)."""
        with self._save_lock:
            moved, self.moved_from[:] = list(self.moved_from), []
        notes = []
        for old in moved:
            new = self.store.moved.get(old, self.session.id)
            if self.store.moved_because.get(old) == "read-only":
                notes.append(
                    f"session {self.store.short_id(old)}'s record is read-only (its file's write permission is off), so it is "
                    f"left as it is; this kernel's conversation is saved as {self.store.short_id(new)} instead"
                )
            else:
                notes.append(
                    f"session {self.store.short_id(old)} was changed by another kernel since this one read it; this "
                    f"kernel's conversation is saved as {self.store.short_id(new)} instead (both are kept)"
                )
        index = self.store.index.notice()
        return [*notes, *([index] if index else [])]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cancel()
        try:
            self.session.listeners.remove(self._on_change)
        except ValueError:
            pass
        if self._at_exit:
            atexit.unregister(self.close)  # never raises (a function not registered is ignored)
        if self.session.messages and (self._dirty or self.writes == 0):
            try:
                self._write()
            except StoreError as exc:
                self.on_error(exc)
        with self._save_lock:
            if self.lease is not None:
                self.lease.release()
                self.lease = None


__all__ = ["AUTOSAVE_DELAY", "AUTOSAVE_MAX_WAIT", "Autosaver"]
