"""The session's meter: each message measured once for the session's life, for the context meter and for
pruning.

* :class:`Record`: one message as measured — its serialised length (:mod:`~shiro_kernel.context.estimate`),
  and what the wire copy's plan would leave of it before a rung's tail (no tool content, no reasoning, no
  ids) or in the reasoning-only plan (no reasoning, no ids), with those copies built the first time a
  request needs them.
* :class:`HistoryScan`: what the history holds as a whole, added up record by record — the history rules'
  :class:`~shiro_kernel.context.rules.HistoryCheck` over its messages, the images, what the messages
  before any cut keep and which of them carry tool content.
* :class:`TokenMeter`: the records cached by message, the last scan and the last digest
  (:class:`~shiro_kernel.context.digest.Digest`), so a step of a session that only grew reads its new
  messages; :func:`wire_ready` says from the scan whether a step may skip the repair, image and size passes.

The session (:mod:`shiro_kernel.session`) keeps one meter; the pruning ladder
(:mod:`~shiro_kernel.context.prune`) reads it. Imports nothing above the transcript but the estimate, the
history rules, the wire limits and the digest, none of which does either.
"""

from __future__ import annotations

from bisect import bisect_left

from ..transcript import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from . import limits
from .digest import Digest
from .estimate import (
    ITEM_ID_CHARS,
    MESSAGE_CHARS,
    ROLE_CHARS,
    json_len,
    part_chars,
    tokens_of,
)
from .rules import HistoryCheck, detached


class Record:
    """One message as measured, for :class:`TokenMeter` and the ladder: its serialised length, and what the
    wire copy's plan would leave of it, measured once while the message is unchanged.

    ``head_chars`` is its length with tool calls, tool results, reasoning and item ids gone (what a
    message before a rung's tail keeps), ``bare_chars`` with reasoning and item ids gone (the
    reasoning-only plan); -1 when nothing would be left. ``head`` and ``bare`` are those copies as
    messages, built the first time a request needs them."""

    __slots__ = (
        "bare",
        "bare_chars",
        "chars",
        "flawed",
        "head",
        "head_chars",
        "images",
        "message",
        "odd",
        "parts",
        "reasoning",
        "tools",
        "with_ids",
    )

    def __init__(self, message: Message) -> None:
        self.message = message
        parts = self.parts = list(message.parts)  # compared with the message's parts: a change is noticed
        full = head = bare = 0  # the parts' lengths: with ids; without tools or reasoning; without reasoning
        n_head = n_bare = images = 0
        tools = odd = with_ids = reasoning = flawed = False
        for p in parts:
            size = part_chars(p, with_id=False)
            kind = type(p)
            if kind is ToolCallPart:
                tools = True
                flawed = flawed or len(p.arguments) > limits.WIRE_ARGUMENT_CHARS  # type: ignore[union-attr]
                bare += size
                n_bare += 1
            elif kind is ToolResultPart:
                tools = True
                images += len(p.images)  # type: ignore[union-attr]
                flawed = flawed or len(p.output) > limits.WIRE_RESULT_CHARS  # type: ignore[union-attr]
                bare += size
                n_bare += 1
            elif kind is ReasoningPart:
                odd = reasoning = True
            else:
                if kind is not TextPart:  # a part kind the plan and the checks may treat differently
                    odd = flawed = True
                head += size
                bare += size
                n_head += 1
                n_bare += 1
            item_id = p.item_id
            if item_id is not None:
                with_ids = True
                size += ITEM_ID_CHARS + json_len(item_id)
            full += size
        # a message is ``{"role": …, "parts": [a, b]}``: its own length plus its parts' and their separators
        base = ROLE_CHARS.get(message.role) or MESSAGE_CHARS + json_len(message.role)
        self.chars = base + full + (2 * (len(parts) - 1) if parts else 0)
        self.head_chars = base + head + 2 * (n_head - 1) if n_head else -1
        self.bare_chars = base + bare + 2 * (n_bare - 1) if n_bare else -1
        self.tools = tools
        self.reasoning = reasoning
        self.odd = odd
        self.with_ids = with_ids
        #: the passes before pruning must look: a part of a kind they may see differently, or over a wire cap
        self.flawed = flawed
        self.images = images
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
                self.head = Message(m.role, [detached(p) for p in keep if type(p) is not ReasoningPart])
        return self.head

    def bare_message(self) -> Message:
        """The message as the reasoning-only plan sends it: no reasoning, no ids."""
        if self.bare is None:
            m = self.message
            if not (self.reasoning or self.with_ids):
                self.bare = m
            else:
                self.bare = Message(m.role, [detached(p) for p in m.parts if type(p) is not ReasoningPart])
        return self.bare


