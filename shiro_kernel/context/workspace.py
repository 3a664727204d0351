"""What the model can work on, told when a turn starts: the kernel's data variables and the files the prompt names.

A data question ("what is the mean fare in titanic.csv?") is answered well only from the data; a model that does
not know what is there either spends its first step finding out (a call, a whole prefill on a local engine) or —
a small model, measured — answers from nothing. So the turn's per-step state carries, computed once when the turn
starts, a short block:

* the user's variables that hold data (frames, series, arrays, containers, numbers and short strings): each with
  its kind, shape and columns — read from the object's attributes, never its ``repr`` (which can run the user's
  code and block);
* each file of the project the prompt names (by its name or its path under the root, as the file tools would open
  it): its size, and for a delimited text file its row count and its columns, each with a kind read from the first
  rows and, for text, its first value.

A lean request (a small local model) gets one more line when the prompt names data: :func:`first_step`, and the step
after its code's output :func:`answer_step`. The block
is capped at :data:`CAP_CHARS` and sent after the conversation, so the cached prefix before it is unchanged.
Only what ``inspect``/``read_file`` would show goes in; the boundary's redaction applies to it as to everything sent.
"""

from __future__ import annotations

import csv
import io
import os
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ShiroError
from ..numbers.verify import Verifier
from ..tools.base import ToolContext
from ..transcript import ToolResultPart

#: the whole block at most, in characters (about 500 tokens)
CAP_CHARS = 2_000
#: the variables and files listed at most
MAX_VARIABLES = 15
MAX_FILES = 4
MAX_COLUMNS = 40
#: a text column's example value at most, in characters
EXAMPLE_CHARS = 24
#: the rows a column's kind is read from, and the size up to which a file's rows are counted
SAMPLE_ROWS = 200
COUNT_BYTES = 50_000_000
#: delimited text files whose columns are read
TABLES = (".csv", ".tsv", ".tab", ".txt")
#: the names IPython itself puts in the namespace
_IPYTHON = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})
_HIDDEN_TYPES = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type, types.MethodType)
HEADER = "What you can work on now (the kernel's variables and the files your prompt names):"


def block(
    prompt: str,
    ns: Mapping[str, Any] | None,
    ctx: ToolContext,
    hidden: Mapping[str, Any] | None = None,
    values: bool = True,
) -> str:
    """The block (see the module), or '' when there is nothing to tell. ``values`` False (the policy's ``values:
    schema-only``): no value at all — no text column's example, no variable's value, only names, kinds and shapes."""
    parts = [p for p in (_variables(ns or {}, hidden or {}, values), _files(prompt, ctx, values)) if p]
    if not parts:
        return ""
    text = HEADER + "\n" + "\n".join(parts)
    return text if len(text) <= CAP_CHARS else text[: CAP_CHARS - 2].rstrip() + " …"


# -- variables -----------------------------------------------------------------------------------------------------
def _variables(ns: Mapping[str, Any], hidden: Mapping[str, Any], values: bool) -> str:
    lines = []
    for name, value in list(ns.items()):
        if name.startswith("_") or name in _IPYTHON or (name in hidden and hidden[name] is value):
            continue
        if isinstance(value, _HIDDEN_TYPES) or type(value).__name__ in ("ExitAutocall", "ZMQExitAutocall"):
            continue
        line = _variable(name, value, values)
        if line:
            lines.append(f"- {line}")
        if len(lines) == MAX_VARIABLES:
            lines.append("- … (more: inspect lists them all)")
            break
    return "Variables:\n" + "\n".join(lines) if lines else ""


def _variable(name: str, value: Any, values: bool = True) -> str:
    kind = type(value)
    module = kind.__module__.split(".")[0]
    try:
        if module == "pandas" and kind.__name__ == "DataFrame":
            rows, width = value.shape
            return f"{name}: DataFrame {rows:,} rows × {width} columns: {_columns(value.dtypes.items(), width)}"
        if module == "pandas" and kind.__name__ == "Series":
            label = f" {value.name!r}" if value.name is not None else ""
            return f"{name}: Series{label}, {len(value):,} values, {value.dtype}"
        if module == "numpy" and hasattr(value, "shape") and hasattr(value, "dtype"):
            return f"{name}: {kind.__name__} {tuple(value.shape)} {value.dtype}"
        if isinstance(value, (bool, int, float, complex)):
            return f"{name}: {kind.__name__} = {value!r}" if values else f"{name}: {kind.__name__}"
        if isinstance(value, str):
            short = len(value) <= 60 and values
            return f"{name}: str = {value!r}" if short else f"{name}: str, {len(value):,} characters"
        if isinstance(value, (list, tuple, dict, set, frozenset)):
            return f"{name}: {kind.__name__}, {len(value):,} items"
    except Exception:  # an odd subclass's attributes may raise anything: named by its type alone
        pass
    return f"{name}: {module}.{kind.__name__}" if module != "builtins" else f"{name}: {kind.__name__}"


