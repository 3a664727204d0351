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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rerun"))
from faultlog import record
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


# -- issue 33, points 10 and 12 ---------------------------------------------------------------------------
ESCAPES = {
    "window title": "\x1b]0;owned-title\x07",
    "clipboard write": "\x1b]52;c;ZWNobyBvd25lZA==\x07",
    "hyperlink": "\x1b]8;;https://attacker.example/\x1b\\click\x1b]8;;\x1b\\",
    "8-bit CSI colour": "\x9b31m",
    "8-bit OSC title": "\x9d0;owned\x9c",
}
OBEYED = ("\x1b", "\x07", "\x9b", "\x9c", "\x9d")  # what a terminal acts on, in any of the above


def test_check_prints_none_of_the_notebook_s_escape_sequences(tmp_path, capsys):
    """The notebook's file name, a saved output that differs now, and a failing cell's error all quote text
    anyone may have written: what ``shiro check`` prints (text and --json) carries no sequence a terminal
    obeys. A real kernel runs it."""
    hidden = "".join(ESCAPES.values())
    saved = [{"output_type": "stream", "name": "stdout", "text": f"total 4 {hidden}\n"}]
    cells = [
        code_cell("print('total 5')", saved),
        code_cell(f"raise ValueError({hidden!r})"),
    ]
    path = write(tmp_path / f"report{ESCAPES['window title']}.ipynb", notebook(cells))
    shown = []
    for argv in (["check", str(path)], ["check", "--json", str(path)]):
        assert cli.main(argv) == 1
        out = capsys.readouterr()
        shown.append(out.out + out.err)
    obeyed = sum(any(c in text for c in OBEYED) for text in shown)
    record(
        "security: terminal escape sequences in a notebook's name, saved output and error, printed by shiro check "
        "(text and --json)",
        len(ESCAPES) * 2,
        obeyed,
        "0 reach the terminal: each control character shows as U+FFFD",
    )
    assert obeyed == 0, shown
    assert "cell 1: output 1 differs: saved" in shown[0] and "cell 2: ValueError: " in shown[0]
    assert "cell 2: ValueError: \ufffd]0;owned-title\ufffd" in shown[0]
    assert json.loads(shown[1])["problems"][1]["reason"].startswith("ValueError: \x1b]0;owned-title\x07")  # escaped


def _nested(depth: int) -> str:
    """A notebook whose one cell's metadata nests ``depth`` objects deep, as text (no recursion to write it)."""
    return (
        '{"cells": [{"cell_type": "code", "execution_count": null, "id": "deep", "outputs": [], "source": "x = 1", '
        '"metadata": {"deep": ' + '{"a": ' * depth + "{}" + "}" * depth + '}}], "metadata": {}, "nbformat": 4, '
        '"nbformat_minor": 5}'
    )


@pytest.mark.parametrize("depth", [100_000, 500])
def test_a_deeply_nested_notebook_cannot_be_read_in_one_line(tmp_path, capsys, depth):
    """100,000 deep overflows the JSON parser; 500 deep parses, then would overflow the copy check makes and
    nbformat's checks in export. Either way: exit 2 and one line, no traceback, no kernel started."""
    path = tmp_path / "deep.ipynb"
    path.write_text(_nested(depth))
    said = []
    for command in ("export", "check"):
        assert cli.main([command, str(path)]) == 2
        said.append(capsys.readouterr().err)
    expected = f"shiro: cannot read {path}: it is nested too deeply to be a notebook (over 200 levels of JSON)\n"
    record(f"a notebook nested {depth:,} deep, given to shiro export and shiro check", 2, 0, "exit 2, one line each")
    assert said == [expected, expected]
    # as deep as real notebooks get (a figure's JSON), it exports
    path.write_text(_nested(150))
    assert cli.main(["export", str(path)]) == 0


def test_export_gives_an_invalid_cell_id_a_new_one_as_a_missing_one(tmp_path, capsys):
    data = bundle(_turn("add one", "y = x + 1", "Added."), prompt="add one", cell_id="bad id!")
    cells = [
        code_cell("x = 1", cell_id="good-id_1"),
        code_cell("print(x)", cell_id="bad id!"),
        code_cell("x = 2", cell_id="a" * 65),
        code_cell("%shiro add one", [turn_output(data)], cell_id="bad id!"),
        code_cell("x = 3"),
    ]
    nb = notebook(cells)
    nb["cells"][4]["id"] = 7
    del nb["cells"][0]["id"]
    nb["cells"][0]["id"] = "good-id_1"
    path = write(tmp_path / "ids.ipynb", nb)
    code = cli.main(["export", str(path)])
    lines = capsys.readouterr().out.splitlines()
    record("shiro export of a notebook with 4 invalid cell ids among 5 cells", 1, int(code != 0), f"exit {code}")
    assert code == 0, lines
    assert lines[-1] == (
        "4 cell ids were not valid (1 to 64 letters, digits, - or _) and got a new one, as a missing id does"
    )
    plain = nbformat.read(tmp_path / "ids.export.ipynb", as_version=4)
    nbformat.validate(plain)
    ids = [c.id for c in plain.cells]
    assert ids[0] == "good-id_1" and len(set(ids)) == len(ids) == 6
    assert [c.source for c in plain.cells] == [
        "x = 1",
        "print(x)",
        "x = 2",
        "> **%shiro** add one\n\nAdded.",
        "y = x + 1",
        "x = 3",
    ]
