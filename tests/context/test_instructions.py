"""The repository's AGENTS.md reaches the system prompt (issue 25, point 6): the root's and the notebook
folder's, under one header, capped at 32 KiB with a notice; /notes says which files were read. Issue 33: only
where read_file could read it (a link out of the project, a FIFO or a device is left out and said), never more
than the cap read, and the cut said in the cell."""

from __future__ import annotations

import json
import os
import threading
import time
import tracemalloc
from pathlib import Path

from fakeopenai import Reply
from faultlog import record
from IPython.utils.capture import capture_output
from kernelutil import NOTEBOOK_KEY, outputs_text, run_notebook

from shiro_kernel.context.instructions import CAP_BYTES, HEADER, read_instructions


def test_root_and_notebook_folder_files_in_order_and_capped(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("Use polars, not pandas.\n")
    sub = tmp_path / "analysis"
    sub.mkdir()
    (sub / "AGENTS.md").write_text("x" * (CAP_BYTES + 10))
    found = read_instructions(tmp_path, sub / "nb.ipynb")
    assert found.block().startswith(f"{HEADER}\n\nUse polars, not pandas.\n\n(from analysis/AGENTS.md)\nxxx")
    assert found.block().endswith("[… AGENTS.md was cut here: the instructions are capped at 32 KiB]")
    assert found.cut and [p.name for p, _ in found.files] == ["AGENTS.md", "AGENTS.md"]
    assert len(found.text.encode()) < CAP_BYTES + 200
    assert found.listing().endswith("(cut at 32 KiB)")
    assert read_instructions(tmp_path / "analysis", None).files == ((sub / "AGENTS.md", CAP_BYTES + 10),)
    assert read_instructions(tmp_path / "none", None).block() == ""


def test_a_turn_is_told_them_and_notes_lists_them(shiro_shell, fake_openai, tmp_path):
    (tmp_path / "AGENTS.md").write_text("Dates are day-first in this project.\n")
    fake_openai.enqueue(Reply(text="ok"))
    with capture_output():
        shiro_shell.run_cell("%shiro hello")
    instructions = fake_openai.requests[-1].body["instructions"]
    assert f"{HEADER}\n\nDates are day-first in this project." in instructions
    with capture_output() as cap:
        shiro_shell.run_cell("%shiro /notes")
    shown = "".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert shown.splitlines()[-1] == f"project instructions read: {tmp_path / 'AGENTS.md'} (37 bytes)"


# -- issue 33, point 1: a cloned repository's AGENTS.md never reads outside the project, nor past the cap ------
AWS = "wJalrXUtnFEMI-fake-aws-secret-for-shiro-tests"
MARKER = "shiro-probe-environ-marker-7f3a"  # a variable no secret filter would hide: only confinement keeps it out


def _repo(tmp_path):
    repo = tmp_path / "cloned"
    (repo / ".git").mkdir(parents=True)
    return repo


def _read_in_thread(root, notebook=None):
    """read_instructions with a deadline: a FIFO or a device that made it wait would fail the test, not hang it."""
    done: list = []
    worker = threading.Thread(target=lambda: done.append(read_instructions(root, notebook)), daemon=True)
    worker.start()
    worker.join(20)
    assert done, "read_instructions did not return within 20 s (a FIFO or a device was opened and waited on)"
    return done[0]


def test_agents_md_is_read_only_where_read_file_could_read_it(tmp_path):
    beside = tmp_path / "beside.txt"
    beside.write_text("the user's private notes beside the repository\n")
    inside = "Tabs, not spaces.\n"
    vectors = {
        "/proc/self/environ": Path("/proc/self/environ"),
        "/etc/passwd": Path("/etc/passwd"),
        "a file beside the repository": beside,
        "/dev/zero": Path("/dev/zero"),
    }
    ran = leaked = 0
    for what, target in vectors.items():
        repo = _repo(tmp_path / what.replace("/", "_"))
        (repo / "AGENTS.md").symlink_to(target)
        found = _read_in_thread(repo)
        ran += 1
        leaked += int(bool(found.block()))
        assert found.block() == "" and found.files == ()
        assert found.notices == (
            f"{repo / 'AGENTS.md'} was not read into the instructions: it leads to {os.path.realpath(target)}, "
            f"outside the project {os.path.realpath(repo)}",
        ), what
    # a FIFO inside the project (nothing writes to it: opening it for reading would wait forever)
    repo = _repo(tmp_path / "fifo")
    os.mkfifo(repo / "AGENTS.md")
    found = _read_in_thread(repo)
    assert found.block() == "" and found.notices == (
        f"{repo / 'AGENTS.md'} was not read into the instructions: it is not a regular file (a folder, pipe, "
        "device or socket)",
    )
    # the notebook folder's AGENTS.md as a link out of the project, beside a good root one
    repo = _repo(tmp_path / "sub")
    (repo / "AGENTS.md").write_text(inside)
    (repo / "docs").mkdir()
    (repo / "docs" / "AGENTS.md").symlink_to("/etc/passwd")
    found = _read_in_thread(repo, repo / "docs" / "nb.ipynb")
    assert found.block() == f"{HEADER}\n\n{inside.strip()}" and "root:" not in found.text
    assert found.listing().splitlines() == [
        f"{repo / 'docs' / 'AGENTS.md'} was not read into the instructions: it leads to /etc/passwd, outside the "
        f"project {os.path.realpath(repo)}",
        f"project instructions read: {repo / 'AGENTS.md'} ({len(inside)} bytes)",
    ]
    # a link that stays inside the project is read, as read_file reads it
    repo = _repo(tmp_path / "inside-link")
    (repo / "CONTRIBUTING.md").write_text(inside)
    (repo / "AGENTS.md").symlink_to("CONTRIBUTING.md")
    assert _read_in_thread(repo).block() == f"{HEADER}\n\n{inside.strip()}"
    record(
        "security: a cloned repository's AGENTS.md linked to /proc/self/environ, /etc/passwd, a file beside it, "
        "/dev/zero, or a FIFO",
        ran + 2,
        leaked,
        "0 read into the instructions; each said in the cell as not read (the file tools' rule: inside the root, "
        "a regular file); a link inside the project is read",
    )


def test_a_50_mb_agents_md_reads_only_the_cap(tmp_path):
    repo = _repo(tmp_path)
    size = 50 * 1024 * 1024
    with open(repo / "AGENTS.md", "wb") as fh:
        fh.write(("é" * 40 + "\n").encode() * (size // 81))  # two-byte characters: the cut may fall inside one
        fh.truncate(size)
    tracemalloc.start()
    started = time.perf_counter()
    found = read_instructions(repo, None)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"\n50 MB AGENTS.md: {seconds * 1000:.2f} ms, peak {peak / 1024:.0f} KiB allocated")
    assert peak < 1024 * 1024  # a few copies of the 32 KiB cap, never the 50 MB file
    assert found.cut and found.files == ((repo / "AGENTS.md", size),)
    assert len(found.text.encode()) < CAP_BYTES + 200 and "\ufffd" not in found.text
    assert found.notices == (
        f"{repo / 'AGENTS.md'} is 52,428,800 bytes: the model is told only its first 32 KiB (project instructions "
        "are capped)",
    )
    record(
        "security: a 50 MB AGENTS.md at session start",
        1,
        int(peak >= 1024 * 1024),
        f"peak {peak / 1024:.0f} KiB allocated, {seconds * 1000:.1f} ms (read at most the 32 KiB cap + 1 byte; "
        "the cut said in the cell)",
    )


def test_the_cut_is_said_in_the_cell(shiro_shell, fake_openai, tmp_path):
    (tmp_path / "AGENTS.md").write_text("Use polars.\n" + "x" * (2 * CAP_BYTES))
    fake_openai.enqueue(Reply(text="ok"), Reply(text="again"))
    with capture_output() as cap:
        shiro_shell.run_cell("%shiro hello")
    said = f"{tmp_path / 'AGENTS.md'} is {12 + 2 * CAP_BYTES:,} bytes: the model is told only its first 32 KiB"
    assert said in cap.stdout + cap.stderr + "".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "Use polars." in fake_openai.requests[-1].body["instructions"]
    with capture_output() as cap:
        shiro_shell.run_cell("%shiro and again")  # the same session: its instructions are built once, said once
    assert said not in cap.stdout + cap.stderr + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def test_a_kernel_with_secrets_sends_none_of_its_environment(fake_openai, tmp_path):
    """End to end, as reported: a cloned repository whose AGENTS.md links to /proc/self/environ, opened in a real
    kernel started with an API key and an AWS secret in its environment; the first request is recorded."""
    repo = _repo(tmp_path)
    (repo / "AGENTS.md").symlink_to("/proc/self/environ")
    fake_openai.enqueue(Reply(text="hello"))
    env = {
        "OPENAI_API_KEY": NOTEBOOK_KEY,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_NO_WARMUP": "1",
        "AWS_SECRET_ACCESS_KEY": AWS,
        "SHIRO_PROBE": MARKER,
    }
    nb = run_notebook(repo / "analysis.ipynb", ["%load_ext shiro_kernel", "%shiro hello"], env)
    instructions = fake_openai.requests[-1].body["instructions"]
    sent = json.dumps([r.body for r in fake_openai.requests])
    leaked = sum(secret in sent for secret in (NOTEBOOK_KEY, AWS, MARKER))
    record(
        "security: AGENTS.md -> /proc/self/environ in a real kernel holding OPENAI_API_KEY and AWS_SECRET_ACCESS_KEY",
        3,
        leaked,
        "0 of the key, the AWS secret and a plain variable in any request; the cell says the file was not read",
    )
    assert leaked == 0 and "PATH=" not in instructions and HEADER not in instructions
    assert "AGENTS.md was not read into the instructions: it leads to /proc/" in outputs_text(nb.cells[1])
