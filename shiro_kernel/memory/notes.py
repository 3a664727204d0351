"""Project notes: the ``remember`` / ``recall`` / ``forget`` store (seed: shiro-neko ``src/memory.ts``).

One JSON array per project at ``SHIRO_HOME/memory/<slug>.json``. Every mutation is a
read-modify-write under :func:`~shiro_kernel.store.files.locked`, so two kernels of one repository never
lose each other's notes. Reading a file that cannot be parsed raises
:class:`~shiro_kernel.errors.CorruptFile` (the caller tells the user and goes on without notes); a write
sets it aside with :func:`~shiro_kernel.store.files.quarantine` first and says where it went. It is
never overwritten. Refused operations (empty text, blank query, unknown kind) raise
:class:`~shiro_kernel.errors.MemoryRefused`.

Exact texts (boot header, ``/notes`` lines, ``/memory`` messages, the compaction prompt) live here
as module constants.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..errors import CorruptFile, MemoryRefused
from ..ids import now_iso, uuid7
from ..store import files, paths

KINDS = ("fact", "decision", "gotcha", "command")
MAX_TEXT = 400
MAX_ENTRIES = 300
RECALL_LIMIT = 15
BOOT_LIMIT = 20
#: ``/memory`` does nothing until the store is past this many entries ...
SUMMARIZE_PAST = 60
#: ... and has at least this many never-recalled entries to merge.
SUMMARIZE_MIN_UNUSED = 2
STALE_DAYS = 90

BOOT_HEADER = (
    "What you learned about this project in earlier sessions. Trust it, but verify anything",
    "that contradicts what you can see in the code now:",
)
EMPTY_LIST = "nothing remembered about this project yet"
DISABLED = "memory is disabled (--no-memory)"
NO_MODEL = "no model available to summarize memory"

SUMMARIZE_SYSTEM = (
    "You are compacting an agent's notes about one codebase. Merge duplicates and near-duplicates, "
    "drop anything that is no longer useful or was only true of one past task, and keep the rest verbatim "
    "where you can. Output one note per line, each prefixed with its kind in brackets: "
    "[fact], [decision], [gotcha], or [command]. No preamble, no numbering, no blank lines."
)
_SUMMARY_LINE = re.compile(r"^\s*\[(fact|decision|gotcha|command)\]\s*(.+?)\s*$", re.IGNORECASE)


def notes_path(root: Path) -> Path:
    return paths.home() / "memory" / f"{paths.project_slug(root)}.json"


def is_entry(value: Any) -> bool:
    """The seed's junk filter: string id/text/createdAt, numeric hits, a known kind."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("text"), str)
        and isinstance(value.get("createdAt"), str)
        and isinstance(value.get("hits"), (int, float))
        and not isinstance(value.get("hits"), bool)
        and value.get("kind") in KINDS
    )


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Added:
    """What :meth:`NoteStore.add` did: the new entry (None for a duplicate), how many notes are stored,
    and where an unreadable notes file was set aside before the write (None when it was readable)."""

    entry: dict[str, Any] | None
    stored: int
    set_aside: Path | None = None


