"""Nothing waits forever, nothing grows without bound, an interrupt records what happened (issue 14), and
the turn's notices tell the truth (issue 17): real turns against the fake server, tools in a real
InteractiveShell."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from fakeopenai import Call, Reply
from faultlog import record
from IPython.core.interactiveshell import InteractiveShell
from turnutil import KEY, make_turn

from shiro_kernel.agent import Agent
from shiro_kernel.config import Shiro
from shiro_kernel.context.limits import WIRE_ARGUMENT_CHARS
from shiro_kernel.events import Notice, TurnEnd
from shiro_kernel.memory.notes import NoteStore
from shiro_kernel.tools import ToolContext, all_tools
from shiro_kernel.turn import STEP_OUTPUT_CHARS, Frontend, TurnOptions
from shiro_kernel.ui.text_view import time_limit
from shiro_kernel.ui.widgets import TurnView

TIME_LIMIT_NOTICE = (
    "the turn ran past its time limit of 2 s and was stopped; what finished is kept "
    "(raise it with %config Shiro.turn_timeout_s = ...)"
)


@pytest.fixture
def env(monkeypatch, fake_openai):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return fake_openai


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    yield sh
    InteractiveShell.clear_instance()


def tool_turn(env, tmp_path, shell, events, stream=True):
    turn = make_turn(env, tmp_path, options=TurnOptions(approval="auto"), events=events, stream=stream)
    turn.tools = all_tools()
    turn.ctx = ToolContext(root=tmp_path, shell=shell)
    return turn


def results(turn) -> dict[str, str]:
    return {r.call_id: r.output for m in turn.session.messages for r in m.tool_results()}


def test_an_interrupt_keeps_finished_results_and_marks_the_running_call(env, tmp_path, shell):
    env.enqueue(
        Reply(
            tool_calls=[
                Call("write_file", {"path": "done.txt", "content": "side effect"}, call_id="c_write"),
                Call("python", {"code": "print('halfway there')\nraise KeyboardInterrupt"}, call_id="c_py"),
                Call("read_file", {"path": "done.txt"}, call_id="c_read"),
            ]
        )
    )
    turn = tool_turn(env, tmp_path, shell, [])
    end = turn.run("do three things")
    assert end.reason == "aborted" and (tmp_path / "done.txt").read_text() == "side effect"
    out = results(turn)
    assert out["c_write"].startswith("Wrote 11 bytes")  # finished: recorded as it happened, not "not run"
    assert out["c_py"].startswith("Error: interrupted after ") and "halfway there" in out["c_py"]
    assert out["c_read"].startswith("Error: not run — the user stopped the turn before this call ran")
    assert len(env.requests) == 1
    record(
        "interrupt during a batch of calls (write_file, python, read_file)",
        3,
        0,
        "the finished write recorded as done; python `interrupted after N s` with its partial output; "
        "only the unstarted read marked not run",
    )


def test_a_turn_past_its_time_limit_stops_within_it(env, tmp_path, shell):
    env.enqueue(Reply(text="warm"))  # the first call of a process builds the client: not this test's subject
    warm = tool_turn(env, tmp_path, shell, [])
    warm.run("hello")
    spin = "import time\nprint('spinning')\nwhile True: time.sleep(0.01)"
    env.enqueue(Reply(tool_calls=[Call("python", {"code": spin})]))
    events: list = []
    turn = tool_turn(env, tmp_path, shell, events)
    started = time.monotonic()
    with time_limit(2.0):
        end = turn.run("spin")
    elapsed = time.monotonic() - started
    assert elapsed < 6
    record("python `while True` in a blocking turn, limit 2 s", 1, 0, f"stopped after {elapsed:.1f} s, output kept")
    assert end.reason == "timeout"
    assert [e.text for e in events if isinstance(e, Notice)] == [TIME_LIMIT_NOTICE]
    (output,) = results(turn).values()
    assert re.fullmatch(
        r"Error: interrupted after [\d.]+ s — the turn reached its time limit while this call ran; "
        r"its output so far:\nspinning",
        output,
    ), output


def test_a_five_megabyte_argument_is_shortened_on_the_wire_only(env, tmp_path, shell):
    huge = "x" * 5_000_000
    env.enqueue(
        Reply(tool_calls=[Call("write_file", {"path": "big.txt", "content": huge})]),
        Reply(text="written"),
        Reply(text="still here"),
    )
    events: list = []
    turn = tool_turn(env, tmp_path, shell, events, stream=False)  # 5 MB streamed in small deltas is just slow
    turn.run("write it")
    turn.run("and then?")
    sizes = [len(r.raw) for r in env.requests]
    assert sizes[0] < 100_000 and max(sizes[1:]) < 4 * WIRE_ARGUMENT_CHARS
    assert (tmp_path / "big.txt").stat().st_size == 5_000_000  # the call ran with the whole argument
    call = turn.session.messages[1].tool_calls()[0]
    assert len(call.arguments) > 5_000_000  # the record keeps it whole
    notices = [e.text for e in events if isinstance(e, Notice)]
    shortened = "1 oversized tool argument or result shortened in the request (the session keeps them whole)"
    assert notices == [shortened, shortened]  # one for each turn's requests
    record(
        "a tool call with a 5 MB argument",
        len(sizes) - 1,
        0,
        f"later requests {max(sizes[1:]) / 1000:.0f} kB at most (not 5 MB); the record keeps it whole; "
        "the notice says 1 shortened",
    )


def test_two_hundred_parallel_reads_share_one_step_budget(env, tmp_path, shell):
    for i in range(200):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n" + "y" * 20_000)
    env.enqueue(Reply(tool_calls=[Call("read_file", {"path": f"f{i}.txt"}) for i in range(200)]), Reply(text="read"))
    turn = tool_turn(env, tmp_path, shell, [])
    turn.run("read them all")
    total = sum(len(o) for o in results(turn).values())
    assert total < STEP_OUTPUT_CHARS * 1.5
    assert len(env.requests[1].raw) < 400_000  # not 4 MB
    assert "200 results this step: each was cut to 500" in next(iter(results(turn).values()))
    record(
        "200 parallel `read_file` calls in one step",
        200,
        0,
        f"the next request {len(env.requests[1].raw) / 1000:.0f} kB (was 4.15 MB); each result cut to its share",
    )


def test_the_pruning_notice_says_when_only_reasoning_went(env, tmp_path):
    from fakeopenai import Reply as R

    env.enqueue(
        *[R(reasoning="thinking " * 400, tool_calls=[Call("add", {"a": i, "b": 1})]) for i in range(6)], R(text="done")
    )
    events: list = []
    turn = make_turn(env, tmp_path, options=TurnOptions(approval="auto", compact_threshold=2_500), events=events)
    turn.run("add a lot")
    notices = [e.text for e in events if isinstance(e, Notice) and e.kind == "compacted"]
    assert notices and "earlier reasoning left out of the request" in notices[0] and "messages kept" in notices[0]
    assert "pruned to" not in notices[0]


def test_the_boot_header_is_shown_once_when_a_session_starts_with_notes(env, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", env.base_url)
    monkeypatch.chdir(tmp_path)
    NoteStore.for_project(tmp_path).add("fact", "the data is in sales.csv")
    NoteStore.for_project(tmp_path).add("gotcha", "dates are day-first")
    agent = Agent(None, Shiro())
    env.enqueue(Reply(text="one"), Reply(text="two"))
    seen: list = []
    agent.ask("first", Frontend(on_event=seen.append))
    agent.ask("second", Frontend(on_event=seen.append))
    headers = [e.text for e in seen if isinstance(e, Notice) and e.text.startswith("memory:")]
    assert headers == ["memory: 2 notes about this project"]
    agent.close()


def test_the_busy_line_shows_elapsed_time_from_ten_seconds():
    view = TurnView()
    view.running()
    assert "working… Stop" in view.status.value
    view.started_at -= 12.4
    view.tick()
    assert "working 12s… Stop" in view.status.value
    view.feed(TurnEnd("answered", __import__("shiro_kernel.events", fromlist=["Usage"]).Usage(1, 1)))
    assert "working" not in view.status.value


def test_a_headless_notebook_turn_that_never_ends_stops_at_its_limit(fake_openai, tmp_path):
    from kernelutil import run_notebook

    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "while True:\n    pass"})]), Reply(text="ok"))
    started = time.monotonic()
    nb = run_notebook(
        tmp_path / "spin.ipynb",
        [
            "%load_ext shiro_kernel",
            '%config Shiro.approval = "auto"',
            "%config Shiro.turn_timeout_s = 2",
            "%shiro --wait spin forever",
            "print('after')",
        ],
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"},
    )
    elapsed = time.monotonic() - started
    assert elapsed < 40
    (shown,) = [o["data"]["text/plain"] for o in nb.cells[3].outputs if "text/plain" in o.get("data", {})]
    _tool_row, notice, _footer = shown.split("\n\n")
    assert notice == f"[{TIME_LIMIT_NOTICE}]"
    assert [o.get("text") for o in nb.cells[4].outputs] == ["after\n"]
    record(
        "headless notebook (nbclient) `while True`, Shiro.turn_timeout_s = 2",
        1,
        0,
        f"the notebook ran to its end in {elapsed:.1f} s (kernel start included); the next cell ran",
    )


def test_the_headless_refusal_shows_how_to_allow_it(fake_openai, tmp_path):
    from kernelutil import run_notebook

    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "1 + 1"})]), Reply(text="I could not run it."))
    nb = run_notebook(
        tmp_path / "refused.ipynb",
        ["%load_ext shiro_kernel", "%shiro --wait add one and one"],
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"},
    )
    final = [o for o in nb.cells[1].outputs if "text/plain" in o.get("data", {})][-1]["data"]
    plain, markdown = final["text/plain"], final["text/markdown"]
    for shown in (plain, markdown):
        assert '`%config Shiro.approval = "auto"` and ask again.' in shown  # the whole first line, not cut
        assert shown.count('run %config Shiro.approval = "auto"') == 1  # one notice, once
    assert Path(tmp_path / "refused.ipynb").exists()
