"""The turn's check: the answer's numbers looked up in the turn's tool outputs, and what is said of them.

:func:`check_turn` is the check itself: each claim of the answer (:mod:`.claims`), but the numbers the turn
chose rather than found — those of the prompt and of its calls' arguments (``df[df.revenue > 1000]``, then
"orders above $1,000") — looked up in the outputs (:mod:`.tool_outputs`, :mod:`.matching`), as the
``numbers`` list of the turn bundle. :func:`not_found_line` is the user's one line under the answer,
:func:`model_note` the note for the model's next turn.

Its seam with a live turn: :class:`TurnNumbers` is fed the turn's events as they happen — each
:class:`~shiro_kernel.events.ToolEnd`'s result parsed into an :class:`~.tool_outputs.OutputIndex` then
(about 1 ms a call), its call's arguments kept as the turn's own inputs, the answer followed
(:class:`~.answer.AnswerBlock`: the views' own rule, so the offsets of the result are offsets in the text
the views mark) — and :meth:`TurnNumbers.check` at the end costs a few milliseconds however large the
outputs were (parsing them then would cost ~80 ms per MB). :class:`LastAnswer` wires it between the agent
and its turns, and keeps the note for the next one. :func:`for_turn` checks a turn from its messages
instead (a recorded turn, a resumed one).
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Iterable, Sequence
from typing import Any

from ..events import Event, NumbersChecked, Observer, ToolEnd, TurnEnd
from ..transcript import Message, ToolCallPart, ToolResultPart
from .answer import AnswerBlock, answer_of
from .claims import find_numbers, in_prompt, prompt_numbers
from .matching import look_up
from .tool_outputs import OutputIndex


def check_turn(
    answer: str,
    prompt: str,
    results: Iterable[ToolResultPart] | OutputIndex,
    *,
    inputs: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The ``numbers`` list of the turn bundle: for each number of the answer (none of the prompt's), in
    order, ``{"text": as written, "found": bool, "call_id": the call whose output has it or None}``, with
    for renderers ``start``/``end`` (offsets of ``text`` in ``answer``) and ``line`` (that call's output
    line holding it, or None). ``results`` may be an :class:`OutputIndex` fed during the turn. ``inputs``
    are more texts whose numbers the turn chose rather than found — the code of its calls, say
    (``df[df.revenue > 1000]`` then "orders above $1,000") — exempt like the prompt's."""
    index = results if isinstance(results, OutputIndex) else OutputIndex(results)
    asked = prompt_numbers("\n".join([prompt, *inputs]))
    claims = [c for c in find_numbers(answer) if not in_prompt(c, asked)]
    return [
        {
            "text": a.claim.text,
            "found": a.found,
            "call_id": a.call_id,
            "start": a.claim.start,
            "end": a.claim.end,
            "line": a.line,
        }
        for a in look_up(index, claims)
    ]


def _missing(numbers: Sequence[dict[str, Any]]) -> list[str]:
    return [str(n["text"]) for n in numbers if not n.get("found")]


def not_found_line(numbers: Sequence[dict[str, Any]]) -> str | None:
    """The user's one line under the answer: "2 numbers not found in this turn's outputs", or None."""
    missing = len(_missing(numbers))
    if not missing:
        return None
    return f"{missing} number{'s' if missing != 1 else ''} not found in this turn's outputs"


