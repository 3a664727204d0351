"""Everything under SHIRO_HOME is private (folders 0700, files 0600) whatever the umask, and an older,
looser home is tightened once, with one notice."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import record

from shiro_kernel.agent import Agent
from shiro_kernel.config import Shiro
from shiro_kernel.memory import bundles
from shiro_kernel.store import files, private
from shiro_kernel.store import lease as leases
from shiro_kernel.store.assets import assets
from shiro_kernel.store.paths import home

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")


@pytest.fixture(params=[0o022, 0o002, 0o000], ids=lambda m: f"umask{m:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


@pytest.fixture
def fresh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SHIRO_HOME that does not exist yet (shiro makes it, and its parent)."""
    where = tmp_path / "user" / ".shiro-neko"
    monkeypatch.setenv("SHIRO_HOME", str(where))
    return where


def modes(root: Path) -> dict[str, int]:
    """Every folder and file under ``root`` (itself included; symlinks neither followed nor listed): its mode."""
    found = {".": stat.S_IMODE(os.lstat(root).st_mode)}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(folder) / name
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode):
                found[str(path.relative_to(root))] = stat.S_IMODE(st.st_mode)
    return found


def loose(root: Path) -> list[str]:
    """What is not exactly private: folders that are not 0700, files that are not 0600."""
    bad = []
    for rel, mode in sorted(modes(root).items()):
        want = 0o700 if (root / rel).is_dir() else 0o600
        if mode != want:
            bad.append(f"{mode:04o} {rel}")
    return bad


def png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(out, format="PNG")
    return out.getvalue()


def bundle(tmp_path: Path) -> Path:
    folder = tmp_path / "kit"
    folder.mkdir()
    body = "# kit\nuse it\n"
    (folder / "kit_tips.md").write_text(body)
    sha = hashlib.sha256(body.encode()).hexdigest()
    (folder / "manifest.yml").write_text(f"name: kit\nversion: '1.0'\nfiles:\n  kit_tips.md: {sha}\n")
    return folder


def test_everything_a_turn_and_the_stores_make_is_private(
    umask: int, fresh_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: Any
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-perm")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    fake_openai.enqueue(
        Reply(
            tool_calls=[
                Call("remember", {"kind": "fact", "text": "ids are unique"}),
                Call(
                    "memory_write", {"scope": "project", "name": "ids", "content": "id is unique", "description": "ids"}
                ),
                Call(
                    "memory_write", {"scope": "system", "name": "me", "content": "tea, not coffee", "description": "me"}
                ),
            ]
        ),
        Reply(text="noted"),
    )
    agent = Agent(None, Shiro(model="gpt-4o-mini", approval="auto"))
    try:
        # a turn: the session record and its index row, the prompt history, a note, two named memories
        assert agent.ask("remember these").reason == "answered"
        assert agent.current.save_now() is None
        assets().put(png(), "image/png")  # an image the model saw
        bundles.install(bundle(tmp_path))  # a bundle copied in, then moved to the trash
        bundles.uninstall("kit")
        with files.locked(home() / "sessions" / "extra"):  # a lock taken (the lock file stays)
            pass
        other = leases.claim(home() / "sessions", "0000-other")  # a second lease, held
        assert isinstance(other, leases.Lease)
        sessions = fresh_home / "sessions"
        # while the index's connection is open SQLite keeps its -wal and -shm beside it
        present = {p.name for p in sessions.iterdir()}
        assert {"index.sqlite", "index.sqlite-wal", "index.sqlite-shm", ".save.lock"} <= present, present
        assert {p.name for p in (sessions / ".live").iterdir()} == {
            f"{agent.current.session.id}.lock",
            "0000-other.lock",
        }
        found = modes(fresh_home)
        for part in ("history/", "memory/", "memories/projects/", "sessions/assets/", ".bundles/.trash/"):
            assert any(part in rel for rel in found), (part, sorted(found))
        assert any(rel.endswith(".json.lock") for rel in found)
        assert len(found) >= 30, sorted(found)
        bad = loose(fresh_home)
        assert not bad, f"not private under umask {umask:03o}: " + ", ".join(bad)
        record(
            f"security: what a turn and the stores create under SHIRO_HOME, umask {umask:03o}",
            len(found),
            len(bad),
            f"{len(found)} files and folders (session record, index.sqlite with -wal and -shm, locks, leases, notes, "
            "memories, history, image assets, a bundle): folders 0700, files 0600",
        )
        assert stat.S_IMODE(os.stat(fresh_home.parent).st_mode) == 0o700  # the parent shiro made for it
        other.release()
    finally:
        agent.close()


