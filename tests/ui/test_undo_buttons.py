"""The live view's Undo buttons (issue 35 #2), in an in-process shell with the fake model: the LiveController is
pumped by the test (it stands in for the kernel's loop) and the buttons are clicked from Python.

Once a turn has ended, each row whose step the kernel can take back has an Undo button; a click takes back that
step and every one after it (off the kernel's thread, as a front end's cell reverts need), shows under the row
what was restored and what was not, and every view's buttons follow: a step taken back has none, and is marked."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Fault, Reply
from faultlog import record
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from shiro_kernel.ui import live
from shiro_kernel.ui.widgets import UndoBar

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # pandas 3.1 on dropna(inplace=True)

#: a frame with a missing value; the turn drops its rows in place, then writes a file
SETUP = 'import pandas as pd\ndf = pd.DataFrame({"a": [1.0, None, 3.0], "b": [4, 5, 6]})'
DROP = Call("python", {"code": "df.dropna(inplace=True)\nkept = len(df)"})
WRITE = Call("write_file", {"path": "clean.csv", "content": "a,b\n1.0,4\n3.0,6\n"})


@pytest.fixture
def shell(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-undo-buttons")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("SHIRO_MODEL", "gpt-4o-mini")
    monkeypatch.chdir(tmp_path)
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext shiro_kernel")
    sh.run_cell('%config Shiro.frontend = "widgets"')
    sh.run_cell('%config Shiro.approval = "auto"')
    yield sh
    sh.run_cell("%unload_ext shiro_kernel")  # stops any turn and the queue
    InteractiveShell.clear_instance()


def controller_of(shell: Any) -> live.LiveController:
    return shell.magics_manager.registry["ShiroMagics"].controller


def run(shell: Any, source: str) -> str:
    with capture_output() as cap:
        result = shell.run_cell(source)
    assert result.error_in_exec is None and result.error_before_exec is None, result
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def bars(view: Any) -> dict[str, UndoBar]:
    """The view's Undo bars by call id, as they stand among its entries."""
    return {w.call_id: w for w in view.entries.children if isinstance(w, UndoBar)}


def shown(bar: UndoBar) -> bool:
    return bar.button.layout.display != "none"


def clean_turn(shell: Any, fake_openai: Any) -> Any:
    """A turn whose first step drops ``df``'s rows in place and whose second writes clean.csv; its view."""
    run(shell, SETUP)
    fake_openai.enqueue(
        Reply(text="Dropping the empty rows.", tool_calls=[DROP]),
        Reply(tool_calls=[WRITE]),
        Reply(text="Dropped 1 row and wrote clean.csv."),
    )
    run(shell, "%shiro clean the frame and save it")
    controller = controller_of(shell)
    assert controller.wait_idle(20)
    view = controller.finished[-1].view
    assert [r.name for r in view.tool_rows] == ["python", "write_file"]
    return view


def test_undo_on_the_first_row_restores_the_frame_removes_the_file_and_says_both(shell, fake_openai, tmp_path):
    view = clean_turn(shell, fake_openai)
    drop, write = (r.call_id for r in view.tool_rows)
    assert len(shell.user_ns["df"]) == 2 and (tmp_path / "clean.csv").exists()
    found = bars(view)
    assert set(found) == {drop, write} and all(shown(b) for b in found.values())  # both steps changed something
    children = list(view.entries.children)
    assert children.index(found[drop]) < children.index(found[write])  # each under its own row

    found[drop].button.click()  # on the kernel's thread, as a click arrives
    controller = controller_of(shell)
    assert controller.wait_idle(20)

    df = shell.user_ns["df"]
    assert len(df) == 3 and df["a"].isna().sum() == 1  # the dropped row is back
    assert "kept" not in shell.user_ns  # the name the step made is gone
    assert not (tmp_path / "clean.csv").exists()  # the file the later step made is removed
    report = found[drop].report.value
    assert "undid 2 steps" in report and "df" in report and "clean.csv removed" in report, report
    assert "kept" in report  # named as removed
    assert not shown(found[drop]) and not shown(found[write])  # nothing left to take back on either row
    assert "undone" in found[drop].mark.value and "undone" in found[write].mark.value
    assert found[write].report.value == ""  # the report is under the row clicked


