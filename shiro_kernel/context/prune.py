"""Automatic pruning of the WIRE copy of a session (the session's own history stays complete).

As the seed (shiro-neko ``src/prune.ts``) does it, plus one thing it does not: when tool content is
pruned, a short digest of what was discarded goes into the wire copy, so the model knows what that
span held (tools, files, outcomes, decisions) instead of seeing nothing.

* :func:`estimate_tokens` — ``round(len(json.dumps(messages_to_json(messages))) / 4)``, an estimate,
  not a token count, computed from :func:`part_chars` (the one measure of a part, exact for the
  default ``json.dumps``) without building the JSON; :class:`TokenMeter` keeps it incrementally.
* images: each counts as :data:`IMAGE_TOKENS` (a fixed estimate: OpenAI bills a 1,024-px image at
  about 765 tokens at high detail) on top of its reference's JSON; :func:`limit_images` keeps only the
  newest :data:`KEEP_IMAGES` on the wire, the older ones replaced by a line naming what they showed.
* :func:`prune_to_fit` — at or under the threshold the list is returned as is; otherwise reasoning is
  stripped and every provider item id detached; if that is still too big, tool calls and results before
  the last N messages go, N from the ladder ``[64, 32, 16, 8, 4]`` (the widest that fits, or the
  narrowest; never an empty list).

Every candidate wire copy is a *plan* (:func:`_plan`: which parts of which messages survive, by one
implementation of the rules — the tail kept, reasoning dropped, results whose call did not survive
dropped by :func:`~shiro_kernel.context.rules.answered_only`); a plan is measured by adding up part
sizes measured once, and only the chosen plan is built. A call without a result is kept on purpose:
that is what a call waiting for approval looks like. Nothing given is mutated.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from ..text import cut, one_line
from ..transcript import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from .rules import answered_only

DEFAULT_THRESHOLD = 120_000
LADDER: tuple[int, ...] = (64, 32, 16, 8, 4)
AMBER_FROM = 66
RED_FROM = 90
DIGEST_LIMIT = 1_500
FILE_TOOLS = ("read_file", "write_file", "edit_file", "grep", "list_files")
#: the estimate of one image, in tokens (see the module doc)
IMAGE_TOKENS = 800
#: images sent with one request: the newest few
KEEP_IMAGES = 3


# -- the one measure ------------------------------------------------------------------------------
# The serialised length of a part, field by field, for the default ``json.dumps`` settings
# (``ensure_ascii``, ", " and ": " separators): exactly ``len(json.dumps(part_to_json(part)))``.
_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps does for a str, C-accelerated

_ITEM_ID = len(', "itemId": ')
_META = len(', "meta": ')
_TEXT = len('{"type": "text", "text": }')
_REASONING = len('{"type": "reasoning", "summary": }')
_ENCRYPTED = len(', "encrypted": ')
_CALL = len('{"type": "tool_call", "callId": , "name": , "arguments": }')
_RESULT = len('{"type": "tool_result", "callId": , "name": , "output": }')
_IS_ERROR = len(', "isError": true')
_IMAGES = len(', "images": ')
_MESSAGE = len('{"role": , "parts": []}')


def _json_len(value: Any) -> int:
    return len(_encode_str(value)) if type(value) is str else len(json.dumps(value))


def part_chars(part: Part, *, with_id: bool = True) -> int:
    """``len(json.dumps(part_to_json(part)))`` (plus ``IMAGE_TOKENS * 4`` per image); with
    ``with_id=False`` as if its item id were detached."""
    if isinstance(part, TextPart):
        n = _TEXT + _json_len(part.text)
    elif isinstance(part, ToolResultPart):
        n = _RESULT + _json_len(part.call_id) + _json_len(part.name) + _json_len(part.output)
        if part.is_error:
            n += _IS_ERROR
        if part.images:
            n += _IMAGES + len(json.dumps([i.to_json() for i in part.images])) + IMAGE_TOKENS * 4 * len(part.images)
    elif isinstance(part, ToolCallPart):
        n = _CALL + _json_len(part.call_id) + _json_len(part.name) + _json_len(part.arguments)
    else:
        n = _REASONING + len(json.dumps(list(part.summary)))
        if part.encrypted is not None:
            n += _ENCRYPTED + _json_len(part.encrypted)
    if with_id and part.item_id is not None:
        n += _ITEM_ID + _json_len(part.item_id)
    if part.meta:
        n += _META + len(json.dumps(dict(part.meta)))
    return n


def _message_chars(role: str, part_sizes: list[int]) -> int:
    """A message's serialised length from its parts' (``{"role": …, "parts": [a, b]}``)."""
    k = len(part_sizes)
    return _MESSAGE + _json_len(role) + sum(part_sizes) + (2 * (k - 1) if k > 0 else 0)


def message_chars(message: Message) -> int:
    """``len(json.dumps(message.to_json()))``."""
    return _message_chars(message.role, [part_chars(p) for p in message.parts])


def _tokens(chars: int, count: int) -> int:
    """The estimate of a list of ``count`` messages whose own lengths add up to ``chars``:
    ``json.dumps`` of a list is ``"[" + ", ".join(items) + "]"``."""
    return round((2 + chars + (2 * (count - 1) if count > 0 else 0)) / 4)


def estimate_tokens(messages: list[Message]) -> int:
    """``round(len(json.dumps(messages_to_json(messages))) / 4)``."""
    return _tokens(sum([message_chars(m) for m in messages]), len(messages))


def percent(estimate: int, threshold: int = DEFAULT_THRESHOLD) -> int:
    """Context used as a percentage of the pruning threshold: ``min(100, round(est/threshold·100))``."""
    if threshold <= 0:
        return 100
    return min(100, round(estimate / threshold * 100))


def meter_label(pct: int) -> tuple[str, str]:
    """``("<pct>% ctx", level)``; from 90 the label adds `` compacting soon``.

    The level is ``normal``, ``amber`` (from 66) or ``red`` (from 90)."""
    if pct >= RED_FROM:
        return f"{pct}% ctx compacting soon", "red"
    return f"{pct}% ctx", "amber" if pct >= AMBER_FROM else "normal"


def _signature(message: Message) -> tuple[Any, ...]:
    """A cheap change check: the role, the parts list object, its length and each part's identity.

    Parts are replaced, not edited, everywhere in the project (a repair makes copies), so a part
    edited in place after it was measured is the one change this does not see."""
    parts = message.parts
    return (message.role, id(parts), len(parts), tuple([id(p) for p in parts]))


class TokenMeter:
    """:func:`estimate_tokens` without re-serialising the whole history every step.

    Each message's serialised length is cached by object identity (the object is kept, so an id is
    never reused while cached) plus a cheap change check (:func:`_signature`: parts added, removed
    or replaced); only new or changed messages are measured. Entries for messages no longer present
    are dropped.
    """

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Message, tuple[Any, ...], int]] = {}
        self.last = 0  # the latest estimate
        self.serialised = 0  # how many messages the last call had to measure (for tests/benchmarks)

    def estimate(self, messages: list[Message]) -> int:
        cache = self._cache
        fresh: dict[int, tuple[Message, tuple[Any, ...], int]] = {}
        total = 0
        measured = 0
        for m in messages:
            key = id(m)
            sig = _signature(m)
            hit = cache.get(key)
            if hit is not None and hit[0] is m and hit[1] == sig:
                n = hit[2]
                fresh[key] = hit
            else:
                n = message_chars(m)
                measured += 1
                fresh[key] = (m, sig, n)
            total += n
        self._cache = fresh
        self.serialised = measured
        self.last = _tokens(total, len(messages))
        return self.last

    def cold_for(self, messages: list[Message]) -> bool:
        """Would :meth:`estimate` measure most of ``messages`` (a new turn on a long resumed history)?"""
        return len(self._cache) < len(messages) // 2

    def adopt(self, messages: list[Message], totals: list[int]) -> int:
        """Take the lengths a full measuring pass found (``totals[i]`` is ``message_chars(messages[i])``)
        as this meter's cache, as :meth:`estimate` would have left it; returns the estimate."""
        self._cache = {id(m): (m, _signature(m), n) for m, n in zip(messages, totals, strict=True)}
        self.serialised = len(messages)
        self.last = _tokens(sum(totals), len(messages))
        return self.last

    def percent(self, threshold: int = DEFAULT_THRESHOLD) -> int:
        """The latest estimate as a percentage of ``threshold``."""
        return percent(self.last, threshold)


