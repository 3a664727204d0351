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

import base64
import html
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .context.restart import assigned_names
from .errors import RequestError
from .replay.find import TURN_MIME, bundles_of
from .replay.plan import has_replay, plan_from_bundle
from .replay.sites import notebook_sites, shiro_lines, source_text
from .text import one_line

#: seconds one cell may run before it is interrupted
CELL_TIMEOUT_S = 600.0
FAILED, DIFFERS = "failed", "differs"
SNIPPET = 60


# -- what a reader sees --------------------------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,}\b")
_TIMING = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds|min|mins|minutes|it/s|s/it)\b")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?\b")
_TOOL_FILE = re.compile(r"<shiro-python-\d+>")
_TAGS = re.compile(r"<[^>]*>")
_HIDDEN_HTML = re.compile(r"<(style|script)\b.*?</\1\s*>", re.S | re.I)


def normal_text(text: str) -> str:
    """Text as compared: no ANSI codes, addresses, timings or the tool's numbered file names; trailing
    spaces and blank edges dropped."""
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    text = _ADDRESS.sub("0x…", text)
    text = _TOOL_FILE.sub("<shiro-python>", text)
    text = _CLOCK.sub("<time>", _TIMING.sub("<time>", text))
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def _joined(value: Any) -> str:
    return "".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _image_bytes(value: Any, limit: int | None = None) -> bytes:
    text = re.sub(r"\s+", "", _joined(value))
    if limit is not None:
        text = text[: limit - limit % 4]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return b""


