"""``shiro check NOTEBOOK``: does the notebook reproduce? It runs a copy top to bottom in a fresh kernel and
reports each cell that fails or whose outputs differ from the saved ones, with a one-line reason::

    cell 4: NameError: name 'clean' is not defined — no cell before it defines clean (hidden state)
    cell 6: output 1 differs: saved "total 1,204", now "total 1,187"

The kernel is what a colleague or CI has: the notebook's folder as its working directory, the notebook's
path as ``JPY_SESSION_NAME`` (so its ``%shiro`` cells find their saved turns), ``SHIRO_REPLAY=notebook`` (they
replay from the notebook, trusted or not), an empty temporary ``SHIRO_HOME`` (no session record of this
machine helps) and no ``OPENAI_API_KEY`` (no model is asked: a turn that cannot replay fails, as it would for
them). The notebook on disk is never written.

Outputs are compared as a reader compares them (:func:`reader_view`): text results, errors, and a turn's
replayed calls' outputs and answer; images by their size in pixels, not their bytes; ``text/html`` (a
DataFrame) by its text. Never execution counts, timings, memory addresses, ids, token counts or footers. A
cell that was never run when saved is only checked for failing; an error in a cell tagged
``raises-exception`` is an output like any other. Cells are numbered from 1, all cells counted.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..context.restart import assigned_names
from ..errors import RequestError
from ..text import one_line
from .find import bundles_of
from .reading import difference, read_saved, reader_view, replayed_calls
from .replay_plan import has_replay, plan_from_bundle
from .sites import notebook_sites, shiro_lines, source_text

#: seconds one cell may run before it is interrupted
CELL_TIMEOUT_S = 600.0
FAILED, DIFFERS = "failed", "differs"
SNIPPET = 60


# -- what a reader sees --------------------------------------------------------------------------------
_UNDEFINED = re.compile(r"^NameError: name '([^']+)' is not defined")


def _defines(cell: Mapping[str, Any]) -> set[str]:
    """The names a cell assigns: its own code, and the code its saved shiro turns run."""
    names = set(assigned_names(source_text(cell.get("source"))))
    for bundle in bundles_of(cell):
        try:
            steps = plan_from_bundle(dict(bundle)).runs if has_replay(bundle) else []
        except ValueError:
            steps = []
        for step in steps:
            names.update(assigned_names(step.code))
    return names


def diagnosis(error: str, index: int, cells: Sequence[Mapping[str, Any]], failed: set[int]) -> str:
    """What a failure says about the notebook (`` — no cell before it defines clean (hidden state)``), or ''."""
    match = _UNDEFINED.match(error)
    if match is None:
        return ""
    name = match.group(1)
    code = [(i, c) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    before = [i for i, c in code if i < index and name in _defines(c)]
    after = [i for i, c in code if i > index and name in _defines(c)]
    if before:
        last = before[-1]
        if last in failed:
            return f" — cell {last + 1}, which defines {name}, failed"
        return f" — cell {last + 1} assigns {name}, but not when run in order (a condition, a loop or a del)"
    if after:
        return f" — {name} is defined only by cell {after[0] + 1}, which runs after it (out-of-order dependency)"
    return f" — no cell before it defines {name} (hidden state)"


# -- the run ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """A cell that does not reproduce: its number (from 1), why, and whether it ``failed`` or ``differs``."""

    cell: int
    reason: str
    kind: str

    def line(self) -> str:
        return f"cell {self.cell}: {self.reason}"


@dataclass
class CheckResult:
    """The outcome of a check: the cells that did not reproduce, and what ran."""

    path: Path
    problems: list[Problem] = field(default_factory=list)
    cells: int = 0  # code cells run
    turns: int = 0  # %shiro turns among them
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        cells = f"{self.cells} code cell" + ("" if self.cells == 1 else "s")
        turns = f", {self.turns} shiro turn" + ("" if self.turns == 1 else "s") + " replayed" if self.turns else ""
        if self.ok:
            return (
                f"{self.path.name} reproduces: {cells} ran top to bottom in a fresh kernel with the saved outputs"
                f"{turns} ({self.seconds:.1f} s)"
            )
        bad = len({p.cell for p in self.problems})
        head = f"{self.path.name} does not reproduce: {bad} of {cells} fail or differ in a fresh kernel"
        return "\n".join([head, *(p.line() for p in self.problems)])

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "ok": self.ok,
            "cells": self.cells,
            "turns": self.turns,
            "seconds": round(self.seconds, 2),
            "problems": [{"cell": p.cell, "kind": p.kind, "reason": p.reason} for p in self.problems],
        }


def _kernel_name(nb: Mapping[str, Any], wanted: str | None) -> str:
    if wanted:
        return wanted
    spec = (nb.get("metadata") or {}).get("kernelspec") or {}
    name = spec.get("name") if isinstance(spec, dict) else None
    if isinstance(name, str) and name:
        from jupyter_client.kernelspec import KernelSpecManager

        if name in KernelSpecManager().find_kernel_specs():
            return name
    return "python3"


#: set in a check's kernel
CHECKING = "SHIRO_CHECKING"


def kernel_env(path: Path, home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the check's kernel (see the module's doc)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(
        {
            "JPY_SESSION_NAME": str(path),
            "SHIRO_REPLAY": "notebook",
            "SHIRO_HOME": str(home),
            "SHIRO_NO_WARMUP": "1",
            CHECKING: "1",  # a /check cell in the notebook does not start a check of its own
        }
    )
    env.update(extra or {})
    return env


def run_fresh(
    nb: Mapping[str, Any], path: Path, *, timeout: float, kernel_name: str, env: Mapping[str, str]
) -> tuple[list[dict[str, Any]], int | None]:
    """Run a copy of ``nb`` in a fresh kernel: the cells as they ran, and the index of the cell during which
    the kernel died (None when it did not)."""
    import copy
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellTimeoutError, DeadKernelError
        from nbformat.v4.rwbase import rejoin_lines

        node = rejoin_lines(nbformat.from_dict(copy.deepcopy(dict(nb))))  # sources saved as lists of lines
    client = NotebookClient(
        node,
        timeout=timeout,
        kernel_name=kernel_name,
        allow_errors=True,
        interrupt_on_timeout=True,
        store_widget_state=False,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    died: int | None = None
    with client.setup_kernel(env=dict(env)):
        for index, cell in enumerate(node.cells):
            try:
                client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
            except DeadKernelError:
                died = index
                break
            except CellTimeoutError:
                cell.outputs.append(
                    nbformat.v4.new_output(
                        "error", ename="TimeoutError", evalue=f"the cell ran longer than {timeout:g} s", traceback=[]
                    )
                )
    return [dict(c) for c in node.cells], died


def _shiro_only(source: str) -> bool:
    marks = shiro_lines(source)
    if marks and marks[0].whole:
        return True
    lines = [n for n, line in enumerate(source.splitlines()) if line.strip()]
    return bool(lines) and {m.number for m in marks} >= set(lines)


def compare(
    saved_cells: Sequence[Mapping[str, Any]], new_cells: Sequence[Mapping[str, Any]], died: int | None
) -> list[Problem]:
    """The problems found comparing the saved cells with the cells as they ran now."""
    problems: list[Problem] = []
    failed: set[int] = set()
    for index, (saved, new) in enumerate(zip(saved_cells, new_cells)):
        if saved.get("cell_type") != "code" or not source_text(saved.get("source")).strip():
            continue
        if died is not None and index >= died:
            problems.append(Problem(index + 1, "the kernel died while it ran (out of memory?)", FAILED))
            break
        source = source_text(saved.get("source"))
        only = _shiro_only(source)
        calls = [replayed_calls(b) for b in bundles_of(saved)]
        before = reader_view(list(saved.get("outputs") or []), shiro_only=only, calls=calls)
        now = reader_view(list(new.get("outputs") or []), shiro_only=only, calls=calls)
        tags = (saved.get("metadata") or {}).get("tags") or []
        errors = [i.value for i in now if i.kind == "error"]
        if errors and "raises-exception" not in tags:
            failed.add(index)
            same = " (as in the saved notebook)" if errors[0] in [i.value for i in before if i.kind == "error"] else ""
            reason = one_line(errors[0], 200) + diagnosis(errors[0], index, list(saved_cells), failed) + same
            problems.append(Problem(index + 1, reason, FAILED))
            continue
        ran_when_saved = saved.get("execution_count") is not None or bool(saved.get("outputs"))
        why = difference(before, now) if ran_when_saved else None
        if why:
            problems.append(Problem(index + 1, why, DIFFERS))
    return problems


def check_notebook(
    path: str | os.PathLike[str],
    *,
    timeout: float = CELL_TIMEOUT_S,
    kernel_name: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CheckResult:
    """Check the notebook at ``path`` (see the module's doc). ``env`` adds to the kernel's environment.
    Raises :class:`~shiro_kernel.errors.RequestError` for a notebook that cannot be read or a kernel that
    cannot start."""
    if os.environ.get(CHECKING):
        raise RequestError("this kernel is a check's own run of the notebook: it does not start another check")
    source = Path(path).resolve()
    nb = read_saved(path)  # what cannot be read is one line, said with the path as given
    started = time.monotonic()
    name = _kernel_name(nb, kernel_name)
    with tempfile.TemporaryDirectory(prefix="shiro-check-") as home:
        try:
            cells, died = run_fresh(
                nb, source, timeout=timeout, kernel_name=name, env=kernel_env(source, Path(home), env)
            )
        except Exception as exc:  # the kernel did not start (no such kernel, a broken environment)
            raise RequestError(
                f"could not run {source.name} in a fresh {name} kernel: {type(exc).__name__}: {exc}"
            ) from None
    saved = [c for c in nb.get("cells") or [] if isinstance(c, dict)]
    result = CheckResult(source, compare(saved, cells, died))
    result.cells = sum(1 for c in saved if c.get("cell_type") == "code" and source_text(c.get("source")).strip())
    result.turns = len(notebook_sites(nb))
    result.seconds = time.monotonic() - started
    return result


#: a ``%shiro`` cell that would ask the model, in a check's own kernel (``SHIRO_CHECKING``): never asked
NO_MODEL_IN_CHECK = (
    "not asked: a check reruns the notebook without the model, and this cell would ask it (it has no recorded "
    "turn to replay, or says --again)"
)


def check_saved(path: Path, timeout: float) -> str:
    """``notebook_check``'s check (:attr:`ToolContext.check <shiro_kernel.tools.base.ToolContext.check>`): the saved
    notebook rerun in a fresh kernel (:func:`check_notebook`), its summary."""
    return check_notebook(path, timeout=timeout).summary()


__all__ = [
    "CELL_TIMEOUT_S",
    "CheckResult",
    "Problem",
    "check_notebook",
    "check_saved",
    "compare",
    "diagnosis",
    "run_fresh",
]
