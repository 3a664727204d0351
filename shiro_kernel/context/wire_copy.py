"""The wire copy: what one step sends of the session's history.

The session's own history is never changed here. Each step sends a copy of it that is

1. **checked** against the provider's history rules (:mod:`.rules`: each call with its result, no orphaned
   result, no stale item id), each repair said once per turn;
2. **limited**: the newest images only, the cut held still so images go once every few figures
   (:func:`.limits.held_image_cut`), and oversized arguments and results shortened (said once per turn);
3. **pruned to fit** the threshold, and **held still** (:mod:`.hold`): a held prune point's prefix goes out
   again with the new messages after it until the threshold is reached again; then the history is pruned down to
   the low-water mark, and that is held — so a provider's prefix cache keeps serving the same bytes. One
   ``compacted`` notice per turn.

When the session's meter shows nothing to repair, shorten or leave out (the usual step), the checks are skipped
and only the new messages are looked at.

What the wire copy keeps between the steps and turns of a session, never saved, is its :class:`WireState`: the
meter's record of each message, the held prune point, the held image cut. The kernel's current session holds one
(:class:`shiro_kernel.current.Current`), and a turn is handed it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..events import Notice
from ..transcript import Message
from . import rules
from .hold import LOW_WATER, Hold
from .limits import held_image_cut, limit_images, limit_sizes
from .meter import Record, TokenMeter, wire_ready
from .prune import prune_to_fit

REASONING_NOTICE = (
    "context compacted: earlier reasoning left out of the request ({before:,} → {after:,} estimated tokens); "
    "all {n} messages kept"
)
SHORTENED_NOTICE = "{n} oversized tool argument{s} or result{s} shortened in the request (the session keeps them whole)"
COMPACTED_NOTICE = "context compacted: {before} messages pruned to {after} on the wire"
REPAIRED_NOTICE = "repaired the history before sending: {repairs}"
WINDOW_NOTICE = (
    "context compacted to fit the model's context window at this server{window}: {before} messages pruned to {after} "
    "on the wire"
)


@dataclass
class WireState:
    """What the wire copy keeps of one session between its steps and turns (never saved)."""

    #: each message measured once for the session's life (the context meter, the pruning ladder, the checks)
    meter: TokenMeter = field(default_factory=TokenMeter)
    #: the held prune point, while it still fits
    hold: Hold | None = None
    #: the held image cut: images before it are sent as their text stand-ins
    image_cut: int | None = None
    #: the tools the model loaded with ``more_tools`` (a lean request's, :mod:`.offer`), in the order it did
    loaded: list[str] = field(default_factory=list)


class WireCopy:
    """One turn's wire copies of the session's history: its :class:`WireState`, and the notices the turn says
    once (``notify``: the turn's event pipe)."""

    def __init__(self, state: WireState, notify: Callable[[Notice], None]) -> None:
        self.state = state
        self.notify = notify
        self._repaired = self._shortened = self._compacted = False

    def messages(self, history: list[Message], *, store: bool, threshold: int) -> list[Message]:
        """What goes out this step (see the module): ``history`` checked, limited and pruned to ``threshold``."""
        meter = self.state.meter
        records = meter.records(history)
        if wire_ready(records, store=store, meter=meter):
            return self._fit(history, history, records, threshold)
        messages, repairs = rules.check_and_repair(history, store=store)
        shown = rules.notable(repairs)
        if shown and not self._repaired:
            self._repaired = True
            self.notify(Notice(REPAIRED_NOTICE.format(repairs="; ".join(shown)), kind="warning"))
        cut = self.state.image_cut = held_image_cut(messages, self.state.image_cut)
        messages, _ = limit_images(messages, before=cut) if cut is not None else (messages, 0)
        messages, shortened = limit_sizes(messages)
        if shortened and not self._shortened:
            self._shortened = True
            self.notify(Notice(SHORTENED_NOTICE.format(n=shortened, s="" if shortened == 1 else "s"), kind="compacted"))
        return self._fit(history, messages, records if messages is history else None, threshold)

    def _fit(
        self, history: list[Message], messages: list[Message], records: list[Record] | None, threshold: int
    ) -> list[Message]:
        """``messages`` (the copy of ``history`` so far) pruned to ``threshold``, holding still. ``records``: the
        messages' records from the meter, if they are the history's own."""
        meter, hold = self.state.meter, self.state.hold
        if hold is not None and hold.holds(history, messages):
            wire, tokens = hold.extend(messages, meter.records(history))
            if tokens <= threshold:
                return wire
        result = prune_to_fit(messages, threshold, meter=meter, records=records)
        if not result.changed:
            self.state.hold = None
            return result.messages
        result = prune_to_fit(messages, int(threshold * LOW_WATER), meter=meter, records=records)
        self.state.hold = Hold.made(history, result)
        if result.changed and not self._compacted:
            self._compacted = True
            if result.dropped_span is None and result.after == result.before:  # only reasoning went
                text = REASONING_NOTICE.format(n=result.before, before=result.tokens_before, after=result.tokens_after)
            else:
                text = COMPACTED_NOTICE.format(before=result.before, after=result.after)
            self.notify(Notice(text, kind="compacted"))
        return result.messages

    def fits(self, history: list[Message], room: int, window: int | None) -> bool:
        """Whether ``history`` pruned to ``room`` estimated tokens (what a server's context window leaves it) fits
        there: then the held prune point is dropped (the next copy is pruned afresh to the new threshold) and
        the turn's one ``compacted`` notice names the window."""
        if room <= 0:
            return False  # the instructions, the tools and the state alone fill the window
        result = prune_to_fit(history, int(room * LOW_WATER), meter=self.state.meter)
        if not result.changed or result.tokens_after > room:
            return False
        self.state.hold = None
        self._compacted = True
        said = f" ({window:,} tokens)" if window else ""
        self.notify(
            Notice(WINDOW_NOTICE.format(window=said, before=result.before, after=result.after), kind="compacted")
        )
        return True

    def estimate(self, messages: list[Message]) -> int:
        return self.state.meter.estimate(messages)


__all__ = [
    "COMPACTED_NOTICE",
    "REASONING_NOTICE",
    "REPAIRED_NOTICE",
    "SHORTENED_NOTICE",
    "WINDOW_NOTICE",
    "WireCopy",
    "WireState",
]
