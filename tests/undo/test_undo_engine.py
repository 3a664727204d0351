"""The undo engine without a kernel: which names code touches, how values are kept, and taking steps back
(a namespace dict stands in for the kernel's; tests/undo/test_undo_kernel.py runs real kernels)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shiro_kernel.undo.journal import Journal
from shiro_kernel.undo.names import touched
from shiro_kernel.undo.snapshot import Kept, NotKept, keep


@pytest.mark.parametrize(
    ("code", "names"),
    [
        ("df.dropna(inplace=True)", {"df"}),
        ('df["c"] = df["a"] * 2', {"df"}),
        ("df.loc[0, 'a'] = 1", {"df"}),
        ('df["a"].fillna(0, inplace=True)', {"df"}),
        ("rows.append(3)", {"rows"}),
        ("arr *= 2", {"arr"}),
        ("np.add(a, b, out=c)", {"c", "np"}),
        ("np.random.shuffle(arr)", {"arr", "np"}),
        ("x, (y, z) = 1, (2, 3)", {"x", "y", "z"}),
        ("del old", {"old"}),
        ("import pandas as pd", {"pd"}),
        ("def f():\n    global q\n    q = 1\n    items.append(q)", {"f", "q", "items"}),
        ("for i in range(3):\n    lst[i] = i", {"i", "lst"}),
        ("obj.attr = 1", {"obj"}),
        ("with open(p) as fh:\n    text = fh.read()", {"fh", "text"}),
        ("helper(frame)", {"frame"}),  # a function of the user's may change what it is given
    ],
)
def test_the_names_code_may_change(code, names):
    assert touched(code).names == frozenset(names)


def test_reading_code_touches_nothing():
    assert touched("print(len(df)); df.head(); arr.mean(); sorted(rows)").names == frozenset()


@pytest.mark.parametrize(
    ("code", "why"), [("exec(s)", "exec()"), ("globals()['x'] = 1", "globals()"), ("x +=", "read")]
)
def test_what_may_change_names_unseen_is_said(code, why):
    assert why in touched(code).unseen


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # pandas 3.1 on dropna(inplace=True), as users write it
def test_pandas_is_kept_by_copy_on_write_and_stays_intact():
    df = pd.DataFrame({"a": [1.0, None, 3.0]})
    kept = keep(df, 10**9)
    assert (
        isinstance(kept, Kept) and kept.how == "shallow (copy-on-write)" and kept.nbytes == int(df.memory_usage().sum())
    )  # at most
    df.loc[0, "a"] = -1
    df.dropna(inplace=True)
    assert kept.value["a"].tolist()[0] == 1.0 and len(kept.value) == 3


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (sqlite3.connect(":memory:"), "sqlite3.Connection cannot be copied"),
        ((x for x in range(3)), "a generator"),
        (open(__file__), "an open file"),
        (pytest, "a module"),
    ],
)
def test_what_cannot_be_copied_is_named(value, why):
    kept = keep(value, 10**9)
    assert isinstance(kept, NotKept) and why in kept.why


def test_a_value_over_the_budget_is_named_with_its_size():
    kept = keep(np.zeros(2_000_000), 1_000_000)  # 16 MB against 1 MB
    assert isinstance(kept, NotKept) and "16 MB, over Shiro.undo_max_mb (1 MB)" in kept.why


@pytest.mark.filterwarnings("ignore:The inplace keyword")
def test_taking_back_restores_removes_and_names_what_it_cannot(tmp_path: Path):
    ns = {
        "df": pd.DataFrame({"a": [1.0, None, 3.0]}),
        "rows": [1, 2],
        "arr": np.arange(4.0),
        "conn": sqlite3.connect(":memory:"),
        "nested": {"k": [1, [2, 3]]},
    }
    before = {"df": ns["df"].copy(), "rows": [1, 2], "arr": np.arange(4.0), "nested": {"k": [1, [2, 3]]}}
    journal = Journal(lambda: 1024)
    code = (
        "df.dropna(inplace=True)\nrows.append(3)\narr *= 2\nnew = 5\nconn.execute('select 1')\nnested['k'][1].append(4)"
    )
    journal.names("t1", "c1", "python", touched(code), ns)
    exec(code, ns)
    report = journal.take_back(journal.last_turn(), ns)
    assert ns["df"].equals(before["df"]) and ns["rows"] == [1, 2] and (ns["arr"] == before["arr"]).all()
    assert ns["nested"] == before["nested"] and "new" not in ns
    assert report.restored == ["arr", "df", "nested", "rows"] and report.removed == ["new"]
    assert report.not_restored == ["conn (a sqlite3.Connection cannot be copied)"]
    assert "The user took back" in journal.note() and journal.note() == ""  # told once


def test_files_come_back_and_a_created_file_goes(tmp_path: Path):
    kept, made = tmp_path / "kept.csv", tmp_path / "made.csv"
    kept.write_text("old")
    journal = Journal(lambda: 1024)
    journal.files("t1", "c1", "write_file", [kept])
    kept.write_text("new")
    journal.files("t1", "c2", "write_file", [made])
    made.write_text("x")
    journal.files("t1", "c3", "edit_file", [kept])
    kept.write_text("newer")
    report = journal.take_back(journal.last_turn(), {})
    assert kept.read_text() == "old" and not made.exists()
    assert sorted(report.files) == ["kept.csv restored", "made.csv removed (the steps made it)"]


def test_the_oldest_turn_is_dropped_to_stay_within_the_budget():
    journal = Journal(lambda: 10)  # 10 MB
    ns = {"a": np.zeros(1_000_000), "b": np.zeros(1_000_000)}  # 8 MB each
    journal.names("t1", "c1", "python", touched("a += 1"), ns)
    journal.names("t2", "c2", "python", touched("b += 1"), ns)
    assert [s.turn_id for s in journal.steps] == ["t2"]
    (said,) = journal.said()
    assert "older turn (1 steps, 8 MB) were dropped to stay within Shiro.undo_max_mb (10 MB)" in said


def test_a_step_and_those_after_it():
    journal = Journal(lambda: 1024)
    ns = {"x": 1}
    for n in range(1, 4):
        journal.names("t1", f"c{n}", "python", touched(f"x = {n + 1}"), ns)
        ns["x"] = n + 1
    steps = journal.since("c2")
    assert steps is not None and [s.call_id for s in steps] == ["c3", "c2"]
    journal.take_back(steps, ns)
    assert ns["x"] == 2 and journal.undoable() == ["c1"] and journal.since("c9") is None


def test_a_container_too_big_to_copy_in_time_is_named_before_the_step():
    rows = [[i] for i in range(600_000)]  # 600,000 lists: a deep copy would hold the step up for seconds
    kept = keep(rows, 10**10)
    assert isinstance(kept, NotKept) and "too many to copy before the step runs" in kept.why


def _every_kind_of_column() -> pd.DataFrame:
    df = pd.DataFrame(np.zeros((1000, 3)), columns=list("abc"))
    df["s"] = "x"  # pandas 3's string dtype
    df["o"] = pd.Series([object()] * 1000, dtype=object)
    df["c"] = pd.Categorical(["u", "v"] * 500)
    df["n"] = pd.array(range(1000), dtype="Int64")
    df["b"], df["i8"] = True, np.int8(1)
    df["t"], df["tz"] = pd.Timestamp("2026-01-01"), pd.Timestamp("2026-01-01", tz="UTC")
    return df


@pytest.mark.parametrize(
    "make",
    [
        _every_kind_of_column,
        lambda: _every_kind_of_column().set_index(["s", "c"]),
        lambda: pd.DataFrame(np.zeros((10, 2000))),
        lambda: pd.DataFrame({"a": [1, 2]}, index=["x", "y"]),
        pd.DataFrame,
        lambda: _every_kind_of_column()["s"],
    ],
)
def test_a_pandas_object_counts_what_its_memory_usage_says(make):
    """Counted without building memory_usage's Series over every column, and to the byte what it says."""
    value = make()
    kept = keep(value, 10**9)
    usage = value.memory_usage(index=True, deep=False)  # a Series per column for a frame, an int for a Series
    assert isinstance(kept, Kept) and kept.nbytes == int(getattr(usage, "sum", lambda: usage)())


def test_a_wide_numeric_frame_is_counted_without_memory_usage(monkeypatch):
    """memory_usage builds a Series over every column (83 ms for 10,000 columns, at each checkpoint): a frame of
    numpy columns is counted from its dtypes alone."""
    wide = pd.DataFrame(np.zeros((10, 5000)))
    expected = int(wide.memory_usage(index=True, deep=False).sum())

    def refuse(*args, **kwargs):
        raise AssertionError("memory_usage over every column")

    monkeypatch.setattr(pd.DataFrame, "memory_usage", refuse)
    kept = keep(wide, 10**9)
    assert isinstance(kept, Kept) and kept.nbytes == expected
