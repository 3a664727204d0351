"""The ``inspect`` tool: a compact summary of the user's variables (type, shape, dtypes, a short repr).

It never imports pandas or numpy to find out what an object is: it only looks at modules that are
already loaded (``sys.modules``), so inspecting is cheap and has no side effects beyond ``repr``.

The user's code does run: a ``repr``, a property on the dotted path, a frame's head. So each value is summarised on
a worker thread and waited for at most :data:`ANSWER_S` seconds, the whole call at most :data:`CALL_S`: a value
that does not answer is named (``x: its repr did not answer within 3 s``) and the others are still shown. The
worker that did not answer is left to finish on its own (a thread cannot be stopped); what it returns is dropped.
"""

from __future__ import annotations

import collections
import reprlib
import sys
import threading
import time
import types
from itertools import islice
from typing import Any

from ..redact import redact
from ..text import cut
from .base import Effect, Tool, ToolContext, ToolError, ToolOutput, schema

#: How many characters of a repr are shown.
REPR_CHARS = 300
#: How many variables are listed when no names are given.
MAX_VARIABLES = 60
#: Columns listed in a DataFrame's dtypes, and characters of its head.
MAX_COLUMNS = 40
HEAD_CHARS = 2_000
#: the rows of a frame's or Series' head a summary shows
HEAD_ROWS = 5

#: how long one value's summary (its repr, a dotted attribute, a frame's head) is waited for
ANSWER_S = 3.0
#: how long one call waits for all of its values' summaries: the values after that are named, not summarised
CALL_S = 10.0

#: strings up to this long are redacted before a repr cuts them (longer ones: the pieces kept are)
REDACT_CHARS = 1_000_000
#: IPython's own names in the user namespace (besides ``_*`` names and ``user_ns_hidden``).
_IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_SKIPPED_TYPES = (
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.BuiltinMethodType,
    type,
)


def _cut(text: str, limit: int = REPR_CHARS) -> str:
    return cut(text.strip("\n"), limit)


_CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)
_TEXTS = (str, bytes, bytearray)
_BUILTINS = _CONTAINERS + _TEXTS


