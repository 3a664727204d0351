"""The lines a user reads about sessions: ``/sessions`` rows, the one ``resumed …`` line, the footer.

Session ids are shown as :func:`~shiro_kernel.store.short_ids.short_id`: the shortest prefix unique among this
home's sessions, in whole groups and never under 8 characters (``0193ab2c``; ``0193ab2c-1f2a`` for a session
started in the last minute, which a later one of that minute cannot share).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..current import Started
from ..provider.pricing import price_of
from ..session import Session
from ..store.autosave import Autosaver
from ..store.index import SessionInfo
from ..store.records import title_of
from ..store.short_ids import short_id
from ..text import one_line
from .money import budget_meter

FAREWELL_TITLE = 52


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def format_row(info: SessionInfo) -> str:
    """``<short id>  <updatedAt[0:16] with T→space>  <n>msg  <title>``."""
    return f"{short_id(info.id)}  {info.updated_at[:16].replace('T', ' ')}  {info.messages}msg  {info.title}"


def format_rows(infos: Iterable[SessionInfo]) -> str:
    """What ``/sessions`` prints: one row per session, or ``no saved sessions``."""
    rows = [format_row(i) for i in infos]
    return "\n".join(rows) if rows else "no saved sessions"


def resumed_line(session: Session | SessionInfo, messages: int | None = None) -> str:
    """``resumed <short id> — <n> messages: "<title>"`` (the title left out when untitled): the one line
    for ``-r``, ``/resume`` and the automatic resume of a reopened notebook; ``messages``: the count as read,
    where the session has been repaired since."""
    if isinstance(session, Session):
        n, title = len(session.messages) if messages is None else messages, title_of(session.messages)
    else:
        n, title = session.messages, session.title
    line = f"resumed {short_id(session.id)} — {plural(n, 'message')}"
    return line + (f': "{title}"' if title and title != "untitled" else "")


def started(what: Started) -> str | None:
    """What choosing the session did, in the lines the user reads (or None): the records set aside, the resumed line
    (:func:`resumed_line`) with what resuming repaired and which variables are gone, the copy made."""
    resumed = [resumed_line(what.resumed, what.messages)] if what.resumed is not None else []
    lines = [*what.notes, *resumed, *([what.after] if what.after and resumed else []), *filter(None, [what.forked])]
    return "\n".join(lines) or None


def saved_line(session: Session, saved: int | None = None) -> str:
    """``Saved <n> message(s)[: "<title>"]`` with the farewell's title rule (over 52: first 49 + ...);
    ``saved`` is how many messages the last successful write held (default: all of them)."""
    title = title_of(session.messages)
    line = f"Saved {plural(len(session.messages) if saved is None else saved, 'message')}"
    if title and title != "untitled":
        line += f': "{one_line(title, FAREWELL_TITLE)}"'
    return line


def resume_hint(session: Session, saved: int | None = None, error: str | None = None) -> str:
    """The seed's farewell as the one-line turn footer: what is saved and the exact magics to resume
    it. An empty session says so instead of naming a command that finds nothing; a failed save says
    that nothing (or not everything) was saved, never "Saved"."""
    if not session.messages:
        return "Nothing to save from this session."
    resume = f"resume: %shiro -c or %shiro -r {short_id(session.id)}"
    if error:
        kept = f"; the record holds {plural(saved, 'message')}" if saved else ""
        return f"Not saved: {error}{kept}"
    if saved is not None and saved == 0:
        return "Not saved yet."
    return f"{saved_line(session, saved)} · {resume}"


def footer(session: Session, saver: Autosaver, budget: float | None, model: str) -> str:
    """A turn's footer from the session's facts: what its record holds (``saver``'s writes, :func:`resume_hint`)
    and the budget meter (:func:`session_budget`; ``budget``: ``Shiro.budget_usd``; ``model``: the setting's)."""
    saved = saver.saved_messages if (saver.writes or saver.error) else None
    line = resume_hint(session, saved, str(saver.error) if saver.error else None)
    meter = session_budget(session, budget, model)
    return line + (f" · {meter}" if meter else "")


def session_budget(session: Session, budget: float | None, model: str) -> str:
    """``$0.0123 of $0.50 budget`` (the session's spend against ``budget``); '' without a budget. ``model``: the
    setting's, where the session has none of its own."""
    model = session.model or model
    return budget_meter(session.usage.cost_usd, budget, model, price_of(model) is not None)


__all__ = [
    "footer",
    "format_row",
    "format_rows",
    "plural",
    "resume_hint",
    "resumed_line",
    "saved_line",
    "session_budget",
    "started",
]
