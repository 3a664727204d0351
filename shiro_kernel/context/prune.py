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

The rules are those of :func:`_plan` (which parts of which messages survive — the tail kept, reasoning
dropped, results whose call did not survive dropped by :func:`~shiro_kernel.context.rules.answered_only`).
A session keeps one :class:`TokenMeter` for its life, and the meter a :class:`Record` of each message:
its length, and what the rules leave of it before a rung's tail (no tool content, no reasoning) or in the
reasoning-only plan, measured once while the message is unchanged. What the history holds as a whole
(:class:`_Scan`) and the digest of a pruned span (:class:`_Digest`) are added up message by message, so a
step of a session that only grew reads its new messages: a rung is measured by adding up, only the
rung's tail (at most 64 messages) goes through :func:`_plan`, and the copies of the messages before it
are kept. ``tests/context/prune_oracle.py`` keeps the ladder that measured every part each step, and the
tests hold this one to exactly its answers. A call without a result is kept on purpose: that is what a
call waiting for approval looks like. Nothing given is mutated.
"""

from __future__ import annotations

import json
from bisect import bisect_left
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


_ROLE_CHARS = {role: _MESSAGE + len(json.dumps(role)) for role in ("user", "assistant", "tool", "system")}


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
    """Context used as a percentage of the pruning threshold: ``min(100, est/threshold·100 rounded half up)``."""
    if threshold <= 0:
        return 100
    return min(100, int(estimate / threshold * 100 + 0.5))  # half up (0.5 % shows 1 %), as the seed's Math.round


def meter_label(pct: int) -> tuple[str, str]:
    """``("<pct>% ctx", level)``; from 90 the label adds `` compacting soon``.

    The level is ``normal``, ``amber`` (from 66) or ``red`` (from 90)."""
    if pct >= RED_FROM:
        return f"{pct}% ctx compacting soon", "red"
    return f"{pct}% ctx", "amber" if pct >= AMBER_FROM else "normal"


class Record:
    """One message as measured, for :class:`TokenMeter` and the ladder: its serialised length, and what the
    wire copy's rules would leave of it, measured once while the message is unchanged.

    ``head_chars`` is its length with tool calls, tool results, reasoning and item ids gone (what a
    message before a rung's tail keeps), ``bare_chars`` with reasoning and item ids gone (the
    reasoning-only plan); -1 when nothing would be left. ``head`` and ``bare`` are those copies as
    messages, built the first time a request needs them."""

    __slots__ = (
        "bare",
        "bare_chars",
        "call_ids",
        "chars",
        "external",
        "flawed",
        "head",
        "head_chars",
        "images",
        "message",
        "odd",
        "oversize",
        "parts",
        "reasoning",
        "result_ids",
        "store_ids",
        "tools",
        "unpaired",
        "with_ids",
    )

    def __init__(self, message: Message) -> None:
        self.message = message
        parts = self.parts = list(message.parts)  # compared with the message's parts: a change is noticed
        full = head = bare = 0  # the parts' lengths: with ids; without tools or reasoning; without reasoning
        n_head = n_bare = images = 0
        calls: list[str] = []
        results: list[str] = []
        external: list[str] = []  # results whose call is not earlier in this message
        odd = with_ids = reasoning = flawed = oversize = store_ids = reasoning_lost = sibling_id = False
        for p in parts:
            size = part_chars(p, with_id=False)
            kind = type(p)
            item_id = p.item_id
            if kind is ToolCallPart:
                calls.append(p.call_id)  # type: ignore[union-attr]
                oversize = oversize or len(p.arguments) > WIRE_ARGUMENT_CHARS  # type: ignore[union-attr]
                bare += size
                n_bare += 1
            elif kind is ToolResultPart:
                results.append(p.call_id)  # type: ignore[union-attr]
                if p.call_id not in calls:  # type: ignore[union-attr]
                    external.append(p.call_id)  # type: ignore[union-attr]
                images += len(p.images)  # type: ignore[union-attr]
                oversize = oversize or len(p.output) > WIRE_RESULT_CHARS  # type: ignore[union-attr]
                bare += size
                n_bare += 1
            elif kind is ReasoningPart:
                odd = reasoning = True
                reasoning_lost = reasoning_lost or item_id is None
            else:
                if kind is not TextPart:  # a part kind the plan and the checks may treat differently
                    odd = flawed = True
                head += size
                bare += size
                n_head += 1
                n_bare += 1
            if item_id is not None:
                with_ids = True
                if kind is not ReasoningPart:
                    sibling_id = True
                    store_ids = True  # an id that cannot go out when the provider stores nothing
                elif not p.encrypted:  # type: ignore[union-attr]
                    store_ids = True
                size += _ITEM_ID + _json_len(item_id)
            full += size
        # a message is ``{"role": …, "parts": [a, b]}``: its own length plus its parts' and their separators
        base = _ROLE_CHARS.get(message.role) or _MESSAGE + _json_len(message.role)
        self.chars = base + full + (2 * (len(parts) - 1) if parts else 0)
        self.head_chars = base + head + 2 * (n_head - 1) if n_head else -1
        self.bare_chars = base + bare + 2 * (n_bare - 1) if n_bare else -1
        self.call_ids = calls
        self.result_ids = results
        self.tools = bool(calls or results)
        self.reasoning = reasoning
        self.odd = odd
        self.with_ids = with_ids
        # what the checks before pruning look at (see :meth:`_Scan.ready`)
        self.flawed = flawed
        self.oversize = oversize
        self.images = images
        self.external = external
        self.store_ids = store_ids
        self.unpaired = reasoning_lost and sibling_id and message.role == "assistant"
        self.head: Message | None = None
        self.bare: Message | None = None

    def head_message(self) -> Message:
        """The message as it goes out before a rung's tail: no tool content, no reasoning, no ids."""
        if self.head is None:
            m = self.message
            if not (self.tools or self.reasoning or self.with_ids):
                self.head = m
            else:
                keep = [p for p in m.parts if type(p) is not ToolCallPart and type(p) is not ToolResultPart]
                self.head = Message(m.role, [_detached(p) for p in keep if type(p) is not ReasoningPart])
        return self.head

    def bare_message(self) -> Message:
        """The message as the reasoning-only plan sends it: no reasoning, no ids."""
        if self.bare is None:
            m = self.message
            if not (self.reasoning or self.with_ids):
                self.bare = m
            else:
                self.bare = Message(m.role, [_detached(p) for p in m.parts if type(p) is not ReasoningPart])
        return self.bare


