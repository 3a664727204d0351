"""``/compact``: the model summarises the whole session, and the summary replaces the transcript.

Unlike automatic pruning (:mod:`shiro_kernel.context.prune`, wire copy only), this replaces the session's
real message list, so it is irreversible for that session. A failed or empty summary raises
:class:`~shiro_kernel.errors.ProviderError` and changes nothing; ``/compact`` shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ProviderError
from ..transcript import Message
from . import rules
from .estimate import DEFAULT_THRESHOLD
from .prune import prune_to_fit

#: the seed's /compact system prompt, verbatim
COMPACT_SYSTEM = (
    "Summarize this coding session for use as the sole context of a fresh session. Keep: the user goal, "
    "files touched with paths, decisions made, commands run and their outcome, and what remains to be done. "
    "Drop pleasantries and full file contents. Write it as notes, not prose."
)
SUMMARY_PREFIX = "Summary of the session so far:\n\n"
EMPTY_SUMMARY = "The model returned an empty summary; the session was left as it was."


def compact_message(before: int, after: int) -> str:
    """The UI line after a successful ``/compact``."""
    return f"compacted {before} messages into {after}"


def _summarise(provider: Any, messages: list[Message], observe: Callable[[Any], object] | None) -> str:
    """The model's summary of ``messages``; its failure raised as :class:`ProviderError`."""
    from ..provider.client import answer

    return answer(provider.stream(COMPACT_SYSTEM, messages, [], None), observe).text


def compact_session(
    session: Any,
    provider: Any,
    *,
    threshold: int = DEFAULT_THRESHOLD,
    observe: Callable[[Any], object] | None = None,
) -> tuple[int, int]:
    """Summarise ``session.messages`` with one model call (no tools) and replace them with ONE user
    message ``Summary of the session so far:\\n\\n<text>``. Returns ``(before, after)`` message counts
    (``(0, 0)`` for an empty history); ``observe`` sees the call's events (the egress ledger's requests). A failed
    or empty summary raises
    :class:`~shiro_kernel.errors.ProviderError` and leaves the transcript untouched."""
    before = len(session.messages)
    if before == 0:
        return 0, 0
    settings = getattr(provider, "settings", None)
    wire, _ = rules.check_and_repair(session.messages, store=bool(getattr(settings, "store", True)), keep_pending=False)
    wire = prune_to_fit(wire, threshold).messages  # a history past the threshold would not fit the model
    try:
        text = _summarise(provider, wire, observe)
    except ProviderError as exc:
        if exc.kind != "item_not_found":
            raise
        text = _summarise(provider, rules.detach_provider_items(wire), observe)  # the provider lost a stored item
    if not text.strip():
        raise ProviderError(EMPTY_SUMMARY)
    session.messages[:] = [Message.user(SUMMARY_PREFIX + text.strip())]
    session.turns = []  # the turns' messages are gone: nothing of them can be replayed
    changed = getattr(session, "changed", None)
    if callable(changed):
        changed()
    return before, 1


__all__ = ["COMPACT_SYSTEM", "EMPTY_SUMMARY", "SUMMARY_PREFIX", "compact_message", "compact_session"]