class HistoryScan(HistoryCheck):
    """What the whole history holds, added up record by record (so a history that only grew is read for
    its new messages): the history rules' check over its messages (what this extends), and what pruning
    needs besides — for the checks before pruning, for the reasoning-only plan, and for the ladder (what
    the messages before any cut keep, and which of them carry tool content)."""

    __slots__ = ("changes", "chars", "flawed", "head_cum", "head_idx", "heads", "images", "n", "tooled")

    def __init__(self) -> None:
        super().__init__()
        self.images = 0
        self.flawed = False  # a record the checks before pruning must look at (see Record.flawed)
        self.changes = False  # the reasoning-only plan would change something (besides dropping a result)
        self.n = 0  # records added
        self.chars = 0  # their lengths, added up
        self.head_idx: list[int] = []  # the records that keep something before a tail, by index
        self.head_cum: list[int] = [0]  # head_cum[j]: the head lengths of head_idx[:j], added up
        self.heads: list[Message] = []  # the head copies of head_idx[:len(heads)], built when first sent
        self.tooled: list[int] = []  # the records with tool calls or results, by index

    def add(self, recs: list[Record]) -> None:
        """Add the records of the messages the history grew by, in order."""
        for r in recs:
            i = self.n
            self.n = i + 1
            self.chars += r.chars
            if r.head_chars >= 0:
                self.head_idx.append(i)
                self.head_cum.append(self.head_cum[-1] + r.head_chars)
            if r.odd or r.with_ids or r.bare_chars < 0:
                self.changes = True
            if r.flawed:
                self.flawed = True
            if r.tools:
                self.tooled.append(i)
                self.images += r.images
        self.read([r.message for r in recs])

    @property
    def strippable(self) -> bool:
        """The reasoning-only plan would change something (:attr:`drops`: a result whose call is not
        before it goes)."""
        return self.changes or self.drops

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
        answered, no id the provider cannot take), at most :data:`~shiro_kernel.context.limits.KEEP_IMAGES`
        images are in it (:func:`~shiro_kernel.context.limits.limit_images`) and nothing is over the wire
        caps (:func:`~shiro_kernel.context.limits.limit_sizes`): then a step skips those three passes. False
        means "do them", never "it is broken" (a call waiting for approval)."""
        if self.flawed or self.images > limits.KEEP_IMAGES:
            return False
        return self.healthy(store, True)  # and every call answered


class TokenMeter:
    """:func:`~shiro_kernel.context.estimate.estimate_tokens` without re-serialising the whole history every step, and the sizes the
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
        self._scan: tuple[list[Record], HistoryScan] | None = None
        self._digest: tuple[int, list[Record], Digest] | None = None
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
        estimate = tokens_of(total, len(messages))
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

    def scan(self, recs: list[Record]) -> HistoryScan:
        """The :class:`HistoryScan` of these records; only those after the last scan's (when they are its
        records, unchanged, followed by new ones) are read."""
        kept = self._scan
        if kept is not None and len(kept[0]) <= len(recs) and recs[: len(kept[0])] == kept[0]:
            done, state = kept
        else:
            done, state = [], HistoryScan()
        if len(recs) > len(done):
            state.add(recs[len(done) :])
        self._scan = (recs, state)
        return state

    def digest(self, messages: list[Message], recs: list[Record], span: tuple[int, int], hidden: int) -> str:
        """:func:`~shiro_kernel.context.digest.pruned_digest` of ``span``; when the last digest was of a span starting at the same
        message, unchanged, only the messages it did not cover are read."""
        start, end = span
        kept = self._digest
        if kept is not None and kept[0] == start and len(kept[1]) <= end - start:
            read, state = kept[1], kept[2]
            if recs[start : start + len(read)] != read:
                read, state = [], Digest()
        else:
            read, state = [], Digest()
        for m in messages[start + len(read) : end]:
            state.add(m)
        self._digest = (start, recs[start:end], state)
        return state.text(hidden)


def wire_ready(recs: list[Record], *, store: bool, meter: TokenMeter | None = None) -> bool:
    """:meth:`HistoryScan.ready` for these records (of the messages ``meter.records`` was given last)."""
    return (meter or TokenMeter()).scan(recs).ready(store)


__all__ = ["HistoryScan", "Record", "TokenMeter", "wire_ready"]
