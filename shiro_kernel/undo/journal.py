"""The kernel's undo journal: a checkpoint before each step that changes something, and taking steps back.

A **checkpoint** (:class:`Step`) is taken right before a call runs, where it runs, for exactly the calls whose
tool's declared effects change the namespace or files (:class:`~shiro_kernel.tools.base.Effect`):

* ``NAMESPACE`` (``python``, ``notebook_run``, a replayed call, ``/rebuild``): each name the code may rebind,
  delete or change in place (:mod:`.names`) kept as it was (:mod:`.snapshot`), or noted absent;
* ``FILES`` (``write_file``, ``edit_file``): the previous bytes of the file, or its absence;
* ``OUTSIDE`` (``shell``, an MCP server's tool, the memory writers): nothing can be kept — the step is named as
  not undoable;
* ``REVIEW`` (the cell tools): the accepted change is taken back through the front end (one undo step each).

**Taking back** (:meth:`Journal.take_back`) goes newest first: names bound again to their checkpoints, names the
steps created deleted, files rewritten or removed, cell changes reverted; it says exactly what it restored and
what it could not, naming each. The model is told on its next request (:meth:`Journal.note`).

The journal lives in the kernel's memory only — never on disk, never sent — bounded by ``Shiro.undo_max_mb``
(the oldest turn's checkpoints are dropped first, and that is said); a kernel restart drops it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .names import Touched
from .snapshot import Absent, Kept, NotKept, Saved, keep


@dataclass
class Step:
    """The checkpoint of one step, taken before its call ran."""

    turn_id: str
    call_id: str
    tool: str
    #: each name the call may change, as it was before (kept, absent, or why it could not be kept)
    names: dict[str, Saved] = field(default_factory=dict)
    #: each file the call writes: its bytes before, or None when it did not exist
    files: dict[str, bytes | None] = field(default_factory=dict)
    #: why the step cannot be taken back ('' when it can): it changed the world outside the kernel
    outside: str = ""
    #: why the call may have changed names the checkpoint could not see ('' when none)
    unseen: str = ""
    #: the call changed the notebook's cells (taken back through the front end)
    cells: bool = False
    #: the extra memory the checkpoint holds, in bytes
    nbytes: int = 0
    undone: bool = False


@dataclass
class Report:
    """What taking steps back did, in words the cell and the model read."""

    steps: int = 0
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)

    def text(self) -> str:
        if not self.steps:
            return "nothing to undo"
        lines = [f"undid {self.steps} step{'s' if self.steps != 1 else ''}, newest first"]
        if self.restored:
            lines.append("restored: " + ", ".join(self.restored))
        if self.removed:
            lines.append("removed (the steps made them): " + ", ".join(self.removed))
        if self.files:
            lines.append("files: " + ", ".join(self.files))
        if self.cells:
            lines.append("cells: " + ", ".join(self.cells))
        if self.not_restored:
            lines.append("could not restore: " + "; ".join(self.not_restored))
        return "\n".join(lines)


#: revert the accepted cell changes of these calls through the front end; one line per change, as done
CellReverter = Callable[[list[str]], list[str]]


class Journal:
    """The undo journal of one kernel (see the module). ``limit_mb``: ``Shiro.undo_max_mb``, read at each step."""

    def __init__(self, limit_mb: Callable[[], float]) -> None:
        self.limit_mb = limit_mb
        self.steps: list[Step] = []
        self._lock = threading.Lock()
        self._told: list[str] = []  # what the model is told at its next request
        self._said: list[str] = []  # what the cell is told (a dropped turn)

    # -- checkpoints ---------------------------------------------------------------------------------
    @property
    def budget(self) -> int:
        return int(float(self.limit_mb()) * 1_000_000)

    def names(self, turn_id: str, call_id: str, tool: str, touched: Touched, ns: Mapping[str, Any]) -> Step:
        """The checkpoint of a step that may change ``touched``'s names of ``ns``."""
        step = Step(turn_id, call_id, tool, unseen=touched.unseen)
        for name in sorted(touched.names):
            if name not in ns:
                step.names[name] = Absent()
                continue
            value = ns[name]
            if name in touched.called and _module(value):
                continue  # a module called (np.add(…)): its binding does not change, and its state is not ours
            saved = keep(value, self.budget)
            if isinstance(saved, NotKept) and saved.why.startswith("a module") and name not in touched.called:
                saved = Kept(value, "reference", 0)  # rebound (import … as): the binding is restored
            if isinstance(saved, Kept) and not self._room(turn_id, step.nbytes + saved.nbytes):
                saved = NotKept(
                    f"{saved.nbytes / 1_000_000:,.0f} MB: with this turn's other checkpoints, over "
                    f"Shiro.undo_max_mb ({self.limit_mb():,.0f} MB)"
                )
            step.names[name] = saved
            step.nbytes += saved.nbytes if isinstance(saved, Kept) else 0
        self._add(step)
        return step

    def files(self, turn_id: str, call_id: str, tool: str, paths: Iterable[Path]) -> Step:
        """The checkpoint of a step that writes ``paths``: their bytes before, or their absence."""
        step = Step(turn_id, call_id, tool)
        for path in paths:
            try:
                data: bytes | None = path.read_bytes() if path.is_file() else None
            except OSError:
                data = None
            if data is not None and not self._room(turn_id, step.nbytes + len(data)):
                step.unseen = f"{path.name}'s previous bytes were over Shiro.undo_max_mb"
                continue
            step.files[str(path)] = data
            step.nbytes += len(data or b"")
        self._add(step)
        return step

    def outside(self, turn_id: str, call_id: str, tool: str, why: str) -> Step:
        step = Step(turn_id, call_id, tool, outside=why)
        self._add(step)
        return step

    def cells(self, turn_id: str, call_id: str, tool: str) -> Step:
        step = Step(turn_id, call_id, tool, cells=True)
        self._add(step)
        return step

    def held(self) -> int:
        """The bytes the checkpoints hold now."""
        with self._lock:
            return self._held()

    def _room(self, turn_id: str, need: int) -> bool:
        """Whether ``need`` more bytes fit the budget, after dropping older turns' checkpoints (oldest first, said)
        where they must go; False when even this turn's alone leave no room."""
        with self._lock:
            while self._held() + need > self.budget:
                older = [s.turn_id for s in self.steps if s.turn_id != turn_id]
                if not older:
                    return False
                gone = [s for s in self.steps if s.turn_id == older[0]]
                self.steps = [s for s in self.steps if s.turn_id != older[0]]
                mb = sum(s.nbytes for s in gone) / 1_000_000
                self._said.append(
                    f"undo: the checkpoints of an older turn ({len(gone)} steps, {mb:,.0f} MB) were dropped to stay "
                    f"within Shiro.undo_max_mb ({self.limit_mb():,.0f} MB); that turn can no longer be undone"
                )
            return True

    def _held(self) -> int:
        return sum(s.nbytes for s in self.steps if not s.undone)

    def _add(self, step: Step) -> None:
        with self._lock:
            self.steps.append(step)

    def said(self) -> list[str]:
        """What the cell is to be told (checkpoints dropped for room), once."""
        with self._lock:
            out, self._said = self._said, []
        return out

    # -- which steps -----------------------------------------------------------------------------------
    def last_turn(self) -> list[Step]:
        """The steps of the newest turn not yet undone, newest first."""
        with self._lock:
            live = [s for s in self.steps if not s.undone]
        if not live:
            return []
        turn = live[-1].turn_id
        return [s for s in reversed(live) if s.turn_id == turn]

    def since(self, call_id: str) -> list[Step] | None:
        """The step of ``call_id`` and every step after it, newest first; None when it has no checkpoint here."""
        with self._lock:
            live = [s for s in self.steps if not s.undone]
        index = next((i for i, s in enumerate(live) if s.call_id == call_id), None)
        return None if index is None else list(reversed(live[index:]))

    def undoable(self) -> list[str]:
        """The calls whose steps can be taken back now (their checkpoints are held)."""
        with self._lock:
            return [s.call_id for s in self.steps if not s.undone]

    # -- taking back -----------------------------------------------------------------------------------
    def take_back(self, steps: list[Step], ns: dict[str, Any], revert_cells: CellReverter | None = None) -> Report:
        """Take ``steps`` back, newest first (see the module); what was done, naming each thing."""
        report = Report(steps=len(steps))
        restored: dict[str, Saved] = {}
        files: dict[str, str] = {}
        for step in steps:  # newest first: the oldest checkpoint of a name or file wins (the state before them all)
            restored.update(step.names)
            for path, data in step.files.items():
                files[path] = _restore_file(Path(path), data)
            if step.outside:
                report.not_restored.append(f"{step.tool} ({step.call_id}): {step.outside}")
            if step.unseen:
                report.not_restored.append(f"names {step.tool} may have changed unseen ({step.unseen})")
            step.undone = True
        report.files.extend(files.values())
        for name in sorted(restored):
            saved = restored[name]
            if isinstance(saved, Absent):
                if name in ns:
                    del ns[name]
                    report.removed.append(name)
            elif isinstance(saved, Kept):
                ns[name] = saved.value
                report.restored.append(name)
            else:
                report.not_restored.append(f"{name} ({saved.why})")
        for step in steps:  # what they held is bound again or written back: nothing more to keep
            step.names, step.files, step.nbytes = {}, {}, 0
        cell_calls = [s.call_id for s in steps if s.cells]
        if cell_calls:
            if revert_cells is None:
                report.not_restored.append("the notebook's cell changes (no front end to revert them)")
            else:
                report.cells.extend(revert_cells(cell_calls))
        with self._lock:
            self._told.append(report.text())
        return report

    def note(self) -> str:
        """The per-step state's line for the model after an undo ('' when none): what is gone, given once."""
        with self._lock:
            told, self._told = self._told, []
        if not told:
            return ""
        return (
            "The user took back some of your earlier steps with undo; the kernel and files are now as follows — do "
            "not rely on what those steps made:\n" + "\n".join(told)
        )


def _restore_file(path: Path, data: bytes | None) -> str:
    try:
        if data is None:
            if path.exists():
                os.unlink(path)
                return f"{path.name} removed (the steps made it)"
            return f"{path.name} (already gone)"
        tmp = path.with_name(f".{path.name}.undo")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return f"{path.name} restored"
    except OSError as exc:
        return f"{path.name} could not be restored ({exc.strerror or exc})"


def _module(value: Any) -> bool:
    import types

    return isinstance(value, types.ModuleType)


__all__ = ["CellReverter", "Journal", "Report", "Step"]
