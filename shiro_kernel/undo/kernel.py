"""The kernel's undo (:class:`Undo`): its journal of checkpoints, the checkpointer each turn takes them with, and
taking steps back — the names and files on the kernel's thread, a live notebook's cells where the front end can
answer — with what it did, or why there was nothing to do, in words.

The agent holds one and asks it; what the agent alone knows (the user's namespace, the front end's live document,
the session, whether a turn runs) it passes in with each call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..events import Notice
from .checkpoints import Checkpointer, checkpointer
from .journal import CellReverter, Journal

if TYPE_CHECKING:
    from ..config import Shiro
    from ..notebook import LiveNotebook
    from ..session import Session


class Undo:
    """The kernel's undo (see the module), within ``config``'s ``Shiro.undo_max_mb``, read when it is needed (0: no
    checkpoints)."""

    def __init__(self, config: Shiro) -> None:
        self.max_mb: Callable[[], float] = lambda: float(config.undo_max_mb)
        self.journal = Journal(self.max_mb)

    def notices(self) -> list[Notice]:
        """What the turn's cell is told on the side when it ends: the checkpoints dropped for room, once."""
        return [Notice(text, kind="warning") for text in self.journal.said()]

    def checkpointer(self, turn_id: str) -> Checkpointer | None:
        """What a call of the turn may change, kept just before it runs (None: ``Shiro.undo_max_mb`` is 0)."""
        return checkpointer(self.journal, turn_id) if self.max_mb() > 0 else None

    def back(
        self,
        call_id: str | None,
        ns: Callable[[], dict[str, Any] | None],
        live: LiveNotebook | None,
        session: Session,
        *,
        on_main: Callable[[Callable[[], str]], str] | None = None,
        force: bool = False,
    ) -> str:
        """``/undo``: the last turn's steps taken back, newest first; with ``call_id``, that step and every one after
        it. Only what is still as the steps left it; what the user changed since is kept and named, unless
        ``force`` (``/undo --force``). What was restored, kept and could not be, in words. ``ns``: the user's
        namespace (read where the names are put back); ``live``: the front end's document; ``session``: the current one (what to say when nothing is
        left to take back).

        ``on_main``: called off the kernel's thread (an Undo button, :meth:`~shiro_kernel.ui.live.LiveController.
        take_back`), the accepted cell changes are reverted from here, where the front end's answers can arrive
        (they reach the kernel only while its thread is idle), and the names and files are put back on the kernel's
        thread through ``on_main``. On the kernel's thread a live notebook's cells cannot be reverted (said)."""
        journal = self.journal
        steps = journal.last_turn(force) if call_id is None else journal.since(call_id)
        if not steps:
            return self.nothing(call_id, session)
        revert: CellReverter | None = live.revert if live is not None else None
        cell_calls = [s.call_id for s in steps if s.cells]
        if on_main is not None and live is not None and cell_calls:
            lines = live.revert(cell_calls)  # off the kernel's thread: the front end's answers can arrive
            revert = lambda _calls: lines  # noqa: E731  # what the reverts did, for the report

        def back() -> str:
            again = "%shiro /undo" + (f" {call_id}" if call_id else "") + " --force"
            names = ns()
            taken = journal.take_back(
                steps, names if names is not None else {}, revert, force=force, force_command=again
            )
            return taken.text()

        return on_main(back) if on_main is not None else back()

    def nothing(self, call_id: str | None, session: Session) -> str:
        """Why there is nothing to take back (for ``call_id``, or of the last turn)."""
        if call_id is not None:
            return (
                f"nothing to undo for {call_id}: its step has no checkpoint in this kernel (it was undone already, it "
                "only read, it was made before this kernel started, or its checkpoint was dropped for room)"
            )
        if self.journal.steps:
            return "nothing more to undo: the steps of this kernel's turns that can be taken back were taken back"
        if session.turns or any(m.role == "tool" for m in session.messages):
            return (
                "nothing to undo in this kernel: undo checkpoints live in the kernel's memory only, and this "
                "session's turns ran before the kernel (re)started, or were undone already"
            )
        return "nothing to undo: no step of this kernel's turns changed anything"


__all__ = ["Undo"]
