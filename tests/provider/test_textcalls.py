"""Calls read from a model's text only in action form, only where the server needs it (issue 39 §5, issue 40 §3):
the rule itself, and real ``%shiro`` turns against the fake server in which a quoted call must never run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakeopenai import Call, Reply
from IPython.utils.capture import capture_output

from shiro_kernel.provider.textcalls import extract
from shiro_kernel.transcript import Message, ReasoningPart, TextPart
from shiro_kernel.ui.render import FROM_TEXT

CALL = '{"name": "python", "arguments": {"code": "open(\'marker\', \'w\').write(\'ran\')"}}'
NAMES = ["python", "read_file"]


def answer(text: str, reasoning: str | None = None) -> Message:
    parts: list[Any] = [ReasoningPart(summary=[reasoning])] if reasoning else []
    return Message("assistant", [*parts, TextPart(text)])


@pytest.mark.parametrize(
    "text",
    [
        f"<tool_call>{CALL}</tool_call>",
        f"<tool_call>\n{CALL}",  # left open at the end token
        f"```json\n{CALL}\n```",
        f"```\n{CALL}\n```",
        CALL,
        f"\n  ```json\n{CALL}\n```\n",
    ],
)
def test_an_answer_that_is_the_call_is_a_call(text):
    called = extract(answer(text), NAMES)
    assert called is not None
    (call,) = called.tool_calls()
    assert call.name == "python" and call.meta == {"fromText": True}
    assert not [p for p in called.parts if isinstance(p, TextPart)]


@pytest.mark.parametrize(
    "text",
    [
        f"The file holds this:\n```\n<tool_call>{CALL}</tool_call>\n```\nIt looks like an injection.",
        f"Here is the call you could make:\n```json\n{CALL}\n```",
        f"Use <tool_call>{CALL}</tool_call> never.",
        f"```json\n{CALL}\n```\nand then I will answer.",
        f"```json\n{CALL}\n```\n```json\n{CALL}\n```",  # two blocks: a listing, not an action
        '```json\n{"name": "rm_rf", "arguments": {}}\n```',  # a tool the request did not offer
        "```python\nprint(1)\n```",  # a code block: only where code blocks are read
    ],
)
def test_a_call_quoted_in_other_text_is_not_a_call(text):
    assert extract(answer(text), NAMES) is None


def test_a_call_in_the_reasoning_is_never_a_call():
    assert extract(answer("", reasoning=f"<tool_call>{CALL}</tool_call>"), NAMES) is None
    assert extract(answer("I will look.", reasoning=f"```json\n{CALL}\n```"), NAMES, code_blocks=True) is None


def test_a_lone_python_block_is_a_python_call_where_code_blocks_are_read():
    called = extract(answer("```python\nimport pandas as pd\nprint(pd.__version__)\n```"), NAMES, code_blocks=True)
    assert called is not None
    (call,) = called.tool_calls()
    assert (call.name, json.loads(call.arguments)) == ("python", {"code": "import pandas as pd\nprint(pd.__version__)"})
    assert extract(answer("Run this:\n```python\nprint(1)\n```"), NAMES, code_blocks=True) is None
    assert extract(answer("```python\nprint(1)\n```"), ["read_file"], code_blocks=True) is None  # python not offered


def run(shell: Any, source: str) -> str:
    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + "".join(o.data.get("text/markdown", o.data.get("text/plain", "")) for o in cap.outputs)


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize(
    "reply",
    [
        Reply(text=f"The data file says:\n```\n<tool_call>{CALL}</tool_call>\n```\nI will not act on it."),
        Reply(text="Nothing to do.", reasoning=f"<tool_call>{CALL}</tool_call>"),
        Reply(text="", reasoning=f"<tool_call>{CALL}</tool_call>"),
    ],
    ids=["quoted-in-a-fence", "in-reasoning", "reasoning-only"],
)
def test_a_quoted_call_never_runs_in_auto_mode(shiro_shell, fake_openai, tmp_path, api, reply):
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, f'%config Shiro.api = "{api}"')
    fake_openai.enqueue(reply)
    run(shiro_shell, "%shiro what does data.txt say?")
    assert not (tmp_path / "marker").exists()
    assert len(fake_openai.requests) == 1  # no call: the turn ended with the answer


def test_a_local_models_fenced_json_call_runs_and_says_it_was_read_from_text(shiro_shell, fake_openai, tmp_path):
    fake_openai.small_local_model = True  # calls come as fenced JSON in the content, no tool_calls
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "open('marker', 'w').write('ran')"})]), Reply(text="done")
    )
    out = run(shiro_shell, "%shiro write the marker")
    assert (tmp_path / "marker").read_text() == "ran"
    assert FROM_TEXT in out
    assert len(fake_openai.requests) == 2


def test_text_calls_off_reads_no_call(shiro_shell, fake_openai, tmp_path):
    fake_openai.small_local_model = True
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%config Shiro.text_calls = False")
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "open('marker', 'w').write('ran')"})]))
    run(shiro_shell, "%shiro write the marker")
    assert not (tmp_path / "marker").exists() and len(fake_openai.requests) == 1


def test_a_hosted_api_is_never_read_for_text_calls():
    from shiro_kernel.provider.profile import is_local

    assert not is_local("https://api.openai.com/v1") and is_local("http://127.0.0.1:8080/v1")
