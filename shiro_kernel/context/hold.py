"""Pruning that holds still: a provider's prefix cache can only serve what did not change.

Recomputing the ladder's cut at every step moves it as the history grows (the keep-tail counts from the end),
so once a session passes the threshold every request would differ early and miss the cache. Instead, when
the wire copy passes the threshold, it is pruned down to a low-water mark (:data:`LOW_WATER` of the
threshold, by the same ladder, digest and repairs: :func:`~shiro_kernel.context.prune.prune_to_fit`), and
that cut is **held**: later steps and turns send the same pruned prefix, byte for byte, with the messages
since appended as they are (reasoning and provider ids left out, as in any pruned request), until the
threshold is reached again. Images beyond the newest few go at such a prune point too, not at every figure.

A hold belongs to the history it was made from: when that history is rewritten (``/compact``, a 404 repair
inlining it, a repair that dropped a message) the next step prunes afresh.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..transcript import Message, ReasoningPart
from .estimate import tokens_of
from .meter import Record
from .prune import PruneResult
from .rules import detached

#: a prune point prunes down to this share of the threshold, so that many steps fit before the next one
LOW_WATER = 0.6


@dataclass
class Hold:
    """A prune point: the pruned wire copy of the history's first ``size`` messages, kept as it was sent."""

    size: int
    first: Message  # the history's first and last messages then (the same objects while it only grows)
    last: Message
    wire: list[Message]
    tokens: int  # the estimate of ``wire``

    @classmethod
    def made(cls, history: list[Message], result: PruneResult) -> Hold:
        return cls(len(history), history[0], history[-1], list(result.messages), result.tokens_after)

    def holds(self, history: list[Message], messages: list[Message]) -> bool:
        """Is the history the one this hold was made from, only grown? (``messages``: the history as the
        checks left it, which must have the same messages.)"""
        return (
            len(history) >= self.size
            and len(messages) == len(history)
            and history[0] is self.first
            and history[self.size - 1] is self.last
        )

    def extend(self, messages: list[Message], records: list[Record]) -> tuple[list[Message], int]:
        """The held prefix with the messages since appended as a pruned request sends them, and the
        estimate of the whole."""
        tail = [_inline(m) for m in messages[self.size :]]
        chars = sum(r.chars for r in records[self.size :])
        return self.wire + [m for m in tail if m.parts], self.tokens + tokens_of(chars, len(tail))


def _inline(message: Message) -> Message:
    """A message as a pruned request carries it: no reasoning, no provider item ids."""
    parts = [p for p in message.parts if not isinstance(p, ReasoningPart)]
    if len(parts) == len(message.parts) and all(p.item_id is None for p in parts):
        return message
    return Message(message.role, [detached(p) for p in parts])


__all__ = ["LOW_WATER", "Hold"]
