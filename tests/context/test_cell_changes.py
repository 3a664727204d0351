"""Cell change detection: fingerprints of the notebook on disk, the change block, its bound, the
record round-trip, and the block reaching the model in a real kernel."""

from __future__ import annotations

import nbformat
import pytest
from fakeopenai import Reply
from kernelutil import run_notebook, state_of
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from shiro_kernel.context import cell_changes
from shiro_kernel.session import Session
from shiro_kernel.store.sessions import SessionStore, session_from_record, session_to_record
from shiro_kernel.transcript import Message

KEY = "sk-test-cells-0000"


def _write(path, sources, counts=None):
    nb = new_notebook(cells=[new_markdown_cell(s[3:]) if s.startswith("md:") else new_code_cell(s) for s in sources])
    for cell, count in zip(nb.cells, counts or []):
        if cell.cell_type == "code":
            cell.execution_count = count
    for n, cell in enumerate(nb.cells):
        cell.id = f"cell-{n}"
    nbformat.write(nb, path)
    return nb


def test_fingerprint_and_changes(tmp_path):
    path = tmp_path / "a.ipynb"
    nb = _write(
        path, ["import pandas as pd", "df = pd.read_csv('x.csv')", "md:# Notes", "%shiro --wait hi"], [1, 2, None, 3]
    )
    old = cell_changes.fingerprint(path)
    assert [r["key"] for r in old] == ["cell-0", "cell-1", "cell-2", "cell-3"]
    assert old[1]["head"] == "df = pd.read_csv('x.csv')" and old[1]["count"] == 2
    assert cell_changes.block(old, old) == ""

    nb.cells[1].source = "df = pd.read_csv('y.csv')\ndf.head()"
    nb.cells[0].execution_count = 7  # run outside the agent
    nb.cells[3].execution_count = 9  # the %shiro cell itself ran: not a change worth telling
    del nb.cells[2]
    extra = new_code_cell("df.plot()")
    extra.id = "cell-new"
    nb.cells.append(extra)
    nbformat.write(nb, path)
    assert cell_changes.block(old, cell_changes.fingerprint(path)) == "\n".join(
        [
            "Since your last turn the user changed the notebook:",
            "- ran cell 1 (execution count 7): import pandas as pd",
            "- edited cell 2: df = pd.read_csv('y.csv')",
            "- added cell 4: df.plot()",
            "- deleted cell 3 (as it was numbered then): # Notes",
        ]
    )


def test_cells_without_ids_are_keyed_by_index_and_unreadable_is_none(tmp_path):
    path = tmp_path / "b.ipynb"
    path.write_text(
        '{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": ['
        '{"cell_type": "code", "source": "a = 1", "metadata": {}, "outputs": [], "execution_count": 1}]}'
    )
    assert cell_changes.fingerprint(path)[0]["key"] == "#0"
    (tmp_path / "bad.ipynb").write_text("{not json")
    assert cell_changes.fingerprint(tmp_path / "bad.ipynb") is None
    assert cell_changes.fingerprint(tmp_path / "missing.ipynb") is None
    assert cell_changes.fingerprint(None) is None
    from nbformat import v3

    old = v3.new_notebook(worksheets=[v3.new_worksheet(cells=[v3.new_code_cell(input="b = 2", prompt_number=5)])])
    (tmp_path / "v3.ipynb").write_text(v3.writes_json(old))
    rows = cell_changes.fingerprint(tmp_path / "v3.ipynb")  # an old format goes through nbformat
    assert rows is not None and rows[0]["head"] == "b = 2" and rows[0]["count"] == 5