class TokenMeter:
    """:func:`estimate_tokens` without re-serialising the whole history every step, and the sizes the
    pruning ladder needs (:class:`Record`), measured once per message.

    Each message's record is cached by object identity (the object is kept, so an id is never reused
    while cached) and used while the message's parts are the ones measured (a part added, removed or
    replaced is noticed; parts are replaced, not edited, everywhere in the project); only new or
    changed messages are measured. Records of messages no longer present are dropped. A session keeps
    one meter for its life, so a turn's first step measures only what the last turn added."""

    def __init__(self) -> None:
        self._cache: dict[int, Record] = {}
        # the messages of the last call (their ids), their records and the sum of their lengths: a history
        # that only grew reuses them
        self._seen: tuple[list[int], list[Record], int] = ([], [], 0)
        # the last scan and digest: the records they read, and what they added up (see scan, digest)
        self._scan: tuple[list[Record], _Scan] | None = None
        self._digest: tuple[int, list[Record], _Digest] | None = None
        self.last = 0  # the latest estimate
        self.serialised = 0  # how many messages the last call had to measure (for tests/benchmarks)

    def records(self, messages: list[Message]) -> list[Record]:
        """Each message's record (measured now when new or changed); sets :attr:`last`."""
        return self._records(messages)[0]

    def _records(self, messages: list[Message]) -> tuple[list[Record], int]:
        """The records and the estimate. The view's context meter may ask from another thread while a turn
        prunes: what one call reads of the last (``_seen``: ids, records and their total) is one tuple."""
        seen, kept, kept_total = self._seen
        ids = list(map(id, messages))
        q = min(len(seen), len(ids))
        if ids[:q] != seen[:q]:  # where the history stopped being the one of the last call
            q = next(i for i, (a, b) in enumerate(zip(ids, seen)) if a != b)
        if q and [m.parts for m in messages[:q]] == [r.parts for r in kept[:q]]:
            # the usual step: the history kept its first q messages (the same objects: the records hold
            # them, so their ids are not reused) and none of them changed; only the rest is looked up
            gone = set(seen[q:]).difference(ids[q:])
            for key in gone:  # the messages that were after them (a step taken back, a retry)
                self._cache.pop(key, None)
            out = kept[:q] + self._measure(messages[q:])
            total = kept_total if q == len(kept) else sum([r.chars for r in kept[:q]])
            total += sum([r.chars for r in out[q:]])
        else:
            out = self._measure(messages, drop_others=True)
            total = sum([r.chars for r in out])
        self._seen = (ids, out, total)
        estimate = _tokens(total, len(messages))
        self.last = estimate
        return out, estimate

    def _measure(self, messages: list[Message], *, drop_others: bool = False) -> list[Record]:
        """The records of ``messages`` from the cache, measuring the new or changed ones; with
        ``drop_others`` the cache keeps only these."""
        cache = self._cache
        fresh: dict[int, Record] = {} if drop_others else cache
        out: list[Record] = []
        measured = 0
        for m in messages:
            rec = cache.get(id(m))
            if rec is None or rec.message is not m or rec.parts != m.parts:
                rec = Record(m)
                measured += 1
            fresh[id(m)] = rec
            out.append(rec)
        self._cache = fresh
        self.serialised = measured
        return out

    def estimate(self, messages: list[Message]) -> int:
        return self._records(messages)[1]

    def scan(self, recs: list[Record]) -> _Scan:
        """The :class:`_Scan` of these records; only those after the last scan's (when they are its
        records, unchanged, followed by new ones) are read."""
        kept = self._scan
        if kept is not None and len(kept[0]) <= len(recs) and recs[: len(kept[0])] == kept[0]:
            done, state = kept
        else:
            done, state = [], _Scan()
        for r in recs[len(done) :]:
            state.add(r)
        self._scan = (recs, state)
        return state

    def digest(self, messages: list[Message], recs: list[Record], span: tuple[int, int], hidden: int) -> str:
        """:func:`pruned_digest` of ``span``; when the last digest was of a span starting at the same
        message, unchanged, only the messages it did not cover are read."""
        start, end = span
        kept = self._digest
        if kept is not None and kept[0] == start and len(kept[1]) <= end - start:
            read, state = kept[1], kept[2]
            if recs[start : start + len(read)] != read:
                read, state = [], _Digest()
        else:
            read, state = [], _Digest()
        for m in messages[start + len(read) : end]:
            state.add(m)
        self._digest = (start, recs[start:end], state)
        return state.text(hidden)

    def percent(self, threshold: int = DEFAULT_THRESHOLD) -> int:
        """The latest estimate as a percentage of ``threshold``."""
        return percent(self.last, threshold)