class _Bounded(reprlib.Repr):
    """``reprlib`` with a total budget: strings and bytes keep their head and tail, containers their first
    items (in their own order: a dict or set is never sorted), and once ``limit`` characters of leaves
    are out every further item is ``...``. Subclasses of those builtins (an ``OrderedDict``, a ``str``
    subclass) are shown the same way under their class name instead of calling their own full ``repr``."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.used = 0
        self.fill = "..."
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = self.maxdeque = 20
        self.maxstring = self.maxother = max(20, limit)
        self.maxlong = 100

    def repr1(self, x: Any, level: int) -> str:
        if self.used > self.limit:
            return self.fill
        kind = type(x)
        if kind not in _BUILTINS and isinstance(x, _BUILTINS):
            base = next(b for b in _BUILTINS if isinstance(x, b))
            text = f"{kind.__name__}({getattr(self, f'repr_{base.__name__}')(x, level)})"
        else:
            text = super().repr1(x, level)
        if not isinstance(x, _CONTAINERS):
            self.used += len(text)
        return text

    def _head_tail(self, x: Any, level: int) -> str:
        # the value itself gets the whole budget (less room for the note); an item inside a container a share
        share = self.limit - 40 if level >= self.maxlevel else self.limit // 8
        room = max(20, min(share, self.limit - self.used - 40))
        if len(x) <= room:
            return repr(x[0 : len(x)])
        half = max(1, (room - len(self.fill)) // 2)
        return f"{x[:half]!r}{self.fill}{x[len(x) - half :]!r} ({len(x):,} in all)"

    def repr_str(self, x: Any, level: int) -> str:
        text = str(x)
        if len(text) <= REDACT_CHARS:  # a secret is replaced whole before the head and tail are cut
            text = redact(text)
        return self._head_tail(text, level)

    def repr_bytes(self, x: Any, level: int) -> str:
        return self._head_tail(x if type(x) is bytes else _Slice(x), level)

    def repr_bytearray(self, x: Any, level: int) -> str:
        return f"bytearray({self.repr_bytes(x, level)})"

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = repr(x)  # any other object: its own repr (pandas and numpy bound theirs)
        except Exception as exc:  # the user's object's repr may raise anything: reported, not raised
            return f"<repr failed: {type(exc).__name__}: {exc}>"
        if len(text) <= self.maxother:
            return text
        half = max(10, (self.maxother - 40) // 2)
        return f"{text[:half]}{self.fill}{text[-half:]} ({len(text):,} characters in all)"

    def repr_dict(self, x: Any, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{" + self.fill + "}"
        pieces = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in islice(x.items(), self.maxdict)]
        if len(x) > self.maxdict:
            pieces.append(f"{self.fill} ({len(x):,} items in all)")
        return "{" + ", ".join(pieces) + "}"

    def _unsorted(self, x: Any, level: int, name: str) -> str:
        if not x:
            return f"{name}()"
        if level <= 0:
            return "{" + self.fill + "}"
        pieces = [self.repr1(item, level - 1) for item in islice(x, self.maxset)]
        if len(x) > self.maxset:
            pieces.append(f"{self.fill} ({len(x):,} items in all)")
        body = "{" + ", ".join(pieces) + "}"
        return body if name == "set" else f"{name}({body})"

    def repr_set(self, x: Any, level: int) -> str:
        return self._unsorted(x, level, "set")

    def repr_frozenset(self, x: Any, level: int) -> str:
        return self._unsorted(x, level, "frozenset")


class _Slice:
    """Bytes-like without a copy of the whole: ``len`` and slicing into ``bytes`` (slices of a 200 MB
    ``bytearray`` or ``bytes`` subclass stay small)."""

    def __init__(self, data: Any) -> None:
        self._data = memoryview(data).cast("B")

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, part: slice) -> bytes:
        return bytes(self._data[part])


def bounded_repr(value: Any, limit: int = REPR_CHARS) -> str:
    """A repr of ``value`` of about ``limit`` characters at most, built without ever making the full
    one for builtin strings, bytes and containers (a 200 MB ``bytes`` costs ``limit`` characters, not
    800 MB). Other objects use their own ``repr`` (pandas and numpy bound theirs); a failing ``repr``
    is reported, not raised. The result is cut to ``limit`` with a note."""
    try:
        text = _Bounded(limit).repr(value)
    except Exception as exc:  # the user's object's repr may raise anything: reported, not raised
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    return _cut(text, limit)


def _safe_repr(obj: Any) -> str:
    return bounded_repr(obj, REPR_CHARS)


def _type_name(obj: Any) -> str:
    cls = type(obj)
    module = cls.__module__
    if module in ("builtins", "__main__", None):
        return cls.__qualname__
    return (
        f"{module.split('.')[0]}.{cls.__qualname__}"
        if module.startswith(("pandas", "numpy"))
        else f"{module}.{cls.__qualname__}"
    )


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _describe_dataframe(obj: Any) -> list[str]:
    lines = [f"pandas.DataFrame, shape {obj.shape[0]} rows x {obj.shape[1]} columns"]
    dtypes = [f"{col}: {dtype}" for col, dtype in list(obj.dtypes.items())[:MAX_COLUMNS]]
    more = obj.shape[1] - len(dtypes)
    lines.append("  dtypes: " + ", ".join(dtypes) + (f", ... ({more} more columns)" if more > 0 else ""))
    try:
        head = obj.head(HEAD_ROWS).to_string(max_cols=20, max_colwidth=40)
    except Exception as exc:  # the user's DataFrame may fail to print (odd dtypes): reported, not raised
        head = f"<head failed: {type(exc).__name__}: {exc}>"
    lines.append("  head(5):")
    lines.append(_indent(_cut(head, HEAD_CHARS)))
    return lines


def _describe_series(obj: Any) -> list[str]:
    name = f", name {obj.name!r}" if obj.name is not None else ""
    lines = [f"pandas.Series, length {len(obj)}, dtype {obj.dtype}{name}"]
    try:
        head = obj.head(HEAD_ROWS).to_string(max_rows=HEAD_ROWS)
    except Exception as exc:  # the user's Series may fail to print: reported, not raised
        head = f"<head failed: {type(exc).__name__}: {exc}>"
    lines.append("  head(5):")
    lines.append(_indent(_cut(head, HEAD_CHARS)))
    return lines


def _describe_ndarray(obj: Any, np: Any) -> list[str]:
    lines = [f"numpy.ndarray, shape {obj.shape}, dtype {obj.dtype}"]
    try:
        with np.printoptions(threshold=20, edgeitems=3, linewidth=100):
            values = repr(obj)
    except Exception:  # a subclass's repr may raise anything: the safe repr instead
        values = _safe_repr(obj)
    lines.append(_indent(_cut(values)))
    return lines


def describe(name: str, obj: Any) -> str:
    """One variable as a few lines of text."""
    pd = sys.modules.get("pandas")
    np = sys.modules.get("numpy")
    try:
        if pd is not None and isinstance(obj, pd.DataFrame):
            return f"{name}: " + "\n".join(_describe_dataframe(obj))
        if pd is not None and isinstance(obj, pd.Series):
            return f"{name}: " + "\n".join(_describe_series(obj))
        if np is not None and isinstance(obj, np.ndarray):
            return f"{name}: " + "\n".join(_describe_ndarray(obj, np))
    except Exception as exc:  # an odd subclass: fall back to the generic summary
        return f"{name}: {_type_name(obj)} (summary failed: {type(exc).__name__}: {exc})\n  {_cut(_safe_repr(obj))}"
    facts: list[str] = []
    if isinstance(obj, (str, bytes, list, tuple, dict, set, frozenset)):
        facts.append(f"len {len(obj)}")
    else:  # array-likes from other libraries (torch, polars, xarray ...): shape and dtype if they have them
        for attr in ("shape", "dtype"):
            try:
                value = getattr(type(obj), attr, None) is not None and getattr(obj, attr, None)
            except Exception:  # a property of a foreign array type may raise anything: not shown
                value = None
            if value is not None and value is not False and not callable(value):
                facts.append(f"{attr} {_cut(str(value), 80)}")
    head = f"{name}: {_type_name(obj)}" + (f", {', '.join(facts)}" if facts else "")
    return f"{head}\n  {_indent(_cut(_safe_repr(obj)), '  ').lstrip()}"


def _user_variables(shell: Any) -> list[str]:
    hidden = getattr(shell, "user_ns_hidden", {}) or {}
    names = []
    for name, value in list(shell.user_ns.items()):
        if name.startswith("_") or name in _IPYTHON_NAMES:
            continue
        if name in hidden and hidden[name] is value:
            continue
        if isinstance(value, _SKIPPED_TYPES) or type(value).__name__ in ("ExitAutocall", "ZMQExitAutocall"):
            continue
        names.append(name)
    return names


def _lookup(shell: Any, name: str) -> Any:
    """``name`` or a dotted path like ``df.columns`` (attributes only; nothing is evaluated)."""
    first, *rest = name.split(".")
    if first not in shell.user_ns:
        raise LookupError(f"{first!r} is not defined")
    obj = shell.user_ns[first]
    for attr in rest:
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            raise LookupError(f"{type(obj).__name__} has no attribute {attr!r}") from None
    return obj


def _run(args: dict[str, Any], ctx: ToolContext) -> str | ToolOutput:
    shell = ctx.shell
    if shell is None:
        raise ToolError("no IPython shell is available, so there are no variables to inspect")
    names = args.get("names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise ToolError("names must be a list of variable names, or null for all variables")
    chosen = [n.strip() for n in names if n.strip()] if names else []
    note = ""
    if not chosen:
        chosen = _user_variables(shell)
        if not chosen:
            return "No user variables are defined yet (modules, functions and classes are not listed)."
        if len(chosen) > MAX_VARIABLES:
            note = (
                f"\n[{len(chosen) - MAX_VARIABLES} more variables not shown: "
                f"{', '.join(chosen[MAX_VARIABLES : MAX_VARIABLES + 30])}; pass names to inspect them]"
            )
            chosen = chosen[:MAX_VARIABLES]
    out = []
    deadline = time.monotonic() + CALL_S
    for name in chosen:
        left = deadline - time.monotonic()
        if ctx.abort is not None and ctx.abort.is_set():
            out.append(f"{name}: not summarised (the turn was stopped)")
        elif left <= 0:
            out.append(f"{name}: not summarised (this call's {CALL_S:g} s went to values that did not answer)")
        else:
            out.append(_summary(shell, name, min(ANSWER_S, left), ctx.abort))
    shown = [v for v in (_values_shown(shell, name) for name in chosen) if v is not None]
    text = "\n".join(out) + note
    return ToolOutput(text, meta={"variables": shown}) if shown else text


def _values_shown(shell: Any, name: str) -> list[Any] | None:
    """``[name, rows, columns, [column names]]`` of the values a summary shows of a frame or Series (its head), for
    the egress ledger; None for anything else (its summary shows a type, a length or a short repr)."""
    value: Any = getattr(shell, "user_ns", {}).get(name)
    kind = type(value)
    if kind.__module__.split(".")[0] != "pandas" or kind.__name__ not in ("DataFrame", "Series"):
        return None
    try:
        rows = min(HEAD_ROWS, len(value))
        if kind.__name__ == "Series":
            return [name, rows, 1, [str(value.name)]]
        return [name, rows, int(value.shape[1]), [str(c) for c in list(value.columns)[:40]]]
    except Exception:  # an odd subclass
        return None


def _summary(shell: Any, name: str, wait: float, abort: threading.Event | None) -> str:
    """``name``'s summary, made on a worker thread and waited for ``wait`` seconds at most (or until ``abort``):
    a value whose repr blocks stalls nothing but its own line."""
    answer: list[str] = []

    def work() -> None:
        try:
            answer.append(_one(shell, name))
        except BaseException as exc:  # the user's code on another thread: whatever it raises is its line's text
            answer.append(f"{name}: summary failed ({type(exc).__name__}: {exc})")

    worker = threading.Thread(target=work, name=f"shiro-inspect-{name}", daemon=True)
    worker.start()
    until = time.monotonic() + wait
    while worker.is_alive() and (left := until - time.monotonic()) > 0:
        worker.join(min(left, 0.1))
        if abort is not None and abort.is_set():
            break
    if answer:
        return answer[0]
    return f"{name}: its repr did not answer within {round(wait, 1):g} s"


def _one(shell: Any, name: str) -> str:
    try:
        obj = _lookup(shell, name)
    except LookupError as exc:
        return f"{name}: not found ({exc})"
    return describe(name, obj)


TOOLS = [
    Tool(
        name="inspect",
        description=(
            "Summarise variables in the user's namespace without running code: type, shape, dtypes and a short "
            "repr (DataFrame: shape, dtypes, head(5)). Pass names (dotted attributes allowed) or null for all user "
            "variables (modules, functions and classes skipped; at most 60 listed)."
        ),
        parameters=schema(
            {
                "names": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "variable names to inspect; null for all user variables",
                }
            },
            optional=("names",),
        ),
        run=_run,
        effects=Effect.READS,
        served=2,
    ),
]
