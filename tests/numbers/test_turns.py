"""The numbers check over real turns (issue 28): ``%shiro`` in a real InteractiveShell against the fake OpenAI
server, its python calls run for real. The issue's turn marks the two numbers no output had in the text view,
the widget view and the saved bundle; a number read off the output links to its call; the next turn's state
message tells the model, for that turn only; ``Shiro.check_numbers = False`` turns all of it off; a turn
replayed in a fresh kernel (nbclient) is not checked again."""

from __future__ import annotations

import html
import json
import os
import re
from typing import Any

import nbformat
import pytest
from fakeopenai import Call, Reply
from IPython.utils.capture import capture_output
from kernelutil import NOTEBOOK_KEY, run_notebook

from shiro_kernel.notebook.mimes import TURN_MIME
from shiro_kernel.ui import live

GROWTH_CODE = "print('cocoa -0.151335, coffee 0.131417, tea 0.050296')"
GROWTH_OUTPUT = "cocoa -0.151335, coffee 0.131417, tea 0.050296"
ISSUE_ANSWER = "**Coffee** grew the most … (+16.4 %). Tea was flat and cocoa fell 3 %."
PROMPT = "which product grew the most?"
MISSING_NUMBERS = [
    {"text": "+16.4 %", "found": False, "call_id": None, "start": 28, "end": 35, "line": None},
    {"text": "3 %", "found": False, "call_id": None, "start": 66, "end": 69, "line": None},
]
NOTE = (
    "Note: in your last answer, +16.4 % and 3 % do not appear in any tool output of that turn; check them with "
    "a tool before relying on them, or say they are estimates."
)
MISSING_SPAN = (
    '<span class="shiro-number-missing" title="not found in this turn\'s outputs" '
    'style="text-decoration:underline dotted #b8860b">{}⚠</span>'
)
FOUND_LINK = (
    '<a class="shiro-number" href="#shiro-call-call_growth" title="from call 1 (python): {line}" '
    'style="color:inherit;text-decoration:underline dotted">{text}</a>'
)


def growth_turn(fake: Any, answer: str = ISSUE_ANSWER) -> None:
    """The issue's turn: one python call printing the growth by product, then ``answer``."""
    fake.enqueue(
        Reply(tool_calls=[Call("python", {"code": GROWTH_CODE}, call_id="call_growth")]),
        Reply(text=answer),
    )


@pytest.fixture
def shell(shiro_shell):
    shiro_shell.run_cell('%config Shiro.approval = "auto"')  # the python calls run without asking
    return shiro_shell


def turn(shell: Any, source: str) -> dict[str, Any]:
    """Run one ``%shiro`` cell (the blocking text view); the final bundle it displayed."""
    with capture_output() as cap:
        result = shell.run_cell(source)
    assert result.error_in_exec is None and result.error_before_exec is None, result
    finals = [o.data for o in cap.outputs if TURN_MIME in o.data]
    assert len(finals) == 1, cap.stdout + cap.stderr
    return finals[0]


def state_message(request: Any) -> str:
    """The request's state message (the last input item when it is a system message), '' when it has none."""
    last = request.body["input"][-1]
    return str(last["content"]) if last.get("role") == "system" else ""


# -- the text view and the bundle ------------------------------------------------------------------------------


def test_the_issues_turn_marks_the_two_made_up_numbers_in_the_text_view_and_the_bundle(shell, fake_openai):
    growth_turn(fake_openai)
    shown = turn(shell, f"%shiro {PROMPT}")
    row, answer, footer = shown["text/plain"].split("\n\n")
    assert row.startswith(f"✓ python({GROWTH_CODE}) · ok · ")
    assert answer == "**Coffee** grew the most … (+16.4 %⚠). Tea was flat and cocoa fell 3 %⚠."
    assert footer.startswith("⚠ 2 numbers not found in this turn's outputs · ")
    assert shown["text/markdown"].split("\n\n")[-2] == answer
    assert shown["text/markdown"].split("\n\n")[-1].startswith("<sub>⚠ 2 numbers not found in this turn's outputs · ")
    page = shown["text/html"]
    assert MISSING_SPAN.format("+16.4 %") in page and MISSING_SPAN.format("3 %") in page
    bundle = shown[TURN_MIME]
    assert bundle["numbers"] == MISSING_NUMBERS
    assert bundle["entries"][-1] == {"type": "text", "text": ISSUE_ANSWER}  # the offsets are in this text
    assert bundle["entries"][0]["callId"] == "call_growth" and bundle["entries"][0]["output"] == GROWTH_OUTPUT