def image_size(mime: str, value: Any) -> tuple[int, int] | None:
    """An image's (width, height) in pixels from its header (PNG, GIF, JPEG), without decoding it."""
    if mime == "image/png":
        head = _image_bytes(value, 44)
        if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
            return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    elif mime == "image/gif":
        head = _image_bytes(value, 16)
        if head[:3] == b"GIF":
            return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    elif mime == "image/jpeg":
        data = _image_bytes(value)
        i = 2
        while i + 9 < len(data) and data[i] == 0xFF:
            marker, length = data[i + 1], int.from_bytes(data[i + 2 : i + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
            i += 2 + length
    return None


def html_text(markup: str) -> str:
    """The text an HTML output shows (a DataFrame's cells), tags, styles and scripts removed."""
    return " ".join(html.unescape(_TAGS.sub(" ", _HIDDEN_HTML.sub(" ", markup))).split())


def display_view(data: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, value) of a display's MIME bundle as a reader compares it."""
    for mime in ("image/png", "image/jpeg", "image/gif"):
        if mime in data:
            size = image_size(mime, data[mime])
            return "image", f"{mime} {size[0]}×{size[1]}" if size else mime
    if "image/svg+xml" in data:
        svg = _joined(data["image/svg+xml"])
        dims = re.search(r'<svg[^>]*?\bwidth="([^"]+)"[^>]*?\bheight="([^"]+)"', svg)
        return "image", f"image/svg+xml {dims.group(1)}×{dims.group(2)}" if dims else "image/svg+xml"
    if "application/vnd.jupyter.widget-view+json" in data:
        return "widget", "a widget"
    for mime in ("application/vnd.plotly.v1+json", "application/vnd.vegalite.v5+json"):
        if mime in data:
            return "chart", mime
    if "text/html" in data:
        return "text", normal_text(html_text(_joined(data["text/html"])))
    for mime in ("text/markdown", "text/latex", "text/plain"):
        if mime in data:
            return "text", normal_text(_joined(data[mime]))
    for mime, value in data.items():
        if mime.endswith("json"):
            return "text", json.dumps(value, sort_keys=True, ensure_ascii=False)
    return "other", ", ".join(sorted(data))


class Item(NamedTuple):
    """One output as a reader sees it: ``kind`` (stdout, stderr, error, text, image, widget, chart, turn,
    other) and a comparable ``value``."""

    kind: str
    value: Any


def turn_view(bundle: Mapping[str, Any], calls: list[str]) -> Any:
    """A turn bundle as compared: for each of ``calls`` (the ids of the turn's replayed calls), its output
    text and what it displayed; the answer; and the error the turn ended with, if any. Footers, usage, ids and
    the other rows are left out."""
    rows = {}
    for entry in bundle.get("entries") or []:
        if isinstance(entry, dict) and entry.get("type") == "tool" and entry.get("callId") in calls:
            shown = tuple(
                display_view(o["data"])
                for o in entry.get("outputs") or []
                if isinstance(o, dict) and isinstance(o.get("data"), dict)
            )
            rows[entry["callId"]] = (normal_text(str(entry.get("output") or "")), shown)
    texts = [
        str(e.get("text") or "")
        for e in bundle.get("entries") or []
        if isinstance(e, dict) and e.get("type") == "text" and str(e.get("text") or "").strip()
    ]
    end = bundle.get("end")
    error = end.get("error") if isinstance(end, dict) else None
    return tuple(rows.get(c) for c in calls), normal_text(texts[-1] if texts else ""), normal_text(str(error or ""))


def replayed_calls(bundle: Mapping[str, Any]) -> list[str] | None:
    """The ids of the calls a replay of ``bundle`` runs; None for a bundle that cannot be replayed."""
    if not has_replay(bundle):
        return None
    try:
        return [step.call_id for step in plan_from_bundle(dict(bundle)).runs]
    except ValueError:
        return None


def reader_view(outputs: list[Any], *, shiro_only: bool, calls: list[list[str] | None]) -> list[Item]:
    """A cell's outputs as a reader compares them. ``shiro_only``: the cell is all shiro lines, so its
    streams and other displays are shiro's own (resume lines, notices) and are left out. ``calls``: for each
    turn bundle in order, the ids of its replayed calls (from the saved notebook)."""
    items: list[Item] = []
    turn = 0
    for output in outputs:
        if not isinstance(output, dict):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            if shiro_only:
                continue
            name = str(output.get("name") or "stdout")
            text = _joined(output.get("text") or "")
            if items and items[-1].kind == name:
                items[-1] = Item(name, items[-1].value + text)
            else:
                items.append(Item(name, text))
        elif kind == "error":
            ename, evalue = str(output.get("ename") or "Error"), str(output.get("evalue") or "")
            items.append(Item("error", normal_text(f"{ename}: {evalue}" if evalue else ename)))
        elif kind in ("execute_result", "display_data"):
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            if isinstance(data.get(TURN_MIME), dict):
                bundle = data[TURN_MIME]
                ids = calls[turn] if turn < len(calls) else replayed_calls(bundle)
                turn += 1
                items.append(Item("turn", turn_view(bundle, ids) if ids is not None else ("not replayable",)))
            elif not shiro_only:
                items.append(Item(*display_view(data)))
    return [Item(i.kind, normal_text(i.value)) if i.kind in ("stdout", "stderr") else i for i in items]


# -- saying how they differ ------------------------------------------------------------------------------
def _quoted(text: str) -> str:
    return '"' + one_line(text, SNIPPET) + '"'


def _first_difference(saved: str, now: str) -> tuple[str, str]:
    """The first line that differs in each, both cut to show where they part (a long line is shown from a
    little before its first differing character)."""
    a, b = saved.splitlines() or [""], now.splitlines() or [""]
    for x, y in zip(a, b):
        if x != y:
            same = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            start = 0
            if max(len(x), len(y)) > SNIPPET:
                back = max(0, same - SNIPPET // 4)
                space = x.rfind(" ", 0, back)  # start at a word when one starts shortly before
                start = space + 1 if space >= 0 and back - space <= 10 else back
            return ("…" if start else "") + x[start:], ("…" if start else "") + y[start:]
    return (a[len(b)] if len(a) > len(b) else "(nothing more)"), (b[len(a)] if len(b) > len(a) else "(nothing more)")


_NAMES = {
    "stdout": "printed text",
    "stderr": "text on stderr",
    "error": "an error",
    "text": "a result",
    "image": "an image",
    "widget": "a widget",
    "chart": "a chart",
    "turn": "a shiro turn",
    "other": "an output",
}


def _turn_difference(saved: Any, now: Any) -> str:
    if saved == ("not replayable",):
        return "its shiro turn was saved without replay information (by an older version), so it cannot be replayed"
    if now == ("not replayable",) or len(now) != 3:
        return "its shiro turn was not replayed now"
    (saved_rows, saved_answer, _), (now_rows, now_answer, now_error) = saved, now
    if now_error:
        return f"its shiro turn was not replayed now; it ended: {one_line(now_error, 120)}"
    for number, (a, b) in enumerate(zip(saved_rows, now_rows), 1):
        if a == b:
            continue
        if b is None:
            return f"shiro turn: replayed call {number} did not run now"
        if a is not None and a[0] != b[0]:
            x, y = _first_difference(a[0], b[0])
            return f"shiro turn: replayed call {number}'s output differs: saved {_quoted(x)}, now {_quoted(y)}"
        return f"shiro turn: what replayed call {number} displayed differs: saved {a[1] if a else ()}, now {b[1]}"
    if saved_answer != now_answer:
        return "shiro turn: the answer shown differs from the saved one"
    return "shiro turn differs"


def difference(saved: list[Item], now: list[Item]) -> str | None:
    """One line saying how ``now`` differs from ``saved``; None when a reader sees the same."""
    if saved == now:
        return None
    for number, (a, b) in enumerate(zip(saved, now), 1):
        if a == b:
            continue
        if a.kind != b.kind:
            return f"output {number} is {_NAMES.get(b.kind, b.kind)} now, {_NAMES.get(a.kind, a.kind)} when saved"
        if a.kind == "turn":
            return _turn_difference(a.value, b.value)
        if a.kind == "image":
            return f"output {number}, an image, is {b.value.split(' ')[-1]} now, {a.value.split(' ')[-1]} when saved"
        x, y = _first_difference(str(a.value), str(b.value))
        return f"output {number} differs: saved {_quoted(x)}, now {_quoted(y)}"
    if len(now) > len(saved):
        extra = now[len(saved)]
        return f"{len(now)} outputs now, {len(saved)} when saved (now also {_NAMES.get(extra.kind, extra.kind)})"
    gone = saved[len(now)]
    return f"{len(now)} outputs now, {len(saved)} when saved ({_NAMES.get(gone.kind, gone.kind)} is missing)"


# -- why a cell failed ------------------------------------------------------------------------------------
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
    from .context.cells import read_notebook

    if os.environ.get(CHECKING):
        raise RequestError("this kernel is a check's own run of the notebook: it does not start another check")
    source = Path(path).resolve()
    try:
        nb = read_notebook(source)
    except FileNotFoundError:
        raise RequestError(f"no notebook at {path}") from None
    except (OSError, ValueError) as exc:
        raise RequestError(f"cannot read {path}: {exc}") from None
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


__all__ = [
    "CELL_TIMEOUT_S",
    "CheckResult",
    "Item",
    "Problem",
    "check_notebook",
    "compare",
    "diagnosis",
    "difference",
    "display_view",
    "html_text",
    "image_size",
    "normal_text",
    "reader_view",
    "run_fresh",
]
