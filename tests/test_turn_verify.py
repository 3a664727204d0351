"""An answer checked before it ends the turn (``Shiro.verify_answers``, :mod:`shiro_kernel.numbers.verify`), and the
workspace block told until the turn's first call: the turn loop against the in-memory model."""

from __future__ import annotations

import json

from fakemodel import FakeModel
from fakeopenai import Call, Reply
from turnutil import TOOLS

from shiro_kernel.context.workspace import FAILED, NOT_RUN, RETRY, AnswerStep, answer_step
from shiro_kernel.events import Notice
from shiro_kernel.numbers.verify import Verifier
from shiro_kernel.session import Session
from shiro_kernel.tools import ToolContext, all_tools
from shiro_kernel.tools.python_tool import run_python
from shiro_kernel.transcript import Message, ToolResultPart
from shiro_kernel.turn import VERIFYING, Turn, TurnOptions


def turn(model: FakeModel, tmp_path, events: list, **fields) -> Turn:
    return Turn(
        Session(),
        model,
        TOOLS,
        ToolContext(root=tmp_path),
        "You are a test.",
        TurnOptions(approval="auto"),
        observers=[events.append],
        **fields,
    )


def test_an_answer_with_a_number_no_output_shows_goes_back_once(tmp_path):
    model = FakeModel().enqueue(
        Reply(text="The mean fare is 16.58."),  # made up: no call ran
        Reply(tool_calls=[Call("add", {"a": 30, "b": 4})]),
        Reply(text="The mean fare is 34."),
    )
    events: list = []
    end = turn(model, tmp_path, events, verifier=Verifier("what is the mean fare?")).run("what is the mean fare?")
    assert end.reason == "answered"
    assert len(model.history) == 3
    note = model.history[1].state
    assert "16.58" in note and "no output of this turn shows" in note and "(no code ran)" in note
    assert "[shiro, not the user]" in note
    assert "16.58" not in model.history[2].state  # told once: the step after the call has no note
    assert [e.text for e in events if isinstance(e, Notice)] == [VERIFYING]


def test_the_note_is_given_once_per_turn(tmp_path):
    model = FakeModel().enqueue(Reply(text="It is 16.58."), Reply(text="Still 16.58, I did not compute it."))
    events: list = []
    end = turn(model, tmp_path, events, verifier=Verifier("what is it?")).run("what is it?")
    assert end.reason == "answered" and len(model.history) == 2


def test_an_answer_from_the_outputs_ends_the_turn(tmp_path):
    model = FakeModel().enqueue(Reply(tool_calls=[Call("add", {"a": 30, "b": 4})]), Reply(text="The sum is 34."))
    events: list = []
    end = turn(model, tmp_path, events, verifier=Verifier("add them")).run("add them")
    assert end.reason == "answered" and len(model.history) == 2
    assert not any(isinstance(e, Notice) for e in events)


def test_a_question_about_named_data_answered_without_a_call_goes_back(tmp_path):
    # a category is never marked by the numbers check: no call ran while the prompt names data
    model = FakeModel().enqueue(Reply(text="The most common class is third."), Reply(text="I did not look."))
    events: list = []
    verifier = Verifier("which class is most common in titanic.csv?", ["titanic.csv"])
    turn(model, tmp_path, events, verifier=verifier).run("which class is most common in titanic.csv?")
    assert len(model.history) == 2
    assert "without looking at titanic.csv" in model.history[1].state


def test_without_a_verifier_an_answer_ends_the_turn(tmp_path):
    model = FakeModel().enqueue(Reply(text="The mean fare is 16.58."))
    events: list = []
    end = turn(model, tmp_path, events).run("what is the mean fare?")
    assert end.reason == "answered" and len(model.history) == 1


def test_the_workspace_is_told_until_the_first_call(tmp_path):
    model = FakeModel().enqueue(
        Reply(tool_calls=[Call("add", {"a": 1, "b": 2})]),
        Reply(text="3"),
    )
    events: list = []
    turn(model, tmp_path, events, workspace="What you can work on now: df").run("add")
    assert model.history[0].state.startswith("What you can work on now: df")
    assert "What you can work on now" not in model.history[1].state


def test_the_answer_step_is_told_the_step_after_each_output_only(tmp_path):
    model = FakeModel().enqueue(
        Reply(tool_calls=[Call("add", {"a": 1, "b": 2})]),
        Reply(
            text="The mean fare is 16.58."
        ),  # made up: sent back, and the step after the answer is not told to answer now
        Reply(tool_calls=[Call("add", {"a": 30, "b": 4})]),
        Reply(text="34"),
    )
    step = "Answer the prompt now, in the form it asks for."
    verifier = Verifier("what is it?")
    turn(model, tmp_path, [], answer_step=AnswerStep(step, NOT_RUN), verifier=verifier).run("what is it?")
    said = [step in r.state for r in model.history]
    assert said == [False, True, False, True]
    assert "16.58" in model.history[2].state  # the check's note, alone


