"""``shiro export NOTEBOOK [-o OUT]``: the notebook as a plain one that runs without shiro_kernel.

* each ``%shiro`` / ``%%shiro`` turn becomes a Markdown cell (the prompt, quoted, then the answer) followed
  by one code cell per successful ``python`` call of the turn, in order, each showing what that call
  displayed (figures, tables) when the notebook saved it. A call that changed something outside the kernel
  (``write_file``, ``shell`` …) becomes a one-line Markdown note where it ran: the export does not redo it;
* the code comes from the turn's bundle (its ``replay`` field), else from this machine's session record
  named by the bundle's ``sessionId``; a turn whose code is in neither says so in its Markdown cell;
* ``%load_ext shiro_kernel``, ``%config Shiro…``, ``%env SHIRO_…`` and ``%shiro`` slash and session lines are
  removed, and a cell left empty is dropped; in a cell where a ``%shiro`` line sits among other code, the
  other code is kept, split around the turn's cells so it runs in the same order;
* everything else is kept as it is (other cells, their outputs and ids, the notebook's metadata).

The model's text (the answer) is made inert (:func:`shiro_kernel.ui.sanitize.inert_markdown`): a Markdown
cell of a trusted notebook renders raw HTML. The result is validated by nbformat and written atomically,
by default to ``NAME.export.ipynb`` beside the notebook.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RequestError
from .find import Found, find_turn
from .replay_plan import RUN, STOP, Plan
from .sites import COMMAND, SETUP, TURN, Site, notebook_sites, shiro_lines, source_text

if TYPE_CHECKING:
    from ..store.sessions import SessionStore

MISSING = (
    "*The code of this turn could not be recovered: its output holds no replay information (saved by an older "
    "version, or cleared) and its session record is not on this machine.*"
)
CHANGED = "*Here shiro's `{name}` call{target} changed something outside the kernel; the export does not redo it.*"


@dataclass
class ExportResult:
    """What an export wrote: where, how many turns and code cells it made, how many shiro lines it removed,
    and one line per turn whose code it could not recover."""

    out: Path
    turns: int = 0
    calls: int = 0
    removed: int = 0
    missing: list[str] = field(default_factory=list)
    ids_replaced: int = 0  # cells whose id was not a valid one, given a new id

    def summary(self) -> str:
        turns = f"{self.turns} shiro turn" + ("" if self.turns == 1 else "s")
        calls = f"{self.calls} code cell" + ("" if self.calls == 1 else "s")
        removed = f"{self.removed} shiro line" + ("" if self.removed == 1 else "s")
        lines = [f"wrote {self.out}: {turns} as Markdown and {calls}, {removed} removed"]
        lines += self.missing
        if self.ids_replaced:
            ids = "1 cell id was" if self.ids_replaced == 1 else f"{self.ids_replaced} cell ids were"
            lines.append(f"{ids} not valid (1 to 64 letters, digits, - or _) and got a new one, as a missing id does")
        return "\n".join(lines)


def default_out(path: Path) -> Path:
    """``NAME.export.ipynb`` beside ``NAME.ipynb``."""
    return path.with_name(f"{path.stem}.export.ipynb")


#: what nbformat 4.5 allows as a cell id
_CELL_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def valid_cell_id(value: Any) -> bool:
    return isinstance(value, str) and _CELL_ID.fullmatch(value) is not None


class _Cells:
    """The exported notebook's cells, with ids when the notebook's format has them (nbformat 4.5). A cell
    whose id is not a valid one (``check`` runs such a notebook; nbformat's validation refuses it) gets a new
    id, as a cell with none does: one bad id never refuses the whole export."""

    def __init__(self, nb: Mapping[str, Any]) -> None:
        self.ids = nb.get("nbformat", 4) == 4 and int(nb.get("nbformat_minor") or 0) >= 5
        self.used = {c.get("id") for c in nb.get("cells") or [] if isinstance(c, dict)}
        self.cells: list[dict[str, Any]] = []
        self.replaced = 0  # invalid ids given a new one

    def _new_id(self) -> str:
        made = uuid.uuid4().hex[:8]
        while made in self.used:
            made = uuid.uuid4().hex[:8]
        self.used.add(made)
        return made

    def _id(self, cell: dict[str, Any], keep: Any = None) -> dict[str, Any]:
        if not self.ids:
            return cell
        if keep is not None and not valid_cell_id(keep):
            self.replaced += 1
        return {"id": keep if valid_cell_id(keep) else self._new_id(), **cell}

    def kept(self, cell: dict[str, Any]) -> None:
        """A cell of the notebook, kept as it is but for an invalid id."""
        if self.ids and "id" in cell and not valid_cell_id(cell["id"]):
            self.replaced += 1
            cell = {**cell, "id": self._new_id()}
        self.cells.append(cell)

    def markdown(self, text: str, keep_id: Any = None) -> None:
        self.cells.append(self._id({"cell_type": "markdown", "metadata": {}, "source": text}, keep_id))

    def code(self, source: str, outputs: list[dict[str, Any]] | None = None, keep_id: Any = None) -> None:
        cell: dict[str, Any] = {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": outputs or [],
            "source": source,
        }
        self.cells.append(self._id(cell, keep_id))


def _quote(prompt: str, whole: bool) -> str:
    from ..ui.sanitize import inert_markdown

    lines = prompt.splitlines() or [""]
    if whole:
        return "\n".join(["> **%%shiro**", *(f"> {inert_markdown(line)}" for line in lines)])
    return f"> **%shiro** {inert_markdown(' '.join(lines))}"


def _displays(bundle: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """What each saved tool row displayed, by call id, as ``display_data`` outputs."""
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in (bundle or {}).get("entries") or []:
        if not isinstance(entry, dict) or entry.get("type") != "tool":
            continue
        shown = []
        for item in entry.get("outputs") or []:
            if isinstance(item, dict) and isinstance(item.get("data"), dict) and item["data"]:
                meta = item.get("metadata")
                shown.append(
                    {
                        "output_type": "display_data",
                        "data": item["data"],
                        "metadata": meta if isinstance(meta, dict) else {},
                    }
                )
        out[str(entry.get("callId"))] = shown
    return out


def _turn(
    cells: _Cells, plan: Plan | None, prompt: str, whole: bool, shown: dict[str, list[dict[str, Any]]], keep_id: Any
) -> int:
    """The turn's Markdown cell and code cells; how many code cells."""
    from ..ui.sanitize import inert_markdown

    head = _quote(prompt, whole)
    if plan is None:
        cells.markdown(f"{head}\n\n{MISSING}", keep_id)
        return 0
    answer = inert_markdown(plan.answer.strip())
    cells.markdown(f"{head}\n\n{answer}" if answer else head, keep_id)
    made = 0
    for step in plan.steps:
        if step.action == RUN:
            cells.code(step.code, [dict(o) for o in shown.get(step.call_id, [])])
            made += 1
        elif step.action == STOP:
            from ..ui.sanitize import md_code

            target = f" ({md_code(step.target)})" if step.target else ""
            cells.markdown(CHANGED.format(name=step.name, target=target))
    return made


Loader = Callable[[str], "Mapping[str, Any] | None"]


class _Export:
    """One export in progress: the cells made so far and the counts."""

    def __init__(self, nb: Mapping[str, Any], load: Loader | None, sessions: list[str]) -> None:
        self.nb, self.load, self.sessions = nb, load, sessions
        self.cells = _Cells(nb)
        self.result = ExportResult(Path())
        self.sites: dict[tuple[int, int], Site] = {(s.cell, s.line): s for s in notebook_sites(dict(nb))}
        self.keep_id: Any = None  # the id of the cell being split, for the first cell made from it

    def cell(self, index: int, cell: dict[str, Any]) -> None:
        source = source_text(cell.get("source"))
        marks = shiro_lines(source) if cell.get("cell_type") == "code" else []
        if not marks:
            self.cells.kept(dict(cell))
            return
        lines = source.splitlines(keepends=True)
        by_line = {m.number: m for m in marks}
        if not any(m.kind == TURN for m in marks):  # setup or command lines only: the rest stays as it was
            rest = "".join(line for n, line in enumerate(lines) if n not in by_line)
            self.result.removed += len(marks)
            if rest.strip() and not marks[0].whole:
                self.cells.kept({**cell, "source": rest})
            return
        self.keep_id = cell.get("id")
        piece: list[str] = []
        for number, line in enumerate(lines):
            mark = by_line.get(number)
            if mark is None:
                if not (marks[0].whole and number > marks[0].number):  # a %%shiro cell's body is its prompt
                    piece.append(line)
            elif mark.kind in (SETUP, COMMAND):
                self.result.removed += 1
            else:
                self.code(piece)
                self.turn(index, number, mark.prompt, mark.whole)
        self.code(piece)

    def code(self, piece: list[str]) -> None:
        """The user's own code of a split cell, up to here, as a code cell (none when it is blank)."""
        text = "".join(piece).strip("\n")
        piece.clear()
        if text.strip():
            self.cells.code(text, keep_id=self.keep_id)
            self.keep_id = None

    def turn(self, index: int, line: int, prompt: str, whole: bool) -> None:
        from .find import saved_turn

        site = self.sites.get((index, line))
        found: Found | None = None
        saved = None
        if site is not None:
            found = find_turn(
                cell_id=site.cell_id,
                prompt=site.prompt,
                ordinal=site.ordinal,
                notebook=self.nb,
                load=self.load,
                sessions=self.sessions,
            )
            saved = saved_turn(self.nb, cell_id=site.cell_id, prompt=site.prompt, ordinal=site.ordinal)
        self.result.turns += 1
        if found is None:
            self.result.missing.append(f"cell {index + 1}: {MISSING.strip('*')}")
        shown = _displays(saved.bundle if saved else None)
        plan = found.plan if found else None
        self.result.calls += _turn(self.cells, plan, prompt, whole, shown, self.keep_id)
        self.keep_id = None


def exported(
    nb: Mapping[str, Any], *, load: Loader | None = None, sessions: list[str] | None = None
) -> tuple[dict[str, Any], ExportResult]:
    """The plain notebook made from ``nb`` (a v4 notebook as JSON) and what the export did (its ``out`` is
    unset). ``load(session_id)`` gives a session record (or None), for turns whose bundle has no replay
    information; ``sessions`` are more sessions to look in (the notebook's newest)."""
    export = _Export(nb, load, sessions or [])
    for index, cell in enumerate(nb.get("cells") or []):
        if isinstance(cell, dict):
            export.cell(index, cell)
    out = {key: value for key, value in nb.items() if key != "cells"}
    out["cells"] = export.cells.cells
    export.result.ids_replaced = export.cells.replaced
    return out, export.result


def _reader(store: SessionStore | None) -> Loader:
    from .replay_cell import _reader as reader

    return reader(store)


def export_notebook(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> ExportResult:
    """Export the notebook at ``path`` to ``out`` (default :func:`default_out`). Raises
    :class:`~shiro_kernel.errors.RequestError` for a notebook that cannot be read or written, or an ``out``
    that is the notebook itself."""
    import warnings

    from ..store import files
    from ..store.sessions import SessionStore
    from .reading import read_saved

    source = Path(path)
    target = Path(out) if out is not None else default_out(source)
    if target.resolve() == source.resolve():
        raise RequestError(f"the export would overwrite {source}; choose another file with -o")
    nb = read_saved(source)
    try:
        mode = source.stat().st_mode & 0o777
    except OSError as exc:
        raise RequestError(f"cannot read {source}: {exc}") from None
    store = SessionStore()
    try:
        latest = store.latest_for_notebook(source.resolve())
    except Exception:  # the index is a cache: the bundles' own sessions are still looked in
        latest = None
    plain, result = exported(nb, load=_reader(store), sessions=[latest.id] if latest else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import nbformat

        node = nbformat.from_dict(plain)
        try:
            nbformat.validate(node)
        except nbformat.ValidationError as exc:
            raise RequestError(f"the export of {source} is not a valid notebook: {exc.message}") from None
        text = nbformat.writes(node)
    files.write_atomic(target, text if text.endswith("\n") else text + "\n", mode=mode)
    result.out = target
    return result


__all__ = ["ExportResult", "default_out", "export_notebook", "exported"]
