"""Undo in real kernels (issue 35): a turn's steps taken back — a frame dropped in place, a reassignment, a new
column, new names, a list append, a numpy in-place operation, a file overwritten and one created — with what
cannot be restored named; after a restart, ``/undo`` says the checkpoints are gone; headless (nbclient) it works
for the kernel and the files; the model is told. An outside check in the spirit of DSEval's namespace-intact
validator: after ``/undo`` every variable the user had compares equal to what it was, and no name the turn made
remains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import record
from kernelutil import Kernel, outputs_text, run_notebook

SETUP = """
import json, sqlite3, numpy as np, pandas as pd
df = pd.DataFrame({"a": [1.0, None, 3.0], "b": [4, 5, 6]})
prices = pd.Series([1.5, 2.5])
rows = [1, 2]
arr = np.arange(4.0)
conn = sqlite3.connect(":memory:")
plain = "unchanged"
"""
#: the turn's one python step: everything the issue lists, and a connection it cannot keep
STEP = """
df.dropna(inplace=True)
df["c"] = df["a"] * 2
prices = prices * 10
rows.append(3)
arr *= 2
made = "by the turn"
conn.execute("create table t (x)")
"""
#: a fingerprint of every user variable, to compare before and after (DSEval's namespace-intact check)
FINGERPRINT = """
import hashlib as _h, types as _t
def _fp(v):
    if isinstance(v, (pd.DataFrame, pd.Series)):
        return "pd:" + _h.sha256(pd.util.hash_pandas_object(v, index=True).values.tobytes()).hexdigest() + str(list(getattr(v, "columns", [])))
    if isinstance(v, np.ndarray):
        return "np:" + _h.sha256(v.tobytes()).hexdigest()
    if isinstance(v, (list, dict, str, int, float, tuple)):
        return "py:" + repr(v)
    return "obj:" + type(v).__name__
