"""Automatic pruning of the WIRE copy of a session (the session's own history stays complete).

As the seed (shiro-neko ``src/prune.ts``) does it, plus one thing it does not: when tool content is
pruned, a short digest of what was discarded goes into the wire copy, so the model knows what that
span held (tools, files, outcomes, decisions) instead of seeing nothing.

* :func:`estimate_tokens` — ``round(len(json.dumps(messages_to_json(messages))) / 4)``, an estimate,
  not a token count; :class:`TokenMeter` computes the same number incrementally.
* :func:`prune_to_fit` — at or under the threshold the list is returned as is; otherwise reasoning
  is stripped and every provider item id detached; if that is still too big, tool calls and results
  before the last N messages go, N from the ladder ``[64, 32, 16, 8, 4]`` (the widest that fits, or
  the narrowest; never an empty list).
* the repairs: :func:`detach_orphaned_items`, :func:`drop_orphaned_results`,
  :func:`detach_provider_items`. A call without a result is kept on purpose: that is what a call
  waiting for approval looks like.

Nothing here mutates the messages it is given: changed messages and parts are copies.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from .transcript import Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

DEFAULT_THRESHOLD = 120_000
LADDER: tuple[int, ...] = (64, 32, 16, 8, 4)
AMBER_FROM = 66
RED_FROM = 90
DIGEST_LIMIT = 1_500
FILE_TOOLS = ("read_file", "write_file", "edit_file", "grep", "list_files")


# -- the estimate --------------------------------------------------------------------------------
# The serialised length of a message is computed field by field, without building the JSON dicts
# or the text: for the default ``json.dumps`` settings (``ensure_ascii``, ", " and ": "
# separators) it is exactly ``len(json.dumps(message.to_json()))`` (see ``transcript.part_to_json``).
_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps does for a str, C-accelerated

_ITEM_ID = len(', "itemId": ')
_META = len(', "meta": ')
_TEXT = len('{"type": "text", "text": }')
_REASONING = len('{"type": "reasoning", "summary": }')
_ENCRYPTED = len(', "encrypted": ')
_CALL = len('{"type": "tool_call", "callId": , "name": , "arguments": }')
_RESULT = len('{"type": "tool_result", "callId": , "name": , "output": }')
_IS_ERROR = len(', "isError": true')
_MESSAGE = len('{"role": , "parts": []}')


def _json_len(value: Any) -> int:
    return len(_encode_str(value)) if isinstance(value, str) else len(json.dumps(value))


def _id_chars(part: Part) -> int:
    """What the part's ``itemId`` adds to its serialised length (0 without one)."""
    return 0 if part.item_id is None else _ITEM_ID + _json_len(part.item_id)


def _part_chars(part: Part) -> int:
    """``len(json.dumps(part_to_json(part)))``."""
    enc = _encode_str
    kind = type(part)
    if kind is ToolResultPart or kind is ToolCallPart or kind is TextPart:  # the common case: str fields
        try:
            if kind is TextPart:
                n = _TEXT + len(enc(part.text))  # type: ignore[union-attr]
            elif kind is ToolCallPart:
                n = _CALL + len(enc(part.call_id)) + len(enc(part.name)) + len(enc(part.arguments))  # type: ignore[union-attr]
            else:
                n = _RESULT + len(enc(part.call_id)) + len(enc(part.name)) + len(enc(part.output))  # type: ignore[union-attr]
                if part.is_error:  # type: ignore[union-attr]
                    n += _IS_ERROR
        except TypeError:  # a field that is not a str: the general way below
            return _part_chars_general(part)
        item_id = part.item_id
        if item_id is not None:
            n += _ITEM_ID + (len(enc(item_id)) if type(item_id) is str else _json_len(item_id))
        if part.meta:
            n += _META + len(json.dumps(dict(part.meta)))
        return n
    return _part_chars_general(part)


def _part_chars_general(part: Part) -> int:
    if isinstance(part, TextPart):
        n = _TEXT + _json_len(part.text)
    elif isinstance(part, ReasoningPart):
        n = _REASONING + len(json.dumps(list(part.summary)))
        if part.encrypted is not None:
            n += _ENCRYPTED + _json_len(part.encrypted)
    elif isinstance(part, ToolCallPart):
        n = _CALL + _json_len(part.call_id) + _json_len(part.name) + _json_len(part.arguments)
    else:
        n = _RESULT + _json_len(part.call_id) + _json_len(part.name) + _json_len(part.output)
        if part.is_error:
            n += _IS_ERROR
    if part.item_id is not None:
        n += _ITEM_ID + _json_len(part.item_id)
    if part.meta:
        n += _META + len(json.dumps(dict(part.meta)))
    return n