class _Scan:
    """What the whole history holds, added up record by record (so a history that only grew is read for
    its new messages): for the checks before pruning, for the reasoning-only plan, and for the ladder
    (what the messages before any cut keep, and which of them carry tool content)."""

    __slots__ = (
        "answered",
        "calls",
        "chars",
        "failed",
        "head_cum",
        "head_idx",
        "heads",
        "images",
        "n",
        "orphans",
        "store_ids",
        "strippable",
        "tooled",
    )

    def __init__(self) -> None:
        self.calls: set[str] = set()
        self.answered: set[str] = set()
        self.images = 0
        self.failed = False  # a repair (or a look at the pairing of ids) is needed
        self.store_ids = False  # an id the provider cannot take when it stores nothing
        self.orphans = False  # a result whose call is not before it (the plan drops it)
        self.strippable = False  # the reasoning-only plan would change something
        self.n = 0  # records added
        self.chars = 0  # their lengths, added up
        self.head_idx: list[int] = []  # the records that keep something before a tail, by index
        self.head_cum: list[int] = [0]  # head_cum[j]: the head lengths of head_idx[:j], added up
        self.heads: list[Message] = []  # the head copies of head_idx[:len(heads)], built when first sent
        self.tooled: list[int] = []  # the records with tool calls or results, by index

    def add(self, r: Record) -> None:
        i = self.n
        self.n = i + 1
        self.chars += r.chars
        if r.head_chars >= 0:
            self.head_idx.append(i)
            self.head_cum.append(self.head_cum[-1] + r.head_chars)
        if r.odd or r.with_ids or r.bare_chars < 0:
            self.strippable = True
        if r.with_ids:
            self.failed = self.failed or r.unpaired
            self.store_ids = self.store_ids or r.store_ids
        if r.tools:
            self.tooled.append(i)
            calls = self.calls
            if r.flawed or r.oversize or (r.external and not calls.issuperset(r.external)):
                self.failed = True
            calls.update(r.call_ids)
            if r.result_ids:
                if not calls.issuperset(r.result_ids):
                    self.orphans = self.strippable = True
                self.answered.update(r.result_ids)
                self.images += r.images

    def before(self, cut: int) -> tuple[int, int, tuple[int, int] | None]:
        """For the messages before ``cut``: how many keep something, their head lengths added up, and
        the [start, end) span of those with tool content (None if none)."""
        k = bisect_left(self.head_idx, cut)
        t = bisect_left(self.tooled, cut)
        return k, self.head_cum[k], ((self.tooled[0], self.tooled[t - 1] + 1) if t else None)

    def head_messages(self, recs: list[Record], k: int) -> list[Message]:
        """The head copies of the first ``k`` messages that keep something (built once each)."""
        heads = self.heads
        for j in range(len(heads), k):
            heads.append(recs[self.head_idx[j]].head_message())
        return heads[:k]

    def ready(self, store: bool) -> bool:
        """Would the checks before pruning leave the history as it is? True when no repair is needed
        (:func:`~shiro_kernel.context.rules.check_and_repair`: every result after its call, every call
        answered, no id the provider cannot take), at most :data:`KEEP_IMAGES` images are in it
        (:func:`limit_images`) and nothing is over the wire caps (:func:`limit_sizes`): then a step skips
        those three passes. False means "do them", never "it is broken" (a call waiting for approval)."""
        if self.failed or (self.store_ids and not store) or self.images > KEEP_IMAGES:
            return False
        return len(self.answered) == len(self.calls)  # every call answered


