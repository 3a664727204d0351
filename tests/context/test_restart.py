"""Kernel-restart awareness: the names the agent's python calls created, which a fresh kernel lacks,
the prompt block and notice, and /rebuild under each approval mode."""

from __future__ import annotations

import json

import pytest
from fakeopenai import Call, Reply
from IPython.core.interactiveshell import InteractiveShell
from kernelutil import outputs_text, run_notebook, state_of

from shiro_kernel.agent import Agent
from shiro_kernel.config import Shiro
from shiro_kernel.context import restart
from shiro_kernel.session import Session
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.transcript import Message, ToolCallPart, ToolResultPart
from shiro_kernel.turn import Frontend
from shiro_kernel.ui.session_text import started

KEY = "sk-test-restart-0000"


def test_assigned_names_covers_every_top_level_binding():
    code = """
import numpy as np, os.path
from math import pi as PI
%matplotlib inline
df = load()
a, (b, *c) = 1, (2, 3)
n += 1
m: int = 3
for i, row in enumerate(rows):
    total = row
with open('f') as fh:
    text = fh.read()
def helper(x):
    inner = 1
class Model: pass
if True:
    flag = 1
df.x = 3
d['k'] = 1
"""
    assert restart.assigned_names(code) == [
        "np",
        "os",
        "PI",
        "df",
        "a",
        "b",
        "c",
        "n",
        "m",
        "i",
        "row",
        "total",
        "fh",
        "text",
        "helper",
        "Model",
        "flag",
    ]
    assert restart.assigned_names("this is not python (") == []


def _session(*codes, failed=()):
    msgs = [Message.user("go")]
    for n, code in enumerate(codes):
        call = ToolCallPart(f"c{n}", "python", json.dumps({"code": code}))
        msgs.append(Message("assistant", [call]))
        msgs.append(
            Message(
                "tool", [ToolResultPart(f"c{n}", "python", "Error: no" if n in failed else "ok", is_error=n in failed)]
            )
        )
    return msgs


def test_missing_names_and_the_code_that_made_them():
    msgs = _session(
        "import pandas as pd\ndf = pd.DataFrame()", "model = fit(df)", "df = df.dropna()", "bad = 1", failed=(3,)
    )
    lost = restart.missing(msgs, {"pd": 1})
    assert list(lost) == ["df", "model"]
    assert lost["df"] == "df = df.dropna()"  # the newest code that assigned it
    assert restart.rebuild_code(msgs, ["df", "model"]) == [
        "import pandas as pd\ndf = pd.DataFrame()",
        "model = fit(df)",
        "df = df.dropna()",
    ]
    assert restart.missing(msgs, None) == {}
    assert restart.prompt_block(["df", "model"]) == (
        "Kernel restarted since this session's earlier turns: these variables they created no longer exist: "
        "df, model (use /rebuild or recreate them before relying on them)."
    )
    assert restart.notice(["df", "model"]) == (
        "kernel restarted: 2 variables from earlier turns are gone (df, model) — "
        "%shiro /rebuild re-runs the code that made them"
    )


@pytest.fixture
def shell(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance()
    yield sh
    InteractiveShell.clear_instance()


def _saved(code: str) -> Session:
    session = Session(messages=_session(code))
    SessionStore().save(session, model="gpt-4o-mini")
    return session


@pytest.mark.parametrize("approval", ["auto", "ask", "read-only"])
def test_resume_reports_lost_variables_and_rebuild_follows_approval(shell, approval):
    session = _saved("import math\nradius = 2\narea = math.pi * radius ** 2")
    agent = Agent(shell, Shiro(approval=approval))
    line = started(agent.current.start(resume=session.id[:8])) or ""
    assert line.splitlines()[-1] == (
        "kernel restarted: 3 variables from earlier turns are gone (math, radius, "
        "area) — %shiro /rebuild re-runs the code that made them"
    )
    from shiro_kernel import commands

    out = commands.run(agent, "/rebuild")
    if approval == "auto":
        assert out == "rebuilt math, radius, area (1 code block re-run)"
        assert shell.user_ns["radius"] == 2 and round(shell.user_ns["area"], 2) == 12.57
        assert commands.run(agent, "/rebuild").startswith("nothing to rebuild")
    elif approval == "ask":
        assert out.startswith("Error: not approved — this run cannot show approval buttons")
        assert "so /rebuild was not run" in out and "radius" not in shell.user_ns
    else:
        assert out.startswith('Error: not approved — Shiro.approval is "read-only", so /rebuild is refused')
        assert "radius" not in shell.user_ns


def test_same_kernel_resume_has_nothing_lost(shell):
    session = _saved("kept = 1")
    shell.user_ns["kept"] = 1
    agent = Agent(shell, Shiro())
    assert "kernel restarted" not in (started(agent.current.start(resume=session.id[:8])) or "")
    assert agent.current.lost == {}


def test_notebook_restart_then_rebuild(fake_openai, tmp_path):
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"}
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "import pandas as pd\ndf2 = pd.DataFrame({'x': [1, 2, 3]})"})]),
        Reply(text="Made df2."),
    )
    path = tmp_path / "r.ipynb"
    run_notebook(path, ["%load_ext shiro_kernel\n%config Shiro.approval = 'auto'", "%shiro --wait make df2"], env)
    assert len(fake_openai.requests) == 2

    fake_openai.enqueue(Reply(text="df2 is gone; I will rebuild it."))
    nb = run_notebook(
        path,
        [
            "%load_ext shiro_kernel\n%config Shiro.approval = 'auto'",
            "%shiro --wait where is df2?",
            "%shiro /rebuild",
            "print(df2.x.sum())",
        ],
        env,
    )
    first = state_of(fake_openai.requests[2])  # the per-step state message after the conversation
    assert (
        "Kernel restarted since this session's earlier turns: these variables they created no longer exist: "
        "pd, df2 (use /rebuild or recreate them before relying on them)."
    ) in first
    assert (
        "kernel restarted: 2 variables from earlier turns are gone (pd, df2) — %shiro /rebuild re-runs the "
        "code that made them"
    ) in outputs_text(nb.cells[1])
    assert "rebuilt pd, df2 (1 code block re-run)" in outputs_text(nb.cells[2])
    assert outputs_text(nb.cells[3]).strip() == "6"


def test_the_block_goes_to_the_first_turn_after_the_resume_only(shell, monkeypatch, fake_openai):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    session = _saved("lost_var = 41")
    SessionStore().save(session, model="gpt-4o-mini")
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"))
    agent = Agent(shell, Shiro(model="gpt-4o-mini"))
    agent.current.resume(session.id)
    seen: list = []
    agent.ask("first", Frontend(on_event=seen.append))
    agent.ask("second", Frontend(on_event=seen.append))
    block = "these variables they created no longer exist: lost_var"
    assert block in state_of(fake_openai.requests[0])  # the per-step state, not the instructions
    assert block not in state_of(fake_openai.requests[1])
    assert fake_openai.requests[0].body["instructions"] == fake_openai.requests[1].body["instructions"]
