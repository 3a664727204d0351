"""The ``inspect`` tool: a compact summary of the user's variables (type, shape, dtypes, a short repr).

It never imports pandas or numpy to find out what an object is: it only looks at modules that are
already loaded (``sys.modules``), so inspecting is cheap and has no side effects beyond ``repr``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ..text import cut
from .base import Tool, ToolContext, ToolError, schema

#: How many characters of a repr are shown.
REPR_CHARS = 300
#: How many variables are listed when no names are given.
MAX_VARIABLES = 60
#: Columns listed in a DataFrame's dtypes, and characters of its head.
MAX_COLUMNS = 40
HEAD_CHARS = 2_000

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


def _safe_repr(obj: Any) -> str:
    try:
        return repr(obj)
    except Exception as exc:
        return f"<repr failed: {type(exc).__name__}: {exc}>"


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
        head = obj.head(5).to_string(max_cols=20, max_colwidth=40)
    except Exception as exc:
        head = f"<head failed: {type(exc).__name__}: {exc}>"
    lines.append("  head(5):")
    lines.append(_indent(_cut(head, HEAD_CHARS)))
    return lines


def _describe_series(obj: Any) -> list[str]:
    name = f", name {obj.name!r}" if obj.name is not None else ""
    lines = [f"pandas.Series, length {len(obj)}, dtype {obj.dtype}{name}"]
    try:
        head = obj.head(5).to_string(max_rows=5)
    except Exception as exc:
        head = f"<head failed: {type(exc).__name__}: {exc}>"
    lines.append("  head(5):")
    lines.append(_indent(_cut(head, HEAD_CHARS)))
    return lines


def _describe_ndarray(obj: Any, np: Any) -> list[str]:
    lines = [f"numpy.ndarray, shape {obj.shape}, dtype {obj.dtype}"]
    try:
        with np.printoptions(threshold=20, edgeitems=3, linewidth=100):
            values = repr(obj)
    except Exception:
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
            except Exception:
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


def _run(args: dict[str, Any], ctx: ToolContext) -> str:
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
    for name in chosen:
        try:
            obj = _lookup(shell, name)
        except LookupError as exc:
            out.append(f"{name}: not found ({exc})")
            continue
        out.append(describe(name, obj))
    return "\n".join(out) + note


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
    ),
]
