"""One validator for every outgoing request: the provider's history rules, enforced and repaired.

:func:`check_and_repair` runs before each model call (and on resume). A healthy history costs one
pass and comes back as the SAME list object (no copying); otherwise the repaired copy comes back
with one readable line per repair. Rules:

* every tool result has its call earlier in the history — else the result is dropped
  (``No tool call found for function call output`` otherwise);
* every call has a result — except the pending approval: calls of the last assistant message with
  nothing after them but their own partial results. Any other unanswered call gets the result
  ``Error: this call was never answered (repaired)`` (``No tool output found`` otherwise);
* reasoning/message pairing: an assistant message whose reasoning item lost its id, or whose
  reasoning id is stale, is sent inline (all its ids detached) — a stored message item refers to
  its reasoning item (``provided without its required 'reasoning' item`` otherwise);
* store off: no ids, except on reasoning that carries encrypted content (replayable inline);
* stale references: with ``known_ids`` given, any id not in it is detached (a 404 otherwise).

Nothing given is mutated; repaired messages and parts are copies.
"""

from __future__ import annotations

from dataclasses import replace

from ..transcript import Message, Part, ReasoningPart, ToolCallPart, ToolResultPart

NEVER_ANSWERED = "Error: this call was never answered (repaired)"
#: repairs starting with this are routine normalisation (the wire does the same), not worth a warning
ROUTINE = "store is off:"


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


def _keeps_id_without_store(part: Part) -> bool:
    return isinstance(part, ReasoningPart) and bool(part.encrypted)


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


def _pending_ids(messages: list[Message], unanswered: set[str]) -> set[str]:
    return {c.call_id for c in pending_calls(messages)} & unanswered


def _ids_to_detach(message: Message, *, store: bool, known_ids: set[str] | None) -> tuple[list[int], int, int, bool]:
    """Indices of parts whose id must go, with counts (store-off, stale) and whether the pairing
    rule detached the whole message."""
    store_off = stale = 0
    drop: set[int] = set()
    for i, p in enumerate(message.parts):
        if p.item_id is None:
            continue
        if not store and not _keeps_id_without_store(p):
            drop.add(i)
            store_off += 1
        elif known_ids is not None and p.item_id not in known_ids:
            drop.add(i)
            stale += 1
    pairing = False
    if message.role == "assistant":
        reasoning = [i for i, p in enumerate(message.parts) if isinstance(p, ReasoningPart)]
        lost = any(message.parts[i].item_id is None or i in drop for i in reasoning)
        others = [
            i
            for i, p in enumerate(message.parts)
            if p.item_id is not None and i not in drop and not isinstance(p, ReasoningPart)
        ]
        if lost and others:
            drop.update(i for i, p in enumerate(message.parts) if p.item_id is not None)
            pairing = True
    return sorted(drop), store_off, stale, pairing


def _healthy(messages: list[Message], *, store: bool, known_ids: set[str] | None, keep_pending: bool) -> bool:
    """One pass, no copies: does any rule need a repair?"""
    calls: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        reasoning_lost = False
        sibling_id = False
        for p in m.parts:
            kind = type(p)
            if kind is ToolCallPart:
                calls.add(p.call_id)  # type: ignore[union-attr]
            elif kind is ToolResultPart:
                if p.call_id not in calls:  # type: ignore[union-attr]
                    return False
                answered.add(p.call_id)  # type: ignore[union-attr]
            item_id = p.item_id
            if kind is ReasoningPart:
                if item_id is None:
                    reasoning_lost = True
            elif item_id is not None:
                sibling_id = True
            if item_id is not None:
                if not store and not _keeps_id_without_store(p):
                    return False
                if known_ids is not None and item_id not in known_ids:
                    return False
        if reasoning_lost and sibling_id and m.role == "assistant":
            return False
    unanswered = calls - answered
    return not (unanswered and (not keep_pending or unanswered - _pending_ids(messages, unanswered)))


def check_and_repair(
    messages: list[Message], *, store: bool, known_ids: set[str] | None = None, keep_pending: bool = True
) -> tuple[list[Message], list[str]]:
    """``(messages, repairs)``: the history the provider will accept, and one line per repair.

    A healthy history returns the same list object and ``[]``. ``keep_pending=False`` answers even a
    pending approval's calls (for a request that must be complete, e.g. ``/compact``)."""
    if _healthy(messages, store=store, known_ids=known_ids, keep_pending=keep_pending):
        return messages, []
    repairs: list[str] = []

    # 1. results without their call
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

    # 2. calls without their result
    answered = {p.call_id for m in out for p in m.parts if isinstance(p, ToolResultPart)}
    unanswered = {p.call_id for m in out for p in m.parts if isinstance(p, ToolCallPart)} - answered
    if unanswered:
        pending = _pending_ids(out, unanswered) if keep_pending else set()
        fix = unanswered - pending
        if fix:
            fixed: list[Message] = []
            i = 0
            while i < len(out):
                m = out[i]
                fixed.append(m)
                missing = [c for c in m.parts if isinstance(c, ToolCallPart) and c.call_id in fix]
                i += 1
                if not missing:
                    continue
                results: list[Part] = [
                    ToolResultPart(c.call_id, c.name, NEVER_ANSWERED, is_error=True) for c in missing
                ]
                for c in missing:
                    repairs.append(f"answered a call that never got a result ({c.name}, {c.call_id})")
                if i < len(out) and out[i].role == "tool":  # this message's own results: add to them
                    fixed.append(Message("tool", list(out[i].parts) + results))
                    i += 1
                else:
                    fixed.append(Message("tool", results))
            out = fixed

    # 3. ids: store off, stale references, reasoning/message pairing
    store_off = stale = paired = 0
    with_ids: list[Message] = []
    for m in out:
        drop, n_off, n_stale, pairing = (
            _ids_to_detach(m, store=store, known_ids=known_ids)
            if any(p.item_id is not None for p in m.parts)
            else ([], 0, 0, False)
        )
        if not drop:
            with_ids.append(m)
            continue
        store_off += n_off
        stale += n_stale
        paired += pairing
        gone = set(drop)
        with_ids.append(
            Message(
                m.role, [replace(p, item_id=None, meta=dict(p.meta)) if i in gone else p for i, p in enumerate(m.parts)]
            )
        )
    out = with_ids
    if store_off:
        repairs.append(f"{ROUTINE} sent {store_off} stored item id{'s' if store_off != 1 else ''} inline")
    if stale:
        repairs.append(f"detached {stale} item id{'s' if stale != 1 else ''} the provider no longer holds")
    if paired:
        repairs.append(
            f"sent {paired} assistant message{'s' if paired != 1 else ''} inline: its reasoning item is missing"
        )
    return out, repairs


def notable(repairs: list[str]) -> list[str]:
    """The repairs worth telling the user about (routine store-off normalisation left out)."""
    return [r for r in repairs if not r.startswith(ROUTINE)]


__all__ = ["NEVER_ANSWERED", "ROUTINE", "answered_only", "check_and_repair", "notable", "pending_calls"]
