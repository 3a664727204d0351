"""First contact with a real local server, with only ``base_url`` and ``model`` set (issue 32).

The fake imitates what llama-cpp-python's server does differently from OpenAI's API (measured against the real
engine: ``tests/realengine`` runs the same paths there): no ``/v1/responses``, no usage in its streams, a context
window too small ending the stream empty; and what other local servers do (Ollama's Responses API keeps
nothing; a missed tool parser leaves ``<tool_call>`` in the text). Real ``%shiro`` turns in an IPython shell,
asserted on the wire and the record."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakeopenai import Call, Fault, Reply
from faultlog import record
from IPython.utils.capture import capture_output

from shiro_kernel.provider.profile import Profiles
from shiro_kernel.store.paths import home

SWITCHED = "has no Responses API (POST /v1/responses answered 404: Not Found): switched to Chat Completions"
ESTIMATED = "(estimated: the server sent no usage)"


def run(shell: Any, source: str) -> str:
    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + "".join(o.data.get("text/markdown", o.data.get("text/plain", "")) for o in cap.outputs)


def records() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((home() / "sessions").glob("*.json"))]


def paths(fake: Any) -> list[str]:
    return [r.path for r in fake.requests]


@pytest.fixture
def llama(fake_openai):
    fake_openai.imitate = "llama-cpp-python"
    return fake_openai


# -- 2.1: a server without /v1/responses --------------------------------------------------------------------
def test_a_server_without_responses_is_switched_to_chat_once_and_remembered(shiro_shell, llama):
    llama.enqueue(Reply(text="first"), Reply(text="second"))
    first = run(shiro_shell, "%shiro hello")
    second = run(shiro_shell, "%shiro again")
    assert "first" in first and SWITCHED in first
    assert "second" in second and SWITCHED not in second  # said once
    assert paths(llama) == ["/v1/responses", "/v1/chat/completions", "/v1/chat/completions"]
    assert Profiles(home() / "servers.json").load(llama.base_url, "gpt-4o-mini").responses_missing
    # a new kernel (a new extension load) asks Chat Completions at once
    run(shiro_shell, "%unload_ext shiro_kernel")
    run(shiro_shell, "%load_ext shiro_kernel")
    llama.enqueue(Reply(text="third"))
    assert "third" in run(shiro_shell, "%shiro --new once more")
    assert paths(llama)[-1] == "/v1/chat/completions" and paths(llama).count("/v1/responses") == 1
    record(
        "a server without /v1/responses (llama-cpp-python's 404), default settings, 3 turns in 2 kernels",
        3,
        0,
        "3 of 3 answered over Chat Completions; the switch said once; /v1/responses asked once in all",
    )


@pytest.mark.parametrize("how", ["config", "environment"])
def test_an_api_the_user_chose_is_kept_and_the_error_says_what_to_set(shiro_shell, llama, monkeypatch, how):
    if how == "config":
        run(shiro_shell, '%config Shiro.api = "responses"')
    else:
        monkeypatch.setenv("SHIRO_API", "responses")
    out = run(shiro_shell, "%shiro hello")
    assert (
        'has no Responses API (POST /v1/responses answered 404: Not Found), and Shiro.api is set to "responses"' in out
    )
    assert '%config Shiro.api = "chat"' in out and "Traceback" not in out
    assert paths(llama) == ["/v1/responses"]  # never switched, never retried
    assert not Profiles(home() / "servers.json").load(llama.base_url, "gpt-4o-mini").responses_missing


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, {"detail": "Not Found"}),  # llama-cpp-python (FastAPI)
        (404, {"error": {"message": "Invalid URL (POST /v1/responses)", "type": "invalid_request_error"}}),  # OpenAI
        (405, {"error": {"message": "Method Not Allowed"}}),
        (404, {}),  # a bare 404: the SDK's message is only "Error code: 404"
    ],
)
def test_each_no_such_route_answer_switches(shiro_shell, fake_openai, status, body):
    fake_openai.enqueue(Fault("error", http_status=status, body=body), Reply(text="ok via chat"))
    out = run(shiro_shell, "%shiro hello")
    assert "ok via chat" in out and "switched to Chat Completions" in out


def test_a_404_about_the_model_is_not_taken_for_a_missing_route(shiro_shell, fake_openai):
    fake_openai.enqueue_error(404, "The model `gpt-4o-mini` does not exist or you do not have access to it.")
    out = run(shiro_shell, "%shiro hello")
    assert "does not know the model" in out and "switched" not in out
    assert paths(fake_openai) == ["/v1/responses"]


# -- 2.2: no usage --------------------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
def test_an_answer_without_usage_is_counted_by_estimate_and_said_to_be_one(shiro_shell, llama, stream):
    run(shiro_shell, f"%config Shiro.stream = {stream}")
    run(shiro_shell, '%config Shiro.api = "chat"')
    if not stream:  # llama-cpp-python sends usage without streaming: a server that sends none at all
        llama.enqueue(lambda rec: Reply(text="hello there", usage=(0, 0)))
    else:
        llama.enqueue(Reply(text="hello there"))
    out = run(shiro_shell, "%shiro hello")
    assert "hello there" in out
    assert f"out tokens {ESTIMATED}" in out and " in · ~" in out and "~0 in" not in out
    (record,) = records()
    assert record["usageEstimated"] is True and record["inputTokens"] > 100 and record["outputTokens"] > 0
    cost = run(shiro_shell, "%shiro /cost")
    assert "~" in cost and ESTIMATED in cost


def test_a_server_that_sends_usage_is_not_marked(shiro_shell, fake_openai):
    fake_openai.enqueue(Reply(text="hi", usage=(1234, 56)))
    out = run(shiro_shell, "%shiro hello")
    assert "1,234 in · 56 out tokens" in out and "estimated" not in out and "~" not in out
    assert "usageEstimated" not in records()[0]


def test_the_budget_counts_estimated_usage(shiro_shell, llama):
    run(shiro_shell, '%config Shiro.api = "chat"')
    run(shiro_shell, "%config Shiro.budget_usd = 0.0000001")  # gpt-4o-mini is priced: the estimate costs more
    llama.enqueue(Reply(text="one"), Reply(text="two"))
    run(shiro_shell, "%shiro hello")
    out = run(shiro_shell, "%shiro again")
    assert "budget reached" in out
    assert len(llama.requests) == 1  # the second turn never asked


# -- 2.3: a context window too small ---------------------------------------------------------------------
def test_an_empty_stream_is_asked_once_without_streaming_and_the_window_named(shiro_shell, llama):
    run(shiro_shell, '%config Shiro.api = "chat"')
    llama.n_ctx = 40  # the instructions alone are larger: nothing to prune can fit it
    out = run(shiro_shell, "%shiro hello")
    assert "The model's context window at" in out and "is 40 tokens" in out and "--n_ctx" in out
    assert "ended the answer before anything arrived" not in out
    assert [r.stream for r in llama.requests] == [True, False]  # one stream, one plain request: no retries
    assert [r.status for r in llama.requests] == [200, 400]
    record(
        "a context window smaller than the instructions (a stream that ends empty, as llama-cpp-python's)",
        1,
        0,
        "2 requests (the stream, then one without streaming: its 400 read), not 4 retries; one paragraph naming "
        "the window and --n_ctx",
    )


def test_a_context_overflow_is_pruned_to_fit_and_the_turn_goes_on(shiro_shell, llama):
    run(shiro_shell, '%config Shiro.api = "chat"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    big = "x = 1\n" + "# " + "filler " * 2000  # one old tool call of ~14 kB
    llama.enqueue(Reply(tool_calls=[Call("python", {"code": big})]), Reply(text="made x"))
    run(shiro_shell, "%shiro make x")
    for n in range(3):  # later turns: the call is no longer among the newest messages
        llama.enqueue(Reply(text=f"answer {n}"))
        run(shiro_shell, f"%shiro question {n}")
    sent = llama.requests[-1]
    llama.n_ctx = len(json.dumps(sent.body["messages"])) // 4 - 2000  # the old call no longer fits
    llama.enqueue(Reply(text="still here"))
    out = run(shiro_shell, "%shiro and now?")
    assert "still here" in out and "to fit the model's context window" in out
    tail = llama.requests[-3:]
    assert [(r.stream, r.status) for r in tail] == [(True, 200), (False, 400), (True, 200)]
    assert "filler filler" not in json.dumps(tail[-1].body)  # the pruned request
    llama.enqueue(Reply(text="and after"))
    assert "and after" in run(shiro_shell, "%shiro next")  # the window is known: no refusal again
    assert llama.requests[-1].status == 200 and len(llama.requests) == 2 + 3 + 3 + 1
    record(
        "a long session overflowing the server's context window",
        2,
        0,
        "pruned to the window and answered in the same turn (1 refused request); the next turn fits at once",
    )


# -- 4: tool calls left in the text, a Responses API that keeps nothing ---------------------------------------
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_call_only_in_the_reasoning_never_runs(shiro_shell, fake_openai, api):
    # a reasoning summary is not the model's action, and the user never sees it (issue 39 §5)
    run(shiro_shell, f'%config Shiro.api = "{api}"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.tool_calls_as = "reasoning"
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "41 + 1"})]))
    out = run(shiro_shell, "%shiro compute")
    assert len(fake_openai.requests) == 1 and "wrote its tool call as text" not in out


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_tool_call_left_in_the_text_runs_as_a_call_said_once(shiro_shell, fake_openai, api):
    run(shiro_shell, f'%config Shiro.api = "{api}"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.tool_calls_as = "text"
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "41 + 1"})]), Reply(text="it is 42"))
    first = run(shiro_shell, "%shiro compute")
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "2 * 3"})]), Reply(text="it is 6"))
    second = run(shiro_shell, "%shiro again")
    assert "it is 42" in first and "it is 6" in second
    assert "wrote its tool call as text" in first and "wrote its tool call as text" not in second
    results = [json.dumps(r.body) for r in fake_openai.requests[1::2]]
    assert "42" in results[0] and "6" in results[1]  # the calls ran, their results went back
    kept = records()[0]["messages"]
    calls = [p for m in kept for p in m["parts"] if p["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["python", "python"]
    assert not any("<tool_call>" in p.get("text", "") for m in kept for p in m["parts"])


def test_a_call_left_in_the_text_asks_as_any_call(shiro_shell, fake_openai):
    fake_openai.tool_calls_as = "text"
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "import os"})]), Reply(text="could not"))
    out = run(shiro_shell, "%shiro do it")  # headless: "ask" cannot show buttons, so the call is not run
    assert "not approved" in out.lower() or "not run" in out.lower()
    assert "Error: not approved" in json.dumps(fake_openai.requests[-1].body)


def test_a_text_that_only_mentions_a_tool_is_left_alone(shiro_shell, fake_openai):
    text = 'Use <tool_call>{"name": "rm_rf", "arguments": {}}</tool_call> never; and <tool_call>not json</tool_call>.'
    fake_openai.enqueue(Reply(text=text))
    out = run(shiro_shell, "%shiro explain")
    assert len(fake_openai.requests) == 1 and "wrote its tool call as text" not in out


def test_a_responses_api_that_keeps_nothing_gets_the_history_inline(shiro_shell, fake_openai):
    fake_openai.imitate = "ollama"
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "1 + 1"})]), Reply(text="two"), Reply(text="yes"))
    first = run(shiro_shell, "%shiro add")
    second = run(shiro_shell, "%shiro sure?")
    assert "two" in first and "yes" in second
    assert all(r.status == 200 for r in fake_openai.requests)
    record(
        "a Responses API that keeps nothing (Ollama's), 2 turns with a tool call",
        3,
        0,
        "3 of 3 requests answered: the history sent inline, 0 item references",
    )
    assert "item_reference" not in json.dumps([r.body for r in fake_openai.requests])


def test_a_server_that_shows_it_keeps_items_gets_references(shiro_shell, fake_openai):
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"))
    run(shiro_shell, "%shiro first")
    run(shiro_shell, "%shiro second")
    assert "item_reference" not in json.dumps(fake_openai.requests[0].body)
    assert "item_reference" in json.dumps(fake_openai.requests[1].body)  # its first answer said "store": true


# -- 33.9: a failure reported mid-stream keeps what arrived ---------------------------------------------------
def test_a_response_failed_mid_stream_keeps_the_partial_answer(shiro_shell, fake_openai):
    fake_openai.default_reply = Reply(text="the partial answer so far")
    fake_openai.enqueue(Fault.failed(after_events=9))  # after a few words of the answer
    out = run(shiro_shell, "%shiro go")
    assert "exceeded your current quota" in out
    fake_openai.default_reply = Reply(text="ok")
    run(shiro_shell, "%shiro next")
    items = fake_openai.requests[-1].body["input"]
    roles = [i.get("role") for i in items if i.get("type", "message") == "message"]
    assert roles == ["user", "assistant", "user"]  # never two user messages in a row
    assert '"text": "the partial' in json.dumps(items)  # what was shown before the failure is kept


# -- what the real engine showed besides: streams that end empty with tools, an answer's length -------------------
def test_a_server_whose_streams_end_empty_with_tools_is_asked_without_streaming(shiro_shell, llama):
    llama.no_tool_streams = True  # llama-cpp-python's chatml-function-calling
    run(shiro_shell, '%config Shiro.api = "chat"')
    llama.enqueue(Reply(text="one"), Reply(text="two"))
    first = run(shiro_shell, "%shiro hello")
    second = run(shiro_shell, "%shiro again")
    assert "one" in first and "two" in second
    assert "asks it without streaming from now on" in first and "without streaming" not in second
    assert [(r.stream, r.status) for r in llama.requests] == [(True, 200), (False, 200), (False, 200)]


def test_the_answer_length_goes_under_the_name_the_model_takes(shiro_shell, fake_openai):
    run(shiro_shell, '%config Shiro.api = "chat"')
    run(shiro_shell, "%config Shiro.max_output_tokens = 64")
    fake_openai.enqueue_error(
        400,
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        param="max_tokens",
        code="unsupported_parameter",
    )
    fake_openai.enqueue(Reply(text="fine"), Reply(text="again"))
    assert "fine" in run(shiro_shell, "%shiro hello")
    assert "again" in run(shiro_shell, "%shiro more")
    sent = [r.body for r in fake_openai.requests]
    assert [("max_tokens" in b, b.get("max_completion_tokens")) for b in sent] == [
        (True, None),
        (False, 64),
        (False, 64),
    ]
    run(shiro_shell, '%config Shiro.api = "responses"')
    fake_openai.enqueue(Reply(text="via responses"))
    run(shiro_shell, "%shiro last")
    assert fake_openai.requests[-1].body["max_output_tokens"] == 64