def test_a_number_read_off_the_output_is_found_with_its_call_id(shell, fake_openai):
    growth_turn(fake_openai, "**Coffee** grew the most (13.1 %). Tea was flat and cocoa fell 15.1 %.")
    shown = turn(shell, f"%shiro {PROMPT}")
    assert shown[TURN_MIME]["numbers"] == [
        {"text": "13.1 %", "found": True, "call_id": "call_growth", "start": 26, "end": 32, "line": GROWTH_OUTPUT},
        {"text": "15.1 %", "found": True, "call_id": "call_growth", "start": 63, "end": 69, "line": GROWTH_OUTPUT},
    ]
    _row, answer, footer = shown["text/plain"].split("\n\n")
    assert answer == "**Coffee** grew the most (13.1 %). Tea was flat and cocoa fell 15.1 %."  # found: as written
    assert not footer.startswith("⚠")
    link = FOUND_LINK.format(line=GROWTH_OUTPUT, text="13.1 %")
    assert f"<p><strong>Coffee</strong> grew the most ({link})." in shown["text/html"]
    assert '<pre id="shiro-call-call_growth"' in shown["text/html"]  # the row the link goes to


def test_the_prompts_and_the_codes_numbers_are_not_checked(shell, fake_openai):
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "threshold = 0.125\nprint(0.131417 > threshold)"}, "call_cmp")]),
        Reply(text="Yes: it grew more than the 12.5 % threshold, and more than the 7.5 % you asked about."),
    )
    shown = turn(shell, "%shiro did coffee grow by more than 7.5 %?")
    assert shown[TURN_MIME]["numbers"] == []  # 12.5 % is the code's 0.125, 7.5 % the prompt's
    assert not shown["text/plain"].split("\n\n")[-1].startswith("⚠")


def test_inspects_dataframe_and_a_displayed_table_are_sources(shell, fake_openai):
    make = "import pandas as pd\nsales = pd.DataFrame({'region': ['north', 'south'], 'revenue': [1234.5 * 1000, 8.5]})"
    show = "from IPython.display import HTML, display\ndisplay(HTML(f'<table><tr><td>{0.5 - 0.0179:.4f}</td></tr></table>'))"
    fake_openai.enqueue(
        Reply(
            tool_calls=[
                Call("python", {"code": make}, "call_make"),
                Call("inspect", {"names": ["sales"]}, "call_inspect"),
                Call("python", {"code": show}, "call_show"),
            ]
        ),
        Reply(text="North's revenue was $1.23 million, 48.2 % of the total; south had 18.6 %."),
    )
    numbers = turn(shell, "%shiro summarise sales")[TURN_MIME]["numbers"]
    assert [(n["text"], n["found"], n["call_id"]) for n in numbers] == [
        ("$1.23 million", True, "call_inspect"),  # the head(5) inspect showed: 1234500.0
        ("48.2 %", True, "call_show"),  # the HTML table the call displayed: 0.4821
        ("18.6 %", False, None),
    ]


def test_the_agent_sends_numbers_checked_just_before_the_turn_end(shell, fake_openai):
    from shiro_kernel.events import NumbersChecked, Recorded, TurnEnd
    from shiro_kernel.turn import Frontend

    events: list[Any] = []
    growth_turn(fake_openai)
    agent = shell.magics_manager.registry["ShiroMagics"].agent
    agent.current.start()
    end = agent.ask(PROMPT, Frontend(on_event=events.append))
    assert [type(e) for e in events[-3:]] == [Recorded, NumbersChecked, TurnEnd] and events[-1] is end
    assert events[-2].numbers == MISSING_NUMBERS
    assert sum(isinstance(e, NumbersChecked) for e in events) == 1