def test_a_v4_fingerprint_reads_plain_json(tmp_path):
    """On a turn's path (its start and its end) the notebook is read as JSON: nbformat, its validator and its
    warnings stay out of the kernel (a fresh process: nothing imported, nothing printed)."""
    import subprocess
    import sys

    path = tmp_path / "c.ipynb"
    path.write_text(
        '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ['
        '{"cell_type": "code", "source": "a = 1", "metadata": {}, "outputs": [], "execution_count": 1}]}'
    )
    code = (
        "import sys\nfrom shiro_kernel.context import cell_changes\nrows = cell_changes.fingerprint(sys.argv[1])\n"
        "print(rows[0]['key'], rows[0]['head'], 'nbformat' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert (result.stdout.split(), result.stderr) == (["#0", "a", "=", "1", "False"], "")


def test_block_is_bounded():
    old = [{"key": f"k{i}", "sha1": "a", "count": 1, "head": "x" * 90} for i in range(100)]
    new = [dict(r, sha1="b") for r in old]
    text = cell_changes.block(old, new)
    assert len(text) <= cell_changes.LIMIT
    assert text.startswith("Since your last turn the user changed the notebook:")
    assert text.splitlines()[-1].startswith("- … and ") and text.endswith(" more")


def test_cells_round_trip_through_the_record():
    session = Session(messages=[Message.user("hi")])
    session.cells = [{"key": "c1", "sha1": "ab", "count": 2, "head": "x = 1", "agent": False}]
    record = session_to_record(session, "gpt-4o-mini")
    assert record["cells"] == session.cells
    assert session_from_record(record).cells == session.cells
    assert "cells" not in session_to_record(Session(messages=[Message.user("hi")]), "m")
    record["cells"] = "junk"
    assert session_from_record(record).cells is None
    store = SessionStore()
    store.save(session, model="m")
    assert store.load(session.id).cells == session.cells


EDIT = """
import nbformat
import pytest
nb = nbformat.read({path!r}, as_version=4)
nb.cells[1].source = "x = 2  # changed by hand"
nb.cells.append(nbformat.v4.new_code_cell("plot(x)"))
nbformat.write(nb, {path!r})
"""


def test_an_edit_between_turns_reaches_the_next_request(fake_openai, tmp_path):
    fake_openai.enqueue(Reply(text="first"), Reply(text="second"))
    path = tmp_path / "c.ipynb"
    run_notebook(
        path,
        ["%load_ext shiro_kernel", "x = 1", "%shiro --wait first", EDIT.format(path=str(path)), "%shiro --wait second"],
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"},
    )
    assert len(fake_openai.requests) == 2
    assert "Since your last turn" not in state_of(fake_openai.requests[0])
    second = state_of(fake_openai.requests[1])  # told in the per-step state message, after the conversation
    assert (
        "Since your last turn the user changed the notebook:\n"
        "- edited cell 2: x = 2  # changed by hand\n"
        "- added cell 6: plot(x)"
    ) in second


def test_an_unchanged_notebook_is_read_once_and_a_changed_one_again(tmp_path, monkeypatch):
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1", execution_count=1)]), str(path))
    reads: list[object] = []
    real = cell_changes._read
    monkeypatch.setattr(cell_changes, "_read", lambda p: reads.append(p) or real(p))
    first = cell_changes.fingerprint(path)
    second = cell_changes.fingerprint(path)  # the end of the same turn: the file did not change
    assert first == second and len(reads) == 1
    second[0]["count"] = 99  # each call gets its own copy
    assert cell_changes.fingerprint(path)[0]["count"] == 1 and len(reads) == 1
    nbformat.write(new_notebook(cells=[new_code_cell("x = 2", execution_count=2)]), str(path))
    third = cell_changes.fingerprint(path)
    assert len(reads) == 2 and third[0]["count"] == 2 and third[0]["sha1"] != first[0]["sha1"]
    path.unlink()
    assert cell_changes.fingerprint(path) is None


def test_a_notebook_nested_too_deeply_is_one_sentence_not_a_traceback(tmp_path):
    from shiro_kernel.notebook.file import read_notebook

    path = tmp_path / "deep.ipynb"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply to be a notebook"):
        read_notebook(path)
