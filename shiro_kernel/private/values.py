"""The values the private names hold in the kernel now, as the texts a request may carry them in.

Read from the objects' data, never their ``repr`` (which could run the user's code): a frame's private columns
(its unique values), a Series named so, and a variable named so whole — a frame (every cell), a Series, an array,
a list, tuple or set, a dict (its keys and values), a string or a number. Each value is told in the texts it
prints as: a string as it is; a number as ``str`` and ``repr`` show it (and an integral float without its
``.0``, as pandas prints a whole column of them). Texts under :data:`MIN_CHARS` characters are left out (``M``,
``34`` occur by chance everywhere; counted, so ``/private`` can say how many).
"""

from __future__ import annotations

import datetime
import decimal
import math
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .names import Name

#: shorter texts are not masked: they are too likely to occur anywhere by chance
MIN_CHARS = 3
#: the most values read from one variable (a bigger one: its first values, and it is said)
MAX_PER_VARIABLE = 1_000_000
_SKIP = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type, types.MethodType)


@dataclass
class Found:
    """The private values now: each text and the label its stand-in shows (the column or variable it came from)."""

    texts: dict[str, str] = field(default_factory=dict)
    #: values left out for being too short, and the variables cut at :data:`MAX_PER_VARIABLE`
    short: int = 0
    cut: list[str] = field(default_factory=list)
    #: the variables and columns that hold private values (``df.email``, ``salaries``), for the figure rule
    sources: list[str] = field(default_factory=list)

    def add(self, values: Iterable[Any], label: str) -> None:
        for value in values:
            for text in texts_of(value):
                if len(text) < MIN_CHARS:
                    self.short += 1
                else:
                    self.texts.setdefault(text, label)


def texts_of(value: Any) -> Iterator[str]:
    """The texts one scalar value prints as (nothing for a missing value or a boolean)."""
    if value is None or isinstance(value, bool):
        return
    item = getattr(value, "item", None)  # a numpy scalar: its Python value
    if item is not None and type(value).__module__ == "numpy":
        try:
            value = item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, str):
        if value.strip():
            yield value
        return
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield str(value)
        return
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return
        yield repr(value)
        if value.is_integer():
            yield str(int(value))
        return
    if isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
        return
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta, decimal.Decimal)):
        text = str(value)  # a timestamp, a decimal: how it prints
        if text not in ("NaT", "NaN"):
            yield text
    # anything else (a frame inside a dict, an object) is no scalar: not read


def collect(ns: Mapping[str, Any], names: Iterable[Name]) -> Found:
    """The private values of ``ns`` (the kernel's namespace) by ``names``."""
    names = list(names)
    found = Found()
    if not names:
        return found
    for variable, value in list(ns.items()):
        if variable.startswith("_") or isinstance(value, _SKIP):
            continue
        if any(n.whole(variable) for n in names):
            found.sources.append(variable)
            found.add(_whole(value, variable, found), _label(variable))
            continue
        kind = type(value)
        if kind.__module__.split(".")[0] != "pandas":
            continue
        if kind.__name__ == "DataFrame":
            for column in _columns(value):
                if any(n.column_of(variable, column) for n in names):
                    found.sources.append(f"{variable}.{column}")
                    found.add(_unique(value[column], variable, found), _label(str(column)))
        elif (
            kind.__name__ == "Series"
            and value.name is not None
            and any(n.column_of(variable, value.name) for n in names)
        ):
            found.sources.append(variable)
            found.add(_unique(value, variable, found), _label(str(value.name)))
    return found


def _columns(frame: Any) -> list[Any]:
    try:
        return list(frame.columns)
    except Exception:  # an odd subclass: no columns read
        return []


def _unique(series: Any, variable: str, found: Found) -> Iterable[Any]:
    try:
        values = series.dropna().unique()
    except Exception:  # unhashable cells (lists in a column): each cell as it is
        values = list(series)
    if len(values) > MAX_PER_VARIABLE:
        found.cut.append(variable)
        values = values[:MAX_PER_VARIABLE]
    return list(values)


def _whole(value: Any, variable: str, found: Found) -> Iterable[Any]:
    """Every scalar a whole variable holds."""
    kind = type(value)
    module = kind.__module__.split(".")[0]
    if module == "pandas" and kind.__name__ == "DataFrame":
        out: list[Any] = []
        for column in _columns(value):
            out.extend(_unique(value[column], variable, found))
        return out
    if module == "pandas" and kind.__name__ in ("Series", "Index"):
        return _unique(value, variable, found)
    if module == "numpy" and hasattr(value, "ravel"):
        flat = value.ravel()
        if flat.size > MAX_PER_VARIABLE:
            found.cut.append(variable)
            flat = flat[:MAX_PER_VARIABLE]
        return list(flat.tolist())
    if isinstance(value, Mapping):
        return [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)[:MAX_PER_VARIABLE]
    return [value]


def _label(text: str) -> str:
    """The label a stand-in shows: the name, in the characters a stand-in may hold, at most 24."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in text)
    return cleaned[:24] or "value"


__all__ = ["MIN_CHARS", "Found", "collect", "texts_of"]
