"""Automatic pruning of the WIRE copy of a session (the session's own history stays complete): the ladder.

As the seed (shiro-neko ``src/prune.ts``) does it, plus one thing it does not: when tool content is
pruned, a short digest of what was discarded (:mod:`~shiro_kernel.context.digest`) goes into the wire
copy, so the model knows what that span held (tools, files, outcomes, decisions) instead of seeing nothing.

:func:`prune_to_fit` — at or under the threshold (the estimate of :mod:`~shiro_kernel.context.estimate`)
the list is returned as is; otherwise reasoning is stripped and every provider item id detached; if that
is still too big, tool calls and results before the last N messages go, N from the ladder
``[64, 32, 16, 8, 4]`` (the widest that fits, or the narrowest; never an empty list).

The rules are those of :func:`_plan` (which parts of which messages survive — the tail kept, reasoning
dropped, results whose call did not survive dropped by :func:`~shiro_kernel.context.rules.answered_only`).
The session's :class:`~shiro_kernel.context.meter.TokenMeter` keeps a record of each message (its length,
and what the plan leaves of it) and the scan of the whole history, so a step of a session that only grew
reads its new messages: a rung is measured by adding up, only the rung's tail (at most 64 messages) goes
through :func:`_plan`, and the copies of the messages before it are kept.
``tests/context/prune_oracle.py`` keeps the ladder that measured every part each step, and the tests hold
this one to exactly its answers. A call without a result is kept on purpose: that is what a call waiting
for approval looks like. Nothing given is mutated.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..transcript import Message, Part, ReasoningPart, ToolCallPart, ToolResultPart
from .digest import heading
from .estimate import (
    DEFAULT_THRESHOLD,
    estimate_tokens,
    message_chars_from,
    part_chars,
    tokens_of,
    user_message_chars,
)
from .meter import HistoryScan, Record, TokenMeter
from .rules import answered_only, detached

LADDER: tuple[int, ...] = (64, 32, 16, 8, 4)


@dataclass
class PruneResult:
    messages: list[Message]
    before: int  # messages in the history
    after: int  # messages on the wire
    changed: bool
    #: [start, end) indices in the original history of the span whose tool content was removed,
    #: or None when nothing but reasoning (and ids) went
    dropped_span: tuple[int, int] | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    rung: int | None = None  # the keep-tail N used, or None


#: a plan: the surviving parts of each surviving message, by the message's index in the history
Plan = list[tuple[int, list[Part]]]


def _plan(messages: list[Message], keep: int) -> tuple[Plan, tuple[int, int] | None]:
    """The wire copy's rules, once: tool calls and results before the last ``keep`` messages go,
    reasoning goes everywhere, a result whose call did not survive goes, an emptied message goes.
    Returns the plan and the [start, end) span of messages that lost tool content (None if none)."""
    cut = max(0, len(messages) - keep)
    calls: set[str] = set()
    plan: Plan = []
    first = last = -1
    for i, m in enumerate(messages):
        parts = m.parts
        if i < cut and any(type(p) is ToolCallPart or type(p) is ToolResultPart for p in parts):
            parts = [p for p in parts if type(p) is not ToolCallPart and type(p) is not ToolResultPart]
            first = i if first < 0 else first
            last = i
        if any(type(p) is ReasoningPart for p in parts):
            parts = [p for p in parts if type(p) is not ReasoningPart]
        parts = answered_only(parts, calls)
        if parts:
            plan.append((i, parts))
    return plan, ((first, last + 1) if first >= 0 else None)


def _build(messages: list[Message], plan: Plan) -> list[Message]:
    """The plan as messages, every item id detached; a message that survived whole and has no id is
    passed through as it is."""
    out: list[Message] = []
    for i, parts in plan:
        m = messages[i]
        if parts is m.parts and not any(p.item_id is not None for p in parts):
            out.append(m)
        else:
            out.append(Message(m.role, [detached(p) for p in parts]))
    return out


def _first_user_index(messages: list[Message]) -> int:
    return next((i for i, m in enumerate(messages) if m.role == "user"), -1)


def _with_digest(
    messages: list[Message], wire: list[Message], span: tuple[int, int] | None, note: str | None
) -> list[Message]:
    """``wire`` never empty (else the first user prompt, or a marker), with the digest of ``span`` as a
    user message right after the first prompt."""
    if not wire:
        wire = [m for m in messages if m.role == "user"][:1] or [Message.user("[context pruned]")]
    if span is None or note is None:
        return wire
    at = _first_user_index(wire)
    return wire[: at + 1] + [Message.user(note)] + wire[at + 1 :]


def _measured(plan: Plan, messages: list[Message]) -> int:
    """A plan's serialised length, ids detached (measured part by part: a rung's tail, a rare plan)."""
    return sum(
        [message_chars_from(messages[i].role, [part_chars(p, with_id=False) for p in parts]) for i, parts in plan]
    )


def _strip_all(messages: list[Message], recs: list[Record], scan: HistoryScan) -> tuple[list[Message], int] | None:
    """The reasoning-only plan (reasoning and every item id gone; a result whose call is not before it
    gone; an empty message gone) as messages with its length; None when it would change nothing."""
    if not scan.strippable:
        return None
    if scan.drops:  # rare (a repaired history has none): the plan built and measured part by part
        plan, _ = _plan(messages, len(messages))
        return _build(messages, plan), _measured(plan, messages)
    kept = [r for r in recs if r.bare_chars >= 0]
    return [r.bare_message() for r in kept], sum([r.bare_chars for r in kept])


def prune_to_fit(
    messages: list[Message],
    threshold: int = DEFAULT_THRESHOLD,
    *,
    meter: TokenMeter | None = None,
    digest: bool = True,
    records: list[Record] | None = None,
) -> PruneResult:
    """The wire copy of ``messages`` that fits ``threshold`` estimated tokens (see module doc).

    With the session's ``meter`` a step measures only the messages new since the last one: the ladder
    adds up sizes the meter keeps, and messages before a rung's tail go out as copies it keeps too.
    ``records``: what ``meter.records(messages)`` just returned, when the caller has it."""
    n = len(messages)
    meter = meter or TokenMeter()
    recs = records if records is not None else meter.records(messages)
    scan = meter.scan(recs)
    est = tokens_of(scan.chars, n)
    if est <= threshold:
        return PruneResult(messages, n, n, False, None, est, est)
    # 1. reasoning first, and every provider id (a pruned request is always inline); nothing to gain when
    #    there is neither (the plan would be the history itself, still over the threshold)
    stripped = _strip_all(messages, recs, scan)
    if stripped is not None:
        wire, chars = stripped
        tokens = tokens_of(chars, len(wire))
        if tokens <= threshold:
            return PruneResult(wire, n, len(wire), True, None, est, tokens)
    # 2. the keep-tail ladder (reasoning stays stripped): each rung measured, only the chosen one built
    for index, keep in enumerate(LADDER):
        final = index == len(LADDER) - 1
        cut = max(0, n - keep)
        n_head, chars, span = scan.before(cut)
        tail, _ = _plan(messages[cut:], len(messages) - cut)
        chars += _measured(tail, messages[cut:])
        count = n_head + len(tail)
        note: str | None = None
        if not count:  # the fallback to the first prompt: build it to measure it
            wire = _with_digest(messages, [], None, None)
            tokens = estimate_tokens(wire)
        else:
            if digest and span is not None:
                hidden = max(0, n - count)
                # the digest is at least its first line: a rung over the threshold even so is skipped
                if not final and tokens_of(chars + user_message_chars(heading(hidden)), count + 1) > threshold:
                    continue
                note = meter.digest(messages, recs, span, hidden)
                chars += user_message_chars(note)
                count += 1
            tokens = tokens_of(chars, count)
            if tokens > threshold and not final:
                continue
            built = scan.head_messages(recs, n_head) + _build(messages[cut:], tail)
            wire = _with_digest(messages, built, span, note)
        if tokens <= threshold or final:
            return PruneResult(wire, n, len(wire), True, span, est, tokens, keep)
    raise AssertionError("the last rung always returns")


__all__ = ["LADDER", "Plan", "PruneResult", "prune_to_fit"]
