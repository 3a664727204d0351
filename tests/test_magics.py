"""The %shiro magics in an in-process IPython shell (no kernel), against the fake server."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from fakeopenai import Call, Reply
from IPython.utils.capture import capture_output


@pytest.fixture
def shell(shiro_shell):
    return shiro_shell


def run(shell, source: str) -> str:
    with capture_output() as cap:
        result = shell.run_cell(source)
    assert result.error_in_exec is None and result.error_before_exec is None, result
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def test_question_prompt_reaches_the_agent(shell, fake_openai):
    fake_openai.enqueue(Reply(text="Because of the loop."))
    out = run(shell, "%shiro why is it slow?")
    answer, _footer = out.split("\n\n")
    assert answer == "Because of the loop."
    assert fake_openai.requests[0].body["input"][0]["content"] == "why is it slow?"


def test_cell_magic_body_is_the_prompt(shell, fake_openai):
    fake_openai.enqueue(Reply(text="ok"))
    run(shell, "%%shiro --wait\nsummarise\nthe data")
    assert fake_openai.requests[0].body["input"][0]["content"] == "summarise\nthe data"


def test_config_wins_over_environment(shell, fake_openai):
    fake_openai.enqueue(Reply(text="ok"))
    shell.run_cell('%config Shiro.model = "gpt-4.1-nano"')
    run(shell, "%shiro hi")
    assert fake_openai.requests[0].body["model"] == "gpt-4.1-nano"


def test_python_tool_runs_in_the_user_namespace(shell, fake_openai):
    shell.run_cell("import pandas\ndf = pandas.DataFrame({'x': [1, 2, 3]})")
    shell.run_cell('%config Shiro.approval = "auto"')
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "total = int(df.x.sum())\ntotal"})]), Reply(text="made `total`")
    )
    out = run(shell, "%shiro --wait sum df.x into total")
    assert shell.user_ns["total"] == 6
    tool_row, answer, _footer = out.split("\n\n")
    assert re.fullmatch(r"✓ python\(total = int\(df\.x\.sum\(\)\) total\) · ok · [\d.]+ m?s", tool_row), tool_row
    assert answer == "made `total`"


def test_usage_errors_are_not_tracebacks(shell):
    with capture_output() as cap:
        shell.run_cell("%shiro --bogus hi")
    assert "unknown option '--bogus'" in cap.stderr + cap.stdout
    with capture_output() as cap:
        shell.run_cell("%shiro")
    assert "give a prompt" in cap.stderr + cap.stdout


LOAD = (
    "from IPython.core.interactiveshell import InteractiveShell\n"
    "import sys\nsh = InteractiveShell.instance()\nsh.run_cell('%load_ext shiro_kernel')\n"
    "print('openai' in sys.modules, 'shiro_kernel.magics' in sys.modules)\n"
)


def test_load_ext_does_not_import_openai(monkeypatch):
    monkeypatch.setenv("SHIRO_NO_WARMUP", "1")
    out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, check=True).stdout
    assert out.split()[-2:] == ["False", "True"]


def test_openai_and_the_options_are_warmed_off_the_main_thread(monkeypatch):
    monkeypatch.delenv("SHIRO_NO_WARMUP", raising=False)
    code = LOAD + (
        "from shiro_kernel import warmup\nwarmup.thread.join(30)\n"
        "from shiro_kernel.magics import ShiroMagics\n"
        "print(warmup.thread.name, 'openai' in sys.modules, '--wait' in ShiroMagics.shiro.__doc__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[-3:] == ["shiro-warmup", "True", "True"]


HELP = LOAD + (
    "from shiro_kernel.magics import ShiroMagics\n"
    "print('built at load:', hasattr(ShiroMagics.shiro, 'parser'))\n"
    "sh.run_cell(sys.argv[1])\n"
)


@pytest.mark.parametrize("ask", ["%shiro?", "%pinfo %shiro", "?%shiro"])
def test_help_is_complete_although_the_options_are_built_on_first_use(monkeypatch, ask):
    """argparse is not paid at ``%load_ext``; the first cell naming ``shiro`` builds it, so ``%shiro?``
    still shows every option and command."""
    monkeypatch.setenv("SHIRO_NO_WARMUP", "1")
    out = subprocess.run([sys.executable, "-c", HELP, ask], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[:2] == ["False True", "built at load: False"]  # LOAD's line, then HELP's
    assert all(word in out for word in ("--wait", "--no-memory", "--agent NAME", "/todos", "/mcp")), out


def test_a_question_in_the_cell_that_loads_the_extension_says_why_it_was_not_sent(monkeypatch, fake_openai, tmp_path):
    """IPython transforms a cell before running it, so in the cell that loads the extension a ``%shiro … ?``
    line is already a help request (``Object `most` not found.``); the cell says what happened and what to
    do instead of leaving the user with IPython's line alone (issue 29, point 7)."""
    from IPython.core.interactiveshell import InteractiveShell

    from shiro_kernel.extension import LOADED_TOO_LATE

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-shell")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("SHIRO_NO_WARMUP", "1")
    monkeypatch.chdir(tmp_path)
    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance()
    try:
        with capture_output() as cap:
            shell.run_cell("%load_ext shiro_kernel\n%shiro --wait which region grew the most?")
        assert LOADED_TOO_LATE in cap.stderr
        assert fake_openai.requests == []
        fake_openai.enqueue(Reply(text="North."))
        with capture_output() as cap:  # the next cell: claimed, sent
            shell.run_cell("%shiro --wait which region grew the most?")
        assert "North." in cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)
        assert LOADED_TOO_LATE not in cap.stderr
        assert [r.body["input"][0]["content"] for r in fake_openai.requests] == ["which region grew the most?"]
        with capture_output() as cap:  # loading again (already loaded) and other cells say nothing
            shell.run_cell("%load_ext shiro_kernel")
        assert cap.stderr == ""
    finally:
        shell.run_cell("%unload_ext shiro_kernel")
        InteractiveShell.clear_instance()