# -- ids ------------------------------------------------------------------------------------------
_PLAIN_PARTS = (TextPart, ReasoningPart, ToolCallPart, ToolResultPart)


def _detached(part: Part) -> Part:
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
            out.append(Message(m.role, [_detached(p) for p in m.parts]))
        else:
            out.append(m)
    return out


# -- images ---------------------------------------------------------------------------------------
def limit_images(messages: list[Message], keep: int = KEEP_IMAGES) -> tuple[list[Message], int]:
    """The wire copy with only the newest ``keep`` images; each older one is replaced by a line in its
    result's text naming what it showed. Returns ``(messages, how many were left out)``; the same list
    when nothing goes. The session's own history keeps every image."""
    seen = 0
    cut_at = -1  # messages before this index lose their images
    for i in range(len(messages) - 1, -1, -1):
        for p in messages[i].parts:
            if isinstance(p, ToolResultPart) and p.images:
                seen += len(p.images)
        if seen > keep:
            cut_at = i
            break
    if cut_at < 0:
        return messages, 0
    out: list[Message] = []
    dropped = 0
    remaining = keep
    # walk newest first so the newest `keep` images survive, even inside one message
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if i > cut_at or not any(isinstance(p, ToolResultPart) and p.images for p in m.parts):
            if i > cut_at:
                remaining -= sum(len(p.images) for p in m.parts if isinstance(p, ToolResultPart))
            out.append(m)
            continue
        parts: list[Part] = []
        for p in reversed(m.parts):
            if isinstance(p, ToolResultPart) and p.images:
                kept = p.images[len(p.images) - max(0, remaining) :] if remaining > 0 else []
                gone = p.images[: len(p.images) - len(kept)]
                remaining -= len(kept)
                dropped += len(gone)
                notes = "".join(
                    f"\n[image left out of this request to save context: {g.alt or 'an image'}]" for g in gone
                )
                p = replace(p, images=list(kept), output=p.output + notes, meta=dict(p.meta))
            parts.append(p)
        out.append(Message(m.role, parts[::-1]))
    return out[::-1], dropped


