"""Nothing secret leaves the kernel (issue 33, point 1): the whole request passes the redaction at the one boundary
where anything leaves — the instructions (a repository's AGENTS.md, the notes and memories injected at the
session's start), the per-step state and every message — not only the tool results. Real turns against the fake
server, asserted on the bytes it received."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakeopenai import Call, Reply
from faultlog import SECURITY, record
from IPython.utils.capture import capture_output

from shiro_kernel.memory.notes import NoteStore

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"  # shaped like an AWS secret access key


def run(shell: Any, source: str) -> str:
    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def test_a_secret_in_the_instructions_state_or_prompt_is_never_sent(shiro_shell, fake_openai, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    # a note carrying a secret (written by an older version, by hand, or by a tool before a redaction rule)
    NoteStore.for_project(Path(tmp_path)).add("fact", f"the bucket key is {SECRET}")
    (Path(tmp_path) / "AGENTS.md").write_text(f"Deploy with key {SECRET} and token sk-test-shell\n")
    run(shiro_shell, '%config Shiro.approval = "auto"')
    todos = [{"content": f"rotate {SECRET}", "status": "pending"}]  # the task list goes out in the state
    fake_openai.enqueue(Reply(tool_calls=[Call("todo_write", {"todos": todos})]), Reply(text="done"))
    run(shiro_shell, f"%shiro use {SECRET} and sk-test-shell")
    sent = b"".join(r.raw for r in fake_openai.requests)
    assert len(fake_openai.requests) == 2
    assert SECRET.encode() not in sent and b"sk-test-shell" not in sent
    assert b"[redacted:AWS_SECRET_ACCESS_KEY]" in sent and b"[redacted:OPENAI_API_KEY]" in sent
    second = fake_openai.requests[1].body
    assert "[redacted:AWS_SECRET_ACCESS_KEY]" in second["instructions"]  # the notes and AGENTS.md
    assert "[redacted:AWS_SECRET_ACCESS_KEY]" in str(second["input"][-1])  # the state: the task list
    record(
        SECURITY + "a secret in AGENTS.md, a project note, the task list and the prompt (2 requests)",
        4,
        0,
        "redacted at the one boundary where a request leaves: 0 occurrences of the secret or the API key in the "
        "bytes sent; the instructions stay byte-stable between requests",
    )


def test_the_redaction_keeps_the_prefix_byte_stable(shiro_shell, fake_openai, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"))
    run(shiro_shell, f"%shiro first {SECRET}")
    run(shiro_shell, "%shiro second")
    first, second = (r.body for r in fake_openai.requests)
    assert second["instructions"] == first["instructions"]
    assert second["input"][0] == first["input"][0]  # the redacted prompt is the same bytes again
