"""The per-step state where a local model's chat template takes it (shiro_kernel.provider.state).

Qwen's template (vLLM, llama.cpp, Ollama, MLX) raises "System message must be at the beginning." for the
state message after the conversation, and Mistral's or Gemma's "roles must alternate": the fake server
imitates both (``FakeOpenAI.chat_template``) with the texts those servers answer, and real ``%shiro`` turns
must still end with the answer, the state delivered, one line saying so, and one refused request at most
per server and model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakeopenai import LLAMA_CPP_SYSTEM_FIRST, TEMPLATE_ERRORS, Call, Reply
from IPython.utils.capture import capture_output
from kernelutil import state_of

from shiro_kernel.provider.profile import Profiles
from shiro_kernel.provider.state import USER_HEADER, next_place
from shiro_kernel.store.paths import home

TODOS = [{"content": "load", "status": "done"}, {"content": "plot", "status": "in_progress"}]
SAID = "takes no system message after the conversation"


def place_for(base_url: str, model: str) -> str:
    """Where the server's profile (kept in this test's SHIRO_HOME) puts the state."""
    return Profiles(home() / "servers.json").load(base_url, model).state_place


def run(shell: Any, source: str) -> str:
    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


@pytest.fixture(params=["responses", "chat"])
def api(request, shiro_shell) -> str:
    run(shiro_shell, f'%config Shiro.api = "{request.param}"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    return request.param


def items(request: Any) -> list[Any]:
    return request.body.get("input") or request.body.get("messages") or []


def note_of(request: Any) -> str:
    last = items(request)[-1]
    return str(last["content"]) if last.get("role") == "user" and USER_HEADER in str(last["content"]) else ""


def plan_turn(shell: Any, fake: Any) -> str:
    fake.enqueue(Reply(tool_calls=[Call("todo_write", {"todos": TODOS})]), Reply(text="planned"))
    return run(shell, "%shiro plan it")


def test_a_system_first_template_gets_the_state_as_a_users_note(shiro_shell, fake_openai, api):
    fake_openai.chat_template = "system-first"
    out = plan_turn(shiro_shell, fake_openai)
    assert "planned" in out and out.count(SAID) == 1
    first, refused, resent = fake_openai.requests
    assert state_of(first) == "" and "[~] plot" in state_of(refused)  # the default place, refused
    assert refused.status == 400 and resent.status == 200
    assert "[~] plot" in note_of(resent) and state_of(resent) == ""
    assert items(resent)[:-1] == items(refused)[:-1]  # the conversation before it unchanged: the prefix holds
    assert resent.body.get("instructions") == first.body.get("instructions")

    # the next turn knows the place: no refusal, and its prefix is the earlier request's
    fake_openai.enqueue(Reply(text="again"))
    out = run(shiro_shell, "%shiro and now")
    assert "again" in out and SAID not in out
    later = fake_openai.requests[-1]
    assert len(fake_openai.requests) == 4 and later.status == 200 and "[~] plot" in note_of(later)
    head = items(resent)[:-1]
    assert items(later)[: len(head)] == head


def test_llama_cpps_500_is_not_retried_as_a_server_error(shiro_shell, fake_openai):
    run(shiro_shell, '%config Shiro.api = "chat"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.chat_template = "system-first"
    fake_openai.template_error = (500, LLAMA_CPP_SYSTEM_FIRST)
    out = plan_turn(shiro_shell, fake_openai)
    assert "planned" in out and SAID in out
    assert [r.status for r in fake_openai.requests] == [200, 500, 200]  # one refusal, no backoff retries


def test_a_template_that_makes_roles_alternate_gets_one_user_message(shiro_shell, fake_openai, api):
    fake_openai.chat_template = "alternate"
    fake_openai.enqueue(Reply(text="hello"))
    run(shiro_shell, "%shiro hi")
    out = plan_turn(shiro_shell, fake_openai)
    assert "planned" in out and "makes roles alternate" in out
    _, first, refused, resent = fake_openai.requests
    assert refused.status == 400 and resent.status == 200
    assert "[~] plot" in note_of(resent) and state_of(resent) == ""
    assert items(resent)[:-1] == items(refused)[:-1]  # after a tool result the note is a message of its own

    # the next turn's first step: the note joins the user's prompt, and the earlier steps' prefix holds
    fake_openai.enqueue(Reply(text="again"))
    assert "again" in run(shiro_shell, "%shiro and now")
    later = fake_openai.requests[-1]
    assert later.status == 200 and len(fake_openai.requests) == 5
    prompt = items(later)[-1]
    text = prompt["content"] if isinstance(prompt["content"], str) else json.dumps(prompt["content"])
    assert prompt["role"] == "user" and "and now" in text and "[~] plot" in text and USER_HEADER in text
    head = items(resent)[:-1]
    assert items(later)[: len(head)] == head


def test_users_in_a_row_are_merged_for_such_a_template_without_any_state(shiro_shell, fake_openai):
    run(shiro_shell, '%config Shiro.api = "chat"')
    fake_openai.chat_template = "alternate"
    fake_openai.enqueue_error(400, "Invalid value for 'temperature': must be at most 2.")  # a turn that failed
    run(shiro_shell, "%shiro first")
    fake_openai.enqueue(Reply(text="second answer"))
    out = run(shiro_shell, "%shiro second")  # user, user: the template refuses it, then one user message
    assert "second answer" in out
    assert [r.status for r in fake_openai.requests] == [400, 400, 200]
    users = [m for m in items(fake_openai.requests[-1]) if m["role"] == "user"]
    assert len(users) == 1 and "first" in users[0]["content"] and "second" in users[0]["content"]


def test_a_new_session_in_the_kernel_does_not_pay_the_refusal_again(shiro_shell, fake_openai):
    run(shiro_shell, '%config Shiro.api = "chat"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.chat_template = "system-first"
    plan_turn(shiro_shell, fake_openai)
    before = len(fake_openai.requests)
    out = plan_turn(shiro_shell, fake_openai).replace("\n", " ")  # the same session, a new task list: no refusal
    run(shiro_shell, "%shiro --new")
    fake_openai.enqueue(Reply(tool_calls=[Call("todo_write", {"todos": TODOS})]), Reply(text="fresh"))
    out += run(shiro_shell, "%shiro plan again")
    assert "fresh" in out and SAID not in out
    assert all(r.status == 200 for r in fake_openai.requests[before:])


def test_other_refusals_are_not_taken_for_the_template(shiro_shell, fake_openai):
    run(shiro_shell, '%config Shiro.api = "chat"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.enqueue(Reply(tool_calls=[Call("todo_write", {"todos": TODOS})]))
    fake_openai.enqueue_error(400, "Invalid value for 'temperature': must be at most 2.")
    out = run(shiro_shell, "%shiro plan it")
    assert "temperature" in out and SAID not in out
    assert len(fake_openai.requests) == 2 and place_for(fake_openai.base_url, "gpt-4o-mini") == "system"


@pytest.mark.parametrize(
    ("message", "place", "expected"),
    [
        ("System message must be at the beginning.", "system", "user"),  # vLLM (Qwen3.x), 400
        (LLAMA_CPP_SYSTEM_FIRST, "system", "user"),  # llama.cpp and Ollama, 500
        ("Chat template error: System message must be at the beginning.", "system", "user"),  # MLX
        ("System message must be at the beginning.", "user", "instructions"),  # a user note refused too
        (
            "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...",
            "system",
            "alternate",
        ),
        (
            "After the optional system message, conversation roles must alternate user and assistant roles except "
            "for tool calls and results.",  # Mistral Small 3
            "user",
            "alternate",
        ),
        ("System message must be at the beginning.", "alternate", "instructions"),
        ("System message must be at the beginning.", "instructions", None),  # nothing left: the error stands
        ("System role not supported", "system", None),  # Gemma 2 refuses the first one too: no place helps
        ("Invalid value for 'temperature'", "system", None),
        ("The system is overloaded, try again", "system", None),
    ],
)
def test_which_refusal_moves_the_state_where(message, place, expected):
    assert next_place(message, place) == expected


def test_without_a_state_only_users_in_a_row_move_it():
    assert next_place("System message must be at the beginning.", "system", state=False) is None
    assert next_place(TEMPLATE_ERRORS["alternate"], "system", state=False) == "alternate"
