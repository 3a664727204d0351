"""The turn loop and the provider layer, end to end against the fake OpenAI-compatible server,
through the real ``openai`` client."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from fakeopenai import Call, Fault, Reply
from turnutil import KEY, TOOLS, make_turn

from shiro_kernel.approval import ALWAYS, DENY, LATER
from shiro_kernel.context.rules import pending_calls
from shiro_kernel.events import Notice, TextDelta, ToolEnd
from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.session import Session
from shiro_kernel.tools import Effect, Tool, ToolContext
from shiro_kernel.tools.base import schema
from shiro_kernel.transcript import ToolCallPart, ToolResultPart
from shiro_kernel.turn import Frontend, Turn, TurnOptions


@pytest.fixture
def env(monkeypatch, fake_openai):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return fake_openai


def last_input(fake):
    body = fake.requests[-1].body
    return body.get("input") or body.get("messages")


MODES = [("responses", True), ("responses", False), ("chat", True), ("chat", False)]


@pytest.mark.parametrize("api,stream", MODES)
def test_text_answer(env, tmp_path, api, stream):
    env.enqueue(Reply(text="Hello there, data scientist.", usage=(120, 8)))
    events = []
    turn = make_turn(env, tmp_path, api=api, stream=stream, events=events)
    end = turn.run("hi")
    assert end.reason == "answered" and end.error is None
    assert [m.role for m in turn.session.messages] == ["user", "assistant"]
    assert turn.session.messages[1].text == "Hello there, data scientist."
    assert (end.usage.input_tokens, end.usage.output_tokens) == (120, 8)
    assert end.usage.cost_usd == pytest.approx((120 * 0.15 + 8 * 0.60) / 1e6)
    if stream:
        deltas = [e.text for e in events if isinstance(e, TextDelta)]
        assert len(deltas) > 1 and "".join(deltas) == "Hello there, data scientist."
    assert env.requests[-1].path.endswith("/responses" if api == "responses" else "/chat/completions")
    assert env.requests[-1].headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("api,stream", MODES)
def test_tool_round_trip_carries_result_to_the_model(env, tmp_path, api, stream):
    def answer(request):
        items = request.body.get("input") or request.body.get("messages")
        outputs = [
            i.get("output") or i.get("content")
            for i in items
            if i.get("type") == "function_call_output" or i.get("role") == "tool"
        ]
        return Reply(text=f"The sum is {outputs[-1]}.")

    env.enqueue(Reply(tool_calls=[Call("add", {"a": 2, "b": 40})]), answer)
    turn = make_turn(env, tmp_path, api=api, stream=stream)
    end = turn.run("add 2 and 40")
    assert end.reason == "answered"
    assert turn.session.messages[-1].text == "The sum is 42."
    roles = [m.role for m in turn.session.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert len(env.requests) == 2


def test_parallel_calls_and_failures_never_end_the_turn(env, tmp_path):
    env.enqueue(
        Reply(
            tool_calls=[
                Call("fail", {}),
                Call("crash", {}),
                Call("nope", {}),
                Call("add", '{"a": 1, "b"'),
                Call("add", {"a": "x", "b": 1}),
                Call("add", {"a": 1, "b": 2}),
            ]
        ),
        Reply(text="done"),
    )
    events = []
    turn = make_turn(env, tmp_path, events=events)
    assert turn.run("go").reason == "answered"
    results = turn.session.messages[2].tool_results()
    texts = [r.output for r in results]
    assert texts[0] == "Error: the disk is on fire"
    assert texts[1].startswith("Error: RuntimeError: bug in the tool")
    assert texts[2].startswith("Error: unknown tool 'nope'")
    assert texts[3].startswith("Error: arguments are not valid JSON")
    assert texts[4].startswith("Error: argument 'a' must be integer")
    assert texts[5] == "3"
    assert [r.is_error for r in results] == [True] * 5 + [False]
    outputs = [i for i in last_input(env) if i.get("type") == "function_call_output"]
    assert len(outputs) == 6  # every call answered, in one request
    assert sum(isinstance(e, ToolEnd) for e in events) == 6


def test_max_steps_stops_cleanly(env, tmp_path):
    env.enqueue(*[Reply(tool_calls=[Call("add", {"a": i, "b": 1})]) for i in range(3)])
    events = []
    turn = make_turn(env, tmp_path, options=TurnOptions(approval="auto", max_steps=3), events=events)
    end = turn.run("loop")
    assert end.reason == "max_steps"
    assert any(isinstance(e, Notice) and "max_steps" in e.text for e in events)
    assert not pending_calls(turn.session.messages)  # consistent: every call has its result


def test_abort_between_steps_leaves_consistent_transcript(env, tmp_path):
    env.enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 1}), Call("add", {"a": 2, "b": 2})]), Reply(text="x"))
    turn = make_turn(env, tmp_path)
    turn.on_event = lambda e: turn.abort.set() if isinstance(e, ToolEnd) else None
    end = turn.run("go")
    assert end.reason == "aborted"
    results = turn.session.messages[-1].tool_results()
    assert [r.output for r in results] == ["2", "Error: not run — the user stopped the turn before this call ran."]
    assert len(env.requests) == 1  # no further model call after Stop


def test_abort_during_streaming_keeps_what_arrived(env, tmp_path):
    env.enqueue(Reply(text="word " * 200))
    turn = make_turn(env, tmp_path)
    seen = []

    def on_event(e):
        if isinstance(e, TextDelta):
            seen.append(e.text)
            if len(seen) == 2:
                turn.abort.set()

    turn.on_event = on_event
    end = turn.run("talk")
    assert end.reason == "aborted"
    last = turn.session.messages[-1]
    assert last.role == "assistant" and last.text and len(last.text) < len("word " * 200)
    assert last.parts[0].item_id is None and last.parts[0].meta["incomplete"] == "aborted"


def test_kernel_interrupt_inside_a_tool(env, tmp_path):
    def interrupt(args, ctx):
        raise KeyboardInterrupt

    tools = dict(TOOLS, stop=Tool("stop", "Interrupts.", schema({}), interrupt, effects=Effect.READS))
    env.enqueue(Reply(tool_calls=[Call("stop", {}), Call("add", {"a": 1, "b": 1})]))
    turn = make_turn(env, tmp_path)
    turn.tools = tools
    end = turn.run("go")
    assert end.reason == "aborted"
    assert not pending_calls(turn.session.messages)
    assert all(r.is_error for r in turn.session.messages[-1].tool_results())


@pytest.mark.parametrize(
    "approval,verdict,expected",
    [
        ("read-only", None, 'Error: not approved — Shiro.approval is "read-only"'),
        ("ask", DENY, "Error: not approved — this run cannot show approval buttons"),
        ("auto", None, "written"),
    ],
)
def test_approval_policies(env, tmp_path, approval, verdict, expected):
    asked = []

    def approver(call, tool):
        asked.append(call.name)
        return verdict

    env.enqueue(Reply(tool_calls=[Call("write", {"x": "1"}), Call("add", {"a": 1, "b": 1})]), Reply(text="ok"))
    turn = make_turn(env, tmp_path, options=TurnOptions(approval=approval), front=Frontend(approver=approver))
    turn.run("write it")
    results = turn.session.messages[2].tool_results()
    assert results[0].output.startswith(expected)
    assert results[1].output == "2"  # reading tools never ask
    assert asked == (["write"] if approval == "ask" else [])


def test_always_this_session_and_pending_approval(env, tmp_path):
    session = Session()
    env.enqueue(Reply(tool_calls=[Call("write", {"x": "a"})]))
    turn = make_turn(
        env, tmp_path, session=session, options=TurnOptions(approval="ask"), front=Frontend(approver=lambda c, t: LATER)
    )
    assert turn.run("write").reason == "waiting"
    assert [c.name for c in pending_calls(session.messages)] == ["write"]  # a call without its result
    # the next turn asks again first; "always" answers it and the rest of the session
    env.enqueue(Reply(text="written, thanks"), Reply(tool_calls=[Call("write", {"x": "b"})]), Reply(text="again"))
    turn = make_turn(
        env,
        tmp_path,
        session=session,
        options=TurnOptions(approval="ask"),
        front=Frontend(approver=lambda c, t: ALWAYS),
    )
    assert turn.run(None).reason == "answered"
    assert session.messages[2].tool_results()[0].output == "written"
    asked = []
    turn = make_turn(
        env,
        tmp_path,
        session=session,
        options=TurnOptions(approval="ask"),
        front=Frontend(approver=lambda c, t: asked.append(1) or DENY),
    )
    turn.run("once more")
    assert asked == [] and session.messages[-2].tool_results()[0].output == "written"


def test_store_on_sends_item_references(env, tmp_path):
    env.enqueue(Reply(reasoning="thinking", tool_calls=[Call("add", {"a": 1, "b": 1})]), Reply(text="2"))
    turn = make_turn(env, tmp_path, store=True, model="gpt-5-mini")
    assert turn.run("add").reason == "answered"
    sent = last_input(env)
    kinds = [i.get("type", "message") for i in sent]
    assert kinds == ["message", "item_reference", "item_reference", "function_call_output"]
    assert sent[1]["id"].startswith("rs_") and sent[2]["id"].startswith("fc_")
    assert "include" not in env.requests[-1].body


def test_store_off_replays_everything_inline(env, tmp_path):
    env.enqueue(
        Reply(reasoning="thinking", text="Let me add.", tool_calls=[Call("add", {"a": 1, "b": 1})]), Reply(text="2")
    )
    turn = make_turn(env, tmp_path, store=False, model="gpt-5-mini")
    assert turn.run("add").reason == "answered"
    body = env.requests[-1].body
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    sent = body["input"]
    assert [i.get("type", "message") for i in sent] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert sent[1]["encrypted_content"] and sent[1]["summary"][0]["text"] == "thinking"
    assert all("id" not in i for i in sent[2:])  # only the reasoning item keeps its (required) id
    assert "item_reference" not in json.dumps(sent)


def test_chat_refused_for_model_falls_back_to_responses_mid_turn(env, tmp_path):
    env.responses_only_models = {"gpt-5-codex"}
    env.enqueue(Reply(tool_calls=[Call("add", {"a": 20, "b": 22})]), Reply(text="42"))
    events = []
    turn = make_turn(env, tmp_path, api="chat", model="gpt-5-codex", events=events)
    end = turn.run("add")
    assert end.reason == "answered" and turn.session.messages[-1].text == "42"
    paths = [r.path for r in env.requests]
    assert paths[0].endswith("/chat/completions") and all(p.endswith("/responses") for p in paths[1:])
    assert any(isinstance(e, Notice) and "Responses API" in e.text for e in events)


def test_missing_key_is_one_clear_paragraph(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    provider = Provider(ProviderSettings(model="gpt-5-mini"))
    turn = Turn(Session(), provider, TOOLS, ToolContext(root=tmp_path), "")
    end = turn.run("hi")
    assert end.reason == "error"
    assert "OPENAI_API_KEY" in end.error and "Shiro.base_url" in end.error and "Traceback" not in end.error


def test_local_server_needs_no_key(monkeypatch, fake_openai, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_openai.enqueue(Reply(text="hi from a local model"))
    turn = make_turn(fake_openai, tmp_path, api="chat")
    assert turn.run("hi").reason == "answered"


def test_unreachable_server(env, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = Provider(ProviderSettings(model="gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0))
    turn = Turn(Session(), provider, TOOLS, ToolContext(root=tmp_path), "")
    end = turn.run("hi")
    assert end.reason == "error" and "Could not reach the model server at http://127.0.0.1" in end.error
    assert KEY not in end.error


def test_429_then_success_is_retried(env, tmp_path):
    env.enqueue(Fault.status(429), Reply(text="after the limit"))
    turn = make_turn(env, tmp_path)
    assert turn.run("hi").reason == "answered"
    assert turn.session.messages[-1].text == "after the limit"


@pytest.mark.parametrize("status", [429, 500])
def test_persistent_failure_is_a_clean_error(env, tmp_path, status):
    env.enqueue(*[Fault.status(status) for _ in range(3)])
    turn = make_turn(env, tmp_path, max_retries=2)
    end = turn.run("hi")
    assert end.reason == "error" and f"({status})" in end.error and "Traceback" not in end.error
    assert KEY not in end.error
    assert [m.role for m in turn.session.messages] == ["user"]


def test_400_is_reported_with_the_servers_words(env, tmp_path):
    env.enqueue_error(400, "Unsupported parameter: 'temperature' is not supported with this model.")
    end = make_turn(env, tmp_path).run("hi")
    assert end.error == (
        "The model server rejected the request (400): Unsupported parameter: 'temperature' "
        "is not supported with this model."
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_stream_cut_before_output_is_retried(env, tmp_path, api):
    env.enqueue(Fault.cut(after_events=1), Reply(text="second try"))
    end = make_turn(env, tmp_path, api=api).run("hi")
    assert end.reason == "answered"


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_malformed_sse_is_a_clean_error_or_retry(env, tmp_path, api):
    env.enqueue(Fault.malformed_sse(), Reply(text="fine now"))
    turn = make_turn(env, tmp_path, api=api)
    end = turn.run("hi")
    if end.reason == "answered":  # broke before anything was shown: retried
        assert turn.session.messages[-1].text == "fine now"
    else:  # broke after text was shown: a clean error, and the text that arrived is kept
        assert end.reason == "error" and "broke in the middle of the answer" in end.error
        assert "Traceback" not in end.error and KEY not in end.error
        assert turn.session.messages[-1].role == "assistant" and turn.session.messages[-1].text


def test_timeout_is_a_clean_error(env, tmp_path):
    env.enqueue(Fault.delay(2.0), Fault.delay(2.0))
    end = make_turn(env, tmp_path, max_retries=1, timeout_s=0.3).run("hi")
    assert end.reason == "error" and "did not answer within 0.3 s" in end.error


def test_threads_do_not_share_state(env, tmp_path):
    """Two sessions in two threads against one server: each gets its own answer."""
    env.enqueue(
        lambda r: Reply(text="A" if "alpha" in json.dumps(r.body) else "B"),
        lambda r: Reply(text="A" if "alpha" in json.dumps(r.body) else "B"),
    )
    turns = [make_turn(env, tmp_path), make_turn(env, tmp_path)]
    threads = [threading.Thread(target=t.run, args=(p,)) for t, p in zip(turns, ["alpha", "beta"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [t.session.messages[-1].text for t in turns] == ["A", "B"]


def test_tool_result_part_round_trip_in_session(env, tmp_path):
    env.enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 2})]), Reply(text="3"))
    turn = make_turn(env, tmp_path)
    turn.run("x")
    tool_msg = turn.session.messages[2]
    assert isinstance(tool_msg.parts[0], ToolResultPart)
    assert isinstance(turn.session.messages[1].parts[0], ToolCallPart)
    assert tool_msg.parts[0].call_id == turn.session.messages[1].parts[0].call_id
