"""The memory a session uses: on or off (``Shiro.memory``, or ``--memory`` / ``--no-memory`` for the rest of the
session), the named memories muted (``Shiro.mute``, ``--mute``), and the project's stores as they are then."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..store.paths import git_commit
from .named import MemoryStore, normalize_mute_list
from .notes import NoteStore

if TYPE_CHECKING:
    from ..config import Shiro
    from ..location import Location

MEMORY_ON = "memory is on: project notes and named memories are loaded and written again"
MEMORY_OFF = (
    "memory is off for this session: no project notes or named memories are loaded or written "
    "(turn it back on with %shiro --memory)"
)


class SessionMemory:
    """``config``'s memory settings, this session's changes to them, and the stores of the project at ``root()``."""

    def __init__(self, config: Shiro, location: Location) -> None:
        self.config, self.location = config, location
        self.muted: list[str] = normalize_mute_list(config.mute)
        #: ``--memory`` / ``--no-memory`` for this kernel's session; None: ``Shiro.memory`` decides
        self.on: bool | None = None

    def enabled(self) -> bool:
        return self.config.memory if self.on is None else self.on

    def set(self, on: bool) -> str:
        """``--memory`` / ``--no-memory``: for the rest of this session; the line to show."""
        self.on = on
        return MEMORY_ON if on else MEMORY_OFF

    def mute(self, names: list[str] | tuple[str, ...]) -> list[str]:
        """``--mute``: hide these named memories for the session; the warnings about names no memory has."""
        self.muted = sorted(set(self.muted) | set(names))
        return self.memories().mute_warnings(list(names))

    def notes(self, enabled: bool | None = None) -> NoteStore | None:
        """The project notes, or None while memory is off."""
        return NoteStore.for_project(self.location.root) if (self.enabled() if enabled is None else enabled) else None

    def memories(self, model: str | None = None) -> MemoryStore:
        return MemoryStore.for_project(self.location.root, model or self.config.model, self.muted)

    def in_use(self, model: str | None = None, provenance: dict[str, Any] | None = None) -> MemoryStore | None:
        """The named memories, or None while memory is off; what they write says where it came from
        (``provenance``, :meth:`provenance`)."""
        if not self.enabled():
            return None
        memories = self.memories(model)
        if provenance is not None:
            memories.provenance = provenance
        return memories

    def provenance(self, session_id: str) -> dict[str, Any]:
        """Where a note or memory written now comes from: the session, the notebook, its cell, the git commit."""
        notebook = self.location.notebook
        return {
            "sessionId": session_id,
            "notebook": str(notebook) if notebook else None,
            "cell": getattr(self.location.shell, "execution_count", None),
            "gitCommit": git_commit(self.location.root),
        }


__all__ = ["MEMORY_OFF", "MEMORY_ON", "SessionMemory"]
