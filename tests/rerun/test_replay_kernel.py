"""Real kernels (nbclient): ``shiro export`` gives a notebook that runs without shiro_kernel and gives the same
values; ``shiro check`` passes a reproducible notebook and flags hidden state; ``%shiro`` cells replay from the
notebook in a fresh kernel (the stand-in magic drives the real engine) and an untrusted notebook's saved code
does not run."""

from __future__ import annotations

import json

import nbformat
import pytest
from replayutil import (
    bundle,
    call,
    code_cell,
    execute,
    kernel_env,
    notebook,
    png,
    result,
    texts,
    turn,
    turn_output,
    write,
)

from shiro_kernel import cli
from shiro_kernel.rerun.check import check_notebook

CSV = "month,amount\n1,10\n1,20\n2,40\n3,5\n"
PNG = png(2, 3)
LONG = 'notes = """' + "x" * 5000 + '"""\nnotes_len = len(notes)'
PLOT = 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nax = monthly.plot(title="monthly")'
RAISED = (
    "Traceback (most recent call last):\n"
    '  File "<shiro-python-2>", line 1, in <module>\n'
    "    monthly.plott()\n"
    "AttributeError: 'Series' object has no attribute 'plott'"
)
ANSWER = "Month 2 is the **largest**. <script>alert(1)</script>"


def ok(cid, code, output="(no output)"):
    return call(cid, "python", code=code), result(cid, "python", output)


def monthly_turn(prompt="make monthly totals"):
    messages = turn(
        prompt,
        [
            ok("c1", 'monthly = sales.groupby("month").amount.sum()'),
            (call("c2", "inspect", names=["monthly"]), result("c2", "inspect", "monthly: Series")),
            ok("c3", "monthly.plott()", RAISED),
            ok("c4", LONG),
            ok("c5", PLOT, "[figure: line chart 'monthly']"),
            (call("c6", "write_file", path="report.md", content="# report"), result("c6", "write_file", "wrote")),
        ],
        ANSWER,
    )
    data = bundle(messages, prompt=prompt, cell_id="turn-cell", turn_id="t-monthly")
    for entry in data["entries"]:
        if entry.get("callId") == "c5":
            entry["outputs"] = [{"data": {"image/png": PNG, "text/plain": "<Figure size 640x480>"}, "metadata": {}}]
    return data


def test_export_runs_without_shiro_kernel_and_gives_the_same_values(tmp_path, capsys):
    (tmp_path / "sales.csv").write_text(CSV)
    source = write(
        tmp_path / "analysis.ipynb",
        notebook(
            [
                {"cell_type": "markdown", "metadata": {}, "source": "# Sales"},
                code_cell("%load_ext shiro_kernel"),
                code_cell('import pandas as pd\n%config Shiro.approval = "auto"\nsales = pd.read_csv("sales.csv")'),
                code_cell("%shiro /todos", [{"output_type": "stream", "name": "stdout", "text": "no tasks\n"}]),
                code_cell("%shiro make monthly totals", [turn_output(monthly_turn())], cell_id="turn-cell"),
                code_cell(
                    "print(monthly.to_dict(), notes_len)",
                    [{"output_type": "stream", "name": "stdout", "text": "{1: 30, 2: 40, 3: 5} 5000\n"}],
                ),
            ]
        ),
    )
    assert cli.main(["export", str(source)]) == 0
    out = tmp_path / "analysis.export.ipynb"
    assert capsys.readouterr().out.startswith(
        f"wrote {out}: 1 shiro turn as Markdown and 3 code cells, 3 shiro lines removed"
    )
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    kinds = [(c.cell_type, c.source.splitlines()[0] if c.source else "") for c in nb.cells]
    assert kinds == [
        ("markdown", "# Sales"),
        ("code", "import pandas as pd"),
        ("markdown", "> **%shiro** make monthly totals"),
        ("code", 'monthly = sales.groupby("month").amount.sum()'),
        ("code", 'notes = """' + "x" * 5000 + '"""'),  # the code in full: the row's copy stops at 4,000
        ("code", "import matplotlib"),
        (
            "markdown",
            "*Here shiro's `write_file` call (`report.md`) changed something outside the kernel; the export does not redo it.*",
        ),
        ("code", "print(monthly.to_dict(), notes_len)"),
    ]
    assert "%config" not in nb.cells[1].source and nb.cells[1].source.endswith('sales = pd.read_csv("sales.csv")')
    assert "Month 2 is the **largest**." in nb.cells[2].source and "<script>" not in nb.cells[2].source
    assert nb.cells[2].id == "turn-cell" and len({c.id for c in nb.cells}) == len(nb.cells)
    assert nb.cells[5].outputs[0]["data"]["image/png"] == PNG  # what the call displayed, under its code
    assert nb.cells[7].outputs[0]["text"] == "{1: 30, 2: 40, 3: 5} 5000\n"  # other cells as they were
    assert "shiro_kernel" not in json.dumps([c.source for c in nb.cells])
    # it runs in a kernel where shiro_kernel is never loaded, and gives the same values
    nb.cells.append(nbformat.v4.new_code_cell("import sys\nprint('shiro_kernel' in sys.modules)"))
    nbformat.write(nb, out)
    ran = execute(out, kernel_env())
    assert texts(ran.cells[7]) == "{1: 30, 2: 40, 3: 5} 5000\n"
    assert texts(ran.cells[8]) == "False\n"
    assert not [o for c in ran.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]