def test_a_check_that_fails_costs_the_turn_nothing(shell, fake_openai, monkeypatch):
    import shiro_kernel.numbers.turn_check

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the check")

    monkeypatch.setattr(shiro_kernel.numbers.turn_check, "check_turn", broken)
    growth_turn(fake_openai)
    shown = turn(shell, f"%shiro {PROMPT}")
    _row, answer, footer = shown["text/plain"].split("\n\n")
    assert answer == ISSUE_ANSWER and not footer.startswith("⚠")  # answered, unchecked
    assert shown[TURN_MIME]["end"]["reason"] == "answered" and "numbers" not in shown[TURN_MIME]
    fake_openai.enqueue(Reply(text="Yes."))
    turn(shell, "%shiro are you sure?")
    assert state_message(fake_openai.requests[-1]) == ""


# -- the model is told at the next turn --------------------------------------------------------------------------


def test_the_model_is_told_at_the_next_turn_for_that_whole_turn_only(shell, fake_openai):
    growth_turn(fake_openai)
    turn(shell, f"%shiro {PROMPT}")
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "print(round(0.131417 * 100, 1))"}, "call_check")]),
        Reply(text="Coffee grew 13.1 %; I had the numbers wrong."),
        Reply(text="Nothing else to add."),
    )
    second = turn(shell, "%shiro are you sure?")
    assert second[TURN_MIME]["numbers"] == [
        {"text": "13.1 %", "found": True, "call_id": "call_check", "start": 12, "end": 18, "line": "13.1"}
    ]
    turn(shell, "%shiro thanks")
    first_turn, second_turn, third_turn = fake_openai.requests[:2], fake_openai.requests[2:4], fake_openai.requests[4:]
    assert [state_message(r) for r in first_turn] == ["", ""]
    assert [state_message(r) for r in second_turn] == [NOTE, NOTE]  # both steps of the next turn
    assert [state_message(r) for r in third_turn] == [""]  # told once: the second answer had all its numbers
    # the note is neither in the cached instructions nor kept in the conversation
    assert len({r.body["instructions"] for r in fake_openai.requests}) == 1
    assert "in your last answer" not in json.dumps(third_turn[0].body)
    session = shell.magics_manager.registry["ShiroMagics"].agent.current.session
    assert all("in your last answer" not in m.text for m in session.messages)


def test_a_new_session_is_not_told_of_the_last_sessions_numbers(shell, fake_openai):
    growth_turn(fake_openai)
    turn(shell, f"%shiro {PROMPT}")
    fake_openai.enqueue(Reply(text="Cocoa fell 3 %, I believe."), Reply(text="It is a guess."))
    turn(shell, "%shiro --new how did cocoa do?")
    turn(shell, "%shiro are you sure?")
    assert state_message(fake_openai.requests[-2]) == ""  # the first turn of the new session
    assert state_message(fake_openai.requests[-1]) == (  # the next one: that session's own last answer
        "Note: in your last answer, 3 % does not appear in any tool output of that turn; check it with a tool "
        "before relying on it, or say it is an estimate."
    )


# -- Shiro.check_numbers = False ---------------------------------------------------------------------------------


def test_check_numbers_false_turns_it_all_off(shell, fake_openai):
    shell.run_cell("%config Shiro.check_numbers = False")
    growth_turn(fake_openai)
    shown = turn(shell, f"%shiro {PROMPT}")
    _row, answer, footer = shown["text/plain"].split("\n\n")
    assert answer == ISSUE_ANSWER and not footer.startswith("⚠")
    assert "numbers" not in shown[TURN_MIME]
    assert "⚠" not in shown["text/markdown"] + shown["text/html"]
    fake_openai.enqueue(Reply(text="Yes."))
    turn(shell, "%shiro are you sure?")
    assert state_message(fake_openai.requests[-1]) == ""
    shell.run_cell("%config Shiro.check_numbers = True")  # on again: the next turn is checked
    growth_turn(fake_openai)
    assert turn(shell, f"%shiro {PROMPT}")[TURN_MIME]["numbers"] == MISSING_NUMBERS


