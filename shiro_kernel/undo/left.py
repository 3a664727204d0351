"""What a step left, recorded right after it ran, so that undo can tell whether the user changed it since:
:func:`trace` of a value, :meth:`Trace.still` against what a name holds at undo time, :func:`file_print` of a file.

Undo restores a name or file only while it is still as the step left it; anything the user changed after the step
(a column added, a value rebound, a variable deleted, a file appended to) is kept and named. The record must cost
little after every step, since most steps are never undone; the comparison, made only at undo, may cost more:

* **immutable values** (numbers, strings, tuples of them, functions, classes) are held: equal or the same object;
* **pandas objects** are held by a copy-on-write shallow copy (about nothing): while the user does not write, the
  name's object still shares every block with it; any write gives the written block a copy of its own, which the
  comparison sees (and then asks ``equals``, so a value restored by another undo still counts as unchanged). Without
  copy-on-write (pandas 2 by default) the data is hashed;
* **numpy arrays** are hashed (CRC-32 of their bytes: about what the checkpoint's copy costs);
* **containers and objects** are hashed as pickle serialises them (C speed: 60 ms for a million-item dict; arrays
  inside handed over as out-of-band buffers and hashed where they lie, never copied into the stream); what pickle
  refuses (a lambda, a lock inside) by a bounded walk of its contents (items, attributes, slots), with the pandas
  objects inside held as above; a walk past :data:`~.snapshot.WALK_LIMIT` objects records only which object it was.
"""

from __future__ import annotations

import collections
import hashlib
import pickle
import sys
import types
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .snapshot import WALK_LIMIT, _immutable, _is_pandas, is_ndarray, slot_values


@dataclass(frozen=True)
class Gone:
    """The step left no such name (it deleted it, or never made it)."""

    def still(self, ns: Mapping[str, Any], name: str) -> bool:
        return name not in ns


@dataclass
class Trace:
    """A value as the step left it: the object, and what tells its contents (see the module)."""

    ident: int
    kind: str
    #: held as it was: an immutable value, or a pandas object's copy-on-write copy
    held: Any = None
    #: the hash of its contents (None when held, or when the walk was too long to tell)
    digest: bytes | None = None
    #: pandas objects met inside a container, held so that a write to one gives it a block of its own
    inside: list[Any] = field(default_factory=list)

    def still(self, ns: Mapping[str, Any], name: str) -> bool:
        """Whether ``ns[name]`` is still what the step left."""
        if name not in ns:
            return False
        return self.matches(ns[name])

    def matches(self, value: Any) -> bool:
        if self.kind == "immutable":
            return value is self.held or _equal(value, self.held)
        if self.kind == "pandas-held":
            return type(value) is type(self.held) and (
                _same_blocks(value, self.held) or _pandas_equal(value, self.held)
            )
        if self.digest is None:  # too much to tell: only which object it was
            return id(value) == self.ident
        return _digest(value, []) == self.digest


Left = Trace | Gone


def trace(value: Any) -> Trace:
    """What tells ``value`` as it is now (see the module)."""
    if _immutable(value):
        return Trace(id(value), "immutable", held=value)
    if isinstance(value, types.ModuleType):  # its state is not ours: which module it is
        return Trace(id(value), "object")
    if _is_pandas(value) and _copy_on_write():
        return Trace(id(value), "pandas-held", held=value.copy(deep=False))
    inside: list[Any] = []
    return Trace(id(value), "digest", digest=_digest(value, inside), inside=inside)


def file_print(path: Path) -> bytes | None:
    """The file's contents as a hash (None: there is no such file); a file that cannot be read counts as absent."""
    try:
        if not path.is_file():
            return None
        digest = hashlib.blake2b(digest_size=16)
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.digest()
    except OSError:
        return None


def _digest(value: Any, inside: list[Any]) -> bytes | None:
    """A hash of ``value``'s contents (see the module); None when it cannot be told. ``inside`` gets the
    copy-on-write copies of the pandas objects a walk met."""
    if is_ndarray(value) and not value.dtype.hasobject:
        return _array_hash(value)
    try:
        return _pickled(value)
    except Exception:  # pickle refuses it (a lambda, a lock, a local class inside): walked instead
        return _walked(value, inside)


def _pickled(value: Any) -> bytes:
    """The hash of ``value`` as pickle serialises it, its contiguous buffers (numpy's data) hashed out of band."""
    h = hashlib.blake2b(digest_size=16)

    def buffer(view: pickle.PickleBuffer) -> None:
        h.update(b"%08x" % zlib.crc32(view.raw()))  # None: kept out of the stream, never copied into it

    h.update(pickle.dumps(value, protocol=5, buffer_callback=buffer))
    return h.digest()