@pytest.fixture
def live_shell(shell):
    """The shell with background turns (a widget frontend, as in JupyterLab)."""
    shell.run_cell('%config Shiro.frontend = "widgets"')
    return shell


@pytest.mark.parametrize(
    ("flags", "said"),
    [("--no-memory", "memory is off for this session"), ("--mute gh-helper,notes", ""), ("--memory", "memory is on")],
)
def test_session_flags_typed_while_a_turn_runs_apply_without_a_prompt(live_shell, fake_openai, flags, said):
    """``%shiro --no-memory`` (or ``--mute X``, ``--memory``) typed while a turn runs applies the flag and
    is done: no "give a prompt" error (issue 29, point 10)."""
    from fakeopenai import Fault

    fake_openai.enqueue(Fault.delay(0.5, Reply(text="still running")))
    run(live_shell, "%shiro a long question")
    magics = live_shell.magics_manager.registry["ShiroMagics"]
    assert magics.controller.busy
    with capture_output() as cap:
        result = live_shell.run_cell(f"%shiro {flags}")
    assert result.error_in_exec is None, cap.stderr
    assert "give a prompt" not in cap.stdout + cap.stderr
    assert said in cap.stdout and "from the next turn on" in cap.stdout
    agent = magics.agent
    if flags == "--no-memory":
        assert agent.memory.enabled() is False
    elif flags == "--memory":
        assert agent.memory.enabled() is True
    else:
        assert {"gh-helper", "notes"} <= set(agent.memory.muted)
    assert magics.controller.wait_idle(10)
    assert len(fake_openai.requests) == 1  # the flag queued no turn
    assert magics.controller.finished[-1].view.turn_log.answer == "still running"


def test_a_prompt_is_sent_as_typed_never_expanded(shiro_shell, fake_openai):
    """IPython expands ``{expr}`` and ``$name`` in a line magic's line unless told not to: a prompt holding braces
    (a dict, a format string, a call id pasted by a front end) must reach the model as typed, run nothing."""
    shiro_shell.user_ns["secret_value"] = "SHOULD-NOT-APPEAR"
    fake_openai.enqueue(Reply(text="ok"), Reply(text="ok"))
    shiro_shell.run_cell("%shiro what does {secret_value} print, and $secret_value?")
    shiro_shell.run_cell("%shiro is {__import__('os').getpid()} a pid?")
    prompts = [r.body["input"][0]["content"] for r in fake_openai.requests]
    assert prompts[0] == "what does {secret_value} print, and $secret_value?"
    assert "{__import__('os').getpid()}" in json.dumps(fake_openai.requests[1].body)


def test_the_magics_routing_is_a_table_of_every_action():
    """Each ``Line.action`` has one route while a turn runs in the background and one when none does."""
    from typing import get_args

    from shiro_kernel.line import Action
    from shiro_kernel.magics import WHEN_IDLE, WHILE_BUSY

    assert set(WHILE_BUSY) == set(WHEN_IDLE) == set(get_args(Action))
