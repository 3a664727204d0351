"""A ``%shiro`` line, parsed once: its options and its prompt, and what it asks for.

:func:`shiro_kernel.magics.parse_line` builds a :class:`Line`; the magic (a blocking turn) and the live
controller (a background turn, a queued prompt) both act on it, and :attr:`Line.action` is the one place
that decides what a line does:

* ``command`` — the prompt is a slash command (``/todos``);
* ``turn`` — a prompt for the model;
* ``switch`` — no prompt, but a session switch (``--new``, ``-c``, ``-r ID``);
* ``flags`` — no prompt, only flags that hold for the session (``--no-memory``, ``--memory``, ``--mute``);
* ``empty`` — nothing to do: a usage error.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Action = Literal["command", "turn", "switch", "flags", "empty"]
GIVE_A_PROMPT = "give a prompt, e.g. %shiro what columns does df have?"


@dataclass(frozen=True)
class Line:
    prompt: str = ""
    #: block until the turn has ended (waits for a running or queued turn first)
    wait: bool = False
    new: bool = False
    cont: bool = False
    resume: str | None = None
    #: ``--memory`` True, ``--no-memory`` False, neither None
    memory: bool | None = None
    mute: tuple[str, ...] = ()
    model: str | None = None
    agent: str | None = None
    #: ``--again``: ask the model even where the cell's recorded turn could be replayed
    again: bool = False
    #: the cell the line was typed in (its id, where the front end sends one) and the line's place among this
    #: kernel's turns with the same prompt: what a rerun of the notebook finds the recorded turn by
    cell_id: str | None = None
    ordinal: int = 0

    @property
    def switches(self) -> bool:
        """Does the line choose the session (``--new``, ``-c``, ``-r``)?"""
        return self.new or self.cont or self.resume is not None

    @property
    def flags(self) -> bool:
        """Does the line set something for the session (memory, mutes)?"""
        return self.memory is not None or bool(self.mute)

    @property
    def action(self) -> Action:
        if self.prompt.startswith("/"):
            return "command"
        if self.prompt:
            return "turn"
        if self.switches:
            return "switch"
        if self.flags:
            return "flags"
        return "empty"

    def with_prompt(self, prompt: str) -> Line:
        return replace(self, prompt=prompt)


__all__ = ["GIVE_A_PROMPT", "Action", "Line"]
