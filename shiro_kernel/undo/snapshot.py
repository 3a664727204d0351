"""A value kept as it was before a step, at the cost it must have: :func:`keep`.

* **Immutable values** (numbers, strings, bytes, ``None``, tuples and frozensets of them, functions, classes) are
  kept by reference: nothing can change them.
* **pandas objects** (DataFrame, Series, Index) are kept by ``copy(deep=False)`` under copy-on-write (pandas 3
  always; pandas 2 when ``mode.copy_on_write`` is on): the copy shares the data until either side writes, so
  the checkpoint costs about nothing and later only what the step writes (counted against the budget at the
  object's size: what it holds at most). Without copy-on-write they are copied whole.
* **numpy arrays** (any ``ndarray`` subclass, sized by ``nbytes``) are copied; a memory-mapped one (``np.memmap``,
  ``np.load(mmap_mode=…)``) is named, not copied: its data is the file's, and a copy in memory would come back
  detached from it (inside a container it is kept by reference, so the file's array comes back as itself).
* **Containers** (list, dict, set, deque …) holding only immutable values are copied one level; others deep, with
  the pandas objects inside kept as above (the copy's memo is given their cheap copies first).
* **What cannot be copied** — a module's state, an open file, a socket, a database connection, a generator, a lock,
  a thread, an object on a GPU — and anything over the size budget (``Shiro.undo_max_mb``) is :class:`NotKept`,
  with the reason, before the call runs.

Sizes are measured without copying (a bounded walk of items, attributes and ``__slots__``): a container too big is
refused before any work, and an object the walk cannot see into (no attributes, no slots, of no kind known here: a
C extension's) is named rather than deep-copied blind.
"""

from __future__ import annotations

import collections
import copy
import datetime
import decimal
import fractions
import io
import itertools
import mmap
import pathlib
import re
import sqlite3
import sys
import threading
import types
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: values nothing can change: kept by reference
_IMMUTABLE: tuple[type, ...] = (int, float, complex, bool, str, bytes, range, type(None), type(Ellipsis), slice)
_IMMUTABLE += (types.FunctionType, types.BuiltinFunctionType, type, types.MethodType)
_IMMUTABLE += (datetime.date, datetime.time, datetime.timedelta, datetime.tzinfo, decimal.Decimal, fractions.Fraction)
_IMMUTABLE += (uuid.UUID, pathlib.PurePath, re.Pattern)
#: containers copied by the copy module (one level when their items are immutable)
_CONTAINERS = (list, dict, set, collections.deque, collections.OrderedDict, collections.defaultdict)
#: the most objects a deep copy may have to copy: past it, the copy would hold the step up for seconds (a
#: deep copy makes about a million small objects a second), so the value is named, not kept — the time budget
WALK_LIMIT = 500_000


@dataclass(frozen=True)
class Kept:
    """A value as it was: ``value`` (to bind again), how it was kept, and its extra memory in bytes."""

    value: Any
    how: str  # reference | shallow (copy-on-write) | copy | deep copy
    nbytes: int


@dataclass(frozen=True)
class Absent:
    """The name did not exist before the step: taking the step back deletes it."""


@dataclass(frozen=True)
class NotKept:
    """The value could not be kept: ``why``, in words (``a sqlite3.Connection cannot be copied``)."""

    why: str


Saved = Kept | Absent | NotKept


def keep(value: Any, budget: int) -> Kept | NotKept:
    """``value`` kept for undo (see the module), or why it cannot be; ``budget``: the bytes it may take."""
    why = uncopyable(value)
    if why:
        return NotKept(why)
    if _immutable(value):
        return Kept(value, "reference", 0)
    if _is_pandas(value):
        return _keep_pandas(value, budget)
    if is_ndarray(value):
        if value.nbytes > budget:
            return NotKept(_over(value.nbytes, budget))
        return Kept(value.copy(), "copy", int(value.nbytes))
    if isinstance(value, _CONTAINERS) and _flat(value):  # one level copies it whole: measured, not walked
        flat = _flat_size(value)
        if flat > budget:
            return NotKept(_over(flat, budget))
        return Kept(_copy_flat(value), "copy", flat)
    unseen: list[Any] = []
    size = size_of(value, budget, unseen)
    if size is None:
        return NotKept(f"over {WALK_LIMIT:,} objects to copy: too many to copy before the step runs")
    if unseen:
        return NotKept(
            f"a {_kind(unseen[0])}{' inside it' if unseen[0] is not value else ''}: what it holds cannot be "
            "measured, so it is not copied"
        )
    if size > budget:
        return NotKept(_over(size, budget))
    try:
        return Kept(copy.deepcopy(value, _cheap_memo(value)), "deep copy", size)
    except Exception as exc:  # an object that refuses to be copied (a lock inside, a C object)
        return NotKept(f"a {_kind(value)} cannot be copied ({type(exc).__name__}: {str(exc)[:80]})")