class NoteStore:
    """The notes of one project. Every method re-reads the file, so several kernels stay in step."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def for_project(cls, root: Path) -> NoteStore:
        return cls(notes_path(root))

    # -- reading and writing -----------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """All notes in file order (oldest first); [] when there is no file. Raises
        :class:`~shiro_kernel.errors.CorruptFile` when the file cannot be read as a notes array."""
        data = files.read_json(self.path)
        if data is None:
            return []
        if not isinstance(data, list):
            raise CorruptFile(self.path, "not a JSON array")
        return [e for e in data if is_entry(e)]

    def __len__(self) -> int:
        return len(self.entries())

    def _update(self, change: Callable[[list[dict[str, Any]]], tuple[bool, Any]]) -> tuple[Any, Path | None]:
        """Read-modify-write under the store's lock. ``change`` edits the list in place and returns
        ``(changed, result)``; the file is written only when ``changed``. Returns ``(result, set_aside)``:
        an unreadable file counts as empty and is set aside (there) before the new one is written."""
        set_aside: Path | None = None
        with files.locked(self.path):
            try:
                entries = self.entries()
                corrupt = False
            except CorruptFile:
                entries, corrupt = [], True
            changed, result = change(entries)
            if changed:
                if corrupt and self.path.exists():
                    set_aside = files.quarantine(self.path)
                files.write_json(self.path, entries[-MAX_ENTRIES:])
                del entries[:-MAX_ENTRIES]
            return result, set_aside

    # -- operations --------------------------------------------------------------------------
    def add(self, kind: str, text: str, source: dict[str, Any] | None = None) -> Added:
        """Store one note; ``Added.entry`` is None for an exact duplicate (nothing written). ``source``
        (provenance) is kept verbatim when it is a dict."""
        if kind not in KINDS:
            raise MemoryRefused(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        clean = (text or "").strip()[:MAX_TEXT]
        if not clean:
            raise MemoryRefused("memory text is empty")

        def change(entries: list[dict[str, Any]]) -> tuple[bool, Any]:
            if any(e["text"] == clean for e in entries):
                return False, (None, len(entries))
            entry: dict[str, Any] = {"id": uuid7(), "kind": kind, "text": clean, "createdAt": now_iso(), "hits": 0}
            if isinstance(source, dict) and source:
                entry["source"] = source
            entries.append(entry)
            return True, (entry, min(len(entries), MAX_ENTRIES))

        (entry, stored), set_aside = self._update(change)
        return Added(entry, stored, set_aside)

    def recall(self, query: str) -> list[dict[str, Any]]:
        """AND search: every term is a substring of the note (case-insensitive). Every match gets a
        hit; the 15 newest matches are returned newest first."""
        terms = (query or "").lower().split()
        if not terms:
            raise MemoryRefused("query is empty")

        def change(entries: list[dict[str, Any]]) -> tuple[bool, Any]:
            found = [e for e in entries if all(t in e["text"].lower() for t in terms)]
            stamp = now_iso()
            for e in found:
                e["hits"] = int(e["hits"]) + 1
                e["lastHitAt"] = stamp
            return bool(found), [dict(e) for e in found[-RECALL_LIMIT:][::-1]]

        found: list[dict[str, Any]] = self._update(change)[0]
        return found

    def forget(self, needle: str) -> int:
        """Remove every note whose text contains ``needle`` (case-insensitive). Returns how many."""
        key = (needle or "").strip().lower()
        if not key:
            raise MemoryRefused("text to forget is empty")

        def change(entries: list[dict[str, Any]]) -> tuple[bool, Any]:
            keep = [e for e in entries if key not in e["text"].lower()]
            removed = len(entries) - len(keep)
            entries[:] = keep
            return removed > 0, removed

        removed: int = self._update(change)[0]
        return removed

    # -- rendering ---------------------------------------------------------------------------
    def render_boot(self, limit: int = BOOT_LIMIT) -> str:
        """The system-prompt block: '' when empty, else an empty line, the two header lines and the
        top ``limit`` notes by hits, then recency."""
        entries = self.entries()
        if not entries:
            return ""
        # Recency is the creation time, then the place in the file: two notes added in the same
        # millisecond share a createdAt, and the one appended later is the newer.
        order = sorted(range(len(entries)), key=lambda i: (entries[i]["createdAt"], i), reverse=True)
        order.sort(key=lambda i: entries[i]["hits"], reverse=True)  # stable: recency breaks ties
        ranked = [entries[i] for i in order[:limit]]
        return "\n".join(["", *BOOT_HEADER, *(f"- ({e['kind']}) {e['text']}" for e in ranked)])

    def format_list(self) -> str:
        """``/notes``: newest first, ``(<kind>) <text>`` plus ``  [recalled <h>x]`` when recalled, and
        under a note with provenance one line saying where it came from (:func:`source_line`)."""
        entries = self.entries()
        if not entries:
            return EMPTY_LIST
        lines: list[str] = []
        for e in reversed(entries):
            lines.append(list_line(e))
            origin = source_line(e.get("source"))
            if origin:
                lines.append(origin)
        return "\n".join(lines)

    def stale(self, days: int = STALE_DAYS, now: datetime | None = None) -> list[dict[str, Any]]:
        """Notes not confirmed (last recalled, else created) in ``days`` days, oldest first."""
        cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=days)
        out = []
        for e in self.entries():
            when = _parse_time(e.get("lastHitAt")) or _parse_time(e.get("createdAt"))
            if when is not None and when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            if when is None or when < cutoff:
                out.append(e)
        return out

    # -- /memory -----------------------------------------------------------------------------
    def summarize(self, ask_model: Callable[[str, str], str] | None) -> str:
        """``/memory``: the model merges the never-recalled notes; recalled ones stay verbatim.

        Nothing happens until the store is past 60 entries with at least two unused ones, and a reply
        with no parseable line leaves the store untouched. Returns the one-line message for the user.
        """
        if ask_model is None:
            return NO_MODEL
        entries = self.entries()
        before = len(entries)
        if before <= SUMMARIZE_PAST:
            return (
                f"memory left as is: {before} entries, not past {SUMMARIZE_PAST} yet "
                f"(nothing is merged until there are more than {SUMMARIZE_PAST})"
            )
        unused = [e for e in entries if not e["hits"]]
        if len(unused) < SUMMARIZE_MIN_UNUSED:
            return f"memory left as is: {before} entries, too few unused ones to merge"
        prompt = "\n".join(f"[{e['kind']}] {e['text']}" for e in unused)
        try:
            reply = ask_model(SUMMARIZE_SYSTEM, prompt)
        except Exception as exc:  # the provider's failure leaves the store as it was
            return f"memory left as is: the model call failed ({type(exc).__name__}: {exc})"
        merged: list[dict[str, Any]] = []
        for line in (reply or "").splitlines():
            m = _SUMMARY_LINE.match(line)
            if m:
                merged.append(
                    {
                        "id": uuid7(),
                        "kind": m.group(1).lower(),
                        "text": m.group(2)[:MAX_TEXT],
                        "createdAt": now_iso(),
                        "hits": 0,
                    }
                )
        if not merged:
            return "memory left as is: the model's reply had no parseable notes"
        sent = {e["id"] for e in unused}

        def change(current: list[dict[str, Any]]) -> tuple[bool, Any]:
            # Re-read under the lock: keep what was recalled, drop what the model merged, and keep
            # anything another kernel added while the model was thinking.
            used = [e for e in current if e["id"] not in sent and e["hits"]]
            fresh = [e for e in current if e["id"] not in sent and not e["hits"]]
            recalled_meanwhile = [e for e in current if e["id"] in sent and e["hits"]]
            current[:] = [*used, *recalled_meanwhile, *merged, *fresh]
            return True, min(len(current), MAX_ENTRIES)

        after = self._update(change)[0]
        return f"memory compacted: {before} entries into {after}"


def source_line(source: Any) -> str:
    """``  — from 0193ab2c · analysis.ipynb cell 4 · a1b2c3d``: session (as ``%shiro -r`` takes it:
    :func:`~shiro_kernel.store.short_ids.short_id`), notebook file name and cell (execution count), git commit (7);
    '' when nothing is known."""
    from ..store.short_ids import short_id

    if not isinstance(source, dict):
        return ""
    bits: list[str] = []
    sid = source.get("sessionId")
    if isinstance(sid, str) and sid:
        bits.append(short_id(sid))
    notebook = source.get("notebook")
    cell = source.get("cell")
    where = Path(notebook).name if isinstance(notebook, str) and notebook else ""
    if isinstance(cell, int) and not isinstance(cell, bool):
        where = f"{where} cell {cell}".strip()
    if where:
        bits.append(where)
    commit = source.get("gitCommit")
    if isinstance(commit, str) and commit:
        bits.append(commit[:7])
    return f"  — from {' · '.join(bits)}" if bits else ""


def list_line(e: dict[str, Any]) -> str:
    line = f"({e['kind']}) {e['text']}"
    hits = int(e["hits"])
    return f"{line}  [recalled {hits}x]" if hits > 0 else line
