"""The kernel's current session: which one it is (a fresh one, the newest of this notebook, one resumed by
id), its record and the autosaver that keeps it, and what resuming it in a fresh kernel tells (the history
repaired, the variables its earlier turns made that are gone).

:class:`~shiro_kernel.agent.Agent` holds one :class:`Current` (callers use ``agent.current`` directly) and hands
it what it needs to know about the kernel (its notebook, its namespace, the settings it reads), never itself. It
also keeps what the wire copy knows of the session between turns (:attr:`Current.wire`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .context import cell_changes, restart, rules
from .context.prompt import step_state
from .context.wire_copy import WireState
from .errors import CorruptFile, RequestError, StoreError
from .session import Session
from .store.autosave import Autosaver
from .store.lease import Lease
from .store.sessions import SessionStore
from .store.short_ids import short_id

if TYPE_CHECKING:
    from .config import Shiro

#: what a turn or ``/save`` says when the record could not be written
SAVE_FAILED = (
    "could not save the session: {why}. The conversation is kept in this kernel; free some space or "
    "point SHIRO_HOME at a writable folder, then run %shiro /save"
)


@dataclass(frozen=True)
class Started:
    """What choosing the session did, for the words the user reads (:func:`shiro_kernel.ui.session_text.started`):
    the records set aside (``notes``), the session resumed, what resuming it repaired and which variables are gone
    (``after``), and the copy made when another kernel has it open (``forked``)."""

    notes: tuple[str, ...] = ()
    resumed: Session | None = None
    after: str = ""
    forked: str = ""
    #: the resumed record's messages as it was read (before the repairs ``after`` names)
    messages: int = 0


class Current:
    def __init__(
        self,
        store: SessionStore,
        *,
        notebook: Callable[[], str | None],
        namespace: Callable[[], dict[str, Any] | None],
        settings: Shiro,
    ) -> None:
        self.store = store
        self._notebook = notebook
        self._namespace = namespace
        self._settings = settings  # ``store`` and ``model``, read when used (``%config`` may change them)
        self.session = Session(notebook_path=notebook())
        #: what the wire copy keeps of the session between its turns (never saved; a new one with each session)
        self.wire = WireState()
        self.autosaver = self._autosaver(self.session)
        self.started = False  # has this kernel chosen its session yet?
        self.turning = False  # a turn is running (other agents' calls are recorded in it when it ends)
        #: variables the resumed session's earlier turns created that this kernel lacks (name -> code);
        #: told to the model on the first turn after the resume
        self.lost: dict[str, str] = {}
        self.tell_lost = False

    def _autosaver(self, session: Session) -> Autosaver:
        return Autosaver(self.store, session, lambda: self.session.model or str(self._settings.model))

    def switch_to(self, session: Session, lease: Lease | None = None) -> None:
        """Make ``session`` current: the old one is saved (if it has messages) and stops autosaving (its
        lease is given back); ``lease`` is the new one's, from :meth:`SessionStore.take`."""
        self.autosaver.close()
        self.session = session
        self.wire = WireState()
        if session.notebook_path is None:
            session.notebook_path = self._notebook()
        self.autosaver = self._autosaver(session)
        self.autosaver.adopt(lease)
        self.started = True
        self.lost, self.tell_lost = {}, False

    def start(self, *, new: bool = False, cont: bool = False, resume: str | None = None) -> Started:
        """Choose the session before a turn; what it did (:class:`Started`).

        The first ``%shiro`` of a kernel continues the newest session recorded for this notebook;
        ``--new`` starts a fresh one; ``-c`` continues the newest for this notebook; ``-r PREFIX``
        resumes by id or unique prefix. The model and agent variant are never restored. Raises
        :class:`~shiro_kernel.errors.RequestError` for an unknown or ambiguous id.
        """
        if resume:
            return self.resume(resume)
        if new:
            self.switch_to(Session(notebook_path=self._notebook()))
            return Started()
        if not (cont or not self.started):
            return Started()
        notes: list[str] = []
        try:  # this notebook's records that cannot be read: set aside and said, never skipped silently
            unreadable = self.store.unreadable_for_notebook(self._notebook(), cwd=str(Path.cwd()))
        except StoreError:
            unreadable = []
        for problem in unreadable:
            notes.append(self.set_aside(problem.path.name.removesuffix(".json"), problem))
        for _ in range(3):  # a corrupt newest record is set aside, then the next newest is tried
            info = self.store.latest_for_notebook(self._notebook(), cwd=str(Path.cwd()))
            if info is None or info.id == self.session.id:
                self.started = True
                if cont and info is None:
                    raise RequestError("no saved session for this notebook")
                return Started(tuple(dict.fromkeys(notes)))
            try:
                taken = self.store.take(info.id)  # a copy when another live kernel has it open
            except CorruptFile as exc:
                notes.append(self.set_aside(info.id, exc))
                continue
            self.switch_to(taken.session, taken.lease)
            forked = taken.note() if taken.forked_from else ""
            read = len(taken.session.messages)
            return Started(tuple(dict.fromkeys(notes)), taken.session, self.restart_notice(), forked, read)
        self.started = True
        return Started(tuple(dict.fromkeys(notes)))

    def set_aside(self, session_id: str, exc: CorruptFile) -> str:
        moved = self.store.set_aside(session_id)
        where = f"; it was moved to {moved}" if moved else ""
        return f"session {short_id(session_id)} could not be read ({exc.reason}){where}"

    def resume(self, prefix: str) -> Started:
        """``-r ID`` and ``/resume ID``: the session with that id or unique prefix becomes current."""
        sid = self.store.resolve(prefix)
        if sid == self.session.id:  # already current: the record may be older than what is in memory
            read = len(self.session.messages)
            return Started(resumed=self.session, after=self.restart_notice(), messages=read)
        try:
            taken = self.store.take(sid)  # a copy when another live kernel has it open
        except CorruptFile as exc:
            raise RequestError(self.set_aside(sid, exc)) from None
        self.switch_to(taken.session, taken.lease)
        read, forked = len(taken.session.messages), taken.note() if taken.forked_from else ""
        return Started(resumed=taken.session, after=self.restart_notice(), forked=forked, messages=read)

    def restart_notice(self) -> str:
        """What resuming the session repaired in its history and which of its variables are gone: the lines after
        the resumed one ('' for none)."""
        # the request validator also runs on resume: a record written by an older version, edited by
        # hand or cut short by a crash is repaired once, here, and the user is told what changed
        fixed, repairs = rules.check_and_repair(self.session.messages, store=bool(self._settings.store))
        shown = rules.notable(repairs)
        lines = []
        if shown:
            self.session.messages[:] = fixed
            self.session.changed()
            lines.append("repaired the resumed history: " + "; ".join(shown))
        self.lost = restart.missing(self.session.messages, self._namespace())
        self.tell_lost = bool(self.lost)
        notice = restart.notice(list(self.lost))
        return "\n".join([*lines, *([notice] if notice else [])])

    def lost_now(self) -> list[str]:
        """The lost variables that are still missing from the namespace."""
        ns = self._namespace()
        return [n for n in self.lost if ns is not None and n not in ns]

    def step_state(self, notebook: Path | None, *, values: bool, notes: tuple[str, ...]) -> Callable[[], str]:
        """What changes during the session, for this turn's steps (:func:`~.context.prompt.step_state`): the task
        list; the variables a kernel restart lost (the first turn after a resume); the cells edited or run outside
        the agent since its last turn (``values``: their outputs' values may be told); then ``notes``, fixed for
        the turn (the last answer's numbers no output had, the steps the user took back)."""
        tell_lost, self.tell_lost = self.tell_lost, False
        before = self.session.cells
        changed = (
            "" if before is None else cell_changes.block(before, cell_changes.fingerprint(notebook), values=values)
        )
        return step_state(self.session.tasks, self.lost_now if tell_lost else None, changed, *notes)

    def save_now(self) -> str | None:
        """Write the record now; the note to show when it was saved under a new id (another kernel changed
        it, or it is read-only) or the index has not been writable for a while, else None. Raises
        :class:`StoreError` when the write failed (the footer then says so too)."""
        self.autosaver.flush()
        return "\n".join(self.autosaver.take_notes()) or None

    def snapshot_cells(self, notebook: Path | None) -> None:
        """Keep the notebook's cell fingerprint with the session (the next turn compares against it)."""
        rows = cell_changes.fingerprint(notebook)
        if rows is not None and rows != self.session.cells:
            self.session.cells = rows
            if self.session.messages:
                self.session.changed()


__all__ = ["Current"]
