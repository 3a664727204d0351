"""The ``shiro`` console script: ``shiro sessions`` and ``shiro sessions show ID``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shiro_kernel import cli
from shiro_kernel.session import Session
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.transcript import Message, TextPart

ROOT = Path(__file__).resolve().parents[2]


def saved(prompt: str, sid: str) -> Session:
    s = Session(id=sid, notebook_path="/p/a.ipynb", cwd="/p")
    s.messages += [Message.user(prompt), Message("assistant", [TextPart(f"answer to {prompt}")])]
    SessionStore().save(s, model="gpt-5")
    return s


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_no_sessions(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["sessions"], capsys) == (0, "no saved sessions\n", "")


def test_list_rows_newest_first(capsys: pytest.CaptureFixture[str]) -> None:
    a = saved("first question", "0193a000-0000-7000-8000-000000000001")
    b = saved("second question", "0193b000-0000-7000-8000-000000000002")
    code, out, _ = run(["sessions"], capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert lines[0].startswith("0193b000  ") and lines[0].endswith("  2msg  second question")
    assert lines[1].startswith("0193a000  ") and lines[1].endswith("  2msg  first question")
    record = SessionStore().load_record(b.id)
    assert lines[0] == f"0193b000  {record['updatedAt'][:16].replace('T', ' ')}  2msg  second question"
    assert run(["sessions", "-n", "1"], capsys)[1].count("\n") == 1
    assert a.id not in out


def test_list_limit_is_15_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(17):
        saved(f"q{i}", f"0193{i:04x}-0000-7000-8000-000000000000")
    assert len(run(["sessions"], capsys)[1].splitlines()) == 15
    assert len(run(["sessions", "--all"], capsys)[1].splitlines()) == 17


def test_show_by_prefix_and_the_errors(capsys: pytest.CaptureFixture[str]) -> None:
    a = saved("first question", "0193a000-0000-7000-8000-000000000001")
    saved("second question", "0193b000-0000-7000-8000-000000000002")
    code, out, err = run(["sessions", "show", "0193a"], capsys)
    assert code == 0 and err == ""
    head, when, *transcript = out.split("\n")
    assert head == f'session {a.id}  "first question"'
    assert when.startswith("/p/a.ipynb · gpt-5 · 2 messages · updated ")
    assert transcript == ["", "you: first question", "", "shiro: answer to first question", ""]
    code, out, err = run(["sessions", "show", "0193a", "--json"], capsys)
    assert code == 0 and json.loads(out)["id"] == a.id
    assert run(["sessions", "show", "ffff"], capsys) == (1, "", 'shiro: no session matching "ffff"\n')
    code, out, err = run(["sessions", "show", "0193"], capsys)
    assert code == 1 and out == ""
    assert err.startswith('shiro: no session matching "0193" (ambiguous: 2 sessions')


def test_show_corrupt_record_is_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    root = SessionStore().root
    root.mkdir(parents=True)
    (root / "0193c000-0000-7000-8000-000000000000.json").write_text("{oops")
    assert run(["sessions"], capsys)[1] == "no saved sessions\n"
    code, out, err = run(["sessions", "show", "0193c000-0000-7000-8000-000000000000"], capsys)
    assert code == 1 and out == "" and err.startswith('shiro: no session matching "0193c000')


def test_main_runs_a_table_and_turns_errors_into_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from shiro_kernel.errors import RequestError

    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("word")

    def echo(args: argparse.Namespace) -> int:
        if args.word == "bad":
            raise RequestError("that word is refused")
        print(args.word)
        return 0

    table = [*cli.commands(), cli.Command("echo", "say a word", add, echo)]
    assert cli.main(["echo", "hi"], table) == 0 and capsys.readouterr().out == "hi\n"
    assert cli.main(["echo", "bad"], table) == 1 and capsys.readouterr().err == "shiro: that word is refused\n"
    assert [c.name for c in cli.commands()] == [
        "sessions",
        "history",
        "notes",
        "memory",
        "bundle",
        "mcp",
        "export",
        "check",
    ]


def test_console_script_via_subprocess(tmp_path: Path) -> None:
    saved("from a kernel", "0193d000-0000-7000-8000-000000000000")
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", "shiro_kernel.cli", "sessions"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("0193d000  ") and proc.stdout.rstrip().endswith("2msg  from a kernel")
    proc = subprocess.run(
        [sys.executable, "-m", "shiro_kernel.cli", "sessions", "show", "nope"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stderr == 'shiro: no session matching "nope"\n'
    proc = subprocess.run(
        [sys.executable, "-m", "shiro_kernel.cli"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0 and "sessions" in proc.stdout


def test_history_command_text_and_json(tmp_path, capsys):
    import json as _json

    from shiro_kernel.cli import main
    from shiro_kernel.store.history import PromptHistory
    from shiro_kernel.store.paths import project_root

    history = PromptHistory.for_project(project_root(tmp_path))
    for prompt in ("load the data", "/todos", "plot it", "plot it"):
        history.append(prompt)
    assert main(["history", "--project", str(tmp_path), "--json"]) == 0
    assert _json.loads(capsys.readouterr().out) == ["load the data", "plot it"]
    assert main(["history", "--project", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "1  load the data\n2  plot it\n"  # no slash command, no repeat


def test_the_cli_tightens_a_loose_home_and_says_so_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    import stat

    from shiro_kernel.store.paths import home

    root = home()
    (root / "sessions").mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    os.chmod(root / "sessions", 0o755)
    code, out, err = run(["sessions"], capsys)
    assert code == 0 and out.strip() == "no saved sessions"
    assert err.startswith("shiro: tightened the permissions of 2 folders under ")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