def _plain(tmp_path, sources):
    (tmp_path / "sales.csv").write_text(CSV)
    path = write(tmp_path / "plain.ipynb", notebook([code_cell(s) for s in sources]))
    execute(path, kernel_env())
    return path


REPRODUCIBLE = [
    "import pandas as pd\nsales = pd.read_csv('sales.csv')",
    "sales.amount.sum()",
    "print(sales.shape)",
    "sales",  # a DataFrame: compared by its text
    "import matplotlib.pyplot as plt\nsales.plot(x='month', y='amount');",  # a figure: by its size
    "import time\nt0 = time.perf_counter()\nprint(f'took {time.perf_counter() - t0:.6f} s', object())",
]


def test_check_passes_a_reproducible_notebook(tmp_path, capsys):
    path = _plain(tmp_path, REPRODUCIBLE)
    saved = nbformat.read(path, as_version=4)
    assert "image/png" in saved.cells[4].outputs[-1]["data"]
    assert cli.main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plain.ipynb reproduces: 6 code cells ran top to bottom in a fresh kernel")
    assert nbformat.read(path, as_version=4) == saved  # the notebook on disk is never written


def test_check_flags_a_changed_result(tmp_path):
    path = _plain(tmp_path, REPRODUCIBLE)
    (tmp_path / "sales.csv").write_text(CSV + "4,1\n")
    result = check_notebook(path)
    lines = [p.line() for p in result.problems]
    assert lines[0] == 'cell 2: output 1 differs: saved "np.int64(75)", now "np.int64(76)"'
    assert lines[1] == 'cell 3: output 1 differs: saved "(4, 2)", now "(5, 2)"'
    assert lines[2].startswith("cell 4: output 1 differs: saved ")
    assert len(lines) == 3 and not result.ok  # the figure keeps its size; the timing line is the same


