"""The numbers check of one turn (issue 28), fed as the turn runs so that its end only looks claims up.

:mod:`.numbers` is the pure core (what a claim is, how an output number matches); this is its seam with a
turn: :class:`TurnNumbers` is fed the turn's events as they happen — each :class:`~.events.ToolEnd`'s result
parsed into an :class:`~.numbers.OutputIndex` then (about 1 ms a call), its call's arguments kept as the
turn's own inputs, the streamed text followed — and :meth:`TurnNumbers.check` at the end costs a few
milliseconds however large the outputs were (parsing them then would cost ~80 ms per MB).
:func:`for_turn` checks a turn from its messages instead (a recorded turn, a resumed one).

The answer is the turn's last block of text, the one the views show as the answer (:attr:`TurnLog.answer
<shiro_kernel.ui.render.TurnLog.answer>`: a tool row or a notice starts a new block), so the offsets of the
result are offsets in that text. Numbers the turn chose rather than found — those of the prompt and of its
calls' arguments (``df[df.revenue > 1000]``, then "orders above $1,000") — are not checked.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from ..events import BudgetReached, Event, Notice, NumbersChecked, TextDelta, ToolEnd, ToolStart, TurnEnd
from ..transcript import Message, ToolCallPart, ToolResultPart
from .claims import OutputIndex, check_turn, model_note


def call_inputs(call: ToolCallPart) -> str:
    """The text of a call's arguments whose numbers the turn chose: every string and number in them, one a
    line (the JSON itself would glue an escaped line break to the number after it: ``\\n1000``)."""
    try:
        value: Any = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        return call.arguments
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, (str, int, float)) and not isinstance(item, bool):
            out.append(str(item))
    return "\n".join(reversed(out))


class TurnNumbers:
    """One turn's numbers check. :meth:`feed` it every event of the turn (it keeps what it needs: the
    results of finished calls, their arguments, the streamed text); :meth:`check` at the end."""

    def __init__(self) -> None:
        self.index = OutputIndex()
        self.inputs: list[str] = []
        self._answer: list[str] = []  # the current block of streamed text, in pieces
        self._new_block = False  # a tool row or a notice came since the last text: the next text starts anew

    def feed(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if self._new_block:
                self._answer, self._new_block = [], False
            self._answer.append(event.text)
        elif isinstance(event, ToolEnd):
            self.inputs.append(call_inputs(event.call))
            if not event.refused:  # a refusal's text says how to allow the call: nothing was computed
                self.index.add_result(event.result)
        elif isinstance(event, (ToolStart, Notice, BudgetReached)):
            self._new_block = True  # the views' log starts a new entry here (see TurnLog.feed)

    @property
    def answer(self) -> str:
        """The turn's last block of text so far."""
        return "".join(self._answer)

    def check(self, prompt: str) -> list[dict[str, Any]]:
        """The ``numbers`` list of the turn (:func:`~.numbers.check_turn`): [] when the turn has no answer.
        ``prompt`` is the user's prompt as typed (not a note added to it)."""
        answer = self.answer
        if not answer.strip():
            return []
        return check_turn(answer, prompt, self.index, inputs=self.inputs)

    def event(self, prompt: str) -> NumbersChecked:
        """:meth:`check` as the event the views take, emitted just before the turn's ``TurnEnd``."""
        return NumbersChecked(self.check(prompt))


def for_turn(messages: Iterable[Message], prompt: str, index: OutputIndex | None = None) -> list[dict[str, Any]]:
    """The ``numbers`` list of a turn from its messages (those it added to the session): the answer is the
    last assistant message with text, looked up in every tool result among them — or in ``index`` when one
    was fed with those results as they came."""
    answer, results, inputs = "", list[ToolResultPart](), list[str]()
    for message in messages:
        if message.role == "assistant":
            inputs.extend(call_inputs(call) for call in message.tool_calls())
            if message.text.strip():
                answer = message.text
        elif message.role == "tool":
            results.extend(message.tool_results())
    if not answer.strip():
        return []
    return check_turn(answer, prompt, index if index is not None else OutputIndex(results), inputs=inputs)


class LastAnswer:
    """The numbers check between the agent and its turns: one per kernel (:attr:`Agent.numbers
    <shiro_kernel.agent.Agent.numbers>`). A live turn's events go through :meth:`follow`; the next turn's
    state message asks :meth:`note` for what the model is told of the last answer."""

    def __init__(self) -> None:
        #: the session of the last checked turn and the note of its numbers found nowhere ('' when none)
        self._pending: tuple[object, str] | None = None

    def follow(self, emit: Callable[[Event], None], prompt: str, session: object, on: bool) -> Callable[[Event], None]:
        """``emit`` wrapped for one live turn of ``session``: each event fed to a :class:`TurnNumbers` and
        passed on; at ``TurnEnd``, its :class:`NumbersChecked` first. ``on`` (``Shiro.check_numbers``) False:
        ``emit`` itself, and no note is left for the next turn."""
        self._pending = None
        if not on:
            return emit
        numbers: TurnNumbers | None = TurnNumbers()

        def on_event(event: Event) -> None:
            nonlocal numbers
            checked = None
            if numbers is not None:
                try:
                    if isinstance(event, TurnEnd):
                        checked = numbers.event(prompt)
                        self._pending = (session, model_note(checked.numbers) or "")
                    else:
                        numbers.feed(event)
                except Exception:  # the check is a help: a bug in it costs the turn nothing (it goes unchecked)
                    numbers = None
                    traceback.print_exc(file=sys.__stderr__)
            if checked is not None:
                emit(checked)
            emit(event)

        return on_event

    def note(self, session: object, on: bool = True) -> str:
        """The one line telling the model which numbers of its last answer no tool output had, for the turn
        starting now in ``session`` ('' when there are none, the last turn was in another session, or the
        check is off now). Given once: the turn after next is not told again."""
        pending, self._pending = self._pending, None
        return pending[1] if pending is not None and on and pending[0] is session else ""


__all__ = ["LastAnswer", "TurnNumbers", "call_inputs", "for_turn"]
