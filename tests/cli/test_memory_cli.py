"""``shiro notes`` / ``shiro memory`` / ``shiro bundle`` (shiro_kernel.cli.memory), through ``shiro``'s main."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from shiro_kernel.cli import main
from shiro_kernel.cli import memory as memory_cli
from shiro_kernel.memory import index_file
from shiro_kernel.memory.named import MemoryStore
from shiro_kernel.memory.notes import NoteStore


def run(argv: list[str]) -> int:
    return main(argv)


def test_commands_shape() -> None:
    assert [c.name for c in memory_cli.COMMANDS] == ["notes", "memory", "bundle"]
    for command in memory_cli.COMMANDS:
        command.add_arguments(argparse.ArgumentParser())
        assert callable(command.run)


def test_notes_list_and_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    assert run(["notes", "--project", str(proj)]) == 0
    assert capsys.readouterr().out == "nothing remembered about this project yet\n"
    store = NoteStore.for_project(proj)
    store.add("fact", "one")
    store.add("gotcha", "two")
    store.recall("one")
    assert run(["notes", "--project", str(proj)]) == 0
    assert capsys.readouterr().out == "(gotcha) two\n(fact) one  [recalled 1x]\n"
    old = (datetime.now(timezone.utc) - timedelta(days=100)).isoformat().replace("+00:00", "Z")
    data = json.loads(store.path.read_text())
    data.append({"id": "x", "kind": "command", "text": "old one", "createdAt": old, "hits": 0})
    store.path.write_text(json.dumps(data))
    assert run(["notes", "--project", str(proj), "--stale"]) == 0
    assert capsys.readouterr().out == f"(command) old one  (last confirmed {old[:10]})\n"


def test_notes_uses_cwd_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    NoteStore.for_project(repo).add("fact", "repo-wide")
    monkeypatch.chdir(repo / "sub")
    assert run(["notes"]) == 0
    assert capsys.readouterr().out == "(fact) repo-wide\n"


def test_memory_print_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    assert run(["memory", "--project", str(proj)]) == 0
    assert capsys.readouterr().out == (
        "Project memories:\nNo memories stored yet.\n\nSystem memories:\nNo memories stored yet.\n"
    )
    MemoryStore.for_project(proj).write("project", "style", "snake_case\n")
    assert run(["memory", "show", "style", "--project", str(proj)]) == 0
    assert capsys.readouterr().out == "snake_case\n\n"
    assert run(["memory", "show", "nope", "--project", str(proj)]) == 1
    assert capsys.readouterr().err == "shiro: memory not found: nope\n"
    assert run(["memory", "show", "../x", "--project", str(proj)]) == 1
    assert "invalid memory name" in capsys.readouterr().err


def test_bundle_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "tips.md").write_text("tips\n")
    (folder / "manifest.yml").write_text("name: tips\nversion: '1'\nneeds:\n  - sh\n  - shiro-no-such-cmd-xyz\n")
    assert run(["bundle", "install", str(folder), "--dry-run"]) == 0
    assert capsys.readouterr().out == (
        "Would install tips 1 into system scope: tips.md\n"
        "needs shiro-no-such-cmd-xyz: not found on PATH; installed anyway\n"
    )
    assert run(["bundle", "install", str(folder)]) == 0
    assert (index_file.system_dir() / "tips.md").exists()
    capsys.readouterr()
    assert run(["bundle", "status", "tips"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2:] == ["needs sh [ok]", "needs shiro-no-such-cmd-xyz [not found]"]
    assert run(["bundle", "upgrade", str(folder)]) == 0
    assert capsys.readouterr().out.startswith("Upgraded tips 1 → 1 in system scope: tips.md\n")
    assert run(["bundle", "uninstall", "tips"]) == 0
    assert "Moved to the trash: tips.md (" in capsys.readouterr().out
    assert run(["bundle", "status", "tips"]) == 1
    assert capsys.readouterr().err == "shiro: bundle 'tips' is not installed\n"
    assert run(["bundle", "install", str(tmp_path / "nowhere")]) == 1
    assert capsys.readouterr().err.startswith("shiro: manifest.yml not found in ")


def test_bundle_project_scope(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "p.md").write_text("p\n")
    (folder / "manifest.yml").write_text("name: pb\nversion: '2'\n")
    assert run(["bundle", "install", str(folder), "--scope", "project", "--project", str(proj)]) == 0
    assert (index_file.project_dir(proj) / "p.md").exists()
    capsys.readouterr()
    assert run(["bundle", "status", "pb", "--project", str(proj)]) == 0
    assert capsys.readouterr().out.startswith("pb 2 (project scope)")