def uncopyable(value: Any) -> str:
    """Why ``value`` cannot be kept at all ('' when it can): what it is, in words."""
    if isinstance(value, types.ModuleType):
        return "a module: its attributes are not copied"
    mapped = memory_map(value)
    if mapped:
        return f"a memory-mapped array ({mapped}): its data is the file's, not copied; what the step wrote stays"
    if isinstance(value, mmap.mmap):
        return "a memory map: its data is the file's, not copied"
    if isinstance(value, io.IOBase):
        return "an open file"
    if isinstance(value, (sqlite3.Connection, sqlite3.Cursor)):
        return f"a {type(value).__module__}.{type(value).__name__} cannot be copied"
    if isinstance(value, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
        return "a generator: where it stands cannot be copied"
    if isinstance(value, (threading.Thread, type(threading.Lock()), type(threading.RLock()))):
        return f"a {type(value).__name__} cannot be copied"
    module = type(value).__module__ or ""
    if module.startswith("socket") or type(value).__name__ in ("socket", "SSLSocket"):
        return "a socket cannot be copied"
    device = getattr(value, "device", None)  # torch, cupy, jax: an object on a GPU is not copied to memory here
    if device is not None and module.split(".")[0] in ("torch", "cupy", "jax", "jaxlib") and "cpu" not in str(device):
        return f"an object on {device} is not copied"
    if "connection" in type(value).__name__.lower() or type(value).__name__.lower() == "engine":
        return f"a {module}.{type(value).__name__} (a connection) cannot be copied"
    return ""


def memory_map(value: Any) -> str:
    """The file of a memory-mapped numpy array (``np.memmap``, or a view of one), in words; '' for any other value."""
    if not is_ndarray(value):
        return ""
    base, hops = value, 0
    while base is not None and hops < 32:
        if isinstance(base, mmap.mmap) or type(base).__name__ == "memmap":
            name = getattr(value, "filename", None) or getattr(base, "filename", None)
            return f"np.memmap of {pathlib.Path(name).name}" if name else "np.memmap"
        base, hops = getattr(base, "base", None), hops + 1
    return ""


def is_ndarray(value: Any) -> bool:
    """A numpy array of any kind (an ``ndarray`` subclass: matrix, recarray, memmap, masked)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def slot_values(value: Any) -> list[tuple[str, Any]]:
    """The ``__slots__`` an object has set, by name (its class's and its bases')."""
    out: list[tuple[str, Any]] = []
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot in ("__dict__", "__weakref__"):
                continue
            try:
                out.append((slot, object.__getattribute__(value, slot)))
            except AttributeError:
                continue
    return out


def size_of(value: Any, limit: int, unseen: list[Any] | None = None) -> int | None:
    """The bytes ``value`` holds, walked without copying (pandas and numpy by their own count; attributes and
    slots); None when the walk passes :data:`WALK_LIMIT` objects (too many to copy in time, so not kept).
    ``unseen`` gets the objects the walk cannot see into (see the module)."""
    seen: set[int] = set()
    stack = [value]
    total = items = 0
    scalars, getsizeof = _SCALARS, sys.getsizeof
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        items += 1
        if items > WALK_LIMIT:
            return None
        if _is_pandas(v):
            total += int(_pandas_bytes(v))
        elif is_ndarray(v):
            total += 0 if memory_map(v) else int(v.nbytes)  # a file's array is kept as itself
        elif (own := _own_size(v)) is not None:  # a tensor, an Arrow table, a polars frame: what it says it holds
            total += own
        else:
            total += getsizeof(v, 64)
            children: Iterable[Any] = ()
            if isinstance(v, dict):
                children = itertools.chain(v.keys(), v.values())
            elif isinstance(v, (list, tuple, set, frozenset, collections.deque)):
                children = v
            elif _immutable(v) or isinstance(v, (bytearray, memoryview)):
                pass
            else:
                state = getattr(v, "__dict__", None)
                slots = [x for _, x in slot_values(v)]
                children = itertools.chain((state,) if isinstance(state, dict) else (), slots)
                if unseen is not None and not isinstance(state, dict) and not slots and _opaque(v):
                    unseen.append(v)
            for child in children:  # a number or a string is shared by the copy: counted, not walked
                if type(child) in scalars:
                    total += getsizeof(child)
                else:
                    stack.append(child)
        if total > limit:
            return total
    return total


def _keep_pandas(value: Any, budget: int) -> Kept | NotKept:
    """A pandas object kept. Under copy-on-write the copy costs nothing until the step writes, and then what it
    writes; it is counted at its whole size against the budget, which is what it holds at most (a step that
    replaces every column leaves the old data to the checkpoint alone)."""
    size = int(_pandas_bytes(value))
    if size > budget:
        return NotKept(_over(size, budget))
    if _copy_on_write():
        return Kept(value.copy(deep=False), "shallow (copy-on-write)", size)
    return Kept(value.copy(deep=True), "copy", size)


def _copy_on_write() -> bool:
    pandas = sys.modules["pandas"]  # a pandas object was met: pandas is imported (and no stub is needed here)
    major = int(pandas.__version__.split(".")[0])
    if major >= 3:
        return True
    return bool(getattr(pandas.options.mode, "copy_on_write", False) is True)


def _pandas_bytes(value: Any) -> int:
    """What ``memory_usage(index=True, deep=False)`` says, without building its Series over every column (83 ms for
    a 10,000-column frame, at each checkpoint): a numpy column holds rows × its item size; the others (strings,
    categories, nullable numbers) are asked together."""
    try:
        if hasattr(value, "columns"):
            numpy_dtype = sys.modules["numpy"].dtype  # pandas is imported, so numpy is
            width, others = 0, []
            for i, dtype in enumerate(value.dtypes):
                if isinstance(dtype, numpy_dtype):
                    width += dtype.itemsize
                else:
                    others.append(i)
            size = len(value) * width + int(value.index.memory_usage(deep=False))
            if others:
                size += int(value.iloc[:, others].memory_usage(index=False, deep=False).sum())
            return size
        usage = value.memory_usage(index=True, deep=False)
        return int(usage.sum() if hasattr(usage, "sum") else usage)
    except Exception:  # an Index of some kinds, an extension array
        return int(getattr(value, "nbytes", 0) or 0)


def _is_pandas(value: Any) -> bool:
    module, name = type(value).__module__ or "", type(value).__name__
    return (module == "pandas" or module.startswith("pandas.")) and (name in ("DataFrame", "Series") or "Index" in name)


def _own_size(value: Any) -> int | None:
    """The bytes an array-like object of another library says it holds (``nbytes``: torch, cupy, JAX, pyarrow,
    xarray; ``estimated_size()``: polars), or None."""
    if isinstance(value, type) or type(value).__module__ == "builtins":
        return None
    try:
        if "nbytes" in dir(type(value)):
            return int(value.nbytes)
        if callable(getattr(type(value), "estimated_size", None)):
            return int(value.estimated_size())
    except Exception:
        return None
    return None


def _opaque(value: Any) -> bool:
    """An object the size walk cannot see into: of a type from no module known here, with no attributes or slots
    (numpy's scalars and the standard library's types are known)."""
    module = (type(value).__module__ or "").split(".")[0]
    return module not in _KNOWN_MODULES and not _is_pandas(value)


#: modules whose objects without attributes are plain values (their size is what sys.getsizeof says)
_KNOWN_MODULES = frozenset({"builtins", "numpy", "array", "collections", "datetime", "decimal", "enum", "functools"})


def _immutable(value: Any, depth: int = 0) -> bool:
    if isinstance(value, _IMMUTABLE):
        return True
    if isinstance(value, (tuple, frozenset)) and depth < 4 and len(value) <= 10_000:
        return all(_immutable(v, depth + 1) for v in value)
    return False


#: the immutable types met most, checked by one lookup (the others by :func:`_immutable`)
_SCALARS = frozenset({int, float, complex, bool, str, bytes, type(None)})


def _flat(value: Any) -> bool:
    """A container whose items (and, for a dict, keys) are all immutable: a one-level copy keeps it whole."""
    parts: list[Iterable[Any]] = [value.keys(), value.values()] if isinstance(value, dict) else [value]
    scalars = _SCALARS
    for part in parts:
        for v in part:
            if type(v) not in scalars and not _immutable(v):
                return False
    return True


def _flat_size(value: Any) -> int:
    """The bytes a one-level copy of a container of immutable items takes: its own table (the items are shared)."""
    return sys.getsizeof(value)


def _copy_flat(value: Any) -> Any:
    if isinstance(value, collections.defaultdict):
        return collections.defaultdict(value.default_factory, value)
    return copy.copy(value)


def _cheap_memo(value: Any) -> dict[int, Any]:
    """A deep copy's memo given the cheap copies of the pandas objects inside ``value`` (copy-on-write) and the
    memory-mapped arrays as themselves."""
    cow = _copy_on_write_available()
    if not cow and "numpy" not in sys.modules:
        return {}
    memo: dict[int, Any] = {}
    stack = [value]
    seen: set[int] = set()
    while stack and len(seen) < WALK_LIMIT:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if _is_pandas(v):
            if cow:
                memo[id(v)] = v.copy(deep=False)
        elif memory_map(v):  # the file's array comes back as itself, not a detached copy
            memo[id(v)] = v
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset, collections.deque)):
            stack.extend(v)
    return memo


def _copy_on_write_available() -> bool:
    if "pandas" not in sys.modules:
        return False
    return _copy_on_write()


def _kind(value: Any) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _over(size: int, budget: int, *, unknown: bool = False) -> str:
    mb = budget / 1_000_000
    if unknown:
        return f"too big to measure within Shiro.undo_max_mb ({mb:,.0f} MB)"
    return f"{size / 1_000_000:,.0f} MB, over Shiro.undo_max_mb ({mb:,.0f} MB)"


__all__ = [
    "Absent",
    "Kept",
    "NotKept",
    "Saved",
    "is_ndarray",
    "keep",
    "memory_map",
    "size_of",
    "slot_values",
    "uncopyable",
]