def test_after_a_refused_call_the_step_says_it_did_not_run_not_to_answer_from_it(tmp_path):
    """The newcomer's headless turn: its block refused (approval "ask", no buttons), told to answer "from what the
    code printed", the 1.5B answered a region from nothing. After a step whose calls were all refused, the step says
    the code was not run and asks for no value it did not compute."""
    model = FakeModel().enqueue(
        Reply(tool_calls=[Call("write", {"path": "x.txt", "content": "1"})]), Reply(text="It was not run.")
    )
    step = AnswerStep("Answer the prompt now, from what the code printed.", NOT_RUN)
    options = TurnOptions(approval="read-only")
    Turn(Session(), model, TOOLS, ToolContext(root=tmp_path), "You are a test.", options, answer_step=step).run("it?")
    assert NOT_RUN in model.history[1].state and step.ran not in model.history[1].state
    assert AnswerStep().after([]) == ""


def test_specs_are_asked_each_step(tmp_path):
    offered = [[{"name": "add", "description": "", "parameters": {}}]]
    model = FakeModel().enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 2})]), Reply(text="3"))

    def specs():
        out = offered[-1]
        offered.append([*out, {"name": "fail", "description": "", "parameters": {}}])
        return out

    turn(model, tmp_path, [], specs=specs).run("add")
    assert [r.tools for r in model.history] == [["add"], ["add", "fail"]]


def test_where_code_blocks_run_the_note_asks_for_one_and_says_quoted_code_did_not_run():
    from shiro_kernel.transcript import Message, TextPart

    answer = Message("assistant", [TextPart("```python\nprint(df.charges.mean())\n```\n\n@mean_charges[16884.924]")])
    note = Verifier("mean charges in insurance.csv?", ["insurance.csv"], code_blocks=True).note([answer])
    assert "16884.924" in note and "in a reply that is one ```python block and nothing else" in note
    assert "the code in your answer did not run: code beside other text is never run" in note
    # a server whose calls come parsed: the tool is named, and nothing is said of code blocks
    plain = Verifier("mean charges in insurance.csv?", ["insurance.csv"]).note([answer])
    assert "with `python`" in plain and "```python block" not in plain


def test_the_note_names_each_number_once_in_plain_grammar():
    from shiro_kernel.transcript import Message, TextPart

    def note(text: str) -> str:
        return Verifier("mean charges?").note([Message("assistant", [TextPart(text)])])

    # an answer that repeats its number: named once, and said of as one
    one = note("The mean is 16884.924.\n\n@mean_charges[16884.924]")
    assert "gives 16884.924, which" in one and "16884.924 and 16884.924" not in one
    assert "Compute it with `python`" in one and "if it cannot be computed, say plainly that it was not computed" in one
    many = note("The mean is 16884.924 and the median 9382.033.")
    assert "gives 16884.924 and 9382.033, which" in many
    assert "Compute them with" in many and "if they cannot be computed, say plainly that they were not computed" in many


def _python_turn(model: FakeModel, tmp_path, shell) -> Turn:
    python = {"python": all_tools()["python"]}
    ctx = ToolContext(root=tmp_path, shell=shell)
    options = TurnOptions(approval="auto")
    return Turn(Session(), model, python, ctx, "You are a test.", options, answer_step=answer_step(["`sales.csv`"]))


def test_after_code_that_raised_the_step_asks_for_a_fix_once_then_for_no_made_up_value(tmp_path, plain_shell):
    """Told "answer now, from what the code printed" after a traceback, the 1.5B made a value up (``@0``, ``None``);
    the first time a step's code raises it is asked to fix it or say it cannot, after that to say it failed."""
    steps = answer_step(["`sales.csv`"])
    model = FakeModel().enqueue(
        Reply(tool_calls=[Call("python", {"code": "print('loaded')\nsales['avg. wait time']"})]),  # NameError
        Reply(tool_calls=[Call("python", {"code": "1 / 0"})]),
        Reply(text="It failed: there is no column fare."),
    )
    _python_turn(model, tmp_path, plain_shell).run("how many outliers are there?")
    states = [request.state for request in model.history]
    assert RETRY in states[1] and steps.ran not in states[1] and FAILED not in states[1]
    assert FAILED in states[2] and RETRY not in states[2]


def test_code_that_runs_after_one_that_raised_is_answered_from(tmp_path, plain_shell):
    steps = answer_step(["`sales.csv`"])
    model = FakeModel().enqueue(
        Reply(tool_calls=[Call("python", {"code": "import no_such_module_here"})]),
        Reply(tool_calls=[Call("python", {"code": "print(2 + 3)"})]),
        Reply(text="5"),
    )
    _python_turn(model, tmp_path, plain_shell).run("what is it?")
    states = [request.state for request in model.history]
    assert RETRY in states[1] and steps.ran in states[2] and FAILED not in states[2]
    assert AnswerStep("ran").after([]) == "ran"  # no results: nothing raised


def test_the_python_tool_says_whether_its_code_raised_and_the_record_does_not_keep_it(plain_shell):
    assert run_python(plain_shell, "print(1)").raised is False
    assert run_python(plain_shell, "print(1)\n1 / 0").raised is True  # printed something first: still raised
    assert run_python(plain_shell, "def (").raised is True  # a SyntaxError
    part = ToolResultPart("c1", "python", "Traceback ...", raised=True)
    assert "raised" not in json.dumps(Message("tool", [part]).to_json())
