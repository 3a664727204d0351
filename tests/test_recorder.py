"""What the agent keeps of a turn when it ends (:mod:`shiro_kernel.recorder`): four observers, each one concern,
in the order of the list — the replay record, the side notices, the cells' snapshot, the record's save — all
before the turn's end reaches the observers after them."""

from __future__ import annotations

from shiro_kernel.errors import StoreError
from shiro_kernel.events import Event, Notice, Pipe, Recorded, TextDelta, TurnEnd, Usage
from shiro_kernel.line import Line
from shiro_kernel.recorder import CellSnapshot, SaveRecord, SideNotices
from shiro_kernel.rerun.record import ReplayRecord
from shiro_kernel.session import Session
from shiro_kernel.transcript import Message, TextPart


def test_at_the_end_the_record_the_side_notices_the_snapshot_and_the_save_come_before_the_end():
    session = Session()
    session.append(Message.user("an earlier turn"))
    ran: set[str] = set()
    done: list[str] = []
    record = ReplayRecord(session, Line(prompt="how many rows?"), {}, ran=ran, turn_id="turn-1")
    session.append(Message.user("how many rows?"))  # the turn's own messages, after the record began
    session.append(Message("assistant", [TextPart("3 rows.")]))

    def save() -> str:
        done.append("saved")
        return "saved under a new id"

    seen: list[Event] = []
    pipe = Pipe(
        [
            record,
            SideNotices([lambda: [Notice("the prompt history was not updated")], lambda: []]),
            CellSnapshot(lambda: done.append("snapshot")),
            SaveRecord(session, save),
            seen.append,
        ]
    )
    pipe(TextDelta("3 rows."))
    assert seen == [TextDelta("3 rows.")] and done == [] and ran == set()  # nothing before the end
    end = TurnEnd("answered", Usage())
    pipe(end)
    assert [type(e) for e in seen[1:]] == [Recorded, Notice, Notice, TurnEnd] and seen[-1] is end
    assert seen[1].fields["prompt"] == "how many rows?" and seen[1].fields["turnId"] == "turn-1"
    assert [e.text for e in seen if isinstance(e, Notice)] == [
        "the prompt history was not updated",
        "saved under a new id",
    ]
    assert done == ["snapshot", "saved"] and ran == {"turn-1"}
    assert session.turns and session.turns[-1]["turnId"] == "turn-1"


def test_a_save_that_fails_is_one_warning_and_the_end_still_comes():
    session = Session()
    session.append(Message.user("hi"))

    def save() -> str:
        raise StoreError("No space left on device")

    seen: list[Event] = []
    Pipe([SaveRecord(session, save), seen.append])(TurnEnd("answered", Usage()))
    assert isinstance(seen[0], Notice) and "No space left on device" in seen[0].text
    assert isinstance(seen[1], TurnEnd)
    assert Pipe([SaveRecord(Session(), save), seen.append])(TurnEnd("answered", Usage())) is None  # nothing to save