def model_note(numbers: Sequence[dict[str, Any]], limit: int = 8) -> str | None:
    """The note for the model's next turn naming the numbers no tool output had, or None."""
    missing = _missing(numbers)
    if not missing:
        return None
    shown = missing[:limit]
    if len(missing) > limit:
        shown.append(f"{len(missing) - limit} more")
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    if len(missing) == 1:
        return (
            f"Note: in your last answer, {listed} does not appear in any tool output of that turn; check it "
            "with a tool before relying on it, or say it is an estimate."
        )
    return (
        f"Note: in your last answer, {listed} do not appear in any tool output of that turn; check them "
        "with a tool before relying on them, or say they are estimates."
    )


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
    results of finished calls, their arguments, the answer's block of text); :meth:`check` at the end."""

    def __init__(self) -> None:
        self.index = OutputIndex()
        self.inputs: list[str] = []
        self._answer = AnswerBlock()

    def feed(self, event: Event) -> None:
        self._answer.feed(event)
        if isinstance(event, ToolEnd):
            self.inputs.append(call_inputs(event.call))
            if not event.result.refused:  # a refusal's text says how to allow the call: nothing was computed
                self.index.add_result(event.result)

    @property
    def answer(self) -> str:
        """The turn's last block of text so far."""
        return self._answer.text

    def check(self, prompt: str) -> list[dict[str, Any]]:
        """The ``numbers`` list of the turn (:func:`check_turn`): [] when the turn has no answer. ``prompt``
        is the user's prompt as typed (not a note added to it)."""
        answer = self.answer
        if not answer.strip():
            return []
        return check_turn(answer, prompt, self.index, inputs=self.inputs)

    def event(self, prompt: str) -> NumbersChecked:
        """:meth:`check` as the event the views take, emitted just before the turn's ``TurnEnd``."""
        return NumbersChecked(self.check(prompt))


def for_turn(messages: Iterable[Message], prompt: str, index: OutputIndex | None = None) -> list[dict[str, Any]]:
    """The ``numbers`` list of a turn from its messages (those it added to the session): the answer is the
    one the views show (:func:`~.answer.answer_of`), looked up in every tool result among them — or in
    ``index`` when one was fed with those results as they came."""
    messages = list(messages)
    answer = answer_of(messages)
    if not answer.strip():
        return []
    calls = [call for m in messages if m.role == "assistant" for call in m.tool_calls()]
    if index is None:
        index = OutputIndex(result for m in messages if m.role == "tool" for result in m.tool_results())
    return check_turn(answer, prompt, index, inputs=[call_inputs(call) for call in calls])


class LastAnswer:
    """The numbers check between the agent and its turns: one per kernel (:attr:`Agent.numbers
    <shiro_kernel.agent.Agent.numbers>`). A live turn's events go through :meth:`check`'s observer; the next turn's
    state message asks :meth:`note` for what the model is told of the last answer."""

    def __init__(self) -> None:
        #: the session of the last checked turn and the note of its numbers found nowhere ('' when none)
        self._pending: tuple[object, str] | None = None

    def check(self, prompt: str, session: object, on: bool) -> Observer | None:
        """The observer that checks one live turn of ``session``: each event fed to a :class:`TurnNumbers`; at
        ``TurnEnd``, its :class:`NumbersChecked` passed on first. ``on`` (``Shiro.check_numbers``) False: None (no
        check), and no note is left for the next turn."""
        self._pending = None
        if not on:
            return None
        numbers: TurnNumbers | None = TurnNumbers()

        def observe(event: Event) -> list[Event] | None:
            nonlocal numbers
            if numbers is None:
                return None
            try:
                if not isinstance(event, TurnEnd):
                    numbers.feed(event)
                    return None
                checked = numbers.event(prompt)
                self._pending = (session, model_note(checked.numbers) or "")
                return [checked, event]
            except Exception:  # the check is a help: a bug in it costs the turn nothing (it goes unchecked)
                numbers = None
                traceback.print_exc(file=sys.__stderr__)
                return None

        return observe

    def note(self, session: object, on: bool = True) -> str:
        """The one line telling the model which numbers of its last answer no tool output had, for the turn
        starting now in ``session`` ('' when there are none, the last turn was in another session, or the
        check is off now). Given once: the turn after next is not told again."""
        pending, self._pending = self._pending, None
        return pending[1] if pending is not None and on and pending[0] is session else ""


__all__ = ["LastAnswer", "TurnNumbers", "call_inputs", "check_turn", "for_turn", "model_note", "not_found_line"]
