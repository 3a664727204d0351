"""The ``inspect`` tool against a real in-process IPython shell."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from shiro_kernel.tools import ToolContext, all_tools, run_tool
from shiro_kernel.tools.base import ToolOutput
from shiro_kernel.transcript import ToolCallPart


@pytest.fixture
def shell(plain_shell):
    return plain_shell


@pytest.fixture
def ctx(shell, tmp_path):
    return ToolContext(root=tmp_path, shell=shell)


def inspect(ctx: ToolContext, names=None) -> str:
    out = all_tools()["inspect"].run({"names": names}, ctx)
    return out.text if isinstance(out, ToolOutput) else out  # the summaries (its meta is the ledger's)


def test_all_user_variables_skip_modules_functions_classes_and_ipython_names(ctx, shell):
    shell.run_cell(
        "import os\nimport json as j\ndef helper(): pass\nclass Thing: pass\n"
        "count = 3\nname = 'shiro'\n_private = 1\n1 + 1",
        store_history=True,
    )
    out = inspect(ctx)
    listed = [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")]
    assert listed == ["count", "name"]
    assert "count: int\n  3" in out
    assert "name: str, len 5\n  'shiro'" in out


def test_nothing_defined(ctx):
    assert inspect(ctx).startswith("No user variables are defined yet")


def test_dataframe_shape_dtypes_head(ctx, shell):
    shell.user_ns["df"] = pd.DataFrame({"a": range(100), "b": [f"s{i}" for i in range(100)], "c": 1.5})
    out = inspect(ctx, ["df"])
    assert out.startswith("df: pandas.DataFrame, shape 100 rows x 3 columns")
    dtypes = f"dtypes: a: int64, b: {shell.user_ns['df'].dtypes['b']}, c: float64"  # object or str (pandas 3)
    assert dtypes in out
    assert "head(5):" in out
    head_rows = [line.split()[0] for line in out.splitlines()[3:]]
    assert head_rows == ["a", "0", "1", "2", "3", "4"]


def test_series_and_ndarray(ctx, shell):
    shell.user_ns["s"] = pd.Series([1.0, 2.0, 3.0] * 10, name="price")
    shell.user_ns["arr"] = np.arange(1000).reshape(100, 10)
    out = inspect(ctx, ["s", "arr"])
    assert "s: pandas.Series, length 30, dtype float64, name 'price'" in out
    assert "arr: numpy.ndarray, shape (100, 10), dtype int64" in out
    assert "..." in out and len(out) < 1500  # a few values, not all 1000


def test_long_repr_is_cut_and_broken_repr_survives(ctx, shell):
    class Broken:
        def __repr__(self):
            raise RuntimeError("no repr")

    shell.user_ns["big"] = list(range(10_000))
    shell.user_ns["broken"] = Broken()
    out = inspect(ctx, ["big", "broken"])
    big = out.split("broken:")[0]
    assert "big: list, len 10000" in big and len(big) < 420
    assert "<repr failed: RuntimeError: no repr>" in out


def test_missing_names_and_dotted_attributes(ctx, shell):
    shell.user_ns["df"] = pd.DataFrame({"x": [1, 2]})
    out = inspect(ctx, ["nope", "df.columns", "df.nothing"])
    assert "nope: not found ('nope' is not defined)" in out
    assert "df.columns: pandas.Index" in out
    assert "df.nothing: not found (DataFrame has no attribute 'nothing')" in out


def test_many_variables_are_capped(ctx, shell):
    for i in range(80):
        shell.user_ns[f"v{i:02d}"] = i
    out = inspect(ctx)
    assert "v59: int" in out and "v60: int" not in out
    assert "20 more variables not shown" in out


def test_does_not_import_pandas_or_numpy():
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\nimport sys\n"
        "from shiro_kernel.tools import ToolContext, all_tools\n"
        "sh = InteractiveShell.instance()\nsh.user_ns['x'] = [1, 2]\n"
        "out = all_tools()['inspect'].run({'names': None}, ToolContext(root='.', shell=sh))\n"
        "assert 'x: list' in out, out\n"
        "print('pandas' in sys.modules, 'numpy' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False False", result.stderr


def test_through_the_registry(ctx):
    def call(arguments: str) -> str:
        return run_tool(all_tools(), ToolCallPart("c", "inspect", arguments), ctx).output

    assert call(json.dumps({"names": None})).startswith("No user variables")
    assert call("{}").startswith("No user variables")
    assert call('{"names": "df"}').startswith("Error: argument 'names' must be array")
    assert call('{"names": [1]}').startswith("Error: names must be a list of variable names")
    assert run_tool(all_tools(), ToolCallPart("c", "inspect", "{}"), ToolContext(root=ctx.root)).output.startswith(
        "Error: no IPython shell"
    )


def test_a_repr_that_blocks_is_named_and_the_others_are_still_shown(ctx, shell, monkeypatch):
    import threading

    from shiro_kernel.tools import inspect_tool

    monkeypatch.setattr(inspect_tool, "ANSWER_S", 0.3)
    release = threading.Event()

    class Stuck:
        def __repr__(self) -> str:
            release.wait(30)
            return "Stuck()"

    shell.user_ns["stuck"] = Stuck()
    shell.user_ns["n"] = 41
    try:
        text = inspect(ctx, ["stuck", "n"])
    finally:
        release.set()
    assert "stuck: its repr did not answer within 0.3 s" in text
    assert "n: int" in text and "41" in text