def test_a_user_file_written_by_a_tool_keeps_the_umask(umask: int, tmp_path: Path) -> None:
    files.write_atomic(tmp_path / "new" / "out.txt", "x", mode=0o666 & ~umask)  # how write_file writes
    assert stat.S_IMODE((tmp_path / "new" / "out.txt").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o777 & ~umask


def test_the_index_rebuilt_or_set_aside_is_private_again(umask: int, fresh_home: Path) -> None:
    from shiro_kernel.store.index import SessionIndex

    folder = fresh_home / "sessions"
    private.make_dirs(folder)
    (folder / "index.sqlite").write_bytes(b"not a database at all, " * 100)
    os.chmod(folder / "index.sqlite", 0o600)
    index = SessionIndex(folder)
    assert index.newest(None) == []  # the broken file is set aside and a new index made
    assert loose(fresh_home) == []
    index.close()


def loose_home(root: Path) -> None:
    """A home as an older version left it under umask 022, with a symlink out and another user's file."""
    for folder in ("sessions/.live", "sessions/assets", "memory", "memories/projects/p_1", "history"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for name in (
        "sessions/index.sqlite",
        "sessions/index.sqlite-wal",
        "sessions/index.sqlite-shm",
        "sessions/.save.lock",
        "memory/p_1.json.lock",
        "memories/.index.lock",
        "history/p_1.json.lock",
    ):
        (root / name).write_text("x")
        os.chmod(root / name, 0o644)
    (root / "sessions" / "01.json").write_text("{}")
    os.chmod(root / "sessions" / "01.json", 0o600)  # already private: not counted
    for folder, _dirs, _names in os.walk(root):
        os.chmod(folder, 0o755)


def test_a_loose_home_is_tightened_once_with_one_notice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / ".shiro-neko"
    monkeypatch.setenv("SHIRO_HOME", str(root))
    loose_home(root)
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's")
    os.chmod(outside, 0o644)
    (root / "memories" / "link.md").symlink_to(outside)
    (tmp_path / "outdir").mkdir(mode=0o755)
    os.chmod(tmp_path / "outdir", 0o755)
    (root / "linkdir").symlink_to(tmp_path / "outdir")
    before = loose(root)
    assert len(before) == 16, before  # 9 folders and 7 files
    notice = private.tighten_home()
    assert notice == (
        f"tightened the permissions of 7 files and 9 folders under {root} "
        "(they were open to other users of this machine)"
    )
    assert loose(root) == []
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # a symlink out of the home is not followed
    assert stat.S_IMODE((tmp_path / "outdir").stat().st_mode) == 0o755
    os.chmod(root / "memory", 0o755)
    assert private.tighten_home() is None  # once per process
    assert stat.S_IMODE((root / "memory").stat().st_mode) == 0o755


def test_a_private_or_missing_home_gives_no_notice(tmp_path: Path) -> None:
    assert private.tighten_home(tmp_path / "none") is None
    (tmp_path / "ok" / "sessions").mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "ok", 0o700)
    (tmp_path / "ok" / "sessions" / "index.sqlite").write_text("")
    os.chmod(tmp_path / "ok" / "sessions" / "index.sqlite", 0o600)
    assert private.tighten_home(tmp_path / "ok") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make another user's file")
def test_what_another_user_owns_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "home"
    (root / "theirs").mkdir(parents=True)
    (root / "theirs" / "f").write_text("x")
    (root / "mine").write_text("x")
    for path, mode in ((root, 0o755), (root / "theirs", 0o755), (root / "theirs" / "f", 0o644), (root / "mine", 0o644)):
        os.chmod(path, mode)
    os.chown(root / "theirs", 12345, 12345)
    assert private.tighten_home(root) == (
        f"tightened the permissions of 1 file and 1 folder under {root} (they were open to other users of this machine)"
    )
    assert stat.S_IMODE((root / "theirs").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "theirs" / "f").stat().st_mode) == 0o644  # not entered


def test_make_dirs_is_mkdir_p_private(umask: int, tmp_path: Path) -> None:
    private.make_dirs(tmp_path / "a" / "b" / "c")
    private.make_dirs(tmp_path / "a" / "b" / "c")  # exists: nothing
    for folder in ("a", "a/b", "a/b/c"):
        assert stat.S_IMODE((tmp_path / folder).stat().st_mode) == 0o700
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        private.make_dirs(tmp_path / "file")
    with pytest.raises(NotADirectoryError):
        private.make_dirs(tmp_path / "file" / "sub")


def test_a_turn_tightens_an_older_home_and_says_so_once(shiro_shell, fake_openai) -> None:
    """The notice reaches the cell (at the end of the first turn after the background walk finished), once."""
    from IPython.utils.capture import capture_output

    root = home()
    (root / "sessions").mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    os.chmod(root / "sessions", 0o755)
    (root / "sessions" / "old.json.corrupt-1").write_text("{}")
    os.chmod(root / "sessions" / "old.json.corrupt-1", 0o644)
    shown = []
    for prompt in ("hello", "again"):
        fake_openai.enqueue(Reply(text="hi"))
        with capture_output() as cap:
            shiro_shell.run_cell(f"%shiro {prompt}")
        shown.append(cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs))
    said = [s.count("tightened the permissions of") for s in shown]
    assert sum(said) == 1, shown
    assert "(they were open to other users of this machine)" in "".join(shown)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "sessions" / "old.json.corrupt-1").stat().st_mode) == 0o600
