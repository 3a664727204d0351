"""Notebook tools: ``notebook_read`` on a real .ipynb written with nbformat, and ``propose_cell``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from shiro_kernel.tools import ToolContext, ToolError, all_tools, run_tool
from shiro_kernel.transcript import ToolCallPart


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell("# Analysis\nLoad the data."),
        v4.new_code_cell(
            "import pandas as pd\ndf = pd.read_csv('x.csv')\ndf.shape",
            execution_count=1,
            outputs=[
                v4.new_output("stream", name="stdout", text="loading...\n"),
                v4.new_output("execute_result", data={"text/plain": "(100, 3)"}, execution_count=1),
            ],
        ),
        v4.new_code_cell(
            "plot()",
            execution_count=2,
            outputs=[
                v4.new_output(
                    "display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 640x480>"}
                ),
                v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="}),
                v4.new_output("display_data", data={"text/html": "<b>hi</b>"}),
            ],
        ),
        v4.new_code_cell(
            "1 / 0",
            execution_count=3,
            outputs=[
                v4.new_output(
                    "error",
                    ename="ZeroDivisionError",
                    evalue="division by zero",
                    traceback=["\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"],
                ),
            ],
        ),
        v4.new_code_cell("print('x' * 10000)", outputs=[v4.new_output("stream", name="stdout", text="x" * 10000)]),
    ]
    path = tmp_path / "analysis.ipynb"
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def ctx(tmp_path: Path, notebook: Path) -> ToolContext:
    return ToolContext(root=tmp_path, notebook_path=notebook)


def read(ctx: ToolContext, cells=None) -> str:
    return all_tools()["notebook_read"].run({"cells": cells}, ctx)


def test_reads_every_cell_with_outputs_as_text(ctx):
    out = read(ctx)
    assert out.startswith("analysis.ipynb as saved on disk (5 cells; unsaved edits are not included):\n\n")
    assert "[0] markdown\n# Analysis\nLoad the data." in out
    assert (
        "[1] code (1)\nimport pandas as pd\ndf = pd.read_csv('x.csv')\ndf.shape\n--- outputs:\nloading...\n(100, 3)"
    ) in out
    assert "[2] code (2)\nplot()\n--- outputs:\n<Figure size 640x480>\n<image/png>\n<image/png>\n<text/html>" in out
    assert "[3] code (3)\n1 / 0\n--- outputs:\nZeroDivisionError: division by zero" in out
    assert "[4] code (not run)" in out
    assert "characters truncated" in out and out.count("x") < 2_500  # each output is cut


def test_reads_chosen_cells(ctx):
    out = read(ctx, [3, -1])
    assert "[3] code (3)" in out and "[4] code" in out and "[0]" not in out and "[1]" not in out
    assert read(ctx, []) == read(ctx)


def test_errors(ctx, tmp_path):
    with pytest.raises(ToolError, match=r"no cell 5, -6 in analysis.ipynb; it has 5 cells \(indices 0-4\)"):
        read(ctx, [0, 5, -6])
    with pytest.raises(ToolError, match="no notebook is known"):
        read(ToolContext(root=tmp_path))
    with pytest.raises(ToolError, match="does not exist on disk"):
        read(ToolContext(root=tmp_path, notebook_path=tmp_path / "unsaved.ipynb"))
    (tmp_path / "broken.ipynb").write_text("{not json")
    with pytest.raises(ToolError, match="could not read the notebook broken.ipynb"):
        read(ToolContext(root=tmp_path, notebook_path=tmp_path / "broken.ipynb"))


def test_empty_notebook(tmp_path):
    path = tmp_path / "empty.ipynb"
    nbformat.write(v4.new_notebook(), str(path))
    assert read(ToolContext(root=tmp_path, notebook_path=path)) == "empty.ipynb has no cells."


def test_nbformat_is_imported_lazily():
    code = "import sys\nimport shiro_kernel.tools as t\nt.all_tools()\nprint('nbformat' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


def test_propose_cell_calls_the_ui(tmp_path):
    proposed: list[str] = []
    ctx = ToolContext(root=tmp_path, propose=proposed.append)
    out = all_tools()["propose_cell"].run({"code": "df.describe()\ndf.head()"}, ctx)
    assert proposed == ["df.describe()\ndf.head()"]
    assert out.startswith("Proposed a new cell (2 lines) below the current one.")


def test_propose_cell_without_ui_returns_the_code(tmp_path):
    out = all_tools()["propose_cell"].run({"code": "x = 1"}, ToolContext(root=tmp_path))
    assert out.startswith("The cell could not be inserted") and "```python\nx = 1\n```" in out

    def broken(code: str) -> None:
        raise RuntimeError("frontend gone")

    out = all_tools()["propose_cell"].run({"code": "x = 2"}, ToolContext(root=tmp_path, propose=broken))
    assert "could not be inserted (RuntimeError: frontend gone)" in out and "x = 2" in out
    with pytest.raises(ToolError, match="code is empty"):
        all_tools()["propose_cell"].run({"code": " "}, ToolContext(root=tmp_path))


def test_through_the_registry(ctx):
    def call(name: str, arguments: str) -> str:
        return run_tool(all_tools(), ToolCallPart("c", name, arguments), ctx).output

    assert call("notebook_read", json.dumps({"cells": [0]})).endswith("[0] markdown\n# Analysis\nLoad the data.")
    assert call("notebook_read", "{}").startswith("analysis.ipynb as saved on disk")
    assert call("notebook_read", '{"cells": 1}').startswith("Error: argument 'cells' must be array")
    assert call("notebook_read", '{"cells": ["1"]}').startswith("Error: cells must be a list of cell indices")
    assert call("propose_cell", "{}").startswith("Error: missing required argument 'code'")
    assert call("notebook_write", "{}").startswith("Error: unknown tool 'notebook_write'")
