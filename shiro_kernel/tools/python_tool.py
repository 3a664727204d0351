"""The ``python`` tool: run code in the user's namespace and report what it printed.

The code runs on the calling thread in ``ctx.shell.user_ns``, like a notebook cell, but it is not a
cell: the execution counter, ``In``/``Out`` and the history stay untouched, and nothing it prints or
displays reaches the notebook. Everything goes to the model instead:

* ``sys.stdout`` / ``sys.stderr`` are swapped for one bounded, chronological buffer;
* ``shell.display_pub`` is swapped for a publisher that records ``display(...)`` calls as text;
* file descriptors 1 and 2 are pointed at a temporary file, so ``os.system`` / ``subprocess`` /
  C-level output neither leaks into the cell (ipykernel forwards fd output) nor gets lost.

A failure in the user's code is part of the result (output so far, then a short traceback of the
user's frames only); only ``KeyboardInterrupt`` propagates, since that is how a turn is stopped.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import io
import itertools
import linecache
import os
import sys
import tempfile
import traceback
from types import CodeType
from typing import Any

import IPython

from ..text import HeadTail, cut, joined
from .base import Effect, Preview, Tool, ToolContext, ToolError, ToolOutput, Touches, schema
from .displays import Capture, Publisher, collect_figures, open_figures, spy_on_formatter

#: Captured output kept in memory: the first HEAD and the last TAIL characters.
OUTPUT_HEAD_CHARS = 30_000
OUTPUT_TAIL_CHARS = 10_000
#: Cap for the last expression's text and for one display output.
VALUE_CHARS = 10_000
#: Frames of user code kept in a traceback (the innermost ones).
TRACEBACK_FRAMES = 6
#: the columns of each frame a ``KeyError``'s hint looks through, at most (:func:`column_hint`)
HINT_COLUMNS = 2_000

_counter = itertools.count(1)
_THIS_FILE = os.path.normcase(os.path.abspath(__file__))
_IPYTHON_DIR = os.path.normcase(os.path.dirname(os.path.abspath(IPython.__file__ or "")))


class _Stream(io.TextIOBase):
    """A text stream (stands in for sys.stdout / sys.stderr) writing into an :class:`~shiro_kernel.text.HeadTail`.

    ``fileno()`` gives the real descriptor (1 or 2) while that descriptor is itself captured, so
    ``subprocess.run(..., stdout=sys.stdout)`` and ``faulthandler`` keep working.
    """

    def __init__(self, log: HeadTail[str], name: str, fd: int | None) -> None:
        super().__init__()
        self._log = log
        self._name = name
        self._fd = fd

    @property
    def name(self) -> str:
        return self._name

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "replace"

    @property
    def buffer(self) -> _BinaryStream:
        return _BinaryStream(self)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("fileno")
        return self._fd

    def write(self, text: Any) -> int:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", "replace")
        text = str(text)
        self._log.write(text)
        return len(text)

    def flush(self) -> None:
        pass


class _BinaryStream(io.RawIOBase):
    """``sys.stdout.buffer`` for code that writes bytes."""

    def __init__(self, text: _Stream) -> None:
        super().__init__()
        self._text = text

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        self._text.write(data)
        return len(data)


def _no_input(prompt: Any = "") -> str:
    raise RuntimeError(
        "input() is not available in the python tool: the code runs without a user at the "
        "keyboard; set the value in the code instead"
    )


class _FdCapture:
    """Point fds 1 and 2 at one temporary file for the duration; restore them afterwards."""

    def __init__(self) -> None:
        self._saved: dict[int, int] = {}
        self._file: Any = None

    def __enter__(self) -> _FdCapture:
        try:
            for fd in (1, 2):
                os.fstat(fd)
            self._file = tempfile.TemporaryFile()
            for stream in (sys.__stdout__, sys.__stderr__):
                try:
                    if stream is not None:
                        stream.flush()
                except Exception:  # a stream the user's code replaced may raise anything on flush
                    pass
            for fd in (1, 2):
                self._saved[fd] = os.dup(fd)
                os.dup2(self._file.fileno(), fd)
        except Exception:  # no usable fds (odd embedding): simply don't capture at this level
            self._restore()
        return self

    @property
    def active(self) -> bool:
        return bool(self._saved)

    def _restore(self) -> None:
        for fd, saved in self._saved.items():
            try:
                os.dup2(saved, fd)
            finally:
                os.close(saved)
        self._saved.clear()

    def __exit__(self, *exc: Any) -> None:
        self._restore()

    def read(self, limit: int) -> str:
        if self._file is None:
            return ""
        try:
            size = self._file.seek(0, os.SEEK_END)
            self._file.seek(0)
            data: bytes = self._file.read(limit)
            text = data.decode("utf-8", "replace")
            if size > limit:
                text += f"\n[... {size - limit} more bytes of output truncated ...]\n"
            return text
        finally:
            self._file.close()
            self._file = None


def _compile(shell: Any, code: str, filename: str) -> tuple[CodeType | None, CodeType | None]:
    """Compile ``code`` into (statements, last expression or None). Raises SyntaxError."""
    flags = getattr(getattr(shell, "compile", None), "flags", 0) & ~ast.PyCF_ONLY_AST
    tree = compile(code, filename, "exec", flags | ast.PyCF_ONLY_AST, dont_inherit=True)
    assert isinstance(tree, ast.Module)
    transform_ast = getattr(shell, "transform_ast", None)
    if transform_ast is not None:
        tree = transform_ast(tree) or tree
    body = list(tree.body)
    last: CodeType | None = None
    if body and isinstance(body[-1], ast.Expr):
        expr = ast.Expression(body.pop().value)
        last = compile(expr, filename, "eval", flags, dont_inherit=True)
    statements = compile(ast.Module(body=body, type_ignores=[]), filename, "exec", flags, dont_inherit=True)
    return statements, last


def _is_internal(filename: str) -> bool:
    path = os.path.normcase(os.path.abspath(filename)) if not filename.startswith("<") else filename
    return path == _THIS_FILE or path.startswith(_IPYTHON_DIR + os.sep) or filename.startswith("<decorator-gen-")


def _format_exception(exc: BaseException) -> str:
    """The exception with only the user's innermost frames (no IPython or tool internals)."""
    if isinstance(exc, SyntaxError) and "outside function" in str(exc.msg) and "await" in str(exc.msg):
        exc.msg = (
            f"{exc.msg} (the python tool runs code synchronously: top-level await is not supported; "
            "use propose_cell to give the user a cell to run)"
        )
    te = traceback.TracebackException.from_exception(exc, capture_locals=False)
    seen: set[int] = set()
    node: traceback.TracebackException | None = te
    keep = TRACEBACK_FRAMES
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        frames = [f for f in node.stack if not _is_internal(f.filename)]
        omitted = max(0, len(frames) - keep)
        node.stack = traceback.StackSummary.from_list(frames[omitted:])
        if omitted:
            node.__notes__ = [  # type: ignore[attr-defined]  # read by format() since 3.11
                *(getattr(node, "__notes__", None) or []),
                f"(traceback shortened: {omitted} outer frame(s) not shown)",
            ]
        node = node.__cause__ or (node.__context__ if not node.__suppress_context__ else None)
        keep = 1  # the exceptions this one was raised from: just where they happened
    return "".join(te.format())