print(json.dumps({k: _fp(v) for k, v in globals().items() if not k.startswith("_") and k not in ("In", "Out", "exit", "quit", "get_ipython") and not isinstance(v, _t.ModuleType) and not callable(v)}, sort_keys=True))
"""


def fingerprint(kernel: Kernel) -> dict[str, str]:
    out = kernel.run(FINGERPRINT)
    return json.loads(out.strip().splitlines()[-1])


def script(fake: Any, tmp: Path) -> None:
    (tmp / "data.csv").write_text("old contents\n")
    fake.enqueue(
        Reply(tool_calls=[Call("python", {"code": STEP})]),
        Reply(tool_calls=[Call("write_file", {"path": "data.csv", "content": "new contents\n"})]),
        Reply(tool_calls=[Call("write_file", {"path": "made.csv", "content": "x\n"})]),
        Reply(text="cleaned the frame, scaled the prices, and wrote the files"),
    )


@pytest.fixture
def kernel(fake_openai, tmp_path: Path):
    env = {
        "OPENAI_API_KEY": "sk-test-undo",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_NO_WARMUP": "1",
        "JPY_SESSION_NAME": str(tmp_path / "undo.ipynb"),
    }
    k = Kernel(env, cwd=str(tmp_path))
    k.run('%load_ext shiro_kernel\n%config Shiro.approval = "auto"')
    yield k
    k.close()


def test_a_turns_steps_are_taken_back_and_the_model_is_told(kernel, fake_openai, tmp_path):
    kernel.run(SETUP)
    before = fingerprint(kernel)
    script(fake_openai, tmp_path)
    kernel.run("%shiro clean the frame and write the files", timeout=120)
    changed = fingerprint(kernel)
    assert changed["df"] != before["df"] and changed["rows"] != before["rows"] and "made" in changed
    assert (tmp_path / "data.csv").read_text() == "new contents\n" and (tmp_path / "made.csv").exists()

    report = kernel.run("%shiro /undo")
    assert "undid 3 steps, newest first" in report
    assert "restored: arr, df, prices, rows" in report and "removed (the steps made them): made" in report
    assert "data.csv restored" in report and "made.csv removed (the steps made it)" in report
    assert "could not restore: conn (a sqlite3.Connection cannot be copied)" in report

    after = fingerprint(kernel)
    # DSEval's namespace-intact check: every variable as it was, no name the turn made
    assert {k: v for k, v in after.items() if k != "conn"} == {k: v for k, v in before.items() if k != "conn"}
    assert set(after) == set(before)
    assert (tmp_path / "data.csv").read_text() == "old contents\n" and not (tmp_path / "made.csv").exists()

    fake_openai.enqueue(Reply(text="noted"))
    kernel.run("%shiro what is df now?", timeout=120)
    state = json.dumps(fake_openai.requests[-1].body["input"][-1])
    assert "The user took back some of your earlier steps with undo" in state and "restored: arr, df" in state
    record(
        "undo of a turn in a real kernel: an in-place dropna, a new column, a reassignment, a list append, a numpy "
        "in-place operation, a new name, a file overwritten and one created",
        8,
        0,
        "all 8 restored or removed; every variable the user had compares equal after (DSEval-style check); the "
        "connection named as not restorable; the model told at its next request",
    )


def test_a_step_and_those_after_it(kernel, fake_openai, tmp_path):
    kernel.run("x = 1")
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "x = 2"}, call_id="call_first")]),
        Reply(tool_calls=[Call("python", {"code": "x = 3\ny = 1"}, call_id="call_second")]),
        Reply(text="done"),
    )
    kernel.run("%shiro step by step", timeout=120)
    listed = json.loads(kernel.run("%shiro /undoable").strip().splitlines()[-1])
    assert listed == {"calls": ["call_first", "call_second"]}
    report = kernel.run("%shiro /undo call_second")
    assert "undid 1 step" in report and "removed (the steps made them): y" in report
    assert kernel.run("print(x, 'y' in dir())").strip().splitlines()[-1] == "2 False"
    assert "undid 1 step" in kernel.run("%shiro /undo call_first")
    assert kernel.run("print(x)").strip().splitlines()[-1] == "1"


def test_a_frame_over_the_cap_is_named_not_kept(kernel, fake_openai, tmp_path):
    kernel.run(
        "%config Shiro.undo_max_mb = 1\nimport numpy as np, pandas as pd\nbig = pd.DataFrame(np.zeros((300_000, 8)))"
    )
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "big.loc[0, 0] = 7"})]), Reply(text="done"))
    kernel.run("%shiro change it", timeout=120)
    report = kernel.run("%shiro /undo")
    assert "could not restore: big (19 MB, over Shiro.undo_max_mb (1 MB))" in report
    assert kernel.run("print(big.loc[0, 0])").strip().splitlines()[-1] == "7.0"  # as the step left it: said so


def test_undo_after_a_restart_says_the_checkpoints_are_gone(fake_openai, tmp_path):
    env = {
        "OPENAI_API_KEY": "sk-test-undo",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_NO_WARMUP": "1",
        "JPY_SESSION_NAME": str(tmp_path / "undo.ipynb"),
    }
    first = Kernel(env, cwd=str(tmp_path))
    try:
        first.run('%load_ext shiro_kernel\n%config Shiro.approval = "auto"\nx = 1')
        fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "x = 2"})]), Reply(text="done"))
        first.run("%shiro change x", timeout=120)
    finally:
        first.close()
    again = Kernel(env, cwd=str(tmp_path))
    try:
        out = again.run("%load_ext shiro_kernel\n%shiro /undo")
    finally:
        again.close()
    assert "nothing to undo in this kernel: undo checkpoints live in the kernel's memory only" in out


def test_undo_headless_under_nbclient(fake_openai, tmp_path):
    (tmp_path / "data.csv").write_text("old\n")
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "rows.append(3)\nnew = 1"})]),
        Reply(tool_calls=[Call("write_file", {"path": "data.csv", "content": "new\n"})]),
        Reply(text="done"),
    )
    cells = [
        '%load_ext shiro_kernel\n%config Shiro.approval = "auto"\nrows = [1, 2]',
        "%shiro change things",
        "%shiro /undo",
        "print(rows, 'new' in dir(), open('data.csv').read().strip())",
    ]
    env = {"OPENAI_API_KEY": "sk-test-undo", "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"}
    nb = run_notebook(tmp_path / "headless.ipynb", cells, env)
    assert "undid 2 steps" in outputs_text(nb.cells[2])
    assert outputs_text(nb.cells[3]).strip() == "[1, 2] False old"
