"""Which names of the user's namespace a piece of code may rebind, delete or change in place, read from its
syntax tree before it runs — erring toward including a name (a name checkpointed that did not change costs a
cheap copy; one missed cannot be restored).

A name is touched when the code

* binds it at the top level: an assignment (tuple targets, ``:=``, ``for``/``with … as``), an augmented
  assignment, ``del``, ``import … (as)``, ``def``, ``class``, or ``global`` inside a function;
* writes into it: ``df["x"] = …``, ``df.loc[0, "a"] = …``, ``obj.attr = …``, ``del d[k]`` (the name at the
  base of the target);
* calls a method on it or on a part of it — ``df.dropna(inplace=True)``, ``rows.append(…)``, ``arr.sort()``,
  ``df["a"].fillna(0, inplace=True)`` — unless the method is one of the common ones known to change nothing
  (:data:`READING_METHODS`: ``df.head()``, ``arr.mean()``; with ``inplace=True`` it counts whatever its name);
* passes it to a call that could change it in place: as ``out=`` (``np.add(a, b, out=a)``), to a function known
  to change its arguments (``np.random.shuffle(arr)``, ``heapq.heappush(h, x)``), or to a function of the
  user's (any plain name that is not a builtin known to change nothing: ``print``, ``len``, ``sorted`` …).

Inside a function or class body the same rules apply (a function the code defines and calls may change a
module-level list), which may add local names: harmless, they are not in the namespace.

Some code can change names it does not show — ``exec``, ``eval``, ``globals()``, ``vars()``, ``from m import *``,
a cell magic — or cannot be read (a syntax error): :attr:`Touched.unseen` says so, and undo names it as a limit.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

#: builtins that change none of their arguments (a call of one does not make its arguments touched)
PURE_CALLS = frozenset(
    {
        "abs",
        "all",
        "any",
        "ascii",
        "bin",
        "bool",
        "callable",
        "chr",
        "dict",
        "dir",
        "display",
        "divmod",
        "enumerate",
        "filter",
        "float",
        "format",
        "frozenset",
        "hasattr",
        "hash",
        "hex",
        "id",
        "int",
        "isinstance",
        "issubclass",
        "iter",
        "len",
        "list",
        "map",
        "max",
        "min",
        "oct",
        "open",
        "ord",
        "pow",
        "print",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "type",
        "zip",
    }
)
#: functions known to change the arguments they are given (numpy's, random's, heapq's, bisect's)
CHANGING_CALLS = frozenset(
    {"shuffle", "copyto", "put", "place", "putmask", "fill_diagonal", "heappush", "heappop", "heapify"}
    | {"heapreplace", "heappushpop", "insort", "insort_left", "insort_right"}
)
#: common methods that change nothing of the object they are called on (pandas', numpy's, str's, dict's): a call
#: of one does not make its object touched, unless it is given ``inplace=True``
READING_METHODS = frozenset(
    {"head", "tail", "describe", "info", "copy", "astype", "to_numpy", "tolist", "to_list", "to_dict", "to_csv"}
    | {"to_json", "to_string", "to_markdown", "to_html", "groupby", "agg", "aggregate", "mean", "median", "sum"}
    | {"min", "max", "std", "var", "count", "nunique", "unique", "value_counts", "isna", "notna", "isnull"}
    | {"notnull", "corr", "cov", "quantile", "idxmax", "idxmin", "argmax", "argmin", "any", "all", "round"}
    | {"plot", "hist", "boxplot", "items", "keys", "values", "get", "index", "startswith", "endswith", "split"}
    | {"join", "format", "lower", "upper", "strip", "reshape", "ravel", "flatten", "nonzero", "dot", "memory_usage"}
    | {"merge", "pivot", "pivot_table", "melt", "query", "filter", "select_dtypes", "nlargest", "nsmallest"}
    | {"sample", "shift", "diff", "pct_change", "rolling", "expanding", "resample", "cumsum", "cumprod", "abs"}
    | {"clip", "between", "isin", "map", "dt", "str", "cat", "sort_values", "sort_index", "reset_index", "rename"}
    | {"drop", "dropna", "fillna", "replace", "set_index", "drop_duplicates", "duplicated", "where", "mask"}
    | {"assign", "apply", "transform", "explode", "stack", "unstack", "transpose", "equals", "compare", "all"}
)
#: what lets code change names it does not show
_HIDDEN_CALLS = frozenset({"exec", "eval", "globals", "vars", "locals", "setattr", "delattr", "__import__"})


@dataclass(frozen=True)
class Touched:
    """The names code may change (``names``); of them, those it only calls or hands to a call (``called``: a module
    called, ``np.add(…)``, keeps its binding); and why it may change others unseen (``unseen``, '' when not)."""

    names: frozenset[str] = field(default_factory=frozenset)
    unseen: str = ""
    called: frozenset[str] = field(default_factory=frozenset)


def base_name(node: ast.expr) -> str | None:
    """The name at the base of ``a.b[c].d`` (``a``), or None when the base is not a plain name."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Reader(ast.NodeVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()  # bound, deleted or written into
        self.called: set[str] = set()  # called, or handed to a call that may change it
        self.unseen = ""

    def _target(self, node: ast.expr) -> None:
        if isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self._target(element)
            return
        name = base_name(node)
        if name is not None:
            self.names.add(name)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._target(node.target)
        self.generic_visit(node)

    visit_AsyncFor = visit_For  # type: ignore[assignment]

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self._target(item.optional_vars)
        self.generic_visit(node)

    visit_AsyncWith = visit_With  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.names.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.unseen = self.unseen or f"from {node.module} import *"
            else:
                self.names.add(alias.asname or alias.name)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.names.add(node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.names.add(node.name)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.names.update(node.names)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.names.add(node.name)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        inplace = any(k.arg == "inplace" and not _false(k.value) for k in node.keywords)
        if isinstance(func, ast.Attribute):  # df.dropna(inplace=True), rows.append(x), df["a"].fillna(...)
            name = base_name(func.value)
            if name is not None and (inplace or func.attr not in READING_METHODS):
                self.called.add(name)
        callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if callee in _HIDDEN_CALLS:
            self.unseen = self.unseen or f"{callee}()"
        users = isinstance(func, ast.Name) and callee not in PURE_CALLS  # a function of the user's may change any
        changes = users or callee in CHANGING_CALLS or callee in ("setattr", "delattr")
        for arg in [*node.args, *(k.value for k in node.keywords if changes or k.arg == "out")]:
            name = base_name(arg)
            if name is not None and (changes or arg in [k.value for k in node.keywords]):
                self.called.add(name)
        self.generic_visit(node)


def _false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in (False, None, 0)


def touched(code: str) -> Touched:
    """The names ``code`` (Python, as the ``python`` tool runs it: IPython's syntax already turned into Python)
    may change; on a syntax error, the names it mentions, and ``unseen`` says it could not be read."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        mentioned = {t for t in _words(code) if t.isidentifier()}
        return Touched(frozenset(mentioned), "it could not be read as Python")
    reader = _Reader()
    reader.visit(tree)
    return Touched(frozenset(reader.names | reader.called), reader.unseen, frozenset(reader.called - reader.names))


def _words(code: str) -> list[str]:
    import re

    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code)


__all__ = ["PURE_CALLS", "Touched", "base_name", "touched"]
