"""The repository's AGENTS.md reaches the system prompt (issue 25, point 6): the root's and the notebook
folder's, under one header, capped at 32 KiB with a notice; /notes says which files were read."""

from __future__ import annotations

from fakeopenai import Reply
from IPython.utils.capture import capture_output

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
