"""A question to the user, waited for: the one way a turn (an approval, a repository's MCP server's consent) or
another agent's call (``/mcp serve``) asks the person at the notebook and waits for a click.

:func:`ask_user` shows the question on the kernel's thread (widgets are only touched there), waits on the calling
thread until the first answer, a Stop, or the deadline (``Shiro.approval_timeout_s``: a closed tab answers nothing),
and takes the question back when it was not answered. What a missing answer means is the caller's: a refusal the
model is told about, a server that does not start, a call refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: how often the wait looks at the Stop flag (a Stop is seen within this)
POLL_S = 0.05


@dataclass(frozen=True)
class Asked:
    """How a question ended: ``answer`` (None: not answered), and whether the wait ended because the turn was
    stopped (else, unanswered: the deadline passed)."""

    answer: str | None
    stopped: bool = False

    @property
    def unanswered(self) -> bool:
        return self.answer is None and not self.stopped


def ask_user(
    post: Callable[[Callable[[], None]], None],
    show: Callable[[Callable[[str], None]], None],
    withdraw: Callable[[], None],
    *,
    wait_s: float,
    abort: threading.Event | None = None,
) -> Asked:
    """Ask and wait: ``show(answer)`` is posted to the kernel's thread (``post``), and the first ``answer(value)``
    ends the wait; a Stop (``abort``) or ``wait_s`` seconds without an answer end it too, and then ``withdraw`` is
    posted to take the question back."""
    answered = threading.Event()
    given: list[str] = []

    def answer(value: str) -> None:
        if not given:
            given.append(value)
        answered.set()

    post(lambda: show(answer))
    deadline = time.monotonic() + wait_s
    while not answered.wait(POLL_S if abort is not None else max(0.0, deadline - time.monotonic())):
        stopped = abort is not None and abort.is_set()
        if stopped or time.monotonic() >= deadline:
            post(withdraw)
            return Asked(None, stopped=stopped)
    return Asked(given[0])


__all__ = ["Asked", "ask_user"]
