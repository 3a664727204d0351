"""The blocking view of a turn (``--wait``, nbclient, papermill, terminal IPython): one display that is
updated (throttled) while the turn streams and ends as the static bundle — Markdown, HTML and the
``application/vnd.shiro.turn+json`` entry — so the saved notebook shows the turn without a kernel.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..context.estimate import percent
from ..errors import TurnTimeout
from ..events import Event, TurnEnd
from ..notebook.mimes import TURN_MIME
from ..store.short_ids import short_id
from .render import (
    Throttle,
    TurnLog,
    to_bundle_json,
    to_html,
    to_markdown,
    to_text,
)
from .session_text import footer

if TYPE_CHECKING:
    from ..agent import Agent
    from ..line import Line


def context_percent(agent: Agent) -> int | None:
    """The session's estimated size as a percentage of the pruning threshold (lower where the server's context
    window is known to be smaller)."""
    try:
        current = agent.current
        return percent(current.wire.meter.estimate(list(current.session.messages)), agent.providers.threshold())
    except Exception:  # a view must never break on a half-built session
        return None


def turn_details(agent: Agent) -> dict[str, Any]:
    """What a turn's final bundle shows beyond its events: footer, session, task list, context meter."""
    return {
        "footer": footer(agent.current.session, agent.current.autosaver, agent.config.budget_usd, agent.config.model),
        "session_id": agent.current.session.id,
        "tasks": agent.current.session.tasks.state(),
        "resume": f"%shiro -r {short_id(agent.current.session.id)}",
        "context_percent": context_percent(agent),
    }


class TextView:
    """Feed it a turn's events; it keeps one display up to date. ``details`` supplies what the final
    bundle needs beyond the events (see :func:`turn_details`)."""

    def __init__(
        self, live: bool = True, interval: float = 0.1, details: Callable[[], dict[str, Any]] | None = None
    ) -> None:
        self.live = live  # False (terminal): print once at the end instead of redrawing
        self.log = TurnLog()
        self.throttle = Throttle(interval)
        self.details = details or (lambda: {})
        self.handle: Any = None

    def bundle(self, final: bool = False) -> dict[str, Any]:
        if not final:  # while streaming, Markdown is enough and cheap
            return {
                "text/markdown": to_markdown(self.log) or "*working…*",
                "text/plain": to_text(self.log) or "working…",
            }
        d = self.details()
        extra = d.get("footer", "")
        return {
            "text/plain": to_text(self.log, extra),
            "text/markdown": to_markdown(self.log, extra),
            "text/html": to_html(self.log, extra),
            TURN_MIME: to_bundle_json(
                self.log,
                session_id=d.get("session_id"),
                tasks=d.get("tasks"),
                context_percent=d.get("context_percent"),
                resume=d.get("resume"),
            ),
        }

    def __call__(self, event: Event) -> None:
        changed = self.log.feed(event)
        if isinstance(event, TurnEnd):
            self.show(final=True)
        elif changed and self.live and self.throttle.ready():
            self.show()

    def show(self, final: bool = False) -> None:
        from IPython.display import display

        data = self.bundle(final)
        if self.handle is None:
            self.handle = display(data, raw=True, display_id=True)
        else:
            self.handle.update(data, raw=True)


def final_bundle(agent: Agent, log: TurnLog) -> dict[str, Any]:
    """The static bundle of a finished turn drawn from ``log`` (the live view's own log)."""
    view = TextView(live=False, details=lambda: turn_details(agent))
    view.log = log
    return view.bundle(final=True)


#: the wall-clock limit of a headless turn when ``Shiro.turn_timeout_s`` is not set
HEADLESS_TURN_LIMIT_S = 900.0


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`~shiro_kernel.errors.TurnTimeout` on this (the main) thread after ``seconds``: the
    turn stops as on a kernel interrupt, keeping what finished. No limit for None, or off the main thread."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        raise TurnTimeout(
            f"the turn ran past its time limit of {seconds:g} s and was stopped; what finished is kept "
            "(raise it with %config Shiro.turn_timeout_s = ...)"
        )

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_blocking(agent: Agent, line: Line, *, live: bool, limit_s: float | None = None) -> TurnEnd:
    """One turn on this thread, drawn by a :class:`TextView` (``live``: redraw while streaming), stopped
    after ``limit_s`` seconds."""
    from ..turn import Frontend

    view = TextView(live=live, details=lambda: turn_details(agent))
    with time_limit(limit_s):
        return agent.ask(line, Frontend(on_event=view))


__all__ = ["TextView", "context_percent", "final_bundle", "run_blocking", "turn_details"]
