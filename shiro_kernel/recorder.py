"""What the agent keeps of a turn when it ends: five observers of the turn's events, each one concern, in the order
:meth:`Agent.ask <shiro_kernel.agent.Agent.ask>` lists them — at :class:`~shiro_kernel.events.TurnEnd`, before the
numbers check and the view see it, so the footer tells the truth:

1. :class:`~shiro_kernel.rerun.record.ReplayRecord` — the turn recorded for replay (its messages and cell in the
   session, its calls in the saved bundle, said by a :class:`~shiro_kernel.events.Recorded` event) and counted as
   run in this kernel (a rerun of its cell here asks the model): the rerun wing's own, beside what reads it;
2. :class:`SideNotices` — what was done on the side, said: the prompt history appended meanwhile (off the turn's
   path), an older SHIRO_HOME made private, an MCP server that died during the turn, steps the user took back;
3. :class:`CellSnapshot` — the notebook's cells as the turn left them, for the next turn's "changed outside the
   agent";
4. :class:`EgressLedger` — each request the turn sent, kept in the session's ledger as it left;
5. :class:`SaveRecord` — the record written before the footer says it is (a failure is one warning, the
   conversation kept in the kernel).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from .current import SAVE_FAILED
from .errors import StoreError
from .events import Event, Notice, Sent, TurnEnd
from .session import Session
from .store import files, private


@dataclass
class SideNotices:
    """Says, when the turn ends, what each of ``side`` has to say (each gives its notices, or none)."""

    side: Sequence[Callable[[], Iterable[Notice]]] = ()

    def __call__(self, event: Event) -> list[Event] | None:
        if not isinstance(event, TurnEnd):
            return None
        said: list[Event] = [n for notices in self.side for n in notices()]
        return [*said, event] if said else None


@dataclass
class CellSnapshot:
    """Takes the notebook's cells as the turn left them (``snapshot``) when it ends."""

    snapshot: Callable[[], None]

    def __call__(self, event: Event) -> None:
        if isinstance(event, TurnEnd):
            self.snapshot()


@dataclass
class EgressLedger:
    """Keeps each request the turn sends (:class:`~shiro_kernel.events.Sent`) in the session's ledger, as it
    leaves (an interrupted turn's requests are kept too), under ``turn_id``."""

    session: Session
    turn_id: str

    def __call__(self, event: Event) -> None:
        if isinstance(event, Sent):
            self.session.egress.add(self.turn_id, event.request)


@dataclass
class SaveRecord:
    """Writes the record of ``session`` when the turn ends (``save``: now; a note when it went under a new id;
    raises StoreError), and says a note or a failure before the end."""

    session: Session
    save: Callable[[], str | None]

    def __call__(self, event: Event) -> list[Event] | None:
        if not isinstance(event, TurnEnd) or not self.session.messages:
            return None
        try:
            note = self.save()
        except StoreError as exc:
            note = SAVE_FAILED.format(why=exc)
        return [Notice(note, kind="warning"), event] if note else None


class TightenOnce:
    """An older, looser SHIRO_HOME made private once per kernel (:func:`~shiro_kernel.store.private.tighten_home`),
    off the turn's path; its notice said at the first turn end after it finished (once: never waited for with a
    timeout that could drop it)."""

    def __init__(self) -> None:
        self._job: Future[str | None] | None = None
        self._shown = False

    def start(self) -> None:
        if self._job is None:
            self._job = files.background(private.tighten_home)

    def notices(self) -> list[Notice]:
        job = self._job
        if job is None or self._shown or not job.done():
            return []
        self._shown = True
        try:
            notice = job.result()
        except StoreError:  # tightening never raises by design; a store failure is said by the writes
            notice = None
        return [Notice(notice, kind="warning")] if notice else []


def history_notice(job: Future[bool]) -> list[Notice]:
    """The prompt history's append, finished by now (a convenience: a failure is one warning)."""
    try:
        job.result(timeout=5.0)
    except StoreError as exc:  # the prompt history is a convenience: the turn went on
        return [Notice(f"the prompt history was not updated: {exc}", kind="warning")]
    except Exception:  # still running after 5 s (a lock held elsewhere): it finishes on its own
        pass
    return []


__all__ = ["CellSnapshot", "EgressLedger", "SaveRecord", "SideNotices", "TightenOnce", "history_notice"]