def test_undo_on_the_second_row_leaves_the_first_step_and_its_button(shell, fake_openai, tmp_path):
    view = clean_turn(shell, fake_openai)
    drop, write = (r.call_id for r in view.tool_rows)
    bars(view)[write].button.click()
    assert controller_of(shell).wait_idle(20)
    assert not (tmp_path / "clean.csv").exists()
    assert len(shell.user_ns["df"]) == 2  # the first step stays
    found = bars(view)
    assert shown(found[drop]) and not shown(found[write])
    assert "undone" in found[write].mark.value and found[drop].mark.value == ""
    assert "undid 1 step" in found[write].report.value


def test_a_rows_undo_keeps_what_the_user_changed_after_the_steps(shell, fake_openai, tmp_path):
    """The Undo buttons follow /undo's rule (issue 39 §1): the frame and the file the user changed since are kept
    and named under the row, with the command that takes them back anyway; no button is left that would do nothing."""
    view = clean_turn(shell, fake_openai)
    drop, write = (r.call_id for r in view.tool_rows)
    run(shell, "df['mine'] = df['a'] * 100")
    with (tmp_path / "clean.csv").open("a") as fh:
        fh.write("5.0,7\n")
    bars(view)[drop].button.click()
    assert controller_of(shell).wait_idle(20)
    report = bars(view)[drop].report.value
    assert "clean.csv (changed after this step), df (changed after this step)" in report, report
    assert f"%shiro /undo {drop} --force to take them back anyway" in report
    assert "removed (the steps made them): kept" in report  # what the user left alone is taken back
    assert list(shell.user_ns["df"].columns) == ["a", "b", "mine"] and (tmp_path / "clean.csv").read_text().endswith(
        "5.0,7\n"
    )
    assert not any(shown(b) for b in bars(view).values())
    run(shell, f"%shiro /undo {drop} --force")
    assert controller_of(shell).wait_idle(20)
    assert len(shell.user_ns["df"]) == 3 and not (tmp_path / "clean.csv").exists()


def test_a_typed_undo_takes_the_buttons_away_and_reports_in_its_cell(shell, fake_openai, tmp_path):
    view = clean_turn(shell, fake_openai)
    with capture_output() as cap:
        shell.run_cell("%shiro /undo")
        assert controller_of(shell).wait_idle(20)
    said = "".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert live.TAKING_BACK in said and "undid 2 steps" in said and "clean.csv removed" in said, said
    assert len(shell.user_ns["df"]) == 3
    assert not any(shown(b) for b in bars(view).values())
    # the listing a front end asks for says the same
    listed = json.loads(run(shell, "%shiro /undoable").strip().splitlines()[-1])
    assert listed == {"calls": []}


def test_no_undo_while_a_turn_runs_and_the_listing_is_never_queued(shell, fake_openai, tmp_path):
    view = clean_turn(shell, fake_openai)
    controller = controller_of(shell)
    fake_openai.enqueue(Fault.delay(1.5, Reply(text="thinking about it")))
    run(shell, "%shiro anything else?")
    assert controller.running is not None
    assert not any(shown(b) for b in bars(view).values())  # no button while a turn runs
    started = time.monotonic()
    listed = json.loads(run(shell, "%shiro /undoable").strip().splitlines()[-1])
    answered = time.monotonic() - started
    assert controller.running is not None and not controller.queue  # answered at once, not queued behind the turn
    assert set(listed["calls"]) == {r.call_id for r in view.tool_rows}
    said: list[str] = []
    controller.take_back(view.tool_rows[0].call_id, said.append)  # a click that raced the turn's start
    assert said == [live.UNDO_WHILE_TURN]
    assert len(shell.user_ns["df"]) == 2 and (tmp_path / "clean.csv").exists()  # nothing was taken back
    assert controller.wait_idle(20)
    record(
        "Undo clicked while a turn runs",
        1,
        0,
        f"refused in one sentence, nothing taken back; the listing answered in {answered * 1000:.0f} ms while the "
        "turn ran (the model held its answer 1.5 s), not queued",
    )
    assert all(shown(b) for b in bars(view).values())  # back once the turn has ended


