"""A session: one notebook's conversation in memory — its transcript, task list and running totals.

Persistence (records under ``SHIRO_HOME/sessions``, the index, autosave, resume) lives in
:mod:`shiro_kernel.store`; the turn loop only appends messages and calls :meth:`Session.changed`.
A ``todo_write`` (a change of :attr:`Session.tasks`) counts as a change of the session.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .egress import Ledger
from .events import Usage
from .ids import now_iso, uuid7
from .tasks import TaskList
from .transcript import Message


@dataclass
class Session:
    id: str = field(default_factory=uuid7)
    created_at: str = field(default_factory=now_iso)
    cwd: str = field(default_factory=os.getcwd)
    notebook_path: str | None = None
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(0, 0, None))
    tasks: TaskList = field(default_factory=TaskList)
    #: the model the last turn actually used (``--model`` included); None before the first turn
    model: str | None = None
    #: tools the user allowed for the rest of this session with "Always"
    always_allowed: set[str] = field(default_factory=set)
    #: the notebook's cell fingerprint at the end of the last turn (``context.cell_changes.fingerprint``)
    cells: list[dict[str, Any]] | None = None
    #: which messages each turn made, and in which cell (``rerun.record.TurnSpan`` as JSON): what a rerun of
    #: the notebook replays without the model
    turns: list[dict[str, Any]] = field(default_factory=list)
    #: what each turn's requests took off the machine, and to which server (:mod:`shiro_kernel.egress`)
    egress: Ledger = field(default_factory=Ledger)
    #: the key of this session's stand-ins for private values (:mod:`shiro_kernel.private.mask`): kept in its
    #: local record, never sent, so a value is the same stand-in after a resume
    mask_key: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)
    #: each private value masked in this session's requests, and its label: masked again after a resume
    private_seen: dict[str, str] = field(default_factory=dict, repr=False)
    listeners: list[Callable[[Session], Any]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.tasks.on_change.append(lambda _tasks: self.changed())

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.changed()

    def changed(self) -> None:
        for listener in list(self.listeners):
            listener(self)

    def add_usage(self, usage: Usage) -> None:
        self.usage = self.usage + usage
