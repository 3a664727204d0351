"""Git worktrees share one project: a real repository (``git init``, a commit), a linked worktree
(``git worktree add``) and a subdirectory all map to the main worktree's root, and two processes —
one in each worktree — write notes and named memories into the same store and see each other's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shiro_kernel.store.paths import project_root, project_slug

# One process: remember a note and write a memory for the project found from its cwd, signal that it
# is done, wait for the other process, then print what it sees (both stores, read afresh).
CHILD = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from shiro_kernel.store.paths import project_root
    from shiro_kernel.memory.notes import NoteStore
    from shiro_kernel.memory.named import MemoryStore

    tag, sync, other = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    root = project_root(Path.cwd())
    entry = NoteStore.for_project(root).add("fact", f"note from {tag}").entry
    assert entry is not None
    out = MemoryStore.for_project(root).write("project", f"mem-{tag}", f"memory body from {tag}",
                                              description=f"written in {tag}")
    assert out.startswith("Memory "), out
    (sync / f"{tag}.done").touch()
    deadline = time.monotonic() + 30
    while not (sync / f"{other}.done").exists():
        if time.monotonic() > deadline:
            sys.exit("timed out waiting for " + other)
        time.sleep(0.02)
    notes = NoteStore.for_project(project_root(Path.cwd()))
    memories = MemoryStore.for_project(project_root(Path.cwd()))
    print(json.dumps({
        "root": str(root),
        "home": os.environ["SHIRO_HOME"],
        "notes": sorted(e["text"] for e in notes.entries()),
        "memories": {name: memories.read(name, "project").bodies[0] for name in ("mem-main", "mem-linked")},
        "index": memories.index_text("project"),
    }))
""")


def git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, Path, Path]:
    main = tmp_path / "project"
    (main / "src" / "pkg").mkdir(parents=True)
    (main / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    git("init", "-q", "-b", "main", cwd=main)
    git("add", ".", cwd=main)
    git("commit", "-q", "-m", "first", cwd=main)
    linked = tmp_path / "linked-wt"
    git("worktree", "add", "-q", "-b", "feature", str(linked), cwd=main)
    return main.resolve(), linked.resolve(), (main / "src" / "pkg").resolve()


def test_project_root_is_the_main_worktree_for_all_three(repo):
    main, linked, sub = repo
    assert (linked / ".git").is_file()  # a real linked worktree: .git is a "gitdir:" file
    assert project_root(main) == main
    assert project_root(sub) == main
    assert project_root(linked) == main
    assert project_root(linked / "src" / "pkg") == main
    assert project_root(sub / "mod.py") == main
    assert len({project_slug(project_root(p)) for p in (main, linked, sub)}) == 1


def test_two_processes_in_two_worktrees_share_one_store(repo, tmp_path):
    main, linked, sub = repo
    home = os.environ["SHIRO_HOME"]  # set by the autouse fixture: the test's own temp home
    assert Path(home).is_dir()
    sync = tmp_path / "sync"
    sync.mkdir()
    env = {
        **os.environ,
        "SHIRO_HOME": home,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    procs = {
        "main": subprocess.Popen(
            [sys.executable, "-c", CHILD, "main", str(sync), "linked"],
            cwd=sub,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
        "linked": subprocess.Popen(
            [sys.executable, "-c", CHILD, "linked", str(sync), "main"],
            cwd=linked,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
    }
    seen = {}
    for tag, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"{tag}: {err}"
        seen[tag] = json.loads(out.strip().splitlines()[-1])
    for tag, view in seen.items():
        assert view["home"] == home
        assert Path(view["root"]) == main, tag
        assert view["notes"] == ["note from linked", "note from main"], tag
        assert view["memories"] == {"mem-main": "memory body from main", "mem-linked": "memory body from linked"}, tag
        assert "mem-main" in view["index"] and "mem-linked" in view["index"], tag
    # one store on disk, under the test's SHIRO_HOME, keyed by the main worktree
    slug = project_slug(main)
    assert (Path(home) / "memory" / f"{slug}.json").is_file()
    assert sorted(p.name for p in (Path(home) / "memory").glob("*.json")) == [f"{slug}.json"]
    project_dirs = [p.name for p in (Path(home) / "memories" / "projects").iterdir()]
    assert project_dirs == [slug]
