"""The provider's history rules, in one place: checked, repaired, and read by pruning.

The rules every outgoing request obeys:

* **calls and results**: every tool result has its call earlier in the history — else the result is
  dropped (``No tool call found for function call output`` otherwise); every call has a result — except
  the pending approval: calls of the last assistant message with nothing after them but their own
  partial results. Any other unanswered call gets the result ``Error: this call was never answered
  (repaired)`` (``No tool output found`` otherwise);
* **reasoning/message pairing** (:func:`breaks_pairing`): an assistant message whose reasoning item lost
  its id, or whose reasoning id is going, is sent inline (all its ids detached) — a stored message item
  refers to its reasoning item (``provided without its required 'reasoning' item`` otherwise);
* **store off** (:func:`needs_store`): no ids, except on reasoning that carries encrypted content
  (replayable inline).

:class:`HistoryCheck` reads a history message by message and says which rule it breaks: the validator
(:func:`check_and_repair`) runs it over the whole history, the session's meter
(:mod:`~shiro_kernel.context.meter`) over the messages new since the last step. A healthy history costs
that one pass and comes back as the SAME list object (no copying); otherwise the repaired copy comes back
with one readable line per repair. :func:`answered_only` is the results rule as pruning's plan and the
repair apply it, :func:`detach_provider_items` the all-inline form of a history (a pruned request, the
404 repair). Nothing given is mutated; repaired messages and parts are copies.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import replace

from ..transcript import Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

NEVER_ANSWERED = "Error: this call was never answered (repaired)"
#: repairs starting with this are routine normalisation (the wire does the same), not worth a warning
ROUTINE = "store is off:"


# -- the rules, one function each ----------------------------------------------------------------------
def answered_only(parts: list[Part], calls: set[str]) -> list[Part]:
    """The rule every request obeys — a tool result needs its call earlier in the history: ``parts``
    (one message's, in history order) without the results whose call is not in ``calls``, after this
    message's own calls were added to ``calls``. The same list object when nothing goes."""
    orphan = False
    for p in parts:
        if isinstance(p, ToolCallPart):
            calls.add(p.call_id)
        elif isinstance(p, ToolResultPart) and p.call_id not in calls:
            orphan = True
    if not orphan:
        return parts
    return [p for p in parts if not (isinstance(p, ToolResultPart) and p.call_id not in calls)]


def needs_store(part: Part) -> bool:
    """Whether ``part``'s item id can go out only while the provider stores items: every id but that of a
    reasoning item carrying its encrypted content (replayable inline)."""
    return not (isinstance(part, ReasoningPart) and bool(part.encrypted))


def breaks_pairing(message: Message, gone: Collection[int] = ()) -> bool:
    """The reasoning/message pairing rule, broken: an assistant message keeps an id on a part other than
    reasoning while one of its reasoning parts has no id, or is losing it (the part indices in ``gone``)."""
    if message.role != "assistant":
        return False
    lost = other = False
    for i, p in enumerate(message.parts):
        if isinstance(p, ReasoningPart):
            lost = lost or p.item_id is None or i in gone
        elif p.item_id is not None and i not in gone:
            other = True
    return lost and other


def pending_calls(messages: list[Message]) -> list[ToolCallPart]:
    """The calls waiting for approval: those of the last assistant message that have no result yet,
    when nothing follows that message but tool messages answering its own calls. [] otherwise (a user
    message after it, or no assistant message)."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), -1)
    if last < 0:
        return []
    calls = messages[last].tool_calls()
    own = {c.call_id for c in calls}
    answered: set[str] = set()
    for m in messages[last + 1 :]:
        if m.role != "tool" or any(not isinstance(p, ToolResultPart) or p.call_id not in own for p in m.parts):
            return []
        answered.update(p.call_id for p in m.parts if isinstance(p, ToolResultPart))
    return [c for c in calls if c.call_id not in answered]


# -- what a history breaks -------------------------------------------------------------------------------
class HistoryCheck:
    """The rules read over a history, message by message (:meth:`read` again with the messages a history
    grew by): the calls and the results seen, and which rule something broke.

    ``orphan``: a result came before its call; ``drops``: one whose call is not even later in its own
    message (:func:`answered_only` would drop it); ``unpaired``: :func:`breaks_pairing`; ``store_only``:
    an id for which :func:`needs_store`."""

    __slots__ = ("answered", "calls", "drops", "orphan", "store_only", "unpaired")

    def __init__(self) -> None:
        self.calls: set[str] = set()
        self.answered: set[str] = set()
        self.orphan = self.drops = self.unpaired = self.store_only = False

    def read(self, messages: Iterable[Message]) -> HistoryCheck:
        calls, answered, store_only = self.calls, self.answered, self.store_only
        for m in messages:
            early = lost = False
            for p in m.parts:
                kind = type(p)
                if kind is ToolCallPart:
                    calls.add(p.call_id)  # type: ignore[union-attr]
                elif kind is ToolResultPart:
                    if p.call_id not in calls:  # type: ignore[union-attr]
                        early = True
                    answered.add(p.call_id)  # type: ignore[union-attr]
                item_id = p.item_id
                if item_id is None:
                    if kind is ReasoningPart:
                        lost = True  # the pairing rule can only break in a message with such a part
                elif not store_only:
                    store_only = needs_store(p)
            if early:
                self.orphan = True
                self.drops = self.drops or len(answered_only(m.parts, calls)) < len(m.parts)
            if lost and breaks_pairing(m):
                self.unpaired = True
        self.store_only = store_only
        return self

    def healthy(self, store: bool, answered: bool = False) -> bool:
        """No rule broken but, perhaps, calls without results (none either, with ``answered``)."""
        if self.orphan or self.unpaired or (self.store_only and not store):
            return False
        return not answered or len(self.answered) == len(self.calls)


def _healthy(messages: list[Message], *, store: bool, keep_pending: bool) -> bool:
    """One pass, no copies: does any rule need a repair?"""
    check = HistoryCheck().read(messages)
    if not check.healthy(store):
        return False
    unanswered = check.calls - check.answered
    return not (unanswered and (not keep_pending or unanswered - _pending_ids(messages, unanswered)))


def _pending_ids(messages: list[Message], unanswered: set[str]) -> set[str]:
    return {c.call_id for c in pending_calls(messages)} & unanswered


# -- the repairs ---------------------------------------------------------------------------------------
def check_and_repair(
    messages: list[Message], *, store: bool, keep_pending: bool = True
) -> tuple[list[Message], list[str]]:
    """``(messages, repairs)``: the history the provider will accept, and one line per repair.

    A healthy history returns the same list object and ``[]``. ``keep_pending=False`` answers even a
    pending approval's calls (for a request that must be complete, e.g. ``/compact``)."""
    if _healthy(messages, store=store, keep_pending=keep_pending):
        return messages, []
    repairs: list[str] = []
    out = _drop_orphaned_results(messages, repairs)
    out = _answer_unanswered(out, keep_pending, repairs)
    out = _detach_ids(out, store, repairs)
    return out, repairs


def _drop_orphaned_results(messages: list[Message], repairs: list[str]) -> list[Message]:
    """1. results without their call, dropped (and a message left empty by that)."""
    calls: set[str] = set()
    out: list[Message] = []
    for m in messages:
        kept = answered_only(m.parts, calls)
        if kept is m.parts:
            out.append(m)
            continue
        survivors = {id(p) for p in kept}
        for p in m.tool_results():
            if id(p) not in survivors:
                repairs.append(f"dropped a tool result whose call is missing ({p.name}, {p.call_id})")
        if kept:
            out.append(Message(m.role, kept))
    return out


def _answer_unanswered(out: list[Message], keep_pending: bool, repairs: list[str]) -> list[Message]:
    """2. calls without their result (but the pending approval's, with ``keep_pending``), answered."""
    answered = {p.call_id for m in out for p in m.parts if isinstance(p, ToolResultPart)}
    unanswered = {p.call_id for m in out for p in m.parts if isinstance(p, ToolCallPart)} - answered
    if not unanswered:
        return out
    fix = unanswered - (_pending_ids(out, unanswered) if keep_pending else set())
    if not fix:
        return out
    fixed: list[Message] = []
    i = 0
    while i < len(out):
        m = out[i]
        fixed.append(m)
        missing = [c for c in m.parts if isinstance(c, ToolCallPart) and c.call_id in fix]
        i += 1
        if not missing:
            continue
        results: list[Part] = [ToolResultPart(c.call_id, c.name, NEVER_ANSWERED, is_error=True) for c in missing]
        for c in missing:
            repairs.append(f"answered a call that never got a result ({c.name}, {c.call_id})")
        if i < len(out) and out[i].role == "tool":  # this message's own results: add to them
            fixed.append(Message("tool", list(out[i].parts) + results))
            i += 1
        else:
            fixed.append(Message("tool", results))
    return fixed


def _ids_to_detach(message: Message, *, store: bool) -> tuple[set[int], int, bool]:
    """Indices of parts whose id must go, with the store-off count and whether the pairing rule
    detached the whole message."""
    drop = {i for i, p in enumerate(message.parts) if p.item_id is not None and not store and needs_store(p)}
    store_off = len(drop)
    pairing = breaks_pairing(message, drop)
    if pairing:
        drop.update(i for i, p in enumerate(message.parts) if p.item_id is not None)
    return drop, store_off, pairing


def _detach_ids(out: list[Message], store: bool, repairs: list[str]) -> list[Message]:
    """3. ids: store off, reasoning/message pairing."""
    store_off = paired = 0
    with_ids: list[Message] = []
    for m in out:
        if not any(p.item_id is not None for p in m.parts):
            with_ids.append(m)
            continue
        drop, n_off, pairing = _ids_to_detach(m, store=store)
        if not drop:
            with_ids.append(m)
            continue
        store_off += n_off
        paired += pairing
        with_ids.append(Message(m.role, [detached(p) if i in drop else p for i, p in enumerate(m.parts)]))
    if store_off:
        repairs.append(f"{ROUTINE} sent {store_off} stored item id{'s' if store_off != 1 else ''} inline")
    if paired:
        repairs.append(
            f"sent {paired} assistant message{'s' if paired != 1 else ''} inline: its reasoning item is missing"
        )
    return with_ids


def notable(repairs: list[str]) -> list[str]:
    """The repairs worth telling the user about (routine store-off normalisation left out)."""
    return [r for r in repairs if not r.startswith(ROUTINE)]


# -- all inline --------------------------------------------------------------------------------------
_PLAIN_PARTS = (TextPart, ReasoningPart, ToolCallPart, ToolResultPart)


def detached(part: Part) -> Part:
    """A copy of ``part`` without its item id (``meta`` copied too); the part itself without one."""
    if part.item_id is None:
        return part
    if type(part) in _PLAIN_PARTS:  # the project's own dataclasses: what ``replace`` would build, faster
        copy = object.__new__(type(part))
        copy.__dict__.update(part.__dict__)
        copy.item_id = None
        copy.meta = dict(part.meta)
        return copy
    return replace(part, item_id=None, meta=dict(part.meta))


def detach_provider_items(messages: list[Message]) -> list[Message]:
    """Copies of the messages with every provider item id stripped (so all of it goes inline).

    Messages with no id are passed through as they are; nothing given is mutated."""
    out: list[Message] = []
    for m in messages:
        if any(p.item_id is not None for p in m.parts):
            out.append(Message(m.role, [detached(p) for p in m.parts]))
        else:
            out.append(m)
    return out


__all__ = [
    "NEVER_ANSWERED",
    "ROUTINE",
    "HistoryCheck",
    "answered_only",
    "breaks_pairing",
    "check_and_repair",
    "detach_provider_items",
    "detached",
    "needs_store",
    "notable",
    "pending_calls",
]
