"""Which text of a turn is its answer (issue 34 #3): one rule, :mod:`shiro_kernel.numbers.answer`, for the
numbers check (live and from a turn's messages) and the views' log, so the check's offsets are offsets in
the text the views mark."""

from __future__ import annotations

import json
import typing

import pytest

from shiro_kernel import events
from shiro_kernel.egress import Request
from shiro_kernel.events import (
    BudgetReached,
    BudgetUnchecked,
    Done,
    Error,
    Event,
    Notice,
    NumbersChecked,
    ReasoningDelta,
    Recorded,
    Sent,
    StepStart,
    TextDelta,
    ToolCallEvent,
    ToolEnd,
    ToolProgress,
    ToolStart,
    TurnEnd,
    Usage,
)
from shiro_kernel.numbers.answer import answer_of, ends_block
from shiro_kernel.numbers.turn_check import TurnNumbers, for_turn
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.ui.render import TurnLog

PROMPT = "how much revenue?"
CALL = ToolCallPart("call_1", "python", json.dumps({"code": "print(revenue.sum())"}))
RESULT = ToolResultPart("call_1", "python", "revenue 5678.2")
#: one event of every kind a turn reports (checked against shiro_kernel.events.Event below)
ONE_OF_EACH: list[Event] = [
    TextDelta("more text"),
    ReasoningDelta("thinking"),
    ToolCallEvent(CALL),
    Usage(10, 2),
    Done(Message("assistant", [TextPart("done")])),
    Error("the request failed"),
    Sent(Request("api.openai.com", "responses", 812, 203)),
    StepStart(2),
    ToolStart(CALL),
    ToolProgress("call_1", "50 %"),
    ToolEnd(CALL, RESULT, 0.1),
    Notice("context compacted", kind="compacted"),
    BudgetReached(1.0, 1.0),
    BudgetUnchecked(0.5, "my-local-model"),
    Recorded({"prompt": PROMPT}),
    NumbersChecked([]),
    TurnEnd("answered", Usage()),
]


def test_every_kind_of_event_is_tried():
    assert {type(e) for e in ONE_OF_EACH} == set(typing.get_args(events.Event))


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_the_check_starts_a_new_answer_exactly_where_the_log_adds_an_entry_that_is_not_text(event):
    log, numbers = TurnLog(), TurnNumbers()
    for e in (TextDelta("before 1,234"), event, TextDelta("after 5,678")):
        log.feed(e)
        numbers.feed(e)
    entry_between = any(not isinstance(entry, str) for entry in log.entries)
    assert ends_block(event) == entry_between
    assert numbers.answer == log.answer
    assert log.answer.endswith("after 5,678") and log.answer.startswith("after") == entry_between


def turn(last_text: str) -> tuple[list[Message], list[Event]]:
    """A turn as its messages and as the events that streamed them: an answer with a number, a call, then
    a last step whose text is ``last_text`` before a second call (the turn stopped there: max steps)."""
    second = ToolCallPart("call_2", "python", json.dumps({"code": "print('ok')"}))
    second_result = ToolResultPart("call_2", "python", "ok")
    messages = [
        Message.user(PROMPT),
        Message("assistant", [TextPart("Revenue was 5,678.2 and costs 1,234."), CALL]),
        Message("tool", [RESULT]),
        Message("assistant", [TextPart(last_text), second]),
        Message("tool", [second_result]),
    ]
    streamed: list[Event] = [
        TextDelta("Revenue was 5,678.2 and costs 1,234."),
        ToolStart(CALL),
        ToolEnd(CALL, RESULT, 0.1),
        *([TextDelta(last_text)] if last_text else []),
        ToolStart(second),
        ToolEnd(second, second_result, 0.1),
    ]
    return messages, streamed


@pytest.mark.parametrize(
    "last_text", ["", "\n\n", "Checking 9,999 more."], ids=["no text", "a blank block", "a new text"]
)
def test_a_turn_from_its_messages_has_the_answer_the_views_show(last_text):
    """The check from the messages (a recorded turn) takes the text the live check and the log take: a
    last step that streamed only a line break before its call makes that blank block the answer in the
    views, so no number is checked — the earlier text's numbers are not the ones the views would mark."""
    messages, streamed = turn(last_text)
    log, numbers = TurnLog(), TurnNumbers()
    for event in streamed:
        log.feed(event)
        numbers.feed(event)
    assert answer_of(messages) == numbers.answer == log.answer
    assert for_turn(messages, PROMPT) == numbers.check(PROMPT)
    expected = {"": ["5,678.2", "1,234"], "\n\n": [], "Checking 9,999 more.": ["9,999"]}[last_text]
    assert [n["text"] for n in for_turn(messages, PROMPT)] == expected
