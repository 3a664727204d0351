"""What the model can work on, told when a turn starts (:mod:`shiro_kernel.context.workspace`)."""

from __future__ import annotations

import pandas as pd

from shiro_kernel.context.workspace import CAP_CHARS, HEADER, block, first_step, named, named_files
from shiro_kernel.tools import ToolContext


class Blocking:
    def __repr__(self) -> str:  # never called: the block reads attributes, not reprs
        raise AssertionError("repr was called")


def test_a_file_the_prompt_names_is_told_with_its_columns(tmp_path):
    (tmp_path / "titanic.csv").write_text("PassengerId,Fare,Name\n1,7.25,Braund\n2,71.28,\n3,7.92,Heikkinen\n")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    ctx = ToolContext(root=tmp_path)
    text = block("What is the mean Fare in titanic.csv?", {}, ctx)
    assert text.startswith(HEADER)
    assert (
        'titanic.csv: 62 bytes, 3 rows × 3 columns: PassengerId (int), Fare (float), Name (text, some empty, e.g. "Braund")'
        in text
    )
    assert "7.25" not in text  # numbers are told by their kind, not shown
    assert "other.csv" not in text  # not named
    assert named_files("see data/x.csv", ctx) == []  # a path that is not there


def test_a_relative_path_under_the_root(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sales.tsv").write_text("region\tamount\nnorth\t3\n")
    text = block("plot data/sales.tsv", {}, ToolContext(root=tmp_path))
    assert "data/sales.tsv" in text and 'region (text, e.g. "north"), amount (int)' in text


def test_a_long_text_value_is_cut(tmp_path):
    (tmp_path / "ids.csv").write_text("id,n\n" + "x" * 100 + ",1\n")
    text = block("count ids.csv", {}, ToolContext(root=tmp_path))
    assert f'id (text, e.g. "{"x" * 23}…"), n (int)' in text


def test_a_path_outside_the_root_is_not_read(tmp_path):
    inside = tmp_path / "p"
    inside.mkdir()
    (tmp_path / "secret.csv").write_text("a,b\n1,2\n")
    assert block("look at ../secret.csv", {}, ToolContext(root=inside)) == ""


def test_data_variables_by_their_attributes(tmp_path):
    ns = {"df": pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}), "n": 3, "obj": Blocking(), "_hidden": 1, "pd": pd}
    text = block("hi", ns, ToolContext(root=tmp_path))
    assert "- df: DataFrame 2 rows × 2 columns: a (int64), b (" in text  # b's dtype: object, or str on pandas 3
    assert "- n: int = 3" in text and "- obj: test_workspace.Blocking" in text
    assert "_hidden" not in text and "- pd" not in text


def test_the_block_is_capped(tmp_path):
    ns = {f"v{i}": pd.DataFrame({f"column_{j}_with_a_long_name": [1] for j in range(60)}) for i in range(20)}
    assert len(block("hi", ns, ToolContext(root=tmp_path))) <= CAP_CHARS


def test_named_data(tmp_path):
    (tmp_path / "titanic.csv").write_text("a,b\n1,2\n")
    ns = {"df": pd.DataFrame({"a": [1]}), "dfx": pd.DataFrame({"a": [1]}), "n": 3}
    assert named("mean of df.a and titanic.csv and n", ns, ToolContext(root=tmp_path)) == ["titanic.csv", "`df`"]


def test_the_first_step_of_a_data_question_is_said_as_a_step():
    step = first_step(["titanic.csv", "`df`"])
    assert step.startswith("Your next reply is only a call to `python` that loads titanic.csv, `df` and prints")
    # the answer comes in the reply after the code's output, never beside the code
    assert "with no answer in it" in step and "you answer in the reply after it, from what it printed" in step
    # where the server's text calls are read, the step asks for the code as a ```python block, not a JSON call
    block = first_step(["titanic.csv"], code_blocks=True)
    assert block.startswith("Your next reply is only a ```python block that loads titanic.csv and prints")
    assert "with no answer in it" in block and "the reply after it" in block
    assert first_step([]) == "" and first_step([], code_blocks=True) == ""  # no data named: told nothing more


def test_a_column_name_with_a_stray_space_is_quoted(tmp_path):
    (tmp_path / "calls.csv").write_text("timestamp,avg. wait time \n1,2\n")
    assert "timestamp (int), 'avg. wait time ' (int)" in block("outliers in calls.csv", {}, ToolContext(root=tmp_path))
