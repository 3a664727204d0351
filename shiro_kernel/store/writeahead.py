"""Write-ahead of the calls that change something: a kernel that dies while, or right after, such a call ran
never leaves a record that lost it.

The autosave waits 400 ms after a change (:mod:`.autosave`); a kernel killed within that time used to keep
only the user's message, and on resume the model never learned its code had run. So before a call that
changes something runs (a tool whose declared effect is anything but reading — ``Tool.changes``: ``python``,
``shell``, the file and notebook edits — and any tool not known here), :class:`WriteAhead` writes the record now
(fsync'd, :func:`~.files.write_atomic`) with the step's assistant message and a tool message after it: the
results known so far, :data:`STOPPED_WHILE_RUNNING` for the call about to run, :data:`NOT_RUN` for the ones
after it. When the call ends, the record is written again with its result. Until the turn appends the step's
own tool message, every autosave writes that tail too, so a debounced write never takes it back. Everything
else keeps the debounce.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from ..errors import StoreError
from ..events import Event, ToolEnd, ToolStart
from ..transcript import Message, Part, ToolCallPart, ToolResultPart
from .autosave import Autosaver

#: what the record says of a call the kernel was running when it stopped (what the model reads on resume)
STOPPED_WHILE_RUNNING = (
    "Error: the kernel stopped while this call ran (it was killed, crashed or restarted), so its result was "
    "never recorded; it may have run in part or in full: check the state it would have changed before running "
    "it again"
)
#: what the record says of a call after it in the same step
NOT_RUN = "Error: not run — the kernel stopped before this call ran."


class Declared(Protocol):
    """What the write-ahead reads of a tool (``shiro_kernel.tools.Tool``, which this layer does not import)."""

    @property
    def changes(self) -> bool: ...


def changes_something(tools: Mapping[str, Declared]) -> Callable[[str], bool]:
    """Whether a call of this name needs the write-ahead: a tool whose declared effect changes something (any
    but reading), or one not in ``tools`` (nothing says it does not change anything)."""

    def needs(name: str) -> bool:
        tool = tools.get(name)
        return tool is None or tool.changes

    return needs


class WriteAhead:
    """A turn's events in, the write-ahead of its state-changing calls out (see the module)."""

    def __init__(
        self, saver: Autosaver, needs: Callable[[str], bool], on_error: Callable[[StoreError], None] | None = None
    ) -> None:
        self.saver = saver
        self.needs = needs
        self.on_error = on_error or (lambda exc: None)
        self._step: Message | None = None  # the assistant message whose calls are being answered
        self._done: dict[str, ToolResultPart] = {}
        #: how many write-ahead writes were made (before and after a call)
        self.writes = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolStart) and self.needs(event.call.name):
            self._write(running=event.call)
        elif isinstance(event, ToolEnd):
            step = self._current()
            if step is not None:
                self._done[event.call.call_id] = event.result
                if self.needs(event.call.name):
                    self._write(running=None)

    def _current(self) -> Message | None:
        """The step being answered: the session's last message when it is an assistant message with calls."""
        messages = self.saver.session.messages
        last = messages[-1] if messages else None
        if last is None or last.role != "assistant" or not last.tool_calls():
            return None
        if last is not self._step:
            self._step, self._done = last, {}
        return last

    def _write(self, running: ToolCallPart | None) -> None:
        step = self._current()
        if step is None:
            return
        parts: list[Part] = []
        for call in step.tool_calls():
            if call.call_id in self._done:
                parts.append(self._done[call.call_id])
            elif running is not None and call.call_id == running.call_id:
                parts.append(
                    ToolResultPart(call.call_id, call.name, STOPPED_WHILE_RUNNING, is_error=True, stopped=True)
                )
            else:
                parts.append(ToolResultPart(call.call_id, call.name, NOT_RUN, is_error=True, stopped=True))
        try:
            self.saver.write_ahead(step, [Message("tool", parts)])
            self.writes += 1
        except StoreError as exc:  # the call runs anyway; the footer says the session is not saved
            self.on_error(exc)


__all__ = ["NOT_RUN", "STOPPED_WHILE_RUNNING", "WriteAhead", "changes_something"]
