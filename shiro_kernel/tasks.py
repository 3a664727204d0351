"""The task list (the seed's ``notebook``): what the agent plans to do, in four states.

``todo_write`` replaces the whole list; the list is re-rendered into the system prompt on every step
(:meth:`TaskList.render_prompt_block`), saved with the session record under ``notebook.todos`` and
restored on resume. ``/todos`` prints :meth:`TaskList.render_lines`; the panel shows
:meth:`TaskList.progress_bar`.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

STATUSES: tuple[str, ...] = ("pending", "in_progress", "done", "blocked")
MARKERS: dict[str, str] = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]", "blocked": "[!]"}
BAR_WIDTH = 40


def _valid(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("content"), str) and item.get("status") in STATUSES


def _clean(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"content": item["content"], "status": item["status"]}
    note = item.get("note")
    if isinstance(note, str) and note.strip():
        out["note"] = note
    return out


def render_line(item: dict[str, Any]) -> str:
    """``<mark> <content>`` plus ``  (<note>)`` when the note is not blank."""
    line = f"{MARKERS[item['status']]} {item['content']}"
    note = item.get("note")
    if isinstance(note, str) and note.strip():
        line += f"  ({note.strip()})"
    return line


def progress_bar(items: list[dict[str, Any]]) -> str:
    """``tasks ####.... 1/4  1 blocked``: 40 wide, filled = done/total·40 rounded half up, as the seed's
    ``Math.round`` (1/16 done fills 3, not Python's half-to-even 2); '' with no items."""
    if not items:
        return ""
    total = len(items)
    done = sum(1 for i in items if i["status"] == "done")
    blocked = sum(1 for i in items if i["status"] == "blocked")
    filled = int(done / total * BAR_WIDTH + 0.5)  # half up; int() floors a non-negative number
    bar = f"tasks {'#' * filled}{'.' * (BAR_WIDTH - filled)} {done}/{total}"
    return bar + (f"  {blocked} blocked" if blocked else "")


class TaskList:
    """The agent's todo list. Items are ``{content, status, note?}`` dicts."""

    def __init__(self, items: list[dict[str, Any]] | None = None) -> None:
        self._items: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        #: called with the list after every replace() and clear()
        self.on_change: list[Callable[[TaskList], Any]] = []
        if items:
            self.restore(items)

    # -- state ---------------------------------------------------------------------------------
    def replace(self, items: list[dict[str, Any]]) -> None:
        """Replace the whole list (never appends). Items must be valid (see ``todo_write``)."""
        for i, item in enumerate(items):
            if not _valid(item):
                raise ValueError(f"task {i + 1} is not a {{content, status, note?}} item: {str(item)[:80]}")
        with self._lock:
            self._items = [_clean(item) for item in items]
        self._notify()

    def state(self) -> list[dict[str, Any]]:
        """A deep copy of the items: mutating it does not change the list."""
        with self._lock:
            return copy.deepcopy(self._items)

    def restore(self, raw: Any) -> None:
        """Load saved items, dropping junk (non-string content, unknown status). ``None`` does nothing.
        Does not fire ``on_change`` (restoring is not a change worth saving)."""
        if raw is None:
            return
        items = [_clean(item) for item in raw if _valid(item)] if isinstance(raw, list) else []
        with self._lock:
            self._items = items

    def clear(self) -> None:
        with self._lock:
            self._items = []
        self._notify()

    def _notify(self) -> None:
        for listener in list(self.on_change):
            listener(self)

    # -- counts --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:  # an empty list is still a list object; use len() for emptiness
        return True

    def count(self, status: str) -> int:
        return sum(1 for item in self._items if item["status"] == status)

    @property
    def total(self) -> int:
        return len(self._items)

    @property
    def done(self) -> int:
        return self.count("done")

    @property
    def blocked(self) -> int:
        return self.count("blocked")

    # -- rendering -----------------------------------------------------------------------------
    def render_lines(self) -> list[str]:
        return [render_line(item) for item in self.state()]

    def render_prompt_block(self) -> str:
        """The system-prompt block: empty with no todos, else the header and one line per task."""
        items = self.state()
        if not items:
            return ""
        done = sum(1 for i in items if i["status"] == "done")
        blocked = sum(1 for i in items if i["status"] == "blocked")
        extra = f", {blocked} blocked" if blocked else ""
        header = f"\nYour task list ({done}/{len(items)} done{extra}). Keep it current with todo_write:"
        return "\n".join([header, *(render_line(i) for i in items)])

    def progress_bar(self) -> str:
        """``tasks ####.... 1/4  1 blocked`` (40 wide); empty string with no todos."""
        return progress_bar(self.state())

    def render(self) -> str:
        """What ``/todos`` prints: the bar and the lines, or ``no tasks`` when empty."""
        if not len(self):
            return "no tasks"
        return "\n".join([self.progress_bar(), *self.render_lines()])

    def warnings(self) -> list[str]:
        """The seed's three warnings for the current list."""
        items = self.state()
        total = len(items)
        done = sum(1 for i in items if i["status"] == "done")
        blocked = sum(1 for i in items if i["status"] == "blocked")
        active = sum(1 for i in items if i["status"] == "in_progress")
        out: list[str] = []
        if active > 1:
            out.append(f"{active} tasks are in_progress; keep it to one.")
        if active == 0 and done < total and blocked < total - done:
            out.append("nothing is in_progress; mark what you are working on.")
        for item in items:
            if item["status"] == "blocked" and not (item.get("note") or "").strip():
                out.append(f'"{item["content"]}" is blocked with no note saying why.')
        return out
