"""The ``shell`` tool: real bash in a temporary project root."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from shiro_kernel.tools import ToolContext, ToolError, all_tools, run_tool
from shiro_kernel.tools.shell_tool import OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES
from shiro_kernel.transcript import ToolCallPart


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "hello.txt").write_text("hi\n")
    return ToolContext(root=tmp_path)


def sh(ctx: ToolContext, command: str, timeout_s=None) -> str:
    return all_tools()["shell"].run({"command": command, "timeout_s": timeout_s}, ctx)


def test_runs_in_the_project_root_with_exit_code(ctx, tmp_path):
    assert sh(ctx, "pwd; cat hello.txt") == f"{os.path.realpath(tmp_path)}\nhi\n[exit code 0]"


def test_stdout_and_stderr_combined_and_failure_code(ctx):
    out = sh(ctx, "echo out; echo err >&2; exit 3")
    assert out == "out\nerr\n[exit code 3]"


def test_no_output_and_closed_stdin(ctx):
    assert sh(ctx, "true") == "(no output)\n[exit code 0]"
    assert sh(ctx, "cat; echo done") == "done\n[exit code 0]"  # stdin is /dev/null, no hang


def test_timeout_kills_the_whole_process_group(ctx, tmp_path):
    started = time.monotonic()
    out = sh(ctx, "echo started; (sleep 30; echo late > late.txt) & sleep 30", timeout_s=1)
    elapsed = time.monotonic() - started
    assert elapsed < 3, elapsed
    assert out.startswith("started\n[timed out after 1 s: the command and its process group were killed")
    time.sleep(0.2)
    assert not (tmp_path / "late.txt").exists()


def test_background_job_holding_the_pipe_does_not_hang(ctx):
    started = time.monotonic()
    out = sh(ctx, "sleep 3 & echo quick", timeout_s=10)
    assert time.monotonic() - started < 3
    assert out.startswith("quick\n") and "background processes still hold the output open" in out
    assert out.endswith("[exit code 0]")


def test_killed_by_a_signal_is_reported(ctx):
    assert "[killed by SIGTERM after " in sh(ctx, "kill -TERM $$")


def test_huge_output_is_bounded(ctx):
    out = sh(ctx, "seq 1 2000000")
    assert out.startswith("1\n2\n3\n") and out.endswith("2000000\n[exit code 0]")
    assert "bytes of output truncated" in out
    assert len(out) < OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES + 200


def test_argument_errors(ctx):
    with pytest.raises(ToolError, match="command is empty"):
        sh(ctx, "  ")
    with pytest.raises(ToolError, match="timeout_s must be a positive number"):
        sh(ctx, "true", timeout_s=0)
    with pytest.raises(ToolError, match="timeout_s may be at most 600 seconds, not 601"):
        sh(ctx, "true", timeout_s=601)


def test_through_the_registry(ctx):
    def call(arguments: str) -> str:
        return run_tool(all_tools(), ToolCallPart("c", "shell", arguments), ctx).output

    assert call(json.dumps({"command": "echo ok"})) == "ok\n[exit code 0]"
    assert call(json.dumps({"command": "echo ok", "timeout_s": 2.5})) == "ok\n[exit code 0]"
    assert call('{"command": ["ls"]}').startswith("Error: argument 'command' must be string")
    assert call('{"command": "ls", "timeout_s": "5"}').startswith("Error: argument 'timeout_s' must be number")
    assert call('{"cmd": "ls"}').startswith("Error: unknown argument(s) cmd")
    assert call('{"command": "ls"').startswith("Error: arguments are not valid JSON")
