"""Which text of a turn is its answer: the one whose numbers are checked, and marked by the views.

The views show a turn as a log of entries (:class:`~shiro_kernel.ui.render.TurnLog`, the saved bundle's
``entries``, the labextension): blocks of text, and between them an entry of another kind — a tool row
(:class:`~shiro_kernel.events.ToolStart`), a notice (:class:`~shiro_kernel.events.Notice`), the budget's
line (:class:`~shiro_kernel.events.BudgetReached`). The answer is the last block of text, and the offsets of
the check are offsets in it.

One rule for both sides, :func:`ends_block`: the log adds an entry of another kind for exactly these
events, and the check (:class:`AnswerBlock`) starts a new block of text after them. A new kind of entry
in the views is added here, so the check follows it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeGuard

from ..events import BudgetReached, BudgetUnchecked, Event, Notice, TextDelta, ToolStart
from ..transcript import Message


def ends_block(event: Event) -> TypeGuard[ToolStart | Notice | BudgetReached | BudgetUnchecked]:
    """Is ``event`` shown as an entry of its own between blocks of text (a tool row, a notice, the budget's
    line)? The text after it is a new block."""
    return isinstance(event, (ToolStart, Notice, BudgetReached, BudgetUnchecked))


class AnswerBlock:
    """The last block of a turn's text, followed as the turn's events arrive: :meth:`feed` it every event.
    The pieces of the block are joined once, when :attr:`text` is read."""

    def __init__(self) -> None:
        self._pieces: list[str] = []  # the current block of text, as streamed
        self._ended = False  # an entry of another kind came since the last text: the next text starts anew

    def feed(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if self._ended:
                self._pieces, self._ended = [], False
            self._pieces.append(event.text)
        elif ends_block(event):
            self._ended = True

    @property
    def text(self) -> str:
        """The turn's last block of text so far ('' before any)."""
        return "".join(self._pieces)


def answer_of(messages: Iterable[Message]) -> str:
    """The answer of a turn from its messages (a recorded turn, a resumed one), by the same rule: each
    assistant message is read as the events that streamed it — its text, then a tool row per call."""
    answer = AnswerBlock()
    for message in messages:
        if message.role != "assistant":
            continue
        if message.text:
            answer.feed(TextDelta(message.text))
        for call in message.tool_calls():
            answer.feed(ToolStart(call))
    return answer.text


__all__ = ["AnswerBlock", "answer_of", "ends_block"]