def _walked(value: Any, inside: list[Any]) -> bytes | None:
    """A hash of ``value``'s contents, walked (cycles and shared objects by their first place); None past
    :data:`WALK_LIMIT` objects."""
    h = hashlib.blake2b(digest_size=16)
    seen: dict[int, int] = {}
    stack: list[Any] = [value]
    walked = 0
    cow = "pandas" in sys.modules and _copy_on_write()
    while stack:
        v = stack.pop()
        if v is _OPEN or v is _CLOSE:
            h.update(v.tag)
            continue
        t = type(v)
        h.update(t.__qualname__.encode())
        if id(v) in seen:
            h.update(b"@%d" % seen[id(v)])
            continue
        walked += 1
        if walked > WALK_LIMIT:
            return None
        if t in (int, float, complex, bool, type(None)):
            h.update(repr(v).encode())
            continue
        if t is str:
            h.update(b"%d:" % len(v))
            h.update(v.encode("utf-8", "surrogatepass"))
            continue
        if t in (bytes, bytearray):
            h.update(b"%d:" % len(v))
            h.update(v)
            continue
        seen[id(v)] = walked
        if _is_pandas(v):
            if cow:
                inside.append(v.copy(deep=False))
                h.update(_block_key(v))
            else:
                h.update(_pandas_hash(v))
            continue
        if is_ndarray(v):
            h.update(_array_hash(v))
            continue
        children: list[Any]
        if isinstance(v, dict):
            children = [x for kv in v.items() for x in kv]
        elif isinstance(v, (list, tuple, collections.deque)):
            children = list(v)
        elif isinstance(v, (set, frozenset)):
            h.update(b"%d:" % len(v))
            h.update(b"".join(sorted(_walked(x, inside) or b"?" for x in v)))
            continue
        elif isinstance(v, types.ModuleType):  # its state is not ours: which module
            h.update(v.__name__.encode())
            continue
        elif _immutable(v):  # a function, a class, a range: what it is
            h.update(repr(v).encode(errors="replace"))
            continue
        else:
            state = getattr(v, "__dict__", None)
            children = [state] if isinstance(state, dict) else []
            children += [x for kv in slot_values(v) for x in kv]
            if not children:  # an object the walk cannot see into: which object it is
                h.update(b"#%d" % id(v))
        h.update(_OPEN.tag)
        stack.append(_CLOSE)
        stack.extend(reversed(children))
    return h.digest()


class _Mark:
    """A bracket in the walk's stream, so that nesting is part of the hash."""

    def __init__(self, tag: bytes) -> None:
        self.tag = tag


_OPEN, _CLOSE = _Mark(b"("), _Mark(b")")


def _equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _copy_on_write() -> bool:
    pandas = sys.modules.get("pandas")
    if pandas is None:
        return False
    if int(pandas.__version__.split(".")[0]) >= 3:
        return True
    return bool(getattr(pandas.options.mode, "copy_on_write", False) is True)


def _blocks(value: Any) -> list[tuple[Any, ...]] | None:
    """Where each of a pandas object's blocks keeps its data (pandas' block manager, read only); None when it
    cannot be read here."""
    try:
        out: list[tuple[Any, ...]] = []
        for block in value._mgr.blocks:
            data = block.values
            array = data if is_ndarray(data) else getattr(data, "_ndarray", None)  # a string or datetime array's
            if array is None:
                array = getattr(data, "_data", None)  # a nullable number's
            where = array.__array_interface__["data"][0] if array is not None and is_ndarray(array) else id(data)
            out.append((where, getattr(data, "shape", None), str(getattr(data, "dtype", ""))))
        return out
    except Exception:
        return None


def _block_key(value: Any) -> bytes:
    blocks = _blocks(value)
    index = getattr(value, "index", None)
    columns = getattr(value, "columns", None)
    key = (
        blocks if blocks is not None else id(value),
        id(index),
        tuple(map(repr, columns)) if columns is not None else (),
    )
    return repr(key).encode()


def _same_blocks(value: Any, held: Any) -> bool:
    """``value`` shares every block with ``held`` and has its axes: nothing was written since."""
    mine, theirs = _blocks(value), _blocks(held)
    if mine is None or mine != theirs:
        return False
    try:
        if not value.index.equals(held.index):
            return False
        columns = getattr(value, "columns", None)
        return columns is None or (bool(columns.equals(held.columns)) and list(columns) == list(held.columns))
    except Exception:
        return False


def _pandas_equal(value: Any, held: Any) -> bool:
    try:
        if hasattr(value, "columns") and list(value.columns) != list(held.columns):
            return False
        if getattr(value, "name", None) != getattr(held, "name", None):
            return False
        return bool(value.equals(held)) and bool(value.index.equals(held.index))
    except Exception:
        return False


def _pandas_hash(value: Any) -> bytes:
    pandas = sys.modules["pandas"]
    try:
        hashed = pandas.util.hash_pandas_object(value, index=True).to_numpy()
        extra = repr((list(getattr(value, "columns", [])), str(getattr(value, "dtypes", "")))).encode()
        return _array_hash(hashed) + extra
    except Exception:
        return b"#%d" % id(value)


def _array_hash(array: Any) -> bytes:
    """The array's shape, kind and a CRC-32 of its bytes (an array of objects: of its items' reprs)."""
    head = repr((type(array).__name__, array.shape, str(array.dtype))).encode()
    if array.dtype.hasobject:
        return head + hashlib.blake2b(repr(array.tolist()).encode(errors="replace"), digest_size=16).digest()
    data = array if array.flags.c_contiguous else array.copy(order="C")
    return head + b"%08x" % zlib.crc32(data.reshape(-1).view("u1"))


__all__ = ["Gone", "Left", "Trace", "file_print", "trace"]
