"""Events: what a provider streams and what a turn reports, in the project's own types, and the one pipe they
go through.

The provider layer turns SDK stream events into the first group; the turn loop adds the second.
Renderers (text, widgets) only ever see these.

A turn hands every event to its observers, in the order it was given them (:class:`Pipe`, as httpx's
``event_hooks``): the write-ahead of the record, the recorder that keeps the turn when it ends, the numbers
check, the view — the order is one line where the turn is built (:meth:`shiro_kernel.agent.Agent.ask`). An
observer may add events for those after it (the recorder's ``Recorded``, the check's ``NumbersChecked``): it
returns the events to pass on in place of the one it got.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import egress
from .transcript import Message, ToolCallPart, ToolResultPart


# -- from the provider -------------------------------------------------------------------------
@dataclass
class TextDelta:
    text: str


@dataclass
class ReasoningDelta:
    text: str


@dataclass
class ToolCallEvent:
    """A complete tool call from the model (arguments fully received)."""

    call: ToolCallPart


@dataclass
class Usage:
    input_tokens: int = 0  # all input tokens, the cached ones included (as both APIs count them)
    output_tokens: int = 0
    cost_usd: float | None = None  # None when the model is not in the price table
    #: of ``input_tokens``, those the provider served from its prompt cache (priced at the cached rate)
    cached_input_tokens: int = 0
    #: the server sent no usage: the counts are the estimate (characters / 4), and every view says so
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost_usd is None and other.cost_usd is None
            else ((self.cost_usd or 0.0) + (other.cost_usd or 0.0))
        )
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cost,
            self.cached_input_tokens + other.cached_input_tokens,
            self.estimated or other.estimated,
        )


@dataclass
class Done:
    """The response is complete: the assistant message as it goes into the transcript."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    api: str = "responses"  # which API actually answered (chat may have fallen back)


@dataclass
class Error:
    """The request failed for good (after retries): one clear sentence, never the key. ``kind`` names a
    failure the turn can repair: ``item_not_found`` (the provider lost a stored item the history refers
    to; resend it inline) or ``images_unsupported`` (the model takes no images; resend without)."""

    message: str
    status: int | None = None
    retryable: bool = False
    kind: str | None = None


@dataclass
class Sent:
    """A request is about to leave, and what it carries (:mod:`shiro_kernel.egress`), for the ledger."""

    request: egress.Request


ProviderEvent = TextDelta | ReasoningDelta | ToolCallEvent | Usage | Done | Error | Sent


# -- from the turn loop -------------------------------------------------------------------------
@dataclass
class StepStart:
    step: int


@dataclass
class ToolStart:
    call: ToolCallPart


@dataclass
class ToolProgress:
    """A running call's one-line progress (an MCP server's progress notification, ...)."""

    call_id: str
    text: str


@dataclass
class ToolEnd:
    """A call ended: its result says whether it failed (``is_error``), was not run because it was not approved
    (``refused``: the result says why and how to allow it), or was stopped (``stopped``)."""

    call: ToolCallPart
    result: ToolResultPart
    seconds: float


@dataclass
class Notice:
    text: str
    kind: str = "info"  # info | compacted | warning


@dataclass
class Recorded:
    """What the turn's saved bundle needs so a rerun of the notebook can replay it without the model: its
    prompt, cell, ordinal, id and calls (``rerun.replay_plan.replay_fields``)."""

    fields: dict[str, Any]


@dataclass
class BudgetReached:
    """The session's spend reached ``Shiro.budget_usd`` (or the next step would pass it): the turn stops
    before the next model call. Views say so in money (:func:`shiro_kernel.ui.money.budget_message`)."""

    spent_usd: float
    budget_usd: float


@dataclass
class BudgetUnchecked:
    """``Shiro.budget_usd`` is set, but ``model`` has no known price: the budget cannot be checked and stops no turn
    (said once per kernel). Views say so in money (:func:`shiro_kernel.ui.money.unpriced_budget`)."""

    budget_usd: float
    model: str


@dataclass
class NumbersChecked:
    """The answer's numbers looked up in this turn's tool outputs (issue 28), sent just before
    :class:`TurnEnd`: ``numbers`` is :func:`shiro_kernel.numbers.turn_check.check_turn`'s list (``text``,
    ``found``, ``call_id``, ``start``, ``end``, ``line``), offsets in the turn's last streamed text block."""

    numbers: list[dict[str, Any]]


@dataclass
class TurnEnd:
    """The turn is over. ``reason`` is one of answered | max_steps | aborted | error | waiting | budget."""

    reason: str
    usage: Usage
    error: str | None = None


TurnEvent = (
    StepStart
    | ToolStart
    | ToolProgress
    | ToolEnd
    | Notice
    | BudgetReached
    | BudgetUnchecked
    | Recorded
    | NumbersChecked
    | TurnEnd
)
Event = ProviderEvent | TurnEvent


#: sees each event of a turn; returns None to pass it on as it is, or the events to pass on in its place
Observer = Callable[[Event], "Iterable[Event] | None"]


class Pipe:
    """A turn's observers in order: each event goes through every one of them, and what an observer returns
    in place of an event goes on to the observers after it (the last one's return is dropped)."""

    def __init__(self, observers: Sequence[Observer]) -> None:
        self.observers = tuple(observers)

    def __call__(self, event: Event) -> None:
        events: list[Event] = [event]
        for observe in self.observers:
            passed: list[Event] = []
            for e in events:
                out = observe(e)
                passed.extend([e] if out is None else out)
            events = passed