def test_a_step_that_only_read_gets_no_button(shell, fake_openai):
    run(shell, "x = 41")
    fake_openai.enqueue(
        Reply(tool_calls=[Call("inspect", {"name": "x"})]),
        Reply(tool_calls=[Call("python", {"code": "x += 1"})]),
        Reply(text="x is 42"),
    )
    run(shell, "%shiro add one to x")
    controller = controller_of(shell)
    assert controller.wait_idle(20)
    view = controller.finished[-1].view
    look, add = view.tool_rows
    assert set(bars(view)) == {add.call_id}
    bars(view)[add.call_id].button.click()
    assert controller.wait_idle(20)
    assert shell.user_ns["x"] == 41
    assert "restored: x" in bars(view)[add.call_id].report.value


def test_undo_runs_off_the_kernels_thread_and_puts_names_back_on_it(shell, fake_openai, monkeypatch):
    """The front end answers cell reverts only while the kernel's thread is idle: the undo leaves it, and the
    names go back on it."""
    import threading

    view = clean_turn(shell, fake_openai)
    agent = controller_of(shell).agent
    threads: dict[str, str] = {}
    undo_back, take_back = agent.undo_back, agent.undo.journal.take_back

    def spy_undo_back(*args: Any, **kwargs: Any) -> str:
        threads["undo"] = threading.current_thread().name
        return undo_back(*args, **kwargs)

    def spy_take_back(*args: Any, **kwargs: Any) -> Any:
        threads["names"] = threading.current_thread().name
        return take_back(*args, **kwargs)

    monkeypatch.setattr(agent, "undo_back", spy_undo_back)
    monkeypatch.setattr(agent.undo.journal, "take_back", spy_take_back)
    bars(view)[view.tool_rows[0].call_id].button.click()
    assert controller_of(shell).wait_idle(20)
    assert threads == {"undo": "shiro-undo", "names": threading.main_thread().name}
    assert Path("clean.csv").exists() is False


def test_a_listing_asked_while_an_undo_runs_is_answered_when_it_has_ended(shell, fake_openai):
    """A front end that asks what can be taken back while an undo runs (a cell of it just ended) gets the
    answer that is true once the undo has ended, in the same request, never the list from before it."""
    view = clean_turn(shell, fake_openai)
    controller = controller_of(shell)
    bars(view)[view.tool_rows[0].call_id].button.click()
    assert controller.undoing is not None  # the names go back on this thread, which the test has not pumped yet
    with capture_output() as cap:
        shell.run_cell("%shiro /undoable")
        assert controller.wait_idle(20)
    said = [o.data.get("text/plain", "") for o in cap.outputs]
    assert said == [live.TAKING_BACK, json.dumps({"calls": []})], said


def test_the_command_table_alone_says_what_never_queues_behind_a_turn(shell, fake_openai, monkeypatch):
    """Routing once: the magic reads the table (``Command.when``), the controller runs what it is given. A made-up
    command declared ``AT_ONCE`` answers while a turn runs; the same command without it queues behind the turn."""
    from shiro_kernel import commands

    asked: list[str] = []

    def ping(agent: Any, arg: str) -> str:
        asked.append(arg)
        return f"pong {arg}"

    monkeypatch.setitem(commands.COMMANDS, "/ping", commands.Command(ping, "/ping", "a test's", commands.AT_ONCE))
    monkeypatch.setitem(commands.COMMANDS, "/later", commands.Command(ping, "/later", "a test's"))
    assert commands.parse("/PING  a b ") == ("/PING", "a b", commands.COMMANDS["/ping"])
    run(shell, "%shiro hello")  # the first turn makes the controller
    controller = controller_of(shell)
    assert controller.wait_idle(20)
    fake_openai.enqueue(Fault.delay(1.5, Reply(text="thinking about it")))
    run(shell, "%shiro anything else?")
    assert controller.running is not None
    assert run(shell, "%shiro /ping now").strip().endswith("pong now") and asked == ["now"]  # at once
    assert controller.running is not None and not controller.queue
    assert "queued (position 1)" in run(shell, "%shiro /later then")
    assert asked == ["now"] and len(controller.queue) == 1  # behind the turn
    assert controller.wait_idle(20)
    assert asked == ["now", "then"]