def _show_value(shell: Any, value: Any, capture: Capture) -> str:
    """The last expression as a notebook shows it: its rich reprs (a figure, a DataFrame's HTML) go to
    the capture like a display; the returned text is what the model reads."""
    formatter = getattr(shell, "display_formatter", None)
    if formatter is not None and not _plain_value(value):
        try:
            data, metadata = formatter.format(value)
        except Exception:  # the user's _repr_*_ methods may raise anything: shown as text instead
            data, metadata = {}, {}
        if isinstance(data, dict) and any(k != "text/plain" for k in data):
            capture.add({**data, "text/plain": _value_text(shell, value)}, metadata, obj=value)
            return ""  # its text went to the model's text with the display
    return _value_text(shell, value)


def _plain_value(value: Any) -> bool:
    return isinstance(value, (str, bytes, int, float, bool, list, tuple, dict, set))


def _value_text(shell: Any, value: Any) -> str:
    """The notebook's ``text/plain`` of a value (falls back to ``repr``).

    numpy scalars are shown as the plain Python value (``2.0``, not numpy 2's ``np.float64(2.0)``):
    that is what the model wants to quote back to the user.
    """
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.number, np.bool_, np.str_, np.bytes_)):
        try:
            value = value.item()
        except Exception:  # a numpy scalar subclass may refuse item(): shown as it is
            pass
    formatter = getattr(shell, "display_formatter", None)
    text: Any = None
    if formatter is not None:
        try:
            data, _ = formatter.format(value, include={"text/plain"})
            text = data.get("text/plain")
        except Exception:  # the user's __repr__ may raise anything: the safe repr instead
            text = None
    if not isinstance(text, str):
        try:
            text = repr(value)
        except Exception as exc:  # a broken __repr__ must not hide the rest of the result
            text = f"<{type(value).__name__} object; repr failed: {type(exc).__name__}: {exc}>"
    return cut(text, VALUE_CHARS)


def _quiet(source: str) -> bool:
    """A trailing ``;`` hides the last value, as in a notebook."""
    lines = [line.split("#", 1)[0].rstrip() for line in source.rstrip().splitlines()]
    lines = [line for line in lines if line]
    return bool(lines) and lines[-1].endswith(";")


def column_hint(exc: BaseException, ns: dict[str, Any]) -> str:
    """For a ``KeyError`` whose key is no column of the namespace's DataFrames, the frames' columns closest to it
    (a header's trailing space, another case, a typo: the most common failure of code written against a table) —
    one line after the traceback, or ''. Reads column names only, never values."""
    key = exc.args[0] if isinstance(exc, KeyError) and len(exc.args) == 1 else None
    if not isinstance(key, str):
        return ""
    found: list[str] = []
    for name, value in list(ns.items()):
        kind = type(value)
        if name.startswith("_") or kind.__name__ != "DataFrame" or not kind.__module__.startswith("pandas"):
            continue
        columns = [c for c in list(value.columns)[:HINT_COLUMNS] if isinstance(c, str)]
        if key in columns:
            return ""  # the key is a column: the KeyError is about something else
        near = [c for c in columns if c.strip().casefold() == key.strip().casefold()]
        near = near or difflib.get_close_matches(key, columns, n=3, cutoff=0.75)
        found += [f"{name}[{c!r}]" for c in near]
    return f"Note: no column {key!r}; the closest: {', '.join(found[:3])}" if found else ""