class _Digest:
    """What a pruned span held (tools, files, outcomes, decisions), added up message by message: the
    span of the next step only grew, so only its new messages are read."""

    __slots__ = ("decisions", "errors", "files", "outcomes", "seen", "tools")

    def __init__(self) -> None:
        self.tools: Counter[str] = Counter()
        self.files: list[str] = []
        self.seen: set[str] = set()
        self.errors = 0
        self.outcomes: list[ToolResultPart] = []  # the last three
        self.decisions: list[str] = []  # the last three

    def add(self, m: Message) -> None:
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                self.tools[p.name] += 1
                if p.name in FILE_TOOLS:
                    try:
                        args = p.parsed_arguments()
                    except ValueError:
                        args = {}
                    for key in ("path", "pattern") if p.name == "list_files" else ("path",):
                        value = args.get(key)
                        if isinstance(value, str) and value and value not in self.seen:
                            self.seen.add(value)
                            self.files.append(value)
            elif isinstance(p, ToolResultPart):
                if p.is_error or p.output.startswith("Error:"):
                    self.errors += 1
                self.outcomes = [*self.outcomes[-2:], p]
            elif isinstance(p, TextPart) and m.role == "assistant" and p.text.strip():
                self.decisions = [*self.decisions[-2:], p.text]

    def text(self, hidden: int) -> str:
        lines = [f"[context pruned: {hidden} earlier messages not shown]"]
        if self.tools:
            lines.append("tools used: " + ", ".join(f"{name} ×{count}" for name, count in self.tools.most_common(12)))
        if self.files:
            shown = self.files[-15:]
            more = f" (+{len(self.files) - len(shown)} more)" if len(self.files) > len(shown) else ""
            lines.append("files touched: " + ", ".join(shown) + more)
        if self.outcomes:
            errors = self.errors
            lines.append(
                f"outcomes: {errors} error{'s' if errors != 1 else ''}; last: "
                + " | ".join(_outcome(p) for p in self.outcomes)
            )
        if self.decisions:
            lines.append("decisions: " + " | ".join(_clip_line(text, 120) for text in self.decisions))
        return cut("\n".join(lines), DIGEST_LIMIT, ellipsis="…")