def test_turning_the_check_off_after_a_turn_tells_the_model_nothing(shell, fake_openai):
    growth_turn(fake_openai)
    assert turn(shell, f"%shiro {PROMPT}")[TURN_MIME]["numbers"] == MISSING_NUMBERS
    shell.run_cell("%config Shiro.check_numbers = False")
    fake_openai.enqueue(Reply(text="Yes."))
    turn(shell, "%shiro are you sure?")
    assert state_message(fake_openai.requests[-1]) == ""


# -- the widget view -----------------------------------------------------------------------------------------


def test_the_widget_view_marks_the_answer_counts_in_its_status_and_publishes_the_numbers(shell, fake_openai):
    shell.run_cell('%config Shiro.frontend = "widgets"')
    magics = shell.magics_manager.registry["ShiroMagics"]
    controller: live.LiveController = magics._controller()
    published: list[dict[str, Any]] = []
    controller.publish = lambda bundle, parent, display_id=None: published.append(bundle)
    growth_turn(fake_openai)
    shell.run_cell(f"%shiro {PROMPT}")
    assert controller.wait_idle(15)
    view = controller.finished[-1].view
    answer_row = view.entries.children[-1].value
    assert answer_row == (
        "<p><strong>Coffee</strong> grew the most … ("
        + MISSING_SPAN.format("+16.4 %")
        + "). Tea was flat and cocoa fell "
        + MISSING_SPAN.format("3 %")
        + ".</p>\n"
    )
    status = html.unescape(view.status.value)
    assert re.fullmatch(  # the fake serves part of the prompt from its cache, which the status says
        r"done · \d+\.\d s · [\d,]+ in(?: \([\d,]+ cached\))? · [\d,]+ out tokens · "
        r"⚠ 2 numbers not found in this turn's outputs",
        status,
    ), status
    assert len(published) == 1 and published[0][TURN_MIME]["numbers"] == MISSING_NUMBERS
    assert published[0]["text/plain"].split("\n\n")[-1].startswith("⚠ 2 numbers not found in this turn's outputs · ")
    # and the model is told at the next turn, as in the text view
    fake_openai.enqueue(Reply(text="Let me check."))
    shell.run_cell("%shiro are you sure?")
    assert controller.wait_idle(15)
    assert state_message(fake_openai.requests[-1]) == NOTE


# -- a saved notebook, and its replay ----------------------------------------------------------------------------


def saved_turn(cell: Any) -> dict[str, Any]:
    outputs = [o for o in cell.outputs if TURN_MIME in o.get("data", {})]
    assert len(outputs) == 1
    return dict(outputs[0]["data"])


def test_the_notebook_keeps_the_numbers_and_a_replay_does_not_check_again(fake_openai, tmp_path):
    from nbclient import NotebookClient

    home = tmp_path / "home"
    env = {
        "OPENAI_API_KEY": NOTEBOOK_KEY,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_HOME": str(home),
    }
    growth_turn(fake_openai)
    path = tmp_path / "growth.ipynb"
    nb = run_notebook(path, ["%load_ext shiro_kernel", '%config Shiro.approval = "auto"', f"%shiro {PROMPT}"], env)
    saved = saved_turn(nbformat.read(path, as_version=4).cells[2])  # as the file holds it
    assert saved[TURN_MIME]["numbers"] == MISSING_NUMBERS
    assert saved["text/plain"].split("\n\n")[-1].startswith("⚠ 2 numbers not found in this turn's outputs · ")
    assert len(fake_openai.requests) == 2

    # Restart & Run All: the turn is replayed from this machine's record, without the model, and not checked again
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env={**os.environ, **env, "JPY_SESSION_NAME": str(path)})
    replayed = saved_turn(nb.cells[2])
    assert len(fake_openai.requests) == 2  # no model call
    assert replayed[TURN_MIME]["end"]["reason"] == "replayed"
    assert replayed[TURN_MIME]["entries"][-2] == {"type": "text", "text": ISSUE_ANSWER}  # the recorded answer
    assert "numbers" not in replayed[TURN_MIME]
    assert "⚠" not in replayed["text/plain"]
