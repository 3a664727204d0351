"""binder/demo.ipynb, as a new user opens it: recorded turns, no key, no session record. Rerun top to bottom in
a fresh kernel (trusted, as ./scripts/run.sh trusts it), its ``%shiro`` cells replay without a model and the
cell after them works; untrusted, they say how to allow it and run nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
from kernelutil import outputs_text
from nbclient import NotebookClient
from nbformat.sign import NotebookNotary

BINDER = Path(__file__).resolve().parents[1] / "binder"


def rerun(path: Path, env: dict[str, str], *, tell: bool = True) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(path.parent)}}
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SHIRO_REPLAY", "JPY_SESSION_NAME"))}
    client.execute(env={**base, **env, **({"JPY_SESSION_NAME": str(path)} if tell else {})})
    return nb


def copy_demo(tmp_path: Path) -> Path:
    for name in ("demo.ipynb", "cafe_sales.csv"):
        shutil.copy(BINDER / name, tmp_path / name)
    return tmp_path / "demo.ipynb"


def test_the_demo_replays_without_a_key_once_trusted(tmp_path):
    path = copy_demo(tmp_path)
    data = tmp_path / "jupyter-data"
    data.mkdir()
    NotebookNotary(data_dir=str(data)).sign(nbformat.read(path, as_version=4))
    nb = rerun(path, {"SHIRO_HOME": str(tmp_path / "home"), "JUPYTER_DATA_DIR": str(data)})
    asked, plotted, after = (outputs_text(nb.cells[i]) for i in (2, 3, 4))
    assert "replayed 1 python call of this turn without the model (from the turn saved in this notebook)" in asked
    assert "**Coffee** grew the most" in asked
    assert "replayed 1 python call" in plotted and "image/png" in str(nb.cells[3].outputs)
    assert after.splitlines()[:2] == ["product", "coffee    0.131"]
    assert "No API key" not in asked + plotted


def test_the_demo_untrusted_runs_none_of_its_code(tmp_path):
    path = copy_demo(tmp_path)
    nb = rerun(path, {"SHIRO_HOME": str(tmp_path / "home"), "JUPYTER_DATA_DIR": str(tmp_path / "empty")})
    asked = outputs_text(nb.cells[2])
    assert asked.startswith("not replayed: this cell's turn (1 python call) is saved in the notebook's output")
    assert [(o.get("ename"), o.get("evalue")) for o in nb.cells[4].outputs] == [
        ("NameError", "name 'growth' is not defined")
    ]


def test_a_program_that_does_not_tell_the_kernel_its_notebook_hears_how(tmp_path):
    """nbconvert --execute and papermill do not say which file they run: the saved turns cannot be found, and
    with no model to ask the cell says how to run it so that they replay, before the missing key."""
    from shiro_kernel.rerun.turn_line import NOT_TOLD

    path = copy_demo(tmp_path)
    data = tmp_path / "jupyter-data"
    data.mkdir()
    NotebookNotary(data_dir=str(data)).sign(nbformat.read(path, as_version=4))
    env = {"SHIRO_HOME": str(tmp_path / "home"), "JUPYTER_DATA_DIR": str(data)}
    nb = rerun(path, env, tell=False)
    asked = outputs_text(nb.cells[2])
    assert asked.index(NOT_TOLD) < asked.index("No API key")
    # a model to ask: the turn goes to it, and nothing is said of replaying
    nb = rerun(path, {**env, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, tell=False)
    assert NOT_TOLD not in outputs_text(nb.cells[2])


def test_a_turn_no_model_answered_is_not_replayed_by_the_next_run(tmp_path):
    """The newcomer's second ``nbconvert --execute`` of the demo (no key, no file told): the first run's turns got no
    answer, so they are not in the session as turns to replay — the cell says again how to run it, never "replayed"
    over nothing (and the cell after it never finds the variables missing without being told why)."""
    from shiro_kernel.rerun.turn_line import NOT_TOLD

    path = copy_demo(tmp_path)
    data = tmp_path / "jupyter-data"
    data.mkdir()
    NotebookNotary(data_dir=str(data)).sign(nbformat.read(path, as_version=4))
    env = {"SHIRO_HOME": str(tmp_path / "home"), "JUPYTER_DATA_DIR": str(data)}
    rerun(path, env, tell=False)
    again = outputs_text(rerun(path, env, tell=False).cells[2])
    assert "replayed" not in again and NOT_TOLD in again and "No API key" in again
