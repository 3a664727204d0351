"""Undo keeps the user's later work (issue 39 §1–§3), in real kernels: what the user changed after the agent's step
— a column added, a value rebound, a name deleted, a file appended to or filled, an in-place write, a change made
between two turns — is kept and named, and ``/undo --force`` takes it back anyway; what is still as the step left it
is restored, also across two undos; a file that cannot be written back keeps its checkpoint and leaves no temporary
file (a real write failure: the kernel's file-size limit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import record
from kernelutil import Kernel


@pytest.fixture
def kernel(fake_openai, tmp_path: Path):
    env = {
        "OPENAI_API_KEY": "sk-test-undo",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_NO_WARMUP": "1",
        "JPY_SESSION_NAME": str(tmp_path / "undo.ipynb"),
    }
    k = Kernel(env, cwd=str(tmp_path))
    k.run('%load_ext shiro_kernel\n%config Shiro.approval = "auto"\nimport numpy as np, pandas as pd')
    yield k
    k.close()


def agent_runs(kernel: Kernel, fake: Any, *calls: Call) -> None:
    fake.enqueue(*(Reply(tool_calls=[c]) for c in calls), Reply(text="done"))
    out = kernel.run("%shiro do it", timeout=120)
    assert "Traceback" not in out, out


def last(kernel: Kernel, code: str) -> str:
    return kernel.run(code).strip().splitlines()[-1]


def test_a_column_the_user_added_after_the_step_is_kept_and_force_takes_it_back(kernel, fake_openai):
    kernel.run("df = pd.DataFrame({'a': [1.0, 2.0, 3.0]})")
    agent_runs(kernel, fake_openai, Call("python", {"code": "df['agent'] = 1"}))
    kernel.run("df['mine'] = df['a'] * 100")

    report = kernel.run("%shiro /undo")
    assert "kept yours: df (changed after this step); %shiro /undo --force to take it back anyway" in report
    assert "restored: df" not in report
    assert last(kernel, "print(list(df.columns))") == "['a', 'agent', 'mine']"
    assert last(kernel, "%shiro /undoable") == '{"calls": []}'  # no Undo button that would do nothing

    report = kernel.run("%shiro /undo --force")
    assert "restored: df" in report and "kept yours" not in report
    assert last(kernel, "print(list(df.columns))") == "['a']"
    assert "nothing more to undo" in kernel.run("%shiro /undo --force")
    record(
        "undo after the user added a column to the frame the agent's step changed (real kernel)",
        1,
        0,
        "the user's column kept and named (kept yours: df changed after this step), no Undo button left; "
        "/undo --force took both columns back",
    )


def test_a_value_the_user_rebound_and_a_name_the_user_deleted_are_kept(kernel, fake_openai):
    kernel.run("x = 1\nrows = [1, 2]")
    agent_runs(kernel, fake_openai, Call("python", {"code": "result = 42\nx = 2\nrows.append(3)"}))
    kernel.run("result = 'USER: 3 hours of compute'\ndel x")

    report = kernel.run("%shiro /undo")
    assert "restored: rows" in report  # untouched by the user since: taken back
    assert "result (changed after this step)" in report and "x (deleted after this step)" in report
    assert "removed (the steps made them)" not in report
    assert last(kernel, "print(result, 'x' in dir(), rows)") == "USER: 3 hours of compute False [1, 2]"
    record(
        "undo after the user rebound a name the step made and deleted one it changed (real kernel)",
        2,
        0,
        "both kept and named (changed / deleted after this step); the list the user left alone restored",
    )


def test_an_in_place_write_by_the_user_is_seen_in_a_frame_and_an_array(kernel, fake_openai):
    kernel.run("df = pd.DataFrame({'a': [1.0, 2.0, 3.0]})\narr = np.arange(4.0)\nkeep = [1]")
    agent_runs(kernel, fake_openai, Call("python", {"code": "df.loc[0, 'a'] = -1\narr *= 2\nkeep.append(2)"}))
    kernel.run("df.loc[1, 'a'] = 99\narr[3] = 7")  # the very blocks the step wrote, written again in place

    report = kernel.run("%shiro /undo")
    assert "arr (changed after this step), df (changed after this step)" in report and "restored: keep" in report
    assert last(kernel, "print(df['a'].tolist(), arr.tolist())") == "[-1.0, 99.0, 3.0] [0.0, 2.0, 4.0, 7.0]"


def test_files_the_user_appended_to_or_filled_are_kept(kernel, fake_openai, tmp_path):
    (tmp_path / "data.txt").write_text("the user's data\n")
    agent_runs(
        kernel,
        fake_openai,
        Call("write_file", {"path": "data.txt", "content": "the agent's data\n"}),
        Call("write_file", {"path": "report.md", "content": "# Report\n"}),
        Call("write_file", {"path": "scratch.md", "content": "scratch\n"}),
    )
    with (tmp_path / "data.txt").open("a") as fh:
        fh.write("and a line the user added\n")
    (tmp_path / "report.md").write_text("# Report\n\nthe user's findings\n")

    report = kernel.run("%shiro /undo")
    assert "data.txt (changed after this step), report.md (changed after this step)" in report
    assert "scratch.md removed (the steps made it)" in report
    assert (tmp_path / "data.txt").read_text() == "the agent's data\nand a line the user added\n"
    assert (tmp_path / "report.md").read_text().endswith("the user's findings\n") and not (
        tmp_path / "scratch.md"
    ).exists()

    assert "data.txt restored" in kernel.run("%shiro /undo --force")
    assert (tmp_path / "data.txt").read_text() == "the user's data\n" and not (tmp_path / "report.md").exists()
    record(
        "undo after the user appended to a file the agent wrote and filled one it created (real kernel)",
        2,
        0,
        "both files kept as the user left them and named; the file nobody touched removed; --force took both back",
    )


def test_a_second_undo_keeps_what_the_user_did_between_the_turns(kernel, fake_openai):
    kernel.run("df = pd.DataFrame({'a': [1.0, 2.0]})")
    agent_runs(kernel, fake_openai, Call("python", {"code": "df['t1'] = 1"}))
    kernel.run("df['between'] = 5")
    agent_runs(kernel, fake_openai, Call("python", {"code": "df['t2'] = 2"}))

    assert "restored: df" in kernel.run("%shiro /undo")
    assert last(kernel, "print(list(df.columns))") == "['a', 't1', 'between']"
    report = kernel.run("%shiro /undo")
    assert "kept yours: df (changed after this step)" in report
    assert last(kernel, "print(list(df.columns))") == "['a', 't1', 'between']"
    record(
        "a second undo into the older turn after the user added a column between the turns (real kernel)",
        1,
        0,
        "the newer turn taken back; the older turn's frame kept with the user's column, named",
    )


def test_two_undos_without_the_user_restore_all_and_one_object_comes_back_under_both_names(kernel, fake_openai):
    kernel.run("df = pd.DataFrame({'a': [1.0, 2.0]})\nsame = df\nn = np.zeros(3)\nm = n")
    agent_runs(kernel, fake_openai, Call("python", {"code": "df['t1'] = 1\nn += 1\nm += 1\nsame.loc[0, 'a'] = 5"}))
    agent_runs(kernel, fake_openai, Call("python", {"code": "df['t2'] = 2"}))

    assert "restored: df, same" in kernel.run("%shiro /undo")  # same = df: the turn changed it too
    report = kernel.run("%shiro /undo")
    assert "restored: df, m, n, same" in report and "kept yours" not in report
    assert last(kernel, "print(list(df.columns), df['a'].tolist(), n.tolist())") == "['a'] [1.0, 2.0] [0.0, 0.0, 0.0]"
    assert last(kernel, "print(df is same, n is m)") == "True True"


def test_a_restore_that_fails_keeps_its_checkpoint_and_leaves_no_temporary_file(kernel, fake_openai, tmp_path):
    original = "".join(f"row {i:06d}\n" for i in range(50_000))  # 550 kB
    (tmp_path / "data.txt").write_text(original)
    agent_runs(kernel, fake_openai, Call("write_file", {"path": "data.txt", "content": "short\n"}))
    kernel.run(  # a real write failure: files may grow to 100 kB at most in this kernel
        "import resource, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "_soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, _hard))"
    )
    report = kernel.run("%shiro /undo")
    assert "data.txt could not be restored (File too large)" in report
    assert "the checkpoint of what could not be restored is kept: run %shiro /undo again" in report
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".undo")] == []
    assert (tmp_path / "data.txt").read_text() == "short\n"

    kernel.run("resource.setrlimit(resource.RLIMIT_FSIZE, (_soft, _hard))")
    assert "data.txt restored" in kernel.run("%shiro /undo")
    assert (tmp_path / "data.txt").read_text() == original
    record(
        "undo of a 550 kB file whose write-back fails (the kernel's file-size limit at 100 kB)",
        1,
        0,
        "could not be restored (File too large), checkpoint kept and said, no .data.txt.undo left; "
        "the next /undo restored all 550 kB",
    )
