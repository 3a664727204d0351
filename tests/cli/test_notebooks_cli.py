"""``shiro export`` and ``shiro check`` as commands: registration, options, usage errors, and how export
splits cells, finds code in this machine's session record, and keeps older notebooks' format."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

from shiro_kernel import cli
from shiro_kernel.session import Session
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "replay"))
from replayutil import bundle, code_cell, notebook, turn_output, write


def _turn(prompt: str, code: str, answer: str) -> list[Message]:
    return [
        Message.user(prompt),
        Message("assistant", [ToolCallPart("call_a1", "python", json.dumps({"code": code}))]),
        Message("tool", [ToolResultPart("call_a1", "python", "(no output)")]),
        Message("assistant", [TextPart(answer)]),
    ]


def test_the_commands_are_listed(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    listed = " ".join(capsys.readouterr().out.split())  # as argparse wraps it for this terminal, unwrapped
    assert (
        " export write a plain notebook that runs without shiro_kernel (each %shiro turn as Markdown and its code)"
        " check run the notebook in a fresh kernel, replaying its %shiro turns, and report cells that fail or differ"
        " options: "
    ) in listed
    with pytest.raises(SystemExit) as exit_code:
        cli.main(["check"])  # NOTEBOOK is required: argparse's usage error
    assert exit_code.value.code == 2


def test_export_splits_a_cell_around_its_shiro_line(tmp_path, capsys):
    data = bundle(_turn("add one", "y = x + 1", "Added."), prompt="add one", cell_id="mixed")
    body = bundle(_turn("two lines\nof prompt", "z = 3", "Made z."), prompt="two lines\nof prompt", cell_id="whole")
    path = write(
        tmp_path / "n.ipynb",
        notebook(
            [
                code_cell("x = 1\n%shiro --wait add one\nprint(y)", [turn_output(data)], cell_id="mixed"),
                code_cell("%%shiro two lines\nof prompt", [turn_output(body)], cell_id="whole"),
                code_cell("%shiro --new"),
            ]
        ),
    )
    out = tmp_path / "plain.ipynb"
    assert cli.main(["export", str(path), "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"wrote {out}: 2 shiro turns as Markdown and 2 code cells, 1 shiro line removed"
    )
    nb = nbformat.read(out, as_version=4)
    assert [(c.cell_type, c.source) for c in nb.cells] == [
        ("code", "x = 1"),
        ("markdown", "> **%shiro** add one\n\nAdded."),
        ("code", "y = x + 1"),
        ("code", "print(y)"),
        ("markdown", "> **%%shiro**\n> two lines\n> of prompt\n\nMade z."),
        ("code", "z = 3"),
    ]
    assert nb.cells[0].id == "mixed" and nb.cells[4].id == "whole"
    assert all(c.get("outputs", []) == [] for c in nb.cells if c.cell_type == "code")
    assert json.loads(path.read_text())["cells"][0]["outputs"]  # the notebook itself is untouched


def test_export_takes_an_older_turn_s_code_from_this_machine_s_record(tmp_path, capsys):
    messages = _turn("make it", "made = 'from the record'", "Made.")
    session = Session(notebook_path=str(tmp_path / "old.ipynb"), messages=messages)
    SessionStore().save(session)
    old = {
        k: v
        for k, v in bundle(messages, prompt="make it", session_id=session.id).items()
        if k not in ("replay", "turnId")
    }
    lost = {
        k: v
        for k, v in bundle(_turn("lost", "q = 1", "?"), prompt="lost", session_id="0193-gone").items()
        if k != "replay"
    }
    nb = notebook([code_cell("%shiro make it", [turn_output(old)]), code_cell("%shiro lost", [turn_output(lost)])])
    nb["nbformat_minor"] = 4
    for cell in nb["cells"]:
        del cell["id"]
    path = write(tmp_path / "old.ipynb", nb)
    assert cli.main(["export", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("2 shiro turns as Markdown and 1 code cell, 0 shiro lines removed")
    assert lines[1] == (
        "cell 2: The code of this turn could not be recovered: its output holds no replay information (saved by an "
        "older version, or cleared) and its session record is not on this machine."
    )
    plain = json.loads((tmp_path / "old.export.ipynb").read_text())
    assert plain["nbformat_minor"] == 4 and all("id" not in c for c in plain["cells"])  # its format kept
    sources = ["".join(c["source"]) for c in plain["cells"]]
    assert sources[1] == "made = 'from the record'" and "could not be recovered" in sources[2]
    nbformat.validate(nbformat.reads(json.dumps(plain), as_version=4))


def test_export_refuses_to_overwrite_the_notebook(tmp_path, capsys):
    path = write(tmp_path / "n.ipynb", notebook([code_cell("x = 1")]))
    assert cli.main(["export", str(path), "-o", str(path)]) == 2
    assert "would overwrite" in capsys.readouterr().err
    (tmp_path / "bad.ipynb").write_text("{not json")
    assert cli.main(["export", str(tmp_path / "bad.ipynb")]) == 2
    assert "it is not valid JSON" in capsys.readouterr().err