def test_check_flags_a_variable_no_cell_defines(tmp_path, capsys):
    path = _plain(
        tmp_path,
        [
            "import pandas as pd\nsales = pd.read_csv('sales.csv')",
            "clean = sales[sales.amount > 5]",
            "clean.amount.sum()",
        ],
    )
    nb = json.loads(path.read_text())
    del nb["cells"][1]  # the cell that made `clean` is gone; its result is still saved in the next one
    path.write_text(json.dumps(nb))
    assert cli.main(["check", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "plain.ipynb does not reproduce: 1 of 2 code cells fail or differ in a fresh kernel",
        "cell 2: NameError: name 'clean' is not defined — no cell before it defines clean (hidden state)",
    ]


def test_check_flags_an_out_of_order_dependency(tmp_path):
    nb = notebook(
        [
            code_cell(
                "total = base + 1\ntotal",
                [{"output_type": "execute_result", "execution_count": 2, "data": {"text/plain": "42"}, "metadata": {}}],
            ),
            code_cell("base = 41", [], cell_id="later"),
        ]
    )
    nb["cells"][1]["execution_count"] = 1
    path = write(tmp_path / "order.ipynb", nb)
    result = check_notebook(path)
    assert [p.line() for p in result.problems] == [
        "cell 1: NameError: name 'base' is not defined — base is defined only by cell 2, which runs after it "
        "(out-of-order dependency)"
    ]
    assert result.to_json()["problems"] == [{"cell": 1, "kind": "failed", "reason": result.problems[0].reason}]


def _shiro_notebook(tmp_path, data):
    (tmp_path / "sales.csv").write_text(CSV)
    return write(
        tmp_path / "turns.ipynb",
        notebook(
            [
                code_cell("%load_ext standin_shiro"),
                code_cell("import pandas as pd\nsales = pd.read_csv('sales.csv')"),
                code_cell("%shiro make monthly totals", [turn_output(data)], cell_id="turn-cell"),
                code_cell("print(monthly.to_dict(), notes_len)"),
            ]
        ),
    )


def test_shiro_cells_replay_in_a_fresh_kernel_and_check_compares_their_calls(tmp_path):
    path = _shiro_notebook(tmp_path, monthly_turn())
    ran = execute(path, kernel_env(SHIRO_REPLAY="notebook"))  # Run All in CI, then saved
    assert texts(ran.cells[3]) == "{1: 30, 2: 40, 3: 5} 5000\n"
    replayed = ran.cells[2].outputs[-1]["data"]["application/vnd.shiro.turn+json"]
    rows = [(e["callId"], e["status"]) for e in replayed["entries"] if e["type"] == "tool"]
    assert rows == [("c1", "ok"), ("c4", "ok"), ("c5", "ok")]  # the plot drew: c5 displayed an image
    assert [
        o["data"].keys() >= {"image/png"} for e in replayed["entries"] if e.get("callId") == "c5" for o in e["outputs"]
    ] == [True]
    notice = [e["text"] for e in replayed["entries"] if e["type"] == "notice"][0]
    assert notice == (
        "replayed 3 python calls of this turn without the model (from the turn saved in this notebook); skipped 1 "
        "call that failed when recorded; stopped before call 6 (write_file report.md): it changed files when "
        "recorded, and a replay does not redo that; %shiro --again make monthly totals asks the model instead"
    )
    assert replayed["turnId"] == "t-monthly" and replayed["replay"] == monthly_turn()["replay"]  # replayable again
    env = kernel_env()
    assert check_notebook(path, env=env).ok
    (tmp_path / "sales.csv").write_text(CSV.replace("2,40", "2,41"))
    lines = [p.line() for p in check_notebook(path, env=env).problems]
    assert lines == [
        'cell 3: shiro turn: replayed call 3\'s output differs: saved "…3.1, y from 3.25 to 41.75, 1 series]", '
        'now "…3.1, y from 3.2 to 42.8, 1 series]"',  # the figure's description for the model: its data moved
        'cell 4: output 1 differs: saved "{1: 30, 2: 40, 3: 5} 5000", now "{1: 30, 2: 41, 3: 5} 5000"',
    ]


def test_an_untrusted_notebook_s_saved_code_does_not_run_in_a_kernel(tmp_path):
    data_dir = tmp_path / "jupyter-data"
    data_dir.mkdir()
    messages = turn("tidy up", [ok("c1", "open('pwned.txt', 'w').write('ran')\ncleaned = True")], "Tidied.")
    saved = bundle(messages, prompt="tidy up", turn_id="t-x")
    path = write(
        tmp_path / "sent.ipynb",
        notebook(
            [
                code_cell("%load_ext standin_shiro"),
                code_cell("%shiro tidy up", [turn_output(saved)]),
                code_cell("cleaned"),
            ]
        ),
    )
    ran = execute(path, kernel_env(JUPYTER_DATA_DIR=str(data_dir)), save=False, allow_errors=True)  # replay "auto"
    assert not (tmp_path / "pwned.txt").exists()
    assert texts(ran.cells[1]).startswith("not replayed: this cell's turn (1 python call) is saved in the notebook")
    assert "jupyter trust sent.ipynb" in texts(ran.cells[1])
    assert texts(ran.cells[2]) == "NameError: name 'cleaned' is not defined"
    # the same notebook in CI (SHIRO_REPLAY=notebook) replays it
    ran = execute(path, kernel_env(JUPYTER_DATA_DIR=str(data_dir), SHIRO_REPLAY="notebook"), save=False)
    assert (tmp_path / "pwned.txt").read_text() == "ran" and texts(ran.cells[2]) == "True"


@pytest.mark.parametrize("argv", [["check", "missing.ipynb"], ["export", "missing.ipynb"]])
def test_usage_errors_exit_2(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == "shiro: no notebook at missing.ipynb\n"
