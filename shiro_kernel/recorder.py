"""What the agent keeps of a turn when it ends: one observer of the turn's events (:class:`Recorder`).

At :class:`~shiro_kernel.events.TurnEnd` — before the numbers check and the view see it, so the footer tells the
truth — the turn is

* recorded for replay (:func:`~shiro_kernel.rerun.find.record_turn_end`: its messages and cell in the session,
  its calls in the saved bundle, said by a :class:`~shiro_kernel.events.Recorded` event) and counted as run in
  this kernel (a rerun of its cell here asks the model);
* saved: the record written before the footer says it is (a failure is one warning, the conversation kept in
  the kernel);

and what was done on the side is said: the prompt history appended meanwhile (off the turn's path), an older
SHIRO_HOME made private, an MCP server that died during the turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from .current import SAVE_FAILED
from .errors import StoreError
from .events import Event, Notice, Recorded, TurnEnd
from .line import Line
from .rerun.find import record_turn_end
from .session import Session
from .store.ids import uuid7
from .tools import Tool


@dataclass
class Recorder:
    """The observer that keeps a turn of ``session`` (made from ``line``) when it ends (see the module)."""

    session: Session
    line: Line
    tools: Mapping[str, Tool]
    #: the ids of the turns run or replayed in this kernel (the agent's): this one is added
    ran: set[str]
    #: writes the record now; a note when it went under a new id; raises StoreError
    save: Callable[[], str | None]
    #: the notebook's cells as the turn left them, for the next turn's "changed outside the agent"
    snapshot: Callable[[], None]
    #: what else there is to say when the turn ends (each gives its notices, or none)
    side: Sequence[Callable[[], Iterable[Notice]]] = ()
    turn_id: str = field(default_factory=uuid7)

    def __post_init__(self) -> None:
        self.since = len(self.session.messages)  # the turn's own messages start here

    def __call__(self, event: Event) -> list[Event] | None:
        if not isinstance(event, TurnEnd):
            return None
        out: list[Event] = []
        self.ran.add(self.turn_id)
        line = self.line
        fields = record_turn_end(
            self.session, line.prompt, line.cell_id, line.ordinal, self.since, self.turn_id, self.tools
        )
        if fields is not None:
            out.append(Recorded(fields))
        for said in self.side:
            out.extend(said())
        self.snapshot()
        if self.session.messages:
            try:
                note = self.save()
            except StoreError as exc:
                note = SAVE_FAILED.format(why=exc)
            if note:
                out.append(Notice(note, kind="warning"))
        return [*out, event]


def history_notice(job: Future[bool]) -> list[Notice]:
    """The prompt history's append, finished by now (a convenience: a failure is one warning)."""
    try:
        job.result(timeout=5.0)
    except StoreError as exc:  # the prompt history is a convenience: the turn went on
        return [Notice(f"the prompt history was not updated: {exc}", kind="warning")]
    except Exception:  # still running after 5 s (a lock held elsewhere): it finishes on its own
        pass
    return []


__all__ = ["Recorder", "history_notice"]
