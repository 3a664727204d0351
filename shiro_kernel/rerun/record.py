"""The record's turns: which messages each turn made, and in which cell — written when a turn ends
(:class:`ReplayRecord`, one of the turn's observers), read back by :mod:`.find` to replay a cell's turn.

**The record's** ``turns`` (a session record field, one entry per turn, oldest first)::

    "turns": [{"turnId": "0193…", "cellId": "3f2a…" | null, "prompt": "which region grew the most?",
               "ordinal": 0, "start": 12, "end": 19}]

``start`` is the index of the turn's user message in ``messages``, ``end`` the index after its last message.
A span that no longer holds its turn (``/compact`` and ``/clear`` replace the transcript) is ignored: the
message at ``start`` must be the user message with that prompt. :func:`new_span` and :func:`add_turn` make
and append an entry; :func:`turns_of` reads them back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..events import Event, Recorded, TurnEnd
from ..ids import uuid7
from ..line import Line
from ..transcript import Message
from .replay_plan import replay_fields

if TYPE_CHECKING:
    from ..session import Session
    from ..tools import Tool

#: turns a record keeps (the oldest are dropped): a turn older than that is asked of the model again
TURNS_KEPT = 500


@dataclass(frozen=True)
class TurnSpan:
    """One entry of a record's ``turns``."""

    turn_id: str
    cell_id: str | None
    prompt: str
    ordinal: int
    start: int
    end: int

    def to_json(self) -> dict[str, Any]:
        return {
            "turnId": self.turn_id,
            "cellId": self.cell_id,
            "prompt": self.prompt,
            "ordinal": self.ordinal,
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_json(cls, data: Any) -> TurnSpan:
        if not isinstance(data, dict):
            raise ValueError("a turn entry must be an object")
        tid, cid, prompt = data.get("turnId"), data.get("cellId"), data.get("prompt")
        ordinal, start, end = data.get("ordinal"), data.get("start"), data.get("end")
        if not isinstance(tid, str) or not isinstance(prompt, str) or not (cid is None or isinstance(cid, str)):
            raise ValueError("a turn entry needs a turnId, a prompt and a cellId (or null)")
        numbers = (ordinal, start, end)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
            raise ValueError("a turn entry's ordinal, start and end must be whole numbers")
        assert isinstance(ordinal, int) and isinstance(start, int) and isinstance(end, int)
        if end <= start:
            raise ValueError("a turn entry must end after it starts")
        return cls(tid, cid, prompt, ordinal, start, end)


def new_span(
    messages: list[Message], *, since: int, prompt: str, cell_id: str | None, ordinal: int, turn_id: str
) -> TurnSpan | None:
    """The entry for the turn that just ran: its user message is the first one with ``prompt`` at or after
    index ``since`` (``len(session.messages)`` before the turn: a turn may first answer a call left waiting),
    and it ends with the transcript. None when no such message is there (the turn failed before sending), or when
    nothing came after it (no model answered: no key, a server that failed) — a rerun of its cell then asks the model
    again, instead of replaying a turn that has nothing to replay."""
    for index in range(max(0, since), len(messages)):
        message = messages[index]
        if message.role == "user" and message.text == prompt:
            if index + 1 == len(messages):
                return None
            return TurnSpan(turn_id, cell_id, prompt, ordinal, index, len(messages))
    return None


def record_turn_end(
    session: Any,
    prompt: str,
    cell_id: str | None,
    ordinal: int,
    since: int,
    turn_id: str,
    tools: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """At a turn's end: which messages it made and in which cell go into ``session.turns``; returns the
    replay fields its saved bundle carries (None when the turn ended before its prompt was sent, or unanswered)."""
    span = new_span(session.messages, since=since, prompt=prompt, cell_id=cell_id, ordinal=ordinal, turn_id=turn_id)
    if span is None:
        return None
    session.turns = add_turn(session.turns, span)
    made = session.messages[span.start : span.end]
    return replay_fields(made, prompt=prompt, cell_id=cell_id, ordinal=ordinal, turn_id=turn_id, tools=tools)


def add_turn(turns: Iterable[Any] | None, span: TurnSpan) -> list[dict[str, Any]]:
    """``turns`` (as read from a record) with ``span`` appended; an entry of the same turn is replaced, broken
    entries are dropped, and only the newest :data:`TURNS_KEPT` are kept."""
    kept = [s.to_json() for s in _valid(turns) if s.turn_id != span.turn_id]
    kept.append(span.to_json())
    return kept[-TURNS_KEPT:]


def _valid(turns: Iterable[Any] | None) -> list[TurnSpan]:
    out = []
    for item in turns or []:
        try:
            out.append(TurnSpan.from_json(item))
        except ValueError:
            continue
    return out


def turns_of(record: Mapping[str, Any]) -> list[TurnSpan]:
    """The record's turn entries, oldest first (broken ones skipped)."""
    turns = record.get("turns")
    return _valid(turns) if isinstance(turns, list) else []


@dataclass
class ReplayRecord:
    """Records the turn of ``session`` (made from ``line``) for replay when it ends, and adds it to ``ran``."""

    session: Session
    line: Line
    tools: Mapping[str, Tool]
    #: the ids of the turns run or replayed in this kernel (the agent's): this one is added
    ran: set[str]
    turn_id: str = field(default_factory=uuid7)

    def __post_init__(self) -> None:
        self.since = len(self.session.messages)  # the turn's own messages start here

    def __call__(self, event: Event) -> list[Event] | None:
        if not isinstance(event, TurnEnd):
            return None
        self.ran.add(self.turn_id)
        line = self.line
        fields = record_turn_end(
            self.session, line.prompt, line.cell_id, line.ordinal, self.since, self.turn_id, self.tools
        )
        return [Recorded(fields), event] if fields is not None else None


__all__ = ["TURNS_KEPT", "ReplayRecord", "TurnSpan", "add_turn", "new_span", "record_turn_end", "turns_of"]
