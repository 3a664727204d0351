"""Undo brings back the files the agent's Python changed (issue 39 §7: ``os.remove`` showed as ``removed: os`` and
the file stayed gone), in real kernels: a file removed, overwritten through pandas, appended to, renamed over
another, a folder removed with ``shutil.rmtree`` — each seen as the code does it (Python's audit hooks) and put back
by ``/undo``; a file the user changed after the step is kept as everywhere else; files outside the project are left
alone; what is over ``Shiro.undo_max_mb`` is named, not kept; the user's own cells are never watched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import record
from kernelutil import Kernel


@pytest.fixture
def kernel(fake_openai, tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    env = {
        "OPENAI_API_KEY": "sk-test-undo-files",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_NO_WARMUP": "1",
        "JPY_SESSION_NAME": str(project / "files.ipynb"),
    }
    k = Kernel(env, cwd=str(project))
    k.run('%load_ext shiro_kernel\n%config Shiro.approval = "auto"\nimport pandas as pd')
    k.project = project  # type: ignore[attr-defined]
    yield k
    k.close()


def agent_runs(kernel: Kernel, fake: Any, code: str) -> None:
    fake.enqueue(Reply(tool_calls=[Call("python", {"code": code})]), Reply(text="done"))
    out = kernel.run("%shiro do it", timeout=120)
    assert "Traceback" not in out, out


def test_files_the_agents_code_removed_overwrote_appended_and_renamed_come_back(kernel, fake_openai):
    project: Path = kernel.project  # type: ignore[attr-defined]
    (project / "data.csv").write_text("a,b\n1,2\n3,4\n")
    (project / "log.txt").write_text("first\n")
    (project / "old.txt").write_text("old\n")
    (project / "target.txt").write_text("target\n")
    (project / "runs").mkdir()
    (project / "runs" / "r1.json").write_text('{"run": 1}')
    agent_runs(
        kernel,
        fake_openai,
        "import os, shutil\n"
        "pd.DataFrame({'x': [9]}).to_csv('data.csv', index=False)\n"
        "with open('log.txt', 'a') as f:\n    f.write('agent\\n')\n"
        "os.replace('old.txt', 'target.txt')\n"
        "shutil.rmtree('runs')\n"
        "open('new.txt', 'w').write('made by the agent')\n",
    )
    assert not (project / "runs").exists() and (project / "target.txt").read_text() == "old\n"

    report = kernel.run("%shiro /undo")
    assert "could not restore" not in report, report
    for name in (
        "data.csv restored",
        "log.txt restored",
        "old.txt restored",
        "target.txt restored",
        "r1.json restored",
    ):
        assert name in report, report
    assert "new.txt removed (the steps made it)" in report
    assert (project / "data.csv").read_text() == "a,b\n1,2\n3,4\n"
    assert (project / "log.txt").read_text() == "first\n"
    assert (project / "old.txt").read_text() == "old\n" and (project / "target.txt").read_text() == "target\n"
    assert (project / "runs" / "r1.json").read_text() == '{"run": 1}'
    assert not (project / "new.txt").exists()
    record(
        "undo of files the agent's Python changed: to_csv over a file, an append, os.replace over another, "
        "shutil.rmtree of a folder, a new file (real kernel)",
        6,
        0,
        "each seen as the code did it (audit hooks) and put back by /undo byte for byte, the folder made again; "
        "the new file removed",
    )


def test_a_file_removed_by_the_agent_then_made_again_by_the_user_is_kept(kernel, fake_openai):
    project: Path = kernel.project  # type: ignore[attr-defined]
    (project / "report.md").write_text("the user's draft")
    agent_runs(kernel, fake_openai, "import os\nos.remove('report.md')")
    kernel.run("open('report.md', 'w').write('written again by the user')")
    report = kernel.run("%shiro /undo")
    assert "report.md (made again after this step)" in report, report
    assert (project / "report.md").read_text() == "written again by the user"
    kernel.run("%shiro /undo --force")
    assert (project / "report.md").read_text() == "the user's draft"


def test_files_outside_the_project_and_the_users_own_cells_are_not_watched(kernel, fake_openai, tmp_path):
    project: Path = kernel.project  # type: ignore[attr-defined]
    outside = tmp_path / "outside.txt"
    agent_runs(kernel, fake_openai, f"open({str(outside)!r}, 'w').write('x')\nv = 1")
    kernel.run("open('mine.txt', 'w').write('the user wrote this')")  # the user's cell: not the agent's step
    report = kernel.run("%shiro /undo")
    assert "outside.txt" not in report and "mine.txt" not in report, report
    assert outside.read_text() == "x" and (project / "mine.txt").exists()


def test_a_file_over_the_undo_budget_is_named_not_kept(kernel, fake_openai):
    project: Path = kernel.project  # type: ignore[attr-defined]
    (project / "big.bin").write_bytes(b"\x00" * 3_000_000)
    kernel.run("%config Shiro.undo_max_mb = 1")
    agent_runs(kernel, fake_openai, "import os\nos.remove('big.bin')")
    report = kernel.run("%shiro /undo")
    assert "big.bin, which python's code changed (its previous 3 MB were over Shiro.undo_max_mb (1 MB))" in report


def test_a_step_that_did_not_run_keeps_nothing(kernel, fake_openai):
    """A call refused (read-only) runs nothing: no file is kept, no Undo button is left."""
    project: Path = kernel.project  # type: ignore[attr-defined]
    (project / "keep.txt").write_text("keep")
    kernel.run('%config Shiro.approval = "read-only"')
    agent_runs(kernel, fake_openai, "import os\nos.remove('keep.txt')")
    assert (project / "keep.txt").read_text() == "keep"
    assert kernel.run("%shiro /undoable").strip().splitlines()[-1] == '{"calls": []}'
