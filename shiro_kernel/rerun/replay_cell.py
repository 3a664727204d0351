"""One running ``%shiro`` cell: replay its recorded turn when there is one that may run, say why not when the
notebook is not trusted, or leave it to the model. This machine's session records count only for the notebook
they were recorded in (their ``notebookPath``): anywhere else the turn is the bundle's, and needs trust
(:mod:`.trust`), as does a ``notebook`` setting made by a cell of the notebook itself.

What a turn line calls before it asks the model (:func:`~.turn_line.replayed`; the caller decides that the
cell is a turn with a prompt, not ``--again``, and keeps the ids of the turns run or replayed in this kernel
in ``seen``)::

    outcome = replay_cell(shell, prompt=..., cell_id=..., ordinal=..., setting=config.replay,
                          notebook_path=agent.location.notebook, store=agent.current.store, seen=agent.turns_here,
                          on_event=view)
    None      → no recorded turn for this cell (or it ran here already, or ``off``): ask the model
    Refused   → show ``outcome.text``; nothing ran, no model call
    Replayed  → the events went to ``on_event``; add ``outcome.found.turn_id`` to ``seen`` and
                ``outcome.found.fields`` to the bundle the view leaves
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from ..events import Event
from .find import Found, find_turn
from .replay_run import NOTEBOOK, ReplayResult, run_plan
from .trust import (
    may_replay_from_notebook,
    may_replay_from_record,
    notebook_trusted,
    outside_setting,
    untrusted_refusal,
)

if TYPE_CHECKING:
    from ..session import Session
    from ..store.sessions import SessionStore
    from ..transcript import Message
    from ..undo.checkpoints import Checkpointer


@dataclass
class Replayed:
    result: ReplayResult
    found: Found


@dataclass
class Refused:
    text: str
    found: Found


class _Messages(Sequence[Any]):
    """A session's messages as a record holds them (JSON), made only for the messages asked for."""

    def __init__(self, messages: list[Message]) -> None:
        self._messages = messages

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [m.to_json() for m in self._messages[index]]
        return self._messages[index].to_json()


def in_memory(session: Session) -> Mapping[str, Any]:
    """The record of the kernel's current session, from memory: what a replay reads of it (its turns and the
    messages of one turn) without writing and parsing the whole record at each ``%shiro``."""
    return {
        "id": session.id,
        "notebookPath": session.notebook_path,
        "turns": list(session.turns),
        "messages": _Messages(session.messages),
    }


def _reader(store: SessionStore | None, current: Session | None = None) -> Callable[[str], Mapping[str, Any] | None]:
    """Reads a session record without touching ``store``'s state (its conflict guard keeps the version it
    last read or wrote, and a replay must not move it); the current session is read from memory."""
    from ..errors import ShiroError
    from ..store import files
    from ..store.records import check_record

    def load(session_id: str) -> Mapping[str, Any] | None:
        if current is not None and current.id == session_id and current.messages:
            return in_memory(current)
        if store is None:
            return None
        path = store.path_for(session_id)
        try:
            st = path.stat()
            stamp = (str(path), st.st_mtime_ns, st.st_size)
            if _last_record[0] != stamp:  # Restart & Run All replays cell after cell from one record
                _last_record[:] = [stamp, check_record(files.read_json(path))]
            return _last_record[1]  # type: ignore[no-any-return]
        except (ShiroError, ValueError, OSError):
            return None

    return load


#: the record read last, by (path, mtime, size): [stamp, record]
_last_record: list[Any] = [None, None]


def same_notebook(recorded: Any, running: Path | None) -> bool:
    """Whether a record's ``notebookPath`` names the running notebook (both none: a shell with no notebook,
    whose sessions are found by their working directory)."""
    if running is None or recorded is None:
        return running is None and recorded is None
    if not isinstance(recorded, str):
        return False
    return os.path.normcase(os.path.realpath(recorded)) == os.path.normcase(os.path.realpath(running))


def _of_this_notebook(
    load: Callable[[str], Mapping[str, Any] | None], path: Path | None
) -> Callable[[str], Mapping[str, Any] | None]:
    """Only the records made in the running notebook: a turn replays from this machine's record (no trust
    asked: it ran here, approved) only in the notebook it was recorded in. A ``%shiro`` cell copied with its
    bundle into another notebook or folder finds its record left out, so it replays from the bundle, which
    needs that notebook's trust like any other."""

    def load_ours(session_id: str) -> Mapping[str, Any] | None:
        record = load(session_id)
        return record if record is not None and same_notebook(record.get("notebookPath"), path) else None

    return load_ours


def _notebook(path: Path | None) -> dict[str, Any] | None:
    from ..notebook.file import read_notebook_shared

    if path is None:
        return None
    try:
        return read_notebook_shared(path)
    except (OSError, ValueError, RecursionError):  # a file nested too deeply to parse holds no saved turn
        return None


def replay_cell(
    shell: Any,
    *,
    prompt: str,
    cell_id: str | None,
    ordinal: int,
    setting: str,
    notebook_path: str | os.PathLike[str] | None,
    on_event: Callable[[Event], None],
    store: SessionStore | None = None,
    seen: Container[str] = (),
    tools: Mapping[str, Any] | None = None,
    end: bool = True,
    current: Session | None = None,
    checkpoint: Checkpointer | None = None,
) -> Replayed | Refused | None:
    """Replay the running cell's recorded turn if it may (see the module's doc and :mod:`.trust`). ``current``:
    the kernel's session, whose record is read from memory; ``checkpoint``: undo's, before each call it runs."""
    if setting == "off":
        return None
    path = Path(notebook_path) if notebook_path is not None else None
    sessions: list[str] = [current.id] if current is not None and current.messages else []
    if store is not None:
        try:
            latest = store.latest_for_notebook(path, cwd=str(Path.cwd()))
        except Exception:  # the index is a cache: without it, only the notebook's own session is looked in
            latest = None
        if latest is not None and latest.id not in sessions:
            sessions.append(latest.id)
    found = find_turn(
        cell_id=cell_id,
        prompt=prompt,
        ordinal=ordinal,
        notebook=_notebook(path),
        load=_of_this_notebook(_reader(store, current), path),
        sessions=sessions,
        tools=tools,
    )
    if found is None or found.turn_id in seen:
        return None
    if found.source == NOTEBOOK and found.plan.runs:  # an answer with no code to run shows, trusted or not
        set_inside = setting == "notebook" and outside_setting(shell) != "notebook"
        setting = "auto" if set_inside else setting  # a notebook cannot vouch for its own outputs
        trusted = setting == "auto" and path is not None and notebook_trusted(path)
        if not may_replay_from_notebook(setting, trusted):
            return Refused(untrusted_refusal(path, prompt, len(found.plan.runs), set_inside), found)
    elif not may_replay_from_record(setting):
        return None
    root = path.parent if path is not None else None
    result = run_plan(
        found.plan,
        shell,
        on_event=on_event,
        source=found.source,
        session_id=found.session_id,
        root=root,
        end=end,
        checkpoint=checkpoint,
    )
    return Replayed(result, found)


__all__ = ["Refused", "Replayed", "replay_cell"]