def wire_ready(recs: list[Record], *, store: bool, meter: TokenMeter | None = None) -> bool:
    """:meth:`_Scan.ready` for these records (of the messages ``meter.records`` was given last)."""
    return (meter or TokenMeter()).scan(recs).ready(store)


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


def _measured(plan: Plan, messages: list[Message]) -> int:
    """A plan's serialised length, ids detached (measured part by part: a rung's tail, a rare plan)."""
    return sum([_message_chars(messages[i].role, [part_chars(p, with_id=False) for p in parts]) for i, parts in plan])


def _strip_all(messages: list[Message], recs: list[Record], scan: _Scan) -> tuple[list[Message], int] | None:
    """The reasoning-only plan (reasoning and every item id gone; a result whose call is not before it
    gone; an empty message gone) as messages with its length; None when it would change nothing."""
    if not scan.strippable:
        return None
    if scan.orphans:  # rare (a repaired history has none): the plan built and measured part by part
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
    est = _tokens(scan.chars, n)
    if est <= threshold:
        return PruneResult(messages, n, n, False, None, est, est)
    # 1. reasoning first, and every provider id (a pruned request is always inline); nothing to gain when
    #    there is neither (the plan would be the history itself, still over the threshold)
    stripped = _strip_all(messages, recs, scan)
    if stripped is not None:
        wire, chars = stripped
        tokens = _tokens(chars, len(wire))
        if tokens <= threshold:
            return PruneResult(wire, n, len(wire), True, None, est, tokens)
    # 2. the keep-tail ladder (reasoning stays stripped): each rung measured, only the chosen one built
    user_chars = _MESSAGE + _json_len("user") + _TEXT
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
                first_line = f"[context pruned: {hidden} earlier messages not shown]"
                # the digest is at least its first line: a rung over the threshold even so is skipped
                if not final and _tokens(chars + user_chars + _json_len(first_line), count + 1) > threshold:
                    continue
                note = meter.digest(messages, recs, span, hidden)
                chars += user_chars + _json_len(note)
                count += 1
            tokens = _tokens(chars, count)
            if tokens > threshold and not final:
                continue
            built = scan.head_messages(recs, n_head) + _build(messages[cut:], tail)
            wire = _with_digest(messages, built, span, note)
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
    digest = _Digest()
    for m in messages[start:end]:
        digest.add(m)
    return digest.text(hidden)


def _clip_line(text: str, limit: int) -> str:
    return one_line(text, limit, "…")


__all__ = [
    "DEFAULT_THRESHOLD",
    "IMAGE_TOKENS",
    "KEEP_IMAGES",
    "LADDER",
    "PruneResult",
    "Record",
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
    "wire_ready",
]
