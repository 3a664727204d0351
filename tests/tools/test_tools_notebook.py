"""Notebook tools: ``notebook_read`` on a real .ipynb written with nbformat, and ``propose_cell``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
from fakeopenai import Call, Reply
from kernelutil import NOTEBOOK_KEY, outputs_text, run_notebook, tool_output
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


def _without_ids(path: Path) -> None:
    """Rewrite ``path`` as an nbformat 4.5 notebook whose cells have no ids (as older tools saved them)."""
    nb = json.loads(path.read_text())
    nb["nbformat"], nb["nbformat_minor"] = 4, 5
    for cell in nb["cells"]:
        cell.pop("id", None)
    path.write_text(json.dumps(nb))


FIRST_CALL = """
import json, sys, time
from pathlib import Path
from shiro_kernel.tools import ToolContext, all_tools, run_tool
from shiro_kernel.transcript import ToolCallPart
path = Path(sys.argv[1])
tools, ctx = all_tools(), ToolContext(root=path.parent, notebook_path=path)
started = time.perf_counter()
part = run_tool(tools, ToolCallPart("c", "notebook_read", "{}"), ctx)
seconds = time.perf_counter() - started
loaded = sorted(m for m in ("nbformat", "jsonschema", "fastjsonschema") if m in sys.modules)
print(json.dumps({"seconds": seconds, "loaded": loaded, "output": part.output}))
"""


def test_the_first_read_is_plain_json_and_warns_nothing(tmp_path):
    """The first ``notebook_read`` of a process paid for nbformat's validator (~2 s for 30 cells) and printed
    its ``MissingIDFieldWarning`` into the user's cell; it reads JSON now (issue 29, point 8)."""
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_code_cell(f"x{i} = {i}\nx{i}", execution_count=i, outputs=[v4.new_output("stream", text=f"{i}\n")])
        for i in range(30)
    ]
    path = tmp_path / "thirty.ipynb"
    nbformat.write(nb, str(path))
    _without_ids(path)
    result = subprocess.run(
        [sys.executable, "-c", FIRST_CALL, str(path)], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stderr == ""  # no nbformat warning on the way to the cell
    report = json.loads(result.stdout)
    assert report["loaded"] == []
    assert report["output"].startswith("thirty.ipynb as saved on disk (30 cells;")
    assert "[29] code (29)\nx29 = 29\nx29\n--- outputs:\n29" in report["output"]
    assert report["seconds"] < 0.5  # ~3 ms; nbformat.read took ~2 s


def test_a_notebook_without_cell_ids_reads_the_same_and_warns_nothing(ctx, notebook, tmp_path):
    before = read(ctx)
    _without_ids(notebook)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read(ctx) == before
    assert [str(w.message) for w in caught] == []


def test_an_old_format_notebook_is_converted(tmp_path):
    from nbformat import v3
    from nbformat.v3 import nbjson

    cells = [
        v3.new_text_cell("markdown", source="# Old"),
        v3.new_code_cell(input="x = 1\nx", prompt_number=1, outputs=[v3.new_output("pyout", output_text="1")]),
    ]
    path = tmp_path / "old.ipynb"
    path.write_text(nbjson.writes(v3.new_notebook(worksheets=[v3.new_worksheet(cells=cells)])))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = read(ToolContext(root=tmp_path, notebook_path=path))
    assert out == (
        "old.ipynb as saved on disk (2 cells; unsaved edits are not included):\n\n"
        "[0] markdown\n# Old\n\n[1] code (1)\nx = 1\nx\n--- outputs:\n1"
    )
    assert caught == []


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "it is not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
        ("[1, 2]", "it is not a notebook (a JSON list, not an object)"),
        ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [3]}', "its cell 0 is not a JSON object"),
        ('{"nbformat": 3}', "nbformat cannot read it"),
        (b"\xff\xfe{", "it is not UTF-8 text"),
    ],
)
def test_a_corrupt_notebook_is_a_clear_error(tmp_path, content, why):
    path = tmp_path / "broken.ipynb"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    part = run_tool(
        all_tools(), ToolCallPart("c", "notebook_read", "{}"), ToolContext(root=tmp_path, notebook_path=path)
    )
    assert part.is_error and part.output.startswith(f"Error: could not read the notebook broken.ipynb: {why}")


def test_outputs_that_are_not_objects_are_skipped(tmp_path):
    path = tmp_path / "odd.ipynb"
    cell = {"cell_type": "code", "source": "x", "execution_count": 1, "metadata": {}}
    odd = [{**cell, "outputs": [7, {"output_type": "stream", "text": "ok\n"}]}, {**cell, "outputs": {"a": 1}}]
    odd.append({**cell, "outputs": [{"output_type": "display_data", "data": ["image/png"]}]})
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": odd}))
    out = all_tools()["notebook_read"].run(
        {"cells": None, "images": True}, ToolContext(root=tmp_path, notebook_path=path)
    )
    assert "[0] code (1)\nx\n--- outputs:\nok\n\n[1] code (1)\nx\n\n[2] code (1)\nx\n--- outputs:\n" in out
    assert out.endswith("(no image outputs in these cells)")


def test_no_nbformat_warning_reaches_the_turns_cell(fake_openai, tmp_path):
    """In a real kernel: a notebook saved without cell ids, a turn that reads it; the cell shows the answer
    and nothing of nbformat."""
    fake_openai.enqueue(
        Reply(tool_calls=[Call("notebook_read", {"cells": None, "images": None})]), Reply(text="Read it.")
    )
    strip = (
        "import json, os\npath = os.environ['JPY_SESSION_NAME']\nnb = json.load(open(path))\n"
        "[cell.pop('id', None) for cell in nb['cells']]\njson.dump(nb, open(path, 'w'))"
    )
    env = {"OPENAI_API_KEY": NOTEBOOK_KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"}
    nb = run_notebook(tmp_path / "old.ipynb", ["%load_ext shiro_kernel", strip, "%shiro --wait read it"], env)
    (shown,) = nb.cells[2].outputs  # the turn's display, and no stream (a warning) beside it
    assert shown["output_type"] == "display_data", outputs_text(nb.cells[2])
    tool_row, answer, _footer = shown["data"]["text/plain"].split("\n\n")
    assert re.fullmatch(r"✓ notebook_read\(\) · ok · [\d.]+ m?s", tool_row), tool_row
    assert answer == "Read it."
    assert tool_output(fake_openai.requests[1]).startswith("old.ipynb as saved on disk (3 cells;")
