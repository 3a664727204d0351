"""The kernel's undo journal: a checkpoint before each step that changes something, and taking steps back.

A **checkpoint** (:class:`Step`) is taken right before a call runs, where it runs, for exactly the calls whose
tool's declared effects change the namespace or files (:class:`~shiro_kernel.tools.base.Effect`):

* ``NAMESPACE`` (``python``, ``notebook_run``, a replayed call, ``/rebuild``): each name the code may rebind,
  delete or change in place (:mod:`.names`) kept as it was (:mod:`.snapshot`), or noted absent;
* ``FILES`` (``write_file``, ``edit_file``): the previous bytes of the file, or its absence;
* and for a ``NAMESPACE`` step's code, the files it is seen writing, removing or renaming (:mod:`.writes`), kept
  the first time, just before it changes them;
* ``OUTSIDE`` (``shell``, an MCP server's tool, the memory writers): nothing can be kept — the step is named as
  not undoable;
* ``REVIEW`` (the cell tools): the accepted change is taken back through the front end (one undo step each).

Right after the call ran, :meth:`Journal.leave` records **what the step left** (:mod:`.left`: a cheap trace of each
name it may have changed, a hash of each file it wrote).

**Taking back** (:meth:`Journal.take_back`) goes newest first: names bound again to their checkpoints, names the
steps created deleted, files rewritten or removed, cell changes reverted — but only what is still as the steps left
it. What the user changed since (a column added, a value rebound, a name deleted, a file appended to) is **kept**
and named, and stays in its step for ``/undo --force``, which takes it back anyway. A file that cannot be written
back (a full disk) leaves no temporary file and keeps its checkpoint, so ``/undo`` can be run again. One object bound
to several names is kept once and comes back as one object under each. It says exactly what it restored, what it
kept and what it could not, naming each. The model is told on its next request (:meth:`Journal.note`).

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

from .left import Gone, Left, file_print, trace
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
    #: what the call left of each name (recorded right after it ran; missing: not recorded, restored as before)
    left: dict[str, Left] = field(default_factory=dict)
    #: the hash of each file as the call left it (None: it left no such file)
    files_left: dict[str, bytes | None] = field(default_factory=dict)
    #: the names and files an undo kept for the user (changed after the step): held for ``/undo --force``
    kept: set[str] = field(default_factory=set)
    #: why the step cannot be taken back ('' when it can): it changed the world outside the kernel
    outside: str = ""
    #: why the call may have changed names the checkpoint could not see ('' when none)
    unseen: str = ""
    #: files its code changed whose previous bytes could not be kept, each with why
    files_not_kept: dict[str, str] = field(default_factory=dict)
    #: the call changed the notebook's cells (taken back through the front end)
    cells: bool = False
    #: the extra memory the checkpoint holds, in bytes
    nbytes: int = 0
    undone: bool = False

    def hold_only(self, held: set[str], kept: set[str]) -> None:
        """After an undo: keep the checkpoint of only the names and files in ``held`` (``kept``: those the user
        changed since, for ``--force``); a step that holds nothing more is undone."""
        self.names = {n: v for n, v in self.names.items() if n in held}
        self.left = {n: v for n, v in self.left.items() if n in held}
        self.files = {p: d for p, d in self.files.items() if p in held}
        self.files_left = {p: d for p, d in self.files_left.items() if p in held}
        self.kept = {k for k in kept if k in self.names or k in self.files}
        self.undone = not self.names and not self.files
        self.nbytes = sum(v.nbytes for v in self.names.values() if isinstance(v, Kept)) + sum(
            len(d or b"") for d in self.files.values()
        )


@dataclass
class Report:
    """What taking steps back did, in words the cell and the model read."""

    steps: int = 0
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    #: what was kept because the user changed it after the steps: 'df (changed after this step)'
    kept: list[str] = field(default_factory=list)
    #: the command that takes what was kept back anyway
    force: str = "%shiro /undo --force"
    #: a file could not be written back: its checkpoint is kept for another /undo
    again: bool = False

    def text(self) -> str:
        if not self.steps:
            return "nothing to undo"
        did = self.restored or self.removed or self.files or self.cells
        steps = f"{self.steps} step{'s' if self.steps != 1 else ''}"
        if did or not self.kept:
            lines = [f"undid {steps}, newest first"]
        else:
            lines = [f"undid nothing of {steps}: what they changed was changed again after them"]
        if self.restored:
            lines.append("restored: " + ", ".join(self.restored))
        if self.removed:
            lines.append("removed (the steps made them): " + ", ".join(self.removed))
        if self.files:
            lines.append("files: " + ", ".join(self.files))
        if self.cells:
            lines.append("cells: " + ", ".join(self.cells))
        if self.kept:
            them = "them" if len(self.kept) > 1 else "it"
            lines.append(f"kept yours: {', '.join(self.kept)}; {self.force} to take {them} back anyway")
        if self.not_restored:
            lines.append("could not restore: " + "; ".join(self.not_restored))
        if self.again:
            lines.append("the checkpoint of what could not be restored is kept: run %shiro /undo again once it can be")
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
        once: dict[int, Saved] = {}  # one object under several names: kept once, back as one object under each
        for name in sorted(touched.names | _aliases(touched, ns)):
            if name not in ns:
                step.names[name] = Absent()
                continue
            value = ns[name]
            if name in touched.called and _module(value):
                continue  # a module called (np.add(…)): its binding does not change, and its state is not ours
            if id(value) in once:
                step.names[name] = once[id(value)]
                continue
            saved = keep(value, self.budget)
            if isinstance(saved, NotKept) and saved.why.startswith("a module") and name not in touched.called:
                saved = Kept(value, "reference", 0)  # rebound (import … as): the binding is restored
            if isinstance(saved, Kept) and not self._room(turn_id, step.nbytes + saved.nbytes):
                saved = NotKept(
                    f"{saved.nbytes / 1_000_000:,.0f} MB: with this turn's other checkpoints, over "
                    f"Shiro.undo_max_mb ({self.limit_mb():,.0f} MB)"
                )
            step.names[name] = once[id(value)] = saved
            step.nbytes += saved.nbytes if isinstance(saved, Kept) else 0
        self._add(step)
        return step

    def leave(self, step: Step, ns: Mapping[str, Any]) -> None:
        """Record what ``step``'s call left (right after it ran): a trace of each name it may have changed that
        undo could put back, a hash of each file it wrote."""
        once: dict[int, Left] = {}
        for name, saved in step.names.items():
            if isinstance(saved, NotKept):
                continue  # never put back: nothing to compare
            if name not in ns:
                step.left[name] = Gone()
                continue
            value = ns[name]
            if id(value) not in once:
                once[id(value)] = trace(value)
            step.left[name] = once[id(value)]
        for path in step.files:
            step.files_left[path] = file_print(Path(path))
        if not (step.names or step.files or step.unseen or step.files_not_kept):
            step.undone = True  # it changed nothing undo could see: no Undo for it

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

    def keep_file(self, step: Step, path: Path) -> None:
        """Keep ``path`` as it is, the first time ``step``'s code is about to change it (:mod:`.writes`): its bytes,
        or its absence; a file over ``Shiro.undo_max_mb`` is named as not kept."""
        key = str(path)
        if key in step.files or key in step.files_not_kept:
            return
        try:
            data: bytes | None = path.read_bytes() if path.is_file() else None
        except OSError as exc:
            step.files_not_kept[key] = f"could not be read: {exc.strerror or exc}"
            return
        if data is not None and not self._room(step.turn_id, step.nbytes + len(data)):
            mb = len(data) / 1_000_000
            step.files_not_kept[key] = (
                f"its previous {mb:,.0f} MB were over Shiro.undo_max_mb ({self.limit_mb():,.0f} MB)"
            )
            return
        step.files[key] = data
        step.nbytes += len(data or b"")

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
    def last_turn(self, force: bool = False) -> list[Step]:
        """The steps of the newest turn with something left to take back, newest first: a step an undo has not
        reached, or one whose file could not be written back; with ``force``, also what an undo kept for the user."""
        with self._lock:
            live = [s for s in self.steps if not s.undone and (force or _pending(s))]
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
        """The calls whose steps can be taken back now (their checkpoints are held, and an undo has not kept all
        that is left of them for the user)."""
        with self._lock:
            return [s.call_id for s in self.steps if not s.undone and _pending(s)]

    # -- taking back -----------------------------------------------------------------------------------
    def take_back(
        self,
        steps: list[Step],
        ns: dict[str, Any],
        revert_cells: CellReverter | None = None,
        *,
        force: bool = False,
        force_command: str = "%shiro /undo --force",
    ) -> Report:
        """Take ``steps`` back, newest first (see the module): only what is still as they left it, unless ``force``;
        what was done, naming each thing."""
        report = Report(steps=len(steps), force=force_command)
        before: dict[str, Saved] = {}
        left: dict[str, Left] = {}
        files: dict[str, bytes | None] = {}
        files_left: dict[str, bytes | None] = {}
        for step in steps:  # newest first: the oldest checkpoint wins (the state before them all), the newest's left
            before.update(step.names)
            files.update(step.files)
            for name in step.names:
                if name not in left and name in step.left:
                    left[name] = step.left[name]
            for path in step.files:
                if path not in files_left and path in step.files_left:
                    files_left[path] = step.files_left[path]
            if step.outside:
                report.not_restored.append(f"{step.tool} ({step.call_id}): {step.outside}")
            if step.unseen:
                report.not_restored.append(f"names {step.tool} may have changed unseen ({step.unseen})")
            for path, why in step.files_not_kept.items():
                report.not_restored.append(f"{Path(path).name}, which {step.tool}'s code changed ({why})")
        kept: set[str] = set()  # names and files the user changed after the steps: they stay, for --force
        failed: set[str] = set()  # files that could not be written back: they stay, for another /undo
        for path in sorted(files, key=lambda p: Path(p).name):
            changed = None if force or path not in files_left else _file_changed(Path(path), files_left[path])
            if changed:
                report.kept.append(f"{Path(path).name} ({changed})")
                kept.add(path)
                continue
            said, ok = _restore_file(Path(path), files[path])
            report.files.append(said)
            if not ok:
                failed.add(path)
                report.again = True
        for name in sorted(before):
            saved = before[name]
            if isinstance(saved, NotKept):
                report.not_restored.append(f"{name} ({saved.why})")
                continue
            changed = None if force or name not in left else _name_changed(left[name], ns, name)
            if changed:
                report.kept.append(f"{name} ({changed})")
                kept.add(name)
                continue
            if isinstance(saved, Absent):
                if name in ns:
                    del ns[name]
                    report.removed.append(name)
            else:
                ns[name] = saved.value
                report.restored.append(name)
        for step in steps:  # what was put back is theirs no more; what was kept stays, for --force or another undo
            step.hold_only(kept | failed, kept)
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


def _restore_file(path: Path, data: bytes | None) -> tuple[str, bool]:
    """Put ``path`` back as ``data`` (None: remove it), atomically; what was done, and whether it was. A write that
    fails leaves the file as it was and no temporary file behind."""
    tmp = path.with_name(f".{path.name}.undo")
    try:
        if data is None:
            if path.exists():
                os.unlink(path)
                return f"{path.name} removed (the steps made it)", True
            return f"{path.name} (already gone)", True
        path.parent.mkdir(parents=True, exist_ok=True)  # its folder, when the step removed it (shutil.rmtree)
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return f"{path.name} restored", True
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return f"{path.name} could not be restored ({exc.strerror or exc})", False


def _name_changed(left: Left, ns: Mapping[str, Any], name: str) -> str | None:
    """How ``name`` changed after the step left it, in words; None while it is as the step left it."""
    if left.still(ns, name):
        return None
    if name not in ns:
        return "deleted after this step"
    if isinstance(left, Gone):
        return "made again after this step"
    return "changed after this step"


def _file_changed(path: Path, left: bytes | None) -> str | None:
    now = file_print(path)
    if now == left:
        return None
    if now is None:
        return "deleted after this step"
    if left is None:
        return "made again after this step"
    return "changed after this step"


def _pending(step: Step) -> bool:
    """Whether an undo has something of ``step`` to take back without --force: not reached yet, or a file it could
    not write back."""
    return not step.kept or any(k not in step.kept for k in (*step.names, *step.files))


def _aliases(touched: Touched, ns: Mapping[str, Any]) -> set[str]:
    """The other names bound to an object a touched name holds (``same = df``): a change in place reaches them too,
    so they are kept with it, as one object (IPython's ``_``-names and its own are left out)."""
    wanted = {id(ns[n]) for n in touched.names if n in ns and not _immutable_or_module(ns[n])}
    if not wanted:
        return set()
    return {
        name
        for name, value in ns.items()
        if id(value) in wanted and name not in touched.names and not name.startswith("_") and name not in _IPYTHON
    }


#: the names IPython binds in the user's namespace itself
_IPYTHON = frozenset({"In", "Out", "exit", "quit", "get_ipython"})


def _immutable_or_module(value: Any) -> bool:
    return _module(value) or isinstance(value, (int, float, complex, bool, str, bytes, type(None), tuple, frozenset))


def _module(value: Any) -> bool:
    import types

    return isinstance(value, types.ModuleType)


__all__ = ["CellReverter", "Journal", "Report", "Step"]
