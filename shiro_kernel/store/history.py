"""Prompt history per project: ``SHIRO_HOME/history/<name>_<hash>.json``, a JSON array of prompts in
submission order, newest last.

Prompts are trimmed; blanks, slash commands and an immediate repeat are not recorded (a non-adjacent
repeat is); the newest 200 are kept. Several kernels of one project share the file, so every append
is a locked read-modify-write. A corrupt file reads as empty and is quarantined before the next write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import CorruptFile, StoreError
from . import files
from .paths import home, project_slug

LIMIT = 200
#: history files whose last write failed (and was reported)
_FAILING: set[Path] = set()


def history_path(root: Path) -> Path:
    return home() / "history" / f"{project_slug(root)}.json"


def _clean(raw: Any) -> list[str] | None:
    """The entries of a parsed file, or None when it is not a JSON array."""
    if not isinstance(raw, list):
        return None
    return [e for e in raw if isinstance(e, str)]


class PromptHistory:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def for_project(cls, root: Path) -> PromptHistory:
        return cls(history_path(root))

    def entries(self) -> list[str]:
        """Oldest first; [] when missing or corrupt."""
        try:
            raw = files.read_json(self.path)
        except CorruptFile:
            return []
        return _clean(raw) or []

    def append(self, prompt: str) -> bool:
        """Record a prompt; False when it was not recorded (blank, slash command, immediate repeat, or a
        write that failed again). The first failure raises :class:`~shiro_kernel.errors.StoreError`; while
        the file stays unwritable later ones return False quietly (one warning, not one per turn)."""
        text = prompt.strip()
        if not text or text.startswith("/"):
            return False
        try:
            added = self._append(text)
        except StoreError:
            if self.path in _FAILING:
                return False
            _FAILING.add(self.path)
            raise
        _FAILING.discard(self.path)
        return added

    def _append(self, text: str) -> bool:
        with files.locked(self.path):
            try:
                raw = files.read_json(self.path)
            except CorruptFile:
                files.quarantine(self.path)
                raw = []
            entries = _clean(raw)
            if entries is None:
                if raw is not None:  # valid JSON but not a list: keep it aside, never overwrite it
                    files.quarantine(self.path)
                entries = []
            if entries and entries[-1] == text:
                return False
            entries.append(text)
            files.write_json(self.path, entries[-LIMIT:])
        return True


def format_history(entries: list[str], limit: int | None = None) -> str:
    """What ``/history`` prints: numbered (1 = oldest), newest last; continuation lines indented.
    With ``limit``, only the newest ``limit`` entries (keeping their numbers)."""
    if not entries:
        return "no prompt history for this project yet"
    start = 0 if limit is None else max(0, len(entries) - limit)
    width = len(str(len(entries)))
    lines: list[str] = []
    for n, text in enumerate(entries[start:], start + 1):
        first, *rest = text.splitlines() or [""]
        lines.append(f"{n:>{width}}  {first}")
        lines += [f"{'':>{width}}  {r}" for r in rest]
    return "\n".join(lines)
