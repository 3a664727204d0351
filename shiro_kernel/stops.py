"""Who stopped a turn, as its results tell the model: the user (Stop, a kernel interrupt), or the kernel
restarting or shutting down.

Jupyter restarts a kernel by interrupting it first and then asking it to shut down (``shutdown_request``
with ``restart``): the interrupt alone looks like the user's. So :func:`install` wraps the kernel's
``do_shutdown``: from then on a stopped call says the kernel restarted, and the results an interrupt wrote
in the :data:`RECENT_S` seconds before are told again the same way (:func:`ending`), then the session is
written. A Stop the user pressed earlier keeps saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: %load_ext imports this module, and the transcript is a turn's
    from .transcript import ToolResultPart

USER = "the user stopped the turn"
RESTARTED = "the kernel restarted"
SHUT_DOWN = "the kernel shut down"
#: an interrupt this close before a shutdown request was the restart's own
RECENT_S = 10.0

_lock = threading.Lock()
_by = [USER]
_recent: list[tuple[float, ToolResultPart]] = []


def by() -> str:
    """Who stops a call now, as its result says it (``... — the user stopped the turn while this call ran``)."""
    return _by[0]


def stopped(part: ToolResultPart) -> ToolResultPart:
    """Mark a result written because the turn was stopped (``part.stopped``: saved with it), and note it, so it
    is told again if a shutdown follows."""
    part.stopped = True
    now = time.monotonic()
    with _lock:
        _recent[:] = [(t, p) for t, p in _recent if now - t < RECENT_S]
        _recent.append((now, part))
    return part


def ending(restart: bool) -> int:
    """The kernel is shutting down (restarting, with ``restart``): say so from now on, and in the results
    stopped in the last :data:`RECENT_S` seconds; how many were told again."""
    who = RESTARTED if restart else SHUT_DOWN
    now = time.monotonic()
    told = 0
    with _lock:
        _by[0] = who
        for at, part in _recent:
            if now - at < RECENT_S and f"— {USER} " in part.output:
                part.output = part.output.replace(f"— {USER} ", f"— {who} ", 1)
                told += 1
        _recent.clear()
    return told


def install(shell: Any, on_ending: Callable[[bool], None]) -> None:
    """Wrap the kernel's ``do_shutdown`` (a Jupyter kernel's shell has one; anything else is left alone):
    :func:`ending`, then ``on_ending(restart)`` (the agent writes its session), then the kernel's own."""
    kernel: Any = getattr(shell, "kernel", None)
    original = getattr(kernel, "do_shutdown", None)
    if original is None or getattr(original, "_shiro_wrapped", False):
        return

    def do_shutdown(restart: bool) -> Any:
        try:
            if ending(bool(restart)):
                on_ending(bool(restart))
        except Exception:  # the kernel shuts down whatever happens here
            pass
        return original(restart)

    do_shutdown._shiro_wrapped = True  # type: ignore[attr-defined]
    kernel.do_shutdown = do_shutdown


__all__ = ["RESTARTED", "SHUT_DOWN", "USER", "by", "ending", "install", "stopped"]
