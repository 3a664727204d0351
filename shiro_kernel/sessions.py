"""Session records: ``SHIRO_HOME/sessions/<uuidv7>.json``, an index beside them, autosave and resume.

A record is the seed's JSON (2-space indent)::

    {"id", "createdAt", "updatedAt", "cwd", "provider": "openai", "model", "title",
     "inputTokens", "outputTokens", "costUsd" (omitted when unpriced),
     "notebook": {"todos": [...]}, "notebookPath", "cells" (the notebook's cell fingerprint at the end
     of the last turn; omitted before the first), "messages": [...]}

A session with no messages is never written. A corrupt record is skipped by every listing, is never
loaded, and is never overwritten: saving over it first moves it aside (``storage.quarantine``).

**Index.** ``sessions/index.json`` holds one row per record — ``[id, updatedAt, createdAt, title,
messages (count), notebookPath, cwd, mtime_ns, size, corrupt]`` (the column names are in its ``fields``),
rows newest ``updatedAt`` first — so that listing and prefix resolution with 10,000 records read one
file, not 10,000. It is rewritten under ``storage.locked`` on every save (several kernels may save at
once) and is a pure cache: when it is missing, unreadable or stale it is repaired from the records
themselves. "Stale" is checked cheaply on every read: the set of ``*.json`` names in the folder (one
``os.listdir``) must equal the index's ids, and the folder must not have changed (mtime) since the index
was stamped — every record write is a rename into the folder, so a writer that bypassed the index
shows up there. A repair stats every record and re-reads only those whose (mtime, size) differ.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import storage
from .events import Usage
from .ids import now_iso
from .paths import home
from .session import Session
from .tasks import TaskList
from .transcript import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart, messages_from_json, messages_to_json

PROVIDER = "openai"
INDEX_NAME = "index.json"
INDEX_VERSION = 2
LIST_LIMIT = 15
TITLE_LIMIT = 60
AUTOSAVE_DELAY = 0.4
#: a long tool loop keeps restarting the debounce; past this many seconds of changes it writes anyway,
#: so a kernel that dies mid-turn loses at most this much of the turn
AUTOSAVE_MAX_WAIT = 5.0
#: a folder unchanged for this long gets a newer mtime on any change, whatever the timestamp granularity
_SETTLED_NS = 2_000_000_000

_ID_OK = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]*$")


class Ambiguous(LookupError):
    """A prefix that matches more than one session."""

    def __init__(self, prefix: str, matches: list[str]) -> None:
        super().__init__(f'"{prefix}" matches {len(matches)} sessions')
        self.prefix = prefix
        self.matches = matches


@dataclass(frozen=True)
class SessionInfo:
    """One row of the index: what listing and resolving need, without reading the record."""

    id: str
    created_at: str
    updated_at: str
    title: str
    messages: int
    notebook_path: str | None
    cwd: str | None


# -- Session <-> record --------------------------------------------------------------------------------
def title_of(messages: Iterable[Message]) -> str:
    """The first user message's text (whitespace collapsed to single spaces, so a ``%%shiro`` cell
    body stays one line); over 60 characters: the first 60 + ``...``; none: ``untitled``."""
    for message in messages:
        if message.role == "user":
            text = " ".join(message.text.split())
            if not text:
                continue
            return text[:TITLE_LIMIT] + "..." if len(text) > TITLE_LIMIT else text
    return "untitled"


def tasks_of(session: Session) -> TaskList:
    """The session's task list (created and attached on first use). A ``todo_write`` counts as a
    change of the session, so autosave picks it up."""
    tasks = session.__dict__.get("tasks")
    if not isinstance(tasks, TaskList):
        tasks = TaskList()
        tasks.on_change.append(lambda _tasks: session.changed())
        session.__dict__["tasks"] = tasks
    return tasks


def session_to_record(session: Session, model: str, *, updated_at: str | None = None) -> dict[str, Any]:
    messages = list(session.messages)  # a snapshot: the turn loop may append meanwhile
    record: dict[str, Any] = {
        "id": session.id,
        "createdAt": session.created_at,
        "updatedAt": updated_at or now_iso(),
        "cwd": session.cwd,
        "provider": PROVIDER,
        "model": model,
        "title": title_of(messages),
        "inputTokens": session.usage.input_tokens,
        "outputTokens": session.usage.output_tokens,
    }
    if session.usage.cost_usd is not None:
        record["costUsd"] = session.usage.cost_usd
    record["notebook"] = {"todos": tasks_of(session).state()}
    record["notebookPath"] = None if session.notebook_path is None else str(session.notebook_path)
    if session.cells is not None:
        record["cells"] = list(session.cells)
    record["messages"] = messages_to_json(messages)
    return record


def _check_record(record: Any) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise ValueError("a session record must be a JSON object")
    if not isinstance(record.get("messages"), list):
        raise ValueError("a session record needs a messages list")
    return record


def session_from_record(record: dict[str, Any]) -> Session:
    """A Session with the record's messages, totals and task list (model and agent are not restored:
    they come from the current config). Raises ValueError for a malformed record."""
    record = _check_record(record)
    cost = record.get("costUsd")
    session = Session(
        id=str(record["id"]),
        created_at=str(record.get("createdAt") or now_iso()),
        cwd=str(record.get("cwd") or os.getcwd()),
        notebook_path=record.get("notebookPath") if isinstance(record.get("notebookPath"), str) else None,
        messages=messages_from_json(record["messages"]),
        usage=Usage(int(record.get("inputTokens") or 0), int(record.get("outputTokens") or 0),
                    float(cost) if isinstance(cost, (int, float)) else None),
    )
    notebook = record.get("notebook")
    tasks_of(session).restore(notebook.get("todos") if isinstance(notebook, dict) else None)
    from .cells import valid

    session.cells = valid(record.get("cells"))
    return session


#: one index row: [id, updatedAt, createdAt, title, messages, notebookPath, cwd, mtime_ns, size, corrupt]
INDEX_FIELDS = ["id", "updatedAt", "createdAt", "title", "messages", "notebookPath", "cwd", "mtime", "size", "corrupt"]


def _row(sid: str, record: dict[str, Any], st: os.stat_result) -> list[Any]:
    nb, cwd = record.get("notebookPath"), record.get("cwd")
    return [sid, str(record.get("updatedAt") or ""), str(record.get("createdAt") or ""),
            str(record.get("title") or "untitled"), len(record.get("messages") or []),
            nb if isinstance(nb, str) else None, cwd if isinstance(cwd, str) else None,
            st.st_mtime_ns, st.st_size, 0]


def _corrupt_row(sid: str, st: os.stat_result) -> list[Any]:
    return [sid, "", "", "", 0, None, None, st.st_mtime_ns, st.st_size, 1]


def _info(row: list[Any]) -> SessionInfo:
    return SessionInfo(row[0], row[2], row[1], row[3], int(row[4]), row[5], row[6])


def _order(row: list[Any]) -> tuple[str, str]:
    return (row[1], row[0])


class _Index:
    """The parsed index: rows newest ``updatedAt`` first, and the same rows by id."""

    __slots__ = ("rows", "by_id")

    def __init__(self, rows: list[list[Any]], *, presorted: bool = False) -> None:
        if not presorted:
            rows.sort(key=_order, reverse=True)
        self.rows = rows
        self.by_id: dict[str, list[Any]] = {r[0]: r for r in rows}

    def replaced(self, row: list[Any] | None, drop: str | None = None) -> _Index:
        """A new index with ``row`` upserted (or ``drop`` removed)."""
        by_id = dict(self.by_id)
        if drop is not None:
            by_id.pop(drop, None)
        if row is not None:
            by_id[row[0]] = row
        return _Index(list(by_id.values()))


_EMPTY = _Index([])


def _same_path(a: str | os.PathLike[str] | None, b: str | os.PathLike[str] | None) -> bool:
    if a is None or b is None:
        return False
    return os.path.normpath(os.path.abspath(os.fspath(a))) == os.path.normpath(os.path.abspath(os.fspath(b)))


# -- the store -------------------------------------------------------------------------------------------
class SessionStore:
    """Session records under ``root`` (default ``home()/"sessions"``)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else home() / "sessions"
        self.index_path = self.root / INDEX_NAME
        self._cache: tuple[tuple[int, int, int], _Index] | None = None
        self._cache_lock = threading.Lock()
        self._verified: tuple[int, int, int, int] | None = None

    # paths
    def path_for(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not _ID_OK.match(session_id):
            raise ValueError(f"not a session id: {session_id!r}")
        return self.root / f"{session_id}.json"

    # -- writing -----------------------------------------------------------------------------------
    def save(self, session: Session, *, model: str) -> bool:
        """Write the session's record (fresh ``updatedAt``) and its index row. A session with no
        messages is not written (returns False). A corrupt record in the way is quarantined first."""
        if not session.messages:
            return False
        record = session_to_record(session, model)
        path = self.path_for(session.id)
        text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
        with storage.locked(self.index_path):
            index = self._index_locked()
            try:
                st = path.stat()
            except FileNotFoundError:
                st = None
            if st is not None:
                known = index.by_id.get(session.id)
                same = known is not None and known[7] == st.st_mtime_ns and known[8] == st.st_size
                if same and known[9]:
                    storage.quarantine(path)
                elif not same:  # written by someone we did not see: make sure it is readable first
                    try:
                        _check_record(storage.read_json(path))
                    except (storage.CorruptFile, ValueError):
                        storage.quarantine(path)
            storage.write_atomic(path, text)
            self._write_index(index.replaced(_row(session.id, record, path.stat())))
        return True

    def delete(self, session_id: str) -> bool:
        path = self.path_for(session_id)
        with storage.locked(self.index_path):
            index = self._index_locked()
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            self._write_index(index.replaced(None, drop=session_id))
        return True

    # -- reading one -------------------------------------------------------------------------------
    def load_record(self, session_id: str) -> dict[str, Any] | None:
        """The raw record; None when unknown or corrupt."""
        try:
            record = storage.read_json(self.path_for(session_id))
            return _check_record(record) if record is not None else None
        except (ValueError, storage.CorruptFile):
            return None

    def load(self, session_id: str) -> Session | None:
        """The session (messages, totals, task list); None when unknown or corrupt."""
        record = self.load_record(session_id)
        if record is None:
            return None
        record.setdefault("id", session_id)
        try:
            return session_from_record(record)
        except (ValueError, KeyError, TypeError):
            return None

    # -- listing -----------------------------------------------------------------------------------
    def list(self, limit: int | None = LIST_LIMIT) -> list[SessionInfo]:
        """The newest ``limit`` sessions, newest ``updatedAt`` first (corrupt records skipped; [] when
        there is no folder). Reads only the index."""
        out: list[SessionInfo] = []
        for row in self._index().rows:
            if limit is not None and len(out) >= limit:
                break
            if not row[9]:
                out.append(_info(row))
        return out

    def infos(self) -> list[SessionInfo]:
        """Every readable session, newest first."""
        return self.list(None)

    def latest_for_notebook(self, notebook_path: str | os.PathLike[str] | None,
                            cwd: str | os.PathLike[str] | None = None) -> SessionInfo | None:
        """The newest session recorded for this notebook; when the notebook is unknown (``None``, e.g.
        terminal IPython) the newest whose ``cwd`` is ``cwd`` (default: the working directory)."""
        column, want = (5, notebook_path) if notebook_path is not None else (6, cwd if cwd is not None else os.getcwd())
        want_s = os.fspath(want)
        for row in self._index().rows:
            if not row[9] and row[column] is not None and (row[column] == want_s or _same_path(row[column], want_s)):
                return _info(row)
        return None

    def resolve(self, prefix: str) -> str | None:
        """The full id for an exact id or a unique prefix; None when nothing matches; raises
        :class:`Ambiguous` when several do."""
        prefix = (prefix or "").strip()
        if not prefix or not _ID_OK.match(prefix):
            return None
        index = self._index()
        exact = index.by_id.get(prefix)
        if exact is not None and not exact[9]:
            return prefix
        low = prefix.lower()
        matches = sorted(sid for sid, row in index.by_id.items() if sid.lower().startswith(low) and not row[9])
        if len(matches) > 1:
            raise Ambiguous(prefix, matches)
        return matches[0] if matches else None

    def rebuild_index(self) -> int:
        """Rebuild the index from every record (reading them all); returns how many records."""
        if not self.root.is_dir():
            return 0
        with storage.locked(self.index_path):
            index = self._scan(_EMPTY)
            self._write_index(index)
        return len(index.rows)

    # -- index internals ---------------------------------------------------------------------------
    def _record_ids(self) -> set[str] | None:
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return None
        return {n[:-5] for n in names if n.endswith(".json") and n != INDEX_NAME and not n.startswith(".")}

    def _read_index(self) -> tuple[_Index | None, os.stat_result | None]:
        """The parsed index (cached while the file is unchanged) and its stat; (None, st) when it is
        missing or unreadable."""
        try:
            st = os.stat(self.index_path)
        except FileNotFoundError:
            return None, None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._cache_lock:
            if self._cache is not None and self._cache[0] == key:
                return self._cache[1], st
        gc_was_on = gc.isenabled()
        gc.disable()  # parsing creates ~10k small lists; collecting during it only costs time
        try:
            raw = storage.read_json(self.index_path)
        except storage.CorruptFile:
            return None, st
        finally:
            if gc_was_on:
                gc.enable()
        if (not isinstance(raw, dict) or raw.get("version") != INDEX_VERSION or raw.get("fields") != INDEX_FIELDS
                or not isinstance(raw.get("sessions"), list)):
            return None, st
        rows = raw["sessions"]
        if not all(isinstance(r, list) and len(r) == len(INDEX_FIELDS) and isinstance(r[0], str) for r in rows):
            return None, st
        index = _Index(rows, presorted=True)
        with self._cache_lock:
            self._cache = (key, index)
        return index, st

    def _fresh(self) -> tuple[_Index | None, _Index | None]:
        """(the index if it is fresh else None, whatever the index holds, for a repair)."""
        index, st = self._read_index()
        if index is None or st is None:
            return None, index
        try:
            dir_mtime = os.stat(self.root).st_mtime_ns
        except FileNotFoundError:
            return None, index
        if dir_mtime > st.st_mtime_ns:
            return None, index
        verified = (st.st_mtime_ns, st.st_size, st.st_ino, dir_mtime)
        if self._verified == verified:
            return index, index
        ids = self._record_ids()
        if ids is None or len(ids) != len(index.by_id) or not ids.issubset(index.by_id.keys()):
            return None, index
        # The names matched. If the folder's mtime is well before now, any later change to the folder
        # gets a newer mtime even on coarse timestamps, so until then the listing need not be redone.
        if time.time_ns() - dir_mtime > _SETTLED_NS:
            self._verified = verified
        return index, index

    def _index(self) -> _Index:
        """The fresh index, repaired (under the lock) when needed."""
        if not self.root.is_dir():
            return _EMPTY
        fresh, _ = self._fresh()
        if fresh is not None:
            return fresh
        try:
            with storage.locked(self.index_path):
                return self._index_locked()
        except OSError:  # a read-only home: list from a scan without writing an index
            _, old = self._fresh()
            return self._scan(old or _EMPTY)

    def _index_locked(self) -> _Index:
        """Like :meth:`_index`, for a caller holding the index lock."""
        fresh, old = self._fresh()
        if fresh is not None:
            return fresh
        if not self.root.is_dir():
            return _EMPTY
        index = self._scan(old or _EMPTY)
        try:
            self._write_index(index)
        except OSError:
            pass
        return index

    def _scan(self, old: _Index) -> _Index:
        """Rows for every record on disk: kept from ``old`` when (mtime, size) match, else read."""
        rows: list[list[Any]] = []
        try:
            it = os.scandir(self.root)
        except FileNotFoundError:
            return _EMPTY
        with it:
            for e in it:
                name = e.name
                if not name.endswith(".json") or name == INDEX_NAME or name.startswith("."):
                    continue
                sid = name[:-5]
                try:
                    st = e.stat()
                except FileNotFoundError:
                    continue
                prev = old.by_id.get(sid)
                if prev is not None and prev[7] == st.st_mtime_ns and prev[8] == st.st_size:
                    rows.append(prev)
                    continue
                try:
                    rows.append(_row(sid, _check_record(storage.read_json(Path(e.path))), st))
                except (storage.CorruptFile, ValueError, TypeError):
                    rows.append(_corrupt_row(sid, st))
        return _Index(rows)

    def _write_index(self, index: _Index) -> None:
        data = json.dumps({"version": INDEX_VERSION, "fields": INDEX_FIELDS, "sessions": index.rows},
                          ensure_ascii=False, separators=(",", ":"))
        storage.write_atomic(self.index_path, data)
        # the rename above touched the folder; stamp the index after it so "folder newer than
        # index" means someone changed a record without updating the index
        os.utime(self.index_path)
        st = os.stat(self.index_path)
        with self._cache_lock:
            self._cache = ((st.st_mtime_ns, st.st_size, st.st_ino), index)


# -- autosave --------------------------------------------------------------------------------------------
class Autosaver:
    """Debounced autosave: every ``session.changed()`` restarts a ``delay`` (400 ms) countdown; when it
    runs out the record is written on a timer thread, never on the caller's. ``writes`` counts writes.

    ``flush()`` writes now (``/save``); ``close()`` cancels the countdown, writes if the session has
    messages and stops listening (called at shutdown; registered with ``atexit`` unless ``at_exit``
    is False).
    """

    def __init__(self, store: SessionStore, session: Session, model_getter: Callable[[], str],
                 delay: float = AUTOSAVE_DELAY, *, at_exit: bool = True) -> None:
        self.store = store
        self.session = session
        self.model_getter = model_getter
        self.delay = delay
        self.max_wait = AUTOSAVE_MAX_WAIT
        self._first_change = 0.0
        self.writes = 0
        self.last_error: BaseException | None = None
        self._timer: threading.Timer | None = None
        self._deadline = 0.0
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._closed = False
        tasks_of(session)  # todo_write changes reach the listeners too
        session.listeners.append(self._on_change)
        self._at_exit = at_exit
        if at_exit:
            atexit.register(self.close)

    @property
    def pending(self) -> bool:
        """A write is scheduled."""
        return self._timer is not None

    def _on_change(self, _session: Session) -> None:
        if self._closed:
            return
        with self._lock:
            now = time.monotonic()
            if self._timer is None:
                self._first_change = now
                self._deadline = now + self.delay
                self._start(self.delay)
            else:
                self._deadline = min(now + self.delay, self._first_change + self.max_wait)

    def _start(self, seconds: float) -> None:
        timer = threading.Timer(seconds, self._fire)
        timer.daemon = True
        timer.name = "shiro-autosave"
        self._timer = timer
        timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._timer is None or threading.current_thread() is not self._timer:
                return  # cancelled or superseded
            remaining = self._deadline - time.monotonic()
            if remaining > 0.001:  # changed again since: wait out the rest of the countdown
                self._start(remaining)
                return
            self._timer = None
        self._write()

    def _cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _write(self) -> bool:
        with self._save_lock:
            try:
                written = self.store.save(self.session, model=self.model_getter())
            except Exception as exc:  # never raise on a timer thread; the caller can look
                self.last_error = exc
                return False
            if written:
                self.writes += 1
                self.last_error = None
            return written

    def flush(self) -> bool:
        """Write now (cancelling the countdown). False when there was nothing to write or it failed
        (see ``last_error``)."""
        self._cancel()
        return self._write()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cancel()
        try:
            self.session.listeners.remove(self._on_change)
        except ValueError:
            pass
        if self._at_exit:
            try:
                atexit.unregister(self.close)
            except Exception:
                pass
        if self.session.messages:
            self._write()


# -- text for the magics and the CLI ---------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def format_row(info: SessionInfo) -> str:
    """``<id[0:8]>  <updatedAt[0:16] with T→space>  <n>msg  <title>``."""
    return f"{info.id[:8]}  {info.updated_at[:16].replace('T', ' ')}  {info.messages}msg  {info.title}"


def format_rows(infos: Iterable[SessionInfo]) -> str:
    """What ``/sessions`` prints: one row per session, or ``no saved sessions``."""
    rows = [format_row(i) for i in infos]
    return "\n".join(rows) if rows else "no saved sessions"


def resumed_line(session: Session | SessionInfo) -> str:
    """``resumed <id8> — <n> messages: "<title>"`` (the title part left out when untitled)."""
    if isinstance(session, Session):
        n, title = len(session.messages), title_of(session.messages)
    else:
        n, title = session.messages, session.title
    line = f"resumed {session.id[:8]} — {_plural(n, 'message')}"
    return line + (f': "{title}"' if title and title != "untitled" else "")


def not_found_message(prefix: str, error: Ambiguous | None = None) -> str:
    """``no session matching "<x>"`` — for an ambiguous prefix followed by the candidates."""
    base = f'no session matching "{prefix}"'
    if error is None:
        return base
    shown = ", ".join(m[:8] for m in error.matches[:5]) + (", ..." if len(error.matches) > 5 else "")
    return f"{base} (ambiguous: {len(error.matches)} sessions start with it: {shown})"


def saved_line(session: Session) -> str:
    """``Saved <n> message(s)[: "<title>"]`` with the farewell's title rule (over 52: first 49 + ...)."""
    title = title_of(session.messages)
    line = f"Saved {_plural(len(session.messages), 'message')}"
    if title and title != "untitled":
        if len(title) > 52:
            title = title[:49] + "..."
        line += f': "{title}"'
    return line


def resume_hint(session: Session) -> str:
    """The seed's farewell as the one-line turn footer: what is saved and the exact magics to resume
    it, never the full id; an empty session says so instead of naming a command that finds nothing."""
    if not session.messages:
        return "Nothing to save from this session."
    return f"{saved_line(session)} · resume: %shiro -c or %shiro -r {session.id[:8]}"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_text(part: ToolCallPart, limit: int = 160) -> str:
    try:
        args = part.parsed_arguments()
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    except ValueError:
        shown = part.arguments
    return f"→ {part.name}({_short(shown, limit)})"


def transcript_text(record: dict[str, Any]) -> str:
    """A readable transcript of a record (``shiro sessions show ID``)."""
    try:
        messages = messages_from_json(record.get("messages") or [])
    except ValueError as exc:
        messages = []
        broken = f"(messages unreadable: {exc})"
    else:
        broken = ""
    where = record.get("notebookPath") or record.get("cwd") or "?"
    head = [
        f"session {record.get('id', '?')}  \"{record.get('title', 'untitled')}\"",
        f"{where} · {record.get('model', '?')} · {_plural(len(messages), 'message')} · "
        f"updated {str(record.get('updatedAt', ''))[:16].replace('T', ' ')}",
    ]
    todos = TaskList()
    notebook = record.get("notebook")
    todos.restore(notebook.get("todos") if isinstance(notebook, dict) else None)
    if len(todos):
        head += ["", todos.render()]
    lines: list[str] = head + ([broken] if broken else [])
    for message in messages:
        if message.role == "system":
            continue
        for part in message.parts:
            if isinstance(part, TextPart) and part.text.strip():
                who = "you" if message.role == "user" else "shiro"
                body = part.text.strip().splitlines()
                lines.append("")
                lines.append(f"{who}: {body[0]}")
                lines += [f"  {b}" for b in body[1:]]
            elif isinstance(part, ToolCallPart):
                lines.append(_call_text(part))
            elif isinstance(part, ToolResultPart):
                mark = "  ✗ " if part.is_error else "  ← "
                lines.append(mark + _short(part.output, 160) if part.output.strip() else mark + "(no output)")
            elif isinstance(part, ReasoningPart) and part.summary:
                lines.append(f"  (thinking: {_short(part.text, 120)})")
    return "\n".join(lines)