# -- sizes ----------------------------------------------------------------------------------------
#: one tool call's arguments, and one tool result, at most on the wire (the session keeps them whole)
WIRE_ARGUMENT_CHARS = 20_000
WIRE_RESULT_CHARS = 30_000


def limit_sizes(messages: list[Message]) -> tuple[list[Message], int]:
    """The wire copy with every tool call's arguments and every tool result cut to their caps (a 5 MB
    argument would otherwise ride along in every later request). Returns ``(messages, how many parts
    were shortened)``; the same list when none was. Shortened arguments stay valid JSON."""
    out: list[Message] | None = None
    shortened = 0
    for i, m in enumerate(messages):
        parts: list[Part] | None = None
        for j, p in enumerate(m.parts):
            new: Part | None = None
            if isinstance(p, ToolCallPart) and len(p.arguments) > WIRE_ARGUMENT_CHARS:
                head = p.arguments[: WIRE_ARGUMENT_CHARS // 2]
                note = (
                    f"{head}… [{len(p.arguments) - len(head):,} more characters of these arguments are left out "
                    "of this request; the call ran with them in full]"
                )
                new = replace(p, arguments=json.dumps({"_shortened": note}), meta=dict(p.meta))
            elif isinstance(p, ToolResultPart) and len(p.output) > WIRE_RESULT_CHARS:
                new = replace(
                    p, output=cut(p.output, WIRE_RESULT_CHARS, tail=WIRE_RESULT_CHARS // 4), meta=dict(p.meta)
                )
            if new is not None:
                if parts is None:
                    parts = list(m.parts)
                parts[j] = new
                shortened += 1
        if parts is not None:
            if out is None:
                out = list(messages[:i])
            out.append(Message(m.role, parts))
        elif out is not None:
            out.append(m)
    return (out if out is not None else messages), shortened


# -- pruning --------------------------------------------------------------------------------------
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


def _build(messages: list[Message], plan: Plan) -> list[Message]:
    """The plan as messages, every item id detached; a message that survived whole and has no id is
    passed through as it is."""
    out: list[Message] = []
    for i, parts in plan:
        m = messages[i]
        if parts is m.parts and not any(p.item_id is not None for p in parts):
            out.append(m)
        else:
            out.append(Message(m.role, [_detached(p) for p in parts]))
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


def keep_tail(
    messages: list[Message], keep: int, *, digest: bool = True
) -> tuple[list[Message], tuple[int, int] | None]:
    """One rung of the ladder as messages: the plan for ``keep`` built, with the digest of the pruned
    span inserted (``digest``). Never an empty list."""
    plan, span = _plan(messages, keep)
    wire = _build(messages, plan)
    note = pruned_digest(messages, span, max(0, len(messages) - len(wire))) if digest and span else None
    return _with_digest(messages, wire, span, note), span


def prune_to_fit(
    messages: list[Message], threshold: int = DEFAULT_THRESHOLD, *, meter: TokenMeter | None = None, digest: bool = True
) -> PruneResult:
    """The wire copy of ``messages`` that fits ``threshold`` estimated tokens (see module doc)."""
    n = len(messages)
    sizes: _Sizes | None = None
    if meter is not None and not meter.cold_for(messages):
        est = meter.estimate(messages)  # a later step: only what changed is measured
    else:  # one pass measures the parts for the ladder and gives the estimate (and warms the meter)
        sizes = _Sizes(messages)
        est = sizes.tokens if meter is None else meter.adopt(messages, sizes.totals)
    if est <= threshold:
        return PruneResult(messages, n, n, False, None, est, est)
    if sizes is None:
        sizes = _Sizes(messages)
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


# -- the digest of what was pruned ----------------------------------------------------------------
def _outcome(p: ToolResultPart) -> str:
    lines = [ln for ln in p.output.strip().splitlines() if ln.strip()]
    return f"{p.name}: {_clip_line(lines[-1], 80) if lines else '(empty)'}"


def pruned_digest(messages: list[Message], span: tuple[int, int], hidden: int) -> str:
    """One short paragraph on what the pruned span held; no model call, at most ``DIGEST_LIMIT`` chars."""
    start, end = span
    tools: Counter[str] = Counter()
    files: list[str] = []
    errors = 0
    outcomes: list[ToolResultPart] = []
    decisions: list[str] = []
    for m in messages[start:end]:
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                tools[p.name] += 1
                if p.name in FILE_TOOLS:
                    try:
                        args = p.parsed_arguments()
                    except ValueError:
                        args = {}
                    for key in ("path", "pattern") if p.name == "list_files" else ("path",):
                        value = args.get(key)
                        if isinstance(value, str) and value and value not in files:
                            files.append(value)
            elif isinstance(p, ToolResultPart):
                if p.is_error or p.output.startswith("Error:"):
                    errors += 1
                outcomes.append(p)  # only the last three are summarised
            elif isinstance(p, TextPart) and m.role == "assistant" and p.text.strip():
                decisions.append(p.text)  # only the last three are clipped
    lines = [f"[context pruned: {hidden} earlier messages not shown]"]
    if tools:
        lines.append("tools used: " + ", ".join(f"{name} ×{count}" for name, count in tools.most_common(12)))
    if files:
        shown = files[-15:]
        more = f" (+{len(files) - len(shown)} more)" if len(files) > len(shown) else ""
        lines.append("files touched: " + ", ".join(shown) + more)
    if outcomes:
        lines.append(
            f"outcomes: {errors} error{'s' if errors != 1 else ''}; last: "
            + " | ".join(_outcome(p) for p in outcomes[-3:])
        )
    if decisions:
        lines.append("decisions: " + " | ".join(_clip_line(text, 120) for text in decisions[-3:]))
    return cut("\n".join(lines), DIGEST_LIMIT, ellipsis="…")


def _clip_line(text: str, limit: int) -> str:
    return one_line(text, limit, "…")


__all__ = [
    "DEFAULT_THRESHOLD",
    "IMAGE_TOKENS",
    "KEEP_IMAGES",
    "LADDER",
    "PruneResult",
    "TokenMeter",
    "detach_provider_items",
    "estimate_tokens",
    "keep_tail",
    "limit_images",
    "limit_sizes",
    "message_chars",
    "meter_label",
    "part_chars",
    "percent",
    "prune_to_fit",
    "pruned_digest",
]