def run_python(shell: Any, code: str) -> ToolOutput:
    """Run ``code`` in ``shell``'s user namespace on this thread and return everything it produced: the
    text (stdout, stderr, displays as text, the last value, a traceback), the images for the model and
    the displays for the user (:mod:`~shiro_kernel.tools.displays`)."""
    filename = f"<shiro-python-{next(_counter)}>"
    try:
        source = shell.transform_cell(code)
    except SyntaxError as exc:
        return ToolOutput(_format_exception(exc).rstrip("\n"), raised=True)
    except Exception as exc:  # IPython's transformers may raise anything on odd input: the model is told
        raise ToolError(f"could not transform the code ({type(exc).__name__}: {exc})") from None
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)

    log: HeadTail[str] = HeadTail("", OUTPUT_HEAD_CHARS, OUTPUT_TAIL_CHARS)
    capture = Capture(log)
    figures_before = open_figures()
    interrupted: KeyboardInterrupt | None = None
    error = ""
    value_text = ""
    saved_out, saved_err = sys.stdout, sys.stderr
    saved_pub = shell.display_pub
    for stream in (saved_out, saved_err):  # let pending output go where it belongs first
        try:
            stream.flush()
        except Exception:  # a stream the user's code replaced may raise anything on flush
            pass
    fds = _FdCapture()
    saved_input = builtins.input
    try:
        with fds:
            sys.stdout = _Stream(log, "<stdout>", 1 if fds.active else None)
            sys.stderr = _Stream(log, "<stderr>", 2 if fds.active else None)
            shell.display_pub = Publisher(capture, shell=shell)
            builtins.input = _no_input  # in a kernel, input() would prompt in the notebook and block the turn
            try:
                with spy_on_formatter(shell, capture):
                    statements, last = _compile(shell, source, filename)
                    if statements is not None:
                        exec(statements, shell.user_global_ns, shell.user_ns)
                    if last is not None:
                        value = eval(last, shell.user_global_ns, shell.user_ns)
                        if value is not None and not _quiet(source):
                            value_text = _show_value(shell, value, capture)
            except KeyboardInterrupt as exc:
                interrupted = exc  # re-raised below, once the streams are back, with the output so far
            except BaseException as exc:  # SystemExit too: the user's code failing is a result
                error = _format_exception(exc)
                error = "\n".join(p for p in (error.rstrip("\n"), column_hint(exc, shell.user_ns)) if p)
            finally:
                collect_figures(capture, figures_before)
    finally:
        builtins.input = saved_input
        sys.stdout, sys.stderr = saved_out, saved_err
        shell.display_pub = saved_pub
        fd_text = fds.read(OUTPUT_HEAD_CHARS)

    if interrupted is not None:
        partial = "\n".join(p.rstrip("\n") for p in (joined(log), fd_text) if p.strip())
        interrupted.partial = cut(partial, OUTPUT_HEAD_CHARS)  # type: ignore[attr-defined]
        raise interrupted
    parts = [joined(log), fd_text, value_text, error, capture.note_text()]
    text = "\n".join(p.rstrip("\n") for p in parts if p and p.strip())
    return ToolOutput(text or "(no output)", images=capture.images, displays=capture.bundles, raised=bool(error))


def _run(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ToolError("code is empty; pass the Python code to run")
    shell = ctx.shell
    if shell is None:
        raise ToolError("no IPython shell is available, so Python code cannot run here; use the shell tool instead")
    return run_python(shell, code)


def _touches(args: dict[str, Any], ctx: ToolContext | None) -> Touches:
    """The code it runs in the user's namespace: its ``code``."""
    code = args.get("code")
    return Touches(code=code if isinstance(code, str) else "")


def _preview(args: dict[str, Any], ctx: ToolContext) -> Preview | None:
    code = args.get("code")
    return Preview("run this Python in your kernel", code, "python") if isinstance(code, str) else None


TOOLS = [
    Tool(
        name="python",
        description=(
            "Run Python code in the user's live IPython namespace (variables persist and are shared with the "
            "notebook; %magics and !commands work). Returns stdout, stderr, display output as text and the value "
            "of the last expression, or a short traceback; long output is truncated. Figures (plt.show(), a "
            "figure as the last expression, display(fig)) and displayed images come back to you as images and "
            "are shown to the user under this call; figures are closed afterwards."
        ),
        parameters=schema({"code": {"type": "string", "description": "Python code to run, like a notebook cell"}}),
        run=_run,
        effects=Effect.NAMESPACE,
        lean=True,
        touches=_touches,
        preview=_preview,
        replayed=True,
        served=1,
    ),
]