def _role_chars(role: Any) -> int:
    return _MESSAGE + _json_len(role)


def _parts_total(lengths_sum: int, k: int) -> int:
    return lengths_sum + (2 * (k - 1) if k > 0 else 0)


def _message_chars(message: Message) -> int:
    """``len(json.dumps(message.to_json()))``."""
    parts = message.parts
    return _role_chars(message.role) + _parts_total(sum([_part_chars(p) for p in parts]), len(parts))


def _total_chars(lengths: list[int] | Any, n: int) -> int:
    # json.dumps of a list: "[" + ", ".join(items) + "]"
    return 2 + sum(lengths) + (2 * (n - 1) if n > 0 else 0)


def estimate_tokens(messages: list[Message]) -> int:
    """``round(len(json.dumps(messages_to_json(messages))) / 4)``."""
    return round(_total_chars([_message_chars(m) for m in messages], len(messages)) / 4)


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
    or replaced); only new or changed messages are serialised. Entries for messages no longer present are dropped.
    """

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Message, tuple[Any, ...], int]] = {}
        self.last = 0  # the latest estimate
        self.serialised = 0  # how many messages the last call had to serialise (for tests/benchmarks)

    def estimate(self, messages: list[Message]) -> int:
        cache = self._cache
        fresh: dict[int, tuple[Message, tuple[Any, ...], int]] = {}
        total = 0
        serialised = 0
        for m in messages:
            key = id(m)
            sig = _signature(m)
            hit = cache.get(key)
            if hit is not None and hit[0] is m and hit[1] == sig:
                n = hit[2]
                fresh[key] = hit
            else:
                n = _message_chars(m)
                serialised += 1
                fresh[key] = (m, sig, n)
            total += n
        self._cache = fresh
        self.serialised = serialised
        self.last = round(_total_chars([total], len(messages)) / 4)
        return self.last

    update = estimate

    def percent(self, threshold: int = DEFAULT_THRESHOLD) -> int:
        """The latest estimate as a percentage of ``threshold``."""
        return percent(self.last, threshold)


# -- the repairs ---------------------------------------------------------------------------------
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


def _reasoning_ids(message: Message) -> set[str]:
    return {p.item_id for p in message.parts if isinstance(p, ReasoningPart) and p.item_id}


def detach_orphaned_items(before: list[Message], after: list[Message]) -> list[Message]:
    """For each assistant message in ``after`` whose reasoning item ids (as found in ``before``) are
    all gone, strip the item id from every part that has one. The parts themselves stay (text and
    tool calls survive, inline), other ``meta`` keys stay; user/tool messages, messages whose
    reasoning survived and parts without an id are left untouched.

    Messages are matched by identity first, then by position among assistant messages."""
    origin: dict[int, Message] = {}
    before_assistants = [m for m in before if m.role == "assistant"]
    after_assistants = [m for m in after if m.role == "assistant"]
    by_id = {id(m): m for m in before_assistants}
    for i, m in enumerate(after_assistants):
        if id(m) in by_id:
            origin[id(m)] = m
        elif len(after_assistants) == len(before_assistants):
            origin[id(m)] = before_assistants[i]
    out: list[Message] = []
    for m in after:
        src = origin.get(id(m)) if m.role == "assistant" else None
        wanted = _reasoning_ids(src) if src is not None else set()
        if wanted and not (wanted & _reasoning_ids(m)) and any(p.item_id is not None for p in m.parts):
            out.append(Message(m.role, [_detached(p) for p in m.parts]))
        else:
            out.append(m)
    return out


def drop_orphaned_results(messages: list[Message]) -> list[Message]:
    """Drop tool results whose call no longer survives (a 400 otherwise), and any message left
    empty by that. A healthy result next to an orphan is kept. Calls without results are kept."""
    calls: set[str] = set()
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant":
            calls.update(c.call_id for c in m.parts if isinstance(c, ToolCallPart))
        results = [p for p in m.parts if isinstance(p, ToolResultPart)]
        if results and any(r.call_id not in calls for r in results):
            kept = [p for p in m.parts if not (isinstance(p, ToolResultPart) and p.call_id not in calls)]
            if kept:
                out.append(Message(m.role, kept))
            continue
        out.append(m)
    return out


def strip_reasoning(messages: list[Message]) -> list[Message]:
    """Copies without reasoning parts; a message left empty is removed."""
    out: list[Message] = []
    for m in messages:
        if any(isinstance(p, ReasoningPart) for p in m.parts):
            kept = [p for p in m.parts if not isinstance(p, ReasoningPart)]
            if kept:
                out.append(Message(m.role, kept))
        else:
            out.append(m)
    return out


# -- pruning -------------------------------------------------------------------------------------
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


def _drop_tools_before_tail(messages: list[Message], keep: int) -> tuple[list[Message], int, int]:
    """Remove tool calls and results from every message before the last ``keep``; returns the new
    list and the [start, end) span of original indices that lost something."""
    cut = max(0, len(messages) - keep)
    out: list[Message] = []
    first, last = -1, -1
    for i, m in enumerate(messages):
        if i < cut and any(isinstance(p, (ToolCallPart, ToolResultPart)) for p in m.parts):
            kept = [p for p in m.parts if not isinstance(p, (ToolCallPart, ToolResultPart))]
            first = i if first < 0 else first
            last = i
            if kept:
                out.append(Message(m.role, kept))
            continue
        out.append(m)
    return out, first, last + 1


def _first_user_index(messages: list[Message]) -> int:
    return next((i for i, m in enumerate(messages) if m.role == "user"), -1)


def keep_tail(messages: list[Message], keep: int, *, digest: bool = True
              ) -> tuple[list[Message], tuple[int, int] | None]:
    """One rung of the ladder: reasoning stripped, tool calls and results before the last ``keep``
    messages removed (messages left empty removed), orphaned results dropped, every id detached,
    and (``digest``) the digest of the pruned span inserted. Never an empty list."""
    return _keep_tail(messages, keep, digest, None)


_KINDS = {TextPart: 0, ReasoningPart: 1, ToolCallPart: 2, ToolResultPart: 3}


class _Sizes:
    """Per-part serialised lengths of one history, measured once, so the size of each candidate
    wire copy (reasoning stripped, a ladder rung) is added up instead of re-serialised.

    Each number is exactly what :func:`estimate_tokens` would give for the list the corresponding
    function builds (``strip_reasoning`` + ``detach_provider_items``, :func:`keep_tail`)."""

    __slots__ = ("messages", "roles", "parts")

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.roles = [_role_chars(m.role) for m in messages]
        # per message: its parts as (part, kind, full length, length without the item id)
        # kind: 0 other, 1 reasoning, 2 tool call, 3 tool result
        table: list[list[tuple[Part, int, int, int]]] = []
        kinds = _KINDS
        for m in messages:
            row = []
            for p in m.parts:
                full = _part_chars(p)
                kind = kinds.get(type(p))
                if kind is None:
                    kind = (1 if isinstance(p, ReasoningPart) else 2 if isinstance(p, ToolCallPart)
                            else 3 if isinstance(p, ToolResultPart) else 0)
                row.append((p, kind, full, full if p.item_id is None else full - _id_chars(p)))
            table.append(row)
        self.parts = table

    def full_tokens(self) -> int:
        total = 0
        for role, row in zip(self.roles, self.parts):
            total += role + _parts_total(sum([r[2] for r in row]), len(row))
        return round(_total_chars([total], len(self.parts)) / 4)

    def stripped_tokens(self) -> int:
        """The estimate of ``detach_provider_items(strip_reasoning(messages))``."""
        total = count = 0
        for role, row in zip(self.roles, self.parts):
            if any(r[1] == 1 for r in row):
                row = [r for r in row if r[1] != 1]
                if not row:
                    continue
            total += role + _parts_total(sum([r[3] for r in row]), len(row))
            count += 1
        return round(_total_chars([total], count) / 4)

    def rung(self, keep: int) -> tuple[int, int, tuple[int, int] | None]:
        """(characters, messages, span) of ``keep_tail(messages, keep, digest=False)``; the
        characters are those of the list's items only (see :func:`_total_chars`). ``count`` 0 means
        the rung would fall back to the first prompt (not measured here)."""
        cut = max(0, len(self.parts) - keep)
        calls: set[str] = set()
        total = count = 0
        first = last = -1
        for i, (role, row, m) in enumerate(zip(self.roles, self.parts, self.messages)):
            if i < cut and any(r[1] >= 2 for r in row):  # tool calls and results before the tail go
                row = [r for r in row if r[1] < 2]
                first = i if first < 0 else first
                last = i
                if not row:
                    continue
            if any(r[1] == 1 for r in row):  # reasoning goes
                row = [r for r in row if r[1] != 1]
                if not row:
                    continue
            if m.role == "assistant":
                calls.update([r[0].call_id for r in row if r[1] == 2])  # type: ignore[union-attr]
            if any(r[1] == 3 and r[0].call_id not in calls for r in row):  # type: ignore[union-attr]
                row = [r for r in row if not (r[1] == 3 and r[0].call_id not in calls)]  # type: ignore[union-attr]
                if not row:
                    continue
            total += role + _parts_total(sum([r[3] for r in row]), len(row))
            count += 1
        return total, count, ((first, last + 1) if first >= 0 else None)


def _tokens(chars: int, count: int) -> int:
    return round(_total_chars([chars], count) / 4)


def _keep_tail(messages: list[Message], keep: int, digest: bool, note: str | None
               ) -> tuple[list[Message], tuple[int, int] | None]:
    """:func:`keep_tail`, optionally with the digest text already made."""
    n = len(messages)
    pruned, start, end = _drop_tools_before_tail(messages, keep)
    wire = detach_provider_items(drop_orphaned_results(strip_reasoning(pruned)))
    if not wire:  # never an empty list: the first user prompt, or failing that a marker
        wire = [m for m in messages if m.role == "user"][:1] or [Message.user("[context pruned]")]
    span = (start, end) if start >= 0 else None
    if digest and span is not None:
        hidden = max(0, n - len(wire))
        text = note if note is not None else pruned_digest(messages, span, hidden)
        note_message = Message.user(text)
        at = _first_user_index(wire)
        wire = wire[: at + 1] + [note_message] + wire[at + 1:]
    return wire, span


def prune_to_fit(messages: list[Message], threshold: int = DEFAULT_THRESHOLD, *,
                 meter: TokenMeter | None = None, digest: bool = True) -> PruneResult:
    """The wire copy of ``messages`` that fits ``threshold`` estimated tokens (see module doc)."""
    n = len(messages)
    sizes: _Sizes | None = None
    if meter is not None:
        est = meter.estimate(messages)
    else:
        sizes = _Sizes(messages)
        est = sizes.full_tokens()
    if est <= threshold:
        return PruneResult(messages, n, n, False, None, est, est)
    if sizes is None:
        sizes = _Sizes(messages)
    # 1. reasoning first, and every provider id (a pruned request is always inline)
    est1 = sizes.stripped_tokens()
    if est1 <= threshold:
        stripped = detach_provider_items(strip_reasoning(messages))
        return PruneResult(stripped, n, len(stripped), True, None, est, est1)
    # 2. the keep-tail ladder over the original indices (reasoning stays stripped); each rung is
    #    measured from the part lengths, and only the chosen one is built
    user_chars = _role_chars("user") + _TEXT
    chosen: tuple[int, str | None, int] | None = None  # (keep, digest text, tokens) or keep only
    for index, keep in enumerate(LADDER):
        final = index == len(LADDER) - 1
        chars, count, span = sizes.rung(keep)
        if count == 0:  # the fallback to the first prompt: build it to measure it
            wire, span = _keep_tail(messages, keep, digest, None)
            tokens = estimate_tokens(wire)
            if tokens <= threshold or final:
                return PruneResult(wire, n, len(wire), True, span, est, tokens, keep)
            continue
        note: str | None = None
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
        if tokens <= threshold or final:
            chosen = (keep, note, tokens)
            break
    assert chosen is not None
    keep, note, tokens = chosen
    wire, span = _keep_tail(messages, keep, digest, note)
    return PruneResult(wire, n, len(wire), True, span, est, tokens, keep)


# -- the digest of what was pruned ----------------------------------------------------------------
def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _outcome(p: ToolResultPart) -> str:
    lines = [ln for ln in p.output.strip().splitlines() if ln.strip()]
    return f"{p.name}: {_clip(lines[-1], 80) if lines else '(empty)'}"


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
        lines.append(f"outcomes: {errors} error{'s' if errors != 1 else ''}; last: "
                     + " | ".join(_outcome(p) for p in outcomes[-3:]))
    if decisions:
        lines.append("decisions: " + " | ".join(_clip(text, 120) for text in decisions[-3:]))
    text = "\n".join(lines)
    return text if len(text) <= DIGEST_LIMIT else text[: DIGEST_LIMIT - 1] + "…"


def insert_digest(wire: list[Message], original: list[Message], span: tuple[int, int], hidden: int) -> list[Message]:
    """``wire`` with one user-role digest message right after the first user prompt."""
    note = Message.user(pruned_digest(original, span, max(0, hidden)))
    at = _first_user_index(wire)
    return wire[: at + 1] + [note] + wire[at + 1:]


__all__ = [
    "DEFAULT_THRESHOLD", "LADDER", "PruneResult", "TokenMeter", "detach_orphaned_items", "detach_provider_items",
    "drop_orphaned_results", "estimate_tokens", "insert_digest", "keep_tail", "meter_label", "percent", "prune_to_fit",
    "pruned_digest", "strip_reasoning",
]