def _columns(items: Any, width: int) -> str:
    shown = [f"{col} ({dtype})" for _, (col, dtype) in zip(range(MAX_COLUMNS), items)]
    more = width - len(shown)
    return ", ".join(shown) + (f", … {more} more" if more > 0 else "")


# -- files ---------------------------------------------------------------------------------------------------------
def named_files(prompt: str, ctx: ToolContext) -> list[Path]:
    """The project's files the prompt names: a file of the root (or the notebook's folder) whose name appears in
    it, or a relative path in it that the file tools would open (inside the root, a regular file)."""
    found: dict[Path, None] = {}
    folders = [ctx.root] + ([ctx.notebook_path.parent] if ctx.notebook_path is not None else [])
    for folder in dict.fromkeys(folders):
        try:
            with os.scandir(folder) as entries:
                names = [e.name for e in entries if e.is_file() and not e.name.startswith(".")]
        except OSError:
            continue
        for name in sorted(names, key=len, reverse=True):
            if len(name) > 3 and name in prompt:
                _add(found, ctx, str(Path(folder) / name))
    for word in prompt.replace("`", " ").replace('"', " ").replace("'", " ").split():
        if "/" in word and "." in word.rsplit("/", 1)[-1]:
            _add(found, ctx, word.rstrip(".,;:)"))
    return list(found)[:MAX_FILES]


def _add(found: dict[Path, None], ctx: ToolContext, path: str) -> None:
    try:
        real = ctx.resolve(path)
    except ShiroError:
        return
    if real.is_file():
        found[real] = None


def _files(prompt: str, ctx: ToolContext, values: bool) -> str:
    lines = []
    for path in named_files(prompt, ctx):
        try:
            lines.append("- " + _file(path, ctx.root, values))
        except (OSError, csv.Error, UnicodeDecodeError):
            continue
    return "Files:\n" + "\n".join(lines) if lines else ""


def _file(path: Path, root: Path, values: bool) -> str:
    size = path.stat().st_size
    head = f"{_shown(path, root)}: {_bytes(size)}"
    if path.suffix.lower() not in TABLES:
        return head
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        sample = f.read(256_000)
    dialect = _dialect(sample, path.suffix.lower())
    rows = list(csv.reader(io.StringIO(sample), dialect))
    if len(rows) < 2 or len(rows[0]) < 2:
        return head
    header, body = rows[0], rows[1 : SAMPLE_ROWS + 1]
    if len(sample) == size or size <= COUNT_BYTES:
        count = _count_rows(path, sample, size)
        head += f", {count:,} rows"
    columns = [_column(name, [r[i] for r in body if i < len(r)], values) for i, name in enumerate(header[:MAX_COLUMNS])]
    more = len(header) - len(columns)
    return f"{head} × {len(header)} columns: {', '.join(columns)}" + (f", … {more} more" if more > 0 else "")


def _column(name: str, cells: list[str], values: bool) -> str:
    """A column as the block shows it: its name (quoted where spaces begin or end it) and kind, and for a text column its first value (how its values
    are written: a date's format, a category's spelling). Numbers are not shown: their kind is what code needs, and
    a small model's tokenizer spends a token a digit (the two first rows this replaced were 40-60 % of a wide
    numeric file's block)."""
    name = name if name and name == name.strip() else repr(name)  # a header's stray space, shown: code needs it
    kind = _kind(cells)
    example = next((v.strip() for v in cells if v.strip()), "") if kind.startswith("text") and values else ""
    if not example:
        return f"{name} ({kind})"
    if len(example) > EXAMPLE_CHARS:
        example = example[: EXAMPLE_CHARS - 1] + "…"
    return f'{name} ({kind}, e.g. "{example}")'


def _shown(path: Path, root: Path) -> str:
    """``path`` as the file tools take it: relative to the project's root where it is inside it."""
    try:
        return str(path.relative_to(Path(os.path.realpath(root))))
    except ValueError:
        return str(path)


