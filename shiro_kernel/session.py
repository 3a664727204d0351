"""A session: the transcript and running totals of one notebook's conversation.

Persistence (records under ``SHIRO_HOME/sessions``, autosave, resume) builds on this object; the
turn loop only appends messages and calls :meth:`Session.changed`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .events import Usage
from .ids import now_iso, uuid7
from .transcript import Message


@dataclass
class Session:
    id: str = field(default_factory=uuid7)
    created_at: str = field(default_factory=now_iso)
    cwd: str = field(default_factory=os.getcwd)
    notebook_path: str | None = None
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(0, 0, None))
    #: tools the user allowed for the rest of this session with "Always"
    always_allowed: set[str] = field(default_factory=set)
    #: the notebook's cell fingerprint at the end of the last turn (``cells.fingerprint``), None before
    cells: list[dict[str, Any]] | None = None
    listeners: list[Callable[[Session], Any]] = field(default_factory=list, repr=False)

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.changed()

    def changed(self) -> None:
        for listener in list(self.listeners):
            listener(self)

    def add_usage(self, usage: Usage) -> None:
        self.usage = self.usage + usage
