"""What a step left (undo/left.py), and what undo's checkpoints hold (issue 39 §3): a trace tells a value still as
the step left it from one the user changed, for every kind undo keeps; a memory-mapped array, an object the size walk
cannot see into, and ``__slots__`` are sized and named as they are; one object under two names is kept once."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shiro_kernel.undo.journal import Journal
from shiro_kernel.undo.left import Gone, file_print, trace
from shiro_kernel.undo.names import touched
from shiro_kernel.undo.snapshot import Kept, NotKept, keep, size_of


class Slotted:
    __slots__ = ("data", "label")

    def __init__(self, data, label):
        self.data, self.label = data, label


class Plain:
    def __init__(self):
        self.items = [1, 2]
        self.fn = lambda x: x  # pickle refuses it: the walk tells the contents


def _changes():
    """(make the value, change it in place) for each kind a trace must tell."""
    return [
        (lambda: pd.DataFrame({"a": [1.0, 2.0]}), lambda v: v.loc.__setitem__((0, "a"), 9.0)),
        (lambda: pd.DataFrame({"a": [1.0, 2.0]}), lambda v: v.__setitem__("b", 1)),
        (lambda: pd.DataFrame({"a": [1.0, 2.0]}), lambda v: setattr(v, "columns", ["z"])),
        (lambda: pd.Series([1, 2], name="s"), lambda v: v.__setitem__(0, 5)),
        (lambda: np.arange(6.0).reshape(2, 3), lambda v: v.__setitem__((1, 2), -1)),
        (lambda: np.arange(6.0)[::2], lambda v: v.__setitem__(0, 7)),  # not contiguous
        (lambda: np.array(["a", None], dtype=object), lambda v: v.__setitem__(1, "b")),
        (lambda: {i: i for i in range(1000)}, lambda v: v.__setitem__(5, -5)),
        (lambda: [[1], [2]], lambda v: v[1].append(3)),
        (lambda: {"frame": pd.DataFrame({"a": [1]})}, lambda v: v["frame"].loc.__setitem__((0, "a"), 2)),
        (lambda: {1, 2}, lambda v: v.add(3)),
        (lambda: Slotted([1], "x"), lambda v: v.data.append(2)),
        (Plain, lambda v: v.items.append(3)),
    ]


@pytest.mark.parametrize(("make", "change"), _changes())
def test_a_trace_tells_a_value_left_alone_from_one_changed_in_place(make, change):
    value = make()
    left = trace(value)
    assert left.matches(value)
    change(value)
    assert not left.matches(value)


def test_a_frame_restored_as_an_equal_copy_counts_as_left_alone():
    """After another undo a name holds the checkpoint's copy: equal contents are the step's own."""
    df = pd.DataFrame({"a": [1.0, 2.0], "s": ["x", "y"]})
    left = trace(df)
    assert left.matches(df.copy(deep=True)) and left.matches(df.copy(deep=False))
    assert not left.matches(df.astype({"a": "float32"})) and not left.matches(df.rename(columns={"a": "b"}))


def test_rebinding_deleting_and_making_again_are_told():
    ns = {"x": [1], "r": 42}
    left_x, left_r = trace(ns["x"]), trace(ns["r"])
    assert left_x.still(ns, "x") and left_r.still(ns, "r")
    ns["r"] = "USER"
    del ns["x"]
    assert not left_r.still(ns, "r") and not left_x.still(ns, "x")
    assert Gone().still(ns, "x") and not Gone().still(ns, "r")


def test_a_files_print_follows_its_bytes(tmp_path: Path):
    path = tmp_path / "f.txt"
    assert file_print(path) is None
    path.write_text("a")
    first = file_print(path)
    path.write_text("a")
    assert file_print(path) == first
    path.write_text("ab")
    assert file_print(path) != first


def test_a_memory_mapped_array_is_named_not_copied(tmp_path: Path):
    mapped = np.memmap(tmp_path / "big.dat", dtype="float64", mode="w+", shape=(1_000_000,))
    for value in (mapped, mapped[10:20], np.load(_saved(tmp_path), mmap_mode="r")):
        kept = keep(value, 10**10)
        assert isinstance(kept, NotKept) and "a memory-mapped array (np.memmap" in kept.why
    inside = keep({"m": mapped, "n": [1]}, 10**10)  # inside a container: kept as itself, not a detached copy
    assert isinstance(inside, Kept) and inside.value["m"] is mapped and inside.nbytes < 10_000


def _saved(tmp_path: Path) -> Path:
    path = tmp_path / "arr.npy"
    np.save(path, np.zeros(1000))
    return path


def test_every_ndarray_subclass_is_sized_by_its_bytes_and_slots_are_walked():
    masked = np.ma.masked_array(np.zeros(500_000), mask=False)  # 4 MB of data, + the mask
    assert size_of(masked, 10**10) >= 4_000_000
    kept = keep(masked, 3_000_000)
    assert isinstance(kept, NotKept) and "over Shiro.undo_max_mb" in kept.why
    slotted = Slotted(np.zeros(500_000), "x")  # its 4 MB only behind a slot
    assert size_of(slotted, 10**10) >= 4_000_000
    assert isinstance(keep(slotted, 3_000_000), NotKept)
    copied = keep(slotted, 10**10)
    assert isinstance(copied, Kept) and copied.value.data is not slotted.data and copied.nbytes >= 4_000_000


def test_an_object_the_size_walk_cannot_see_into_is_named():
    compressor = zlib.compressobj()
    kept = keep({"c": compressor}, 10**10)
    assert isinstance(kept, NotKept) and "zlib.Compress inside it: what it holds cannot be measured" in kept.why


class Tensorish:
    """An array-like of another library: no attributes the walk sees, but it says what it holds."""

    __slots__ = ()
    nbytes = 4_000_000


def test_an_object_that_says_its_size_is_sized_by_it():
    assert size_of([Tensorish()], 10**10) >= 4_000_000
    assert isinstance(keep([Tensorish()], 3_000_000), NotKept)


def test_one_object_under_two_names_is_kept_once_and_comes_back_as_one():
    arr = np.zeros(250_000)  # 2 MB
    ns = {"a": arr, "b": arr, "same": arr, "_": arr}
    journal = Journal(lambda: 1024)
    step = journal.names("t", "c", "python", touched("a += 1\nb += 1"), ns)
    assert set(step.names) == {"a", "b", "same"}  # same = a: changed in place with it; IPython's _ left alone
    assert step.nbytes == arr.nbytes
    arr += 1
    journal.leave(step, ns)
    report = journal.take_back(journal.last_turn(), ns)
    assert report.restored == ["a", "b", "same"] and ns["a"] is ns["b"] is ns["same"]
    assert ns["a"].sum() == 0 and ns["_"] is arr