def _dialect(sample: str, suffix: str) -> Any:
    if suffix in (".tsv", ".tab"):
        return csv.excel_tab
    try:
        return csv.Sniffer().sniff(sample[:20_000], delimiters=",;\t|")
    except csv.Error:
        return csv.excel


def _count_rows(path: Path, sample: str, size: int) -> int:
    """The data rows (lines after the header; a quoted field over several lines counts as more)."""
    if len(sample) >= size:
        return max(0, len(sample.splitlines()) - 1)
    with open(path, "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return max(0, lines - 1)


def _kind(values: list[str]) -> str:
    """A column's kind from its sample: int, float, text; with ``some empty`` where values are missing."""
    filled = [v.strip() for v in values if v.strip() and v.strip().lower() not in ("na", "nan", "null", "none")]
    empty = ", some empty" if len(filled) < len(values) else ""
    if not filled:
        return "empty"
    for kind, parse in (("int", int), ("float", float)):
        try:
            for v in filled:
                parse(v.replace(",", "") if kind == "float" else v)
            return kind + empty
        except ValueError:
            continue
    return "text" + empty


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} bytes"


def first_step(named: list[str], code_blocks: bool = False) -> str:
    """What a lean request's first step is told after the block when the prompt names data (:func:`named`): to
    compute from it before answering, said as a step to take. A small model asked a question about data answers the
    question's format line from nothing while the rule is only in the instructions (Qwen2.5-Coder-1.5B, measured:
    the same rule said here last, as an instruction, and it writes the code). ``code_blocks``: the server's text
    calls are read (:attr:`~.provider.client.Provider.reads_text_calls`), so the step asks for a ```` ```python ````
    block — told to *call* the tool, the same model writes the call as JSON with the code as an escaped string,
    and at greedy decoding repeats its import lines until the output limit. The step says the reply is the block
    *alone*: asked "before you answer, reply with a block …; then answer", the 1.5B wrote the block and a guessed
    answer in one reply (code beside other text never runs), 4 of 4 first requests kept from a benchmark run; told
    its next reply is only the block, with the answer in the reply after, it wrote the block alone in 9 of 9 (and
    in 3–17 s rather than 15–28 s). '' when the prompt names no data."""
    if not named:
        return ""
    names = ", ".join(named)
    if code_blocks:
        return (
            f"Your next reply is only a ```python block that loads {names} and prints what the prompt asks, with no "
            "answer in it: the block runs here, and you answer in the reply after it, from what it printed."
        )
    return (
        f"Your next reply is only a call to `python` that loads {names} and prints what the prompt asks, with no "
        "answer in it: the call runs here, and you answer in the reply after it, from what it printed."
    )


@dataclass(frozen=True)
class AnswerStep:
    """What a lean request is told the step after its calls' results (:func:`answer_step`): ``ran``, after an output;
    ``refused``, when every call of the step was refused (not approved: nothing ran, nothing was printed); when the
    code of every call raised, ``retry`` the first time in a turn and ``failed`` after (``ran`` where they are '')."""

    ran: str = ""
    refused: str = ""
    retry: str = ""
    failed: str = ""

    def after(self, results: list[ToolResultPart], raised_before: bool = False) -> str:
        """The step to tell after ``results`` (the last tool message's); ``raised_before``: an earlier step of the
        turn's code raised too."""
        if results and all(r.refused for r in results):
            return self.refused
        if results and all(r.raised for r in results):
            return (self.failed if raised_before else self.retry) or self.ran
        return self.ran


#: the step after a refusal: the newcomer's headless turn ("Which region had the highest total revenue?", approval
#: "ask", no buttons), told to answer "from what the code printed" after its block was refused, answered "East"
#: from nothing (the data says west)
NOT_RUN = (
    "The code was not run: it was not approved. Say so in one sentence, and give no value or answer that was not "
    "computed."
)


#: the step after code that raised, the first time in a turn: a model that can fix it does; one that cannot says so
RETRY = (
    "The code failed before it finished (its error is above). Reply with only a ```python block that fixes it, or, "
    "if it cannot be fixed, say so in one sentence and give no value the code did not print."
)
#: the step after code that raised again: nothing more is asked of the code, and nothing made up is answered
FAILED = "The code failed again. Say in one sentence why it failed, and give no value or answer the code did not print."


