"""The pruning ladder as it was before the session's meter kept each message's sizes (commit b52e15e):
every step measured every part again. Kept as the oracle the faster ladder must agree with exactly; and
:func:`rung`, one rung of the ladder built on its own."""

from __future__ import annotations

from shiro_kernel.context.digest import pruned_digest
from shiro_kernel.context.estimate import _TEXT, DEFAULT_THRESHOLD, estimate_tokens, part_chars
from shiro_kernel.context.estimate import ITEM_ID_CHARS as _ITEM_ID
from shiro_kernel.context.estimate import MESSAGE_CHARS as _MESSAGE
from shiro_kernel.context.estimate import json_len as _json_len
from shiro_kernel.context.estimate import message_chars_from as _message_chars
from shiro_kernel.context.estimate import tokens_of as _tokens
from shiro_kernel.context.prune import LADDER, Plan, PruneResult, _build, _plan, _with_digest
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart


class _Sizes:
    """Every part's serialised length without its item id, measured once per prune, so that each
    candidate plan is measured by addition. The same pass gives the history's estimate (``tokens``, equal
    to :func:`estimate_tokens`) and whether the reasoning-only plan would change anything (``strippable``:
    reasoning, an item id, a result without its call, or an empty message)."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        part: dict[int, int] = {}
        totals: list[int] = []
        strippable = False
        calls: set[str] = set()
        for m in messages:
            if not m.parts:
                strippable = True
            sizes = []
            for p in m.parts:
                size = part_chars(p, with_id=False)
                part[id(p)] = size
                kind = type(p)
                if kind is ToolCallPart:
                    calls.add(p.call_id)  # type: ignore[union-attr]
                elif kind is ToolResultPart:
                    if p.call_id not in calls:  # type: ignore[union-attr]
                        strippable = True
                elif kind is not TextPart:
                    strippable = True  # reasoning (or a part kind the plan may treat differently)
                if p.item_id is not None:
                    size += _ITEM_ID + _json_len(p.item_id)
                    strippable = True
                sizes.append(size)
            totals.append(_message_chars(m.role, sizes))
        self.part = part
        self.totals = totals  # each message's serialised length, item ids included
        self.tokens = _tokens(sum(totals), len(messages))
        self.strippable = strippable

    def chars(self, plan: Plan) -> int:
        part = self.part
        messages = self.messages
        return sum([_message_chars(messages[i].role, [part[id(p)] for p in parts]) for i, parts in plan])


def prune_to_fit_oracle(
    messages: list[Message], threshold: int = DEFAULT_THRESHOLD, *, digest: bool = True
) -> PruneResult:
    """The wire copy of ``messages`` that fits ``threshold`` estimated tokens (see module doc)."""
    n = len(messages)
    sizes = _Sizes(messages)
    est = sizes.tokens
    if est <= threshold:
        return PruneResult(messages, n, n, False, None, est, est)
    # 1. reasoning first, and every provider id (a pruned request is always inline); nothing to gain when
    #    there is neither (the plan would be the history itself, still over the threshold)
    if sizes.strippable:
        plan, _ = _plan(messages, n)
        tokens = _tokens(sizes.chars(plan), len(plan))
        if tokens <= threshold:
            wire = _build(messages, plan)
            return PruneResult(wire, n, len(wire), True, None, est, tokens)
    # 2. the keep-tail ladder (reasoning stays stripped): each rung measured, only the chosen one built
    user_chars = _MESSAGE + _json_len("user") + _TEXT
    for index, keep in enumerate(LADDER):
        final = index == len(LADDER) - 1
        plan, span = _plan(messages, keep)
        chars, count = sizes.chars(plan), len(plan)
        note: str | None = None
        if not plan:  # the fallback to the first prompt: build it to measure it
            wire = _with_digest(messages, [], None, None)
            tokens = estimate_tokens(wire)
        else:
            if digest and span is not None:
                hidden = max(0, n - count)
                head = f"[context pruned: {hidden} earlier messages not shown]"
                # the digest is at least its first line: a rung over the threshold even so is skipped
                if not final and _tokens(chars + user_chars + _json_len(head), count + 1) > threshold:
                    continue
                note = pruned_digest(messages, span, hidden)
                chars += user_chars + _json_len(note)
                count += 1
            tokens = _tokens(chars, count)
            if tokens > threshold and not final:
                continue
            wire = _with_digest(messages, _build(messages, plan), span, note)
        if tokens <= threshold or final:
            return PruneResult(wire, n, len(wire), True, span, est, tokens, keep)
    raise AssertionError("the last rung always returns")


def rung(messages: list[Message], keep: int) -> list[Message]:
    """One rung of the ladder as messages: the plan for ``keep`` built, with the digest of the pruned span
    inserted (as :func:`prune_to_fit_oracle` builds the rung it chooses). Never an empty list."""
    plan, span = _plan(messages, keep)
    wire = _build(messages, plan)
    note = pruned_digest(messages, span, max(0, len(messages) - len(wire))) if span else None
    return _with_digest(messages, wire, span, note)
