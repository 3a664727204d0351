"""The ``python`` tool in a real in-process IPython shell, and once inside a real kernel (nbclient)."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import time

import pytest

from shiro_kernel.tools import ToolContext, all_tools, run_tool
from shiro_kernel.tools.python_tool import OUTPUT_HEAD_CHARS, OUTPUT_TAIL_CHARS
from shiro_kernel.transcript import ToolCallPart


@pytest.fixture
def shell(plain_shell):
    plain_shell.user_ns["shared_value"] = 21
    return plain_shell


@pytest.fixture
def ctx(shell, tmp_path):
    return ToolContext(root=tmp_path, shell=shell)


def py(ctx: ToolContext, code: str) -> str:
    """The text the model reads (the images and displays are tested in test_tools_figures.py)."""
    out = all_tools()["python"].run({"code": code}, ctx)
    return out if isinstance(out, str) else out.text


def call(ctx: ToolContext, name: str, arguments: str):
    return run_tool(all_tools(), ToolCallPart("call_1", name, arguments), ctx)


def test_last_expression_value_uses_the_user_namespace(ctx, shell):
    assert py(ctx, "doubled = shared_value * 2\ndoubled") == "42"
    assert shell.user_ns["doubled"] == 42  # state persists in the user's namespace
    assert py(ctx, "doubled + 1") == "43"


def test_trailing_semicolon_hides_the_value(ctx):
    assert py(ctx, "shared_value + 1;  # quiet") == "(no output)"
    assert py(ctx, "'a;b'") == "'a;b'"


def test_value_is_formatted_like_the_notebook(ctx):
    out = py(ctx, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
    assert out.splitlines()[0].split() == ["a", "b"]
    assert out.splitlines()[1].split() == ["0", "1", "x"]


def test_numpy_scalars_read_as_plain_values(ctx):
    assert py(ctx, "import numpy as np\nnp.float64(2.0)") == "2.0"
    assert py(ctx, "import pandas as pd\npd.Series([1, 2, 3]).mean()") == "2.0"
    assert py(ctx, "np.int32(7), np.bool_(True)") == "(np.int32(7), np.True_)"  # only a bare scalar is unwrapped
    assert py(ctx, "np.array([1.5])") == "array([1.5])"


def test_stdout_stderr_and_value_in_order(ctx):
    out = py(ctx, "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n'the value'")
    assert out == "to stdout\nto stderr\n'the value'"


def test_display_data_is_captured_as_text(ctx, shell):
    saved_pub = shell.display_pub
    code = textwrap.dedent("""
        from IPython.display import display, Image
        display({'k': 1})
        class OnlyPng:
            def _repr_png_(self):
                return b'\\x89PNG fake'
            def __repr__(self):
                return ''
        display(OnlyPng(), include=['image/png'])
        print('after')
    """)
    out = py(ctx, code)
    assert out == "{'k': 1}\n<image/png>\nafter"
    assert shell.display_pub is saved_pub


def test_fd_level_output_is_captured(ctx):
    out = py(
        ctx,
        "import os, subprocess\nos.system('echo from-os-system')\n"
        "subprocess.run(['bash', '-c', 'echo from-child >&2'])\nNone",
    )
    assert "from-os-system" in out and "from-child" in out


def test_stream_fileno_and_buffer_work(ctx):
    out = py(
        ctx,
        "import subprocess, sys\nsubprocess.run(['echo', 'via-fileno'], stdout=sys.stdout)\n"
        "sys.stdout.buffer.write(b'raw-bytes\\n')\nsys.stderr.write('plain\\n')\nNone",
    )
    assert out.splitlines() == ["raw-bytes", "plain", "via-fileno"]  # fd-level output comes last


def test_input_is_refused_not_prompted(ctx):
    out = py(ctx, "name = input('Your name? ')")
    assert "RuntimeError: input() is not available in the python tool" in out
    import builtins

    assert builtins.input is not None and builtins.input.__name__ != "_no_input"


def test_top_level_await_explains_itself(ctx):
    out = py(ctx, "import asyncio\nawait asyncio.sleep(0)")
    where, error = out.split("\n")
    assert re.fullmatch(r'  File "<shiro-python-\d+>", line 2', where), out
    assert error == (
        "SyntaxError: 'await' outside function (the python tool runs code synchronously: top-level await is not "
        "supported; use propose_cell to give the user a cell to run)"
    )


def test_nothing_printed_is_no_output(ctx, capsys):
    assert py(ctx, "x = 1") == "(no output)"
    assert py(ctx, "None") == "(no output)"
    assert capsys.readouterr() == ("", "")  # nothing leaked to the real streams


def test_exception_traceback_is_short_and_user_only(ctx):
    code = "print('before')\ndef inner():\n    raise ValueError('bad value')\ndef outer():\n    inner()\nouter()\n"
    result = call(ctx, "python", json.dumps({"code": code}))
    assert not result.is_error  # the user's code failing is a result, not a tool error
    out = result.output
    assert out.startswith("before\nTraceback (most recent call last):")
    assert out.rstrip().endswith("ValueError: bad value")
    assert "raise ValueError('bad value')" in out  # source lines of the user's code are shown
    assert "IPython" not in out and "python_tool" not in out and "exec(" not in out
    assert len(out.splitlines()) < 15


def test_deep_recursion_keeps_only_the_innermost_frames(ctx):
    out = py(ctx, "def f(n):\n    return 1 / 0 if n == 0 else f(n - 1)\nf(50)")
    assert "ZeroDivisionError" in out
    assert out.count('File "<shiro-python-') <= 6
    assert "traceback shortened: 46 outer frame(s) not shown" in out


def test_exception_from_a_library_is_reported(ctx):
    out = py(ctx, "import json\njson.loads('{nope')")
    assert "JSONDecodeError" in out and "json.loads('{nope')" in out
    out = py(ctx, "import pandas as pd\npd.DataFrame({'a': [1]})['missing']")
    assert out.rstrip().endswith("KeyError: 'missing'") and "['missing']" in out
    cause = out.split("The above exception was the direct cause")[0]
    assert cause.count("  File ") == 1  # the exception it came from: only where it happened


def test_syntax_error_has_line_and_caret(ctx):
    out = py(ctx, "x = 1\ny = (2 +\n     3))\n")
    where, *shown = out.split("\n")  # no frames, no "Traceback": the code never ran
    assert re.fullmatch(r'  File "<shiro-python-\d+>", line 3', where), out
    assert shown == ["    3))", "      ^", "SyntaxError: unmatched ')'"]


def test_magics_and_shell_escapes(ctx, shell):
    out = py(ctx, "%time t = sum(range(10))\nlines = !echo hi there\nlines")
    assert "Wall time" in out
    assert "['hi there']" in out
    assert shell.user_ns["t"] == 45


def test_no_history_or_counter_bump(ctx, shell):
    shell.run_cell("a_cell_value = 1", store_history=True)
    count = shell.execution_count
    n_in, n_out = len(shell.user_ns["In"]), len(shell.user_ns["Out"])
    n_parsed = len(shell.history_manager.input_hist_parsed)
    py(ctx, "1 + 1")
    py(ctx, "print('x')")
    py(ctx, "raise RuntimeError('x')")
    assert shell.execution_count == count
    assert (len(shell.user_ns["In"]), len(shell.user_ns["Out"])) == (n_in, n_out)
    assert len(shell.history_manager.input_hist_parsed) == n_parsed


def test_keyboard_interrupt_propagates_and_streams_are_restored(ctx, shell):
    out_before, err_before, pub_before = sys.stdout, sys.stderr, shell.display_pub
    with pytest.raises(KeyboardInterrupt):
        py(ctx, "print('partial')\nraise KeyboardInterrupt")
    with pytest.raises(KeyboardInterrupt):  # through the registry too
        call(ctx, "python", json.dumps({"code": "raise KeyboardInterrupt"}))
    assert (sys.stdout, sys.stderr, shell.display_pub) == (out_before, err_before, pub_before)


def test_system_exit_is_reported_not_raised(ctx):
    out = py(ctx, "import sys\nsys.exit(3)")
    assert "SystemExit: 3" in out


def test_huge_output_is_truncated_with_a_note(ctx):
    out = py(ctx, "for i in range(200_000):\n    print('line', i)")
    assert "characters of output truncated" in out
    assert out.startswith("line 0\n") and out.rstrip().endswith("line 199999")
    assert len(out) < OUTPUT_HEAD_CHARS + OUTPUT_TAIL_CHARS + 200
    result = call(ctx, "python", json.dumps({"code": "print('y' * 100_000)"}))
    assert "truncated" in result.output and len(result.output) < 25_000


def test_errors_through_the_registry(ctx):
    assert call(ctx, "python", json.dumps({"code": ""})).output.startswith("Error: code is empty")
    assert call(ctx, "python", '{"code": 1}').output.startswith("Error: argument 'code' must be string")
    assert call(ctx, "python", '{"code": ').output.startswith("Error: arguments are not valid JSON")
    assert call(ctx, "pythn", '{"code": "1"}').output.startswith("Error: unknown tool 'pythn'")
    assert call(ctx, "python", '{"code": "1", "x": 2}').output.startswith("Error: unknown argument(s) x")
    no_shell = ToolContext(root=ctx.root)
    assert call(no_shell, "python", '{"code": "1"}').output.startswith("Error: no IPython shell")


# -- inside a real kernel --------------------------------------------------------------------------
KERNEL_CELL = """
import json
from pathlib import Path
from shiro_kernel.tools import ToolContext, all_tools, run_tool
from shiro_kernel.transcript import ToolCallPart
code = (
    "import sys, os\\n"
    "from IPython.display import display\\n"
    "print('printed-line')\\n"
    "print('stderr-line', file=sys.stderr)\\n"
    "display({'displayed': 1})\\n"
    "os.system('echo fd-line')\\n"
    "6 * 7"
)
ctx = ToolContext(root=Path.cwd(), shell=get_ipython())
before = (get_ipython().execution_count, len(In), len(Out))
result = run_tool(all_tools(), ToolCallPart("c1", "python", json.dumps({"code": code})), ctx)
after = (get_ipython().execution_count, len(In), len(Out))
print("MARKER " + json.dumps([result.output, before == after]))
"""


def test_inside_a_real_kernel_nothing_leaks(tmp_path, monkeypatch):
    import nbclient
    import nbformat

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(KERNEL_CELL), nbformat.v4.new_code_cell("print('second cell')")]
    started = time.monotonic()
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=60, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = nb.cells[0].outputs
    assert [o.get("name") for o in outputs] == ["stdout"], outputs  # one stream: the marker only
    text = outputs[0]["text"]
    assert text.startswith("MARKER ") and text.count("\n") == 1, text
    returned, unchanged = json.loads(text[len("MARKER ") :])
    assert returned.splitlines() == ["printed-line", "stderr-line", "{'displayed': 1}", "fd-line", "42"]
    assert unchanged  # the tool did not bump the execution counter nor touch In/Out
    assert nb.cells[1].outputs[0]["text"] == "second cell\n"
    assert [c.execution_count for c in nb.cells] == [1, 2]
    assert time.monotonic() - started < 30


def test_a_keyerror_on_a_column_names_the_closest_columns(ctx):
    setup = "import pandas as pd\ncalls = pd.DataFrame({'avg. wait time ': [1.0], 'Region': ['east']})\n"
    out = py(ctx, setup + "calls['avg. wait time'].mean()")
    assert out.endswith(
        "KeyError: 'avg. wait time'\nNote: no column 'avg. wait time'; the closest: calls['avg. wait time ']"
    )
    assert py(ctx, "calls['region']").endswith("the closest: calls['Region']")
    assert "Note:" not in py(ctx, "{'a': 1}['zzz']")  # no column near it: the traceback alone
    assert "Note:" not in py(ctx, "calls.loc[0, 'Region']; {}['Region']")  # a column: the KeyError is another's