#: the step after an output under ``values: schema-only``: the model never reads it, the user does
NOT_SENT_STEP = (
    "The output is shown to the user and was not sent to you (the policy sends no data values). Say in one sentence "
    "what the code computed and that its result is in the output; give no value."
)


def answer_step(named: list[str], values: bool = True) -> AnswerStep:
    """What a lean request is told the step after its code's output when the prompt names data: to answer now, in
    the prompt's form, from what the code printed; after a step whose calls were all refused, :data:`NOT_RUN`. After the output alone, the 1.5B answered in prose where the
    prompt asked for a format, or thanked the user and stopped (3 of 9 second requests kept from a benchmark run);
    told this, it answered in the prompt's form in 9 of 9 (those 3 in 1–2 s rather than 17–21 s), the 4 it had
    answered right still right.
    Told also "if the code failed, reply with a fixed block", it sent the same block again (4 of 4, the
    code had not failed), so that is not said. After code that raised, "answer now" made it up (``@0``, a correlation
    of ``None``, an empty list: the 3 second requests kept after a `KeyError` or a `TypeError`, 11–15 s each), so
    such a step gets :data:`RETRY` once a turn — the 1.5B sent another block (3 of 3, none of them fixed), a model
    that can fix its code does — and :data:`FAILED` after: told that, the 1.5B said why the code failed (a column
    that is not there, ``corr`` called wrongly) and gave no value (3 of 3, in 3–4 s). '' when the prompt names no data. ``values`` False (the policy's ``values: schema-only``): the output was shown to the user
    and not sent, so the model is told to say what its code computes (:data:`NOT_SENT_STEP`)."""
    if not named:
        return AnswerStep()
    if not values:
        return AnswerStep(NOT_SENT_STEP, NOT_RUN)
    return AnswerStep(
        "Answer the prompt now, in the form it asks for, from what the code printed.", NOT_RUN, RETRY, FAILED
    )


def named(
    prompt: str, ns: Mapping[str, Any] | None, ctx: ToolContext, hidden: Mapping[str, Any] | None = None
) -> list[str]:
    """The data the prompt names: its files (as the block shows them) and the data variables it names as words
    (a frame, a series, an array) — what a question about data should be answered from."""
    out = [_shown(path, ctx.root) for path in named_files(prompt, ctx)]
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", prompt))
    for name, value in (ns or {}).items():
        if (
            name in words
            and not name.startswith("_")
            and not (hidden and hidden.get(name) is value)
            and _is_data(value)
        ):
            out.append(f"`{name}`")
    return out


def _is_data(value: Any) -> bool:
    kind = type(value)
    module = kind.__module__.split(".")[0]
    return (module == "pandas" and kind.__name__ in ("DataFrame", "Series")) or (
        module == "numpy" and hasattr(value, "shape")
    )


@dataclass(frozen=True)
class DataSteps:
    """What a turn is told of the data it can work on, and how its answer is checked (the
    :class:`~shiro_kernel.turn.Turn`'s ``workspace``, ``answer_step`` and ``verifier``)."""

    told: str
    answer_step: AnswerStep
    verifier: Verifier | None


def data_steps(
    prompt: str,
    ns: Mapping[str, Any] | None,
    ctx: ToolContext,
    hidden: Mapping[str, Any] | None,
    *,
    lean: bool,
    code_blocks: bool,
    verify: bool,
    values: bool = True,
) -> DataSteps:
    """The :class:`DataSteps` of a turn: the block (:func:`block`); for a lean request whose prompt names data, the
    step to take first and the step after its code's output (:func:`first_step`, :func:`answer_step`;
    ``code_blocks``: the server's text calls are read); the answer's check where ``verify``
    (:class:`~shiro_kernel.numbers.verify.Verifier`; never under ``values`` False: the model cannot compute what it
    never reads)."""
    found = named(prompt, ns, ctx, hidden) if lean or verify else []
    step = first_step(found, code_blocks) if lean else ""
    return DataSteps(
        "\n\n".join(t for t in (block(prompt, ns, ctx, hidden, values), step) if t),
        answer_step(found, values) if lean else AnswerStep(),
        Verifier(prompt, found, code_blocks=code_blocks) if verify and values else None,
    )


__all__ = [
    "CAP_CHARS",
    "HEADER",
    "NOT_RUN",
    "NOT_SENT_STEP",
    "AnswerStep",
    "DataSteps",
    "answer_step",
    "block",
    "data_steps",
    "first_step",
    "named",
    "named_files",
]
