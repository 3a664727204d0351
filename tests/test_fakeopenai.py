"""Tests for tests/fakeopenai.py, driven through the real ``openai`` client."""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import openai
import pytest
from fakeopenai import SMALL_MODEL_GUESS, SMALL_MODEL_NUMBER, Call, FakeOpenAI, Fault, Recorded, Reply

TOOLS_R = [
    {
        "type": "function",
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    }
]
TOOLS_C = [
    {
        "type": "function",
        "function": {"name": "add", "description": "Add two numbers.", "parameters": TOOLS_R[0]["parameters"]},
    }
]
LONG = "The quick brown fox jumps over the extraordinarily lazy dog."


@pytest.fixture
def client(fake_openai: FakeOpenAI) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=fake_openai.base_url, max_retries=0)


def dump(items: list[Any]) -> list[dict[str, Any]]:
    """SDK output items -> request input items (what a client replays)."""
    return [i.model_dump(exclude_none=True) for i in items]


# --- environment ---------------------------------------------------------------


def test_environment_is_isolated(tmp_path_factory: pytest.TempPathFactory) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SHIRO_MODEL", "SHIRO_API"):
        assert var not in os.environ
    base = str(tmp_path_factory.getbasetemp())
    assert os.environ["SHIRO_HOME"].startswith(base)
    assert os.environ["IPYTHONDIR"].startswith(base)


# --- plain text ------------------------------------------------------------------


def test_responses_text_non_streaming(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    r = client.responses.create(model="gpt-5", input="hi")
    assert r.output_text == "ok"  # the default reply
    fake_openai.enqueue(Reply(text="Hello!", usage=(12, 3), model="gpt-5-2025-08-07", phase="final_answer"))
    r = client.responses.create(model="gpt-5", input=[{"role": "user", "content": "hi"}])
    assert r.output_text == "Hello!"
    assert r.id.startswith("resp_") and r.output[0].id.startswith("msg_")
    assert r.object == "response" and r.status == "completed" and r.model == "gpt-5-2025-08-07"
    assert r.output[0].phase == "final_answer"  # type: ignore[union-attr]
    assert r.usage is not None
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (12, 3, 15)
    assert r.usage.input_tokens_details.cached_tokens == 0
    assert r.store is True

    rec = fake_openai.last_request
    assert rec.path == "/v1/responses" and rec.method == "POST" and rec.status == 200 and not rec.stream
    assert rec.body["input"] == [{"role": "user", "content": "hi"}]
    assert rec.headers["authorization"] == "Bearer sk-test"
    assert len(fake_openai.requests) == 2


def test_responses_text_streaming(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Reply(text=LONG))
    stream = client.responses.create(model="gpt-5", input="hi", stream=True)
    events = list(stream)
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 3 and "".join(deltas) == LONG
    assert [t for t in types if "delta" not in t] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == LONG  # type: ignore[union-attr]
    assert fake_openai.last_request.stream and fake_openai.last_request.status == 200

    # The SDK's helper accumulates the same text.
    fake_openai.enqueue(Reply(text=LONG))
    with client.responses.stream(model="gpt-5", input="hi") as s:
        text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
        assert s.get_final_response().output_text == text == LONG


def test_chat_text_both_modes(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Reply(text="Hi there.", usage=(7, 2)))
    c = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert c.id.startswith("chatcmpl-") and c.object == "chat.completion"
    assert c.choices[0].message.content == "Hi there." and c.choices[0].finish_reason == "stop"
    assert c.usage is not None and (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (7, 2, 9)

    fake_openai.enqueue(Reply(text=LONG))
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == LONG and sum(1 for ch in chunks if ch.choices and ch.choices[0].delta.content) > 3
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None  # the include_usage chunk

    fake_openai.enqueue(Reply(text="no usage"))
    chunks = list(
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True)
    )
    assert all(ch.choices for ch in chunks) and chunks[-1].choices[0].finish_reason == "stop"


# --- a small local model (Qwen2.5-Coder 0.5B/1.5B on llama-server) -------------------------------------------

PYTHON_C = [
    {
        "type": "function",
        "function": {
            "name": "python",
            "description": "Run Python code.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]
FENCE = re.compile(r"```json\n(.*?)\n```", re.S)


def test_small_local_model_writes_calls_as_fenced_json_and_guesses(
    fake_openai: FakeOpenAI, client: openai.OpenAI
) -> None:
    fake_openai.small_local_model = True
    code = "import pandas as pd\nprint(pd.read_csv('titanic.csv').Fare.mean())"
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": code})]))
    ask = [{"role": "user", "content": "What is the mean fare?"}]
    c = client.chat.completions.create(model="qwen", messages=ask, tools=PYTHON_C)  # type: ignore[arg-type]
    message = c.choices[0].message
    assert message.tool_calls is None and c.choices[0].finish_reason == "stop"  # the server parsed no call
    assert message.content is not None and message.content.startswith('```json\n{\n  "name": "python",\n')
    (block,) = FENCE.findall(message.content)
    assert json.loads(block) == {"name": "python", "arguments": {"code": code}}
    # nothing scripted: a call-less guess with a number no output showed, not the default "ok"
    c = client.chat.completions.create(model="qwen", messages=ask, tools=PYTHON_C)  # type: ignore[arg-type]
    assert c.choices[0].message.tool_calls is None and c.choices[0].message.content == SMALL_MODEL_GUESS
    assert SMALL_MODEL_NUMBER in SMALL_MODEL_GUESS

    # streamed, and on the Responses API: the same text, no function_call item; str arguments go in verbatim
    written = '{"code": """print(1)"""}'  # a Python triple-quoted string, as the 1.5B model writes: not JSON
    fake_openai.enqueue(Reply(text="Let me compute it.", tool_calls=[Call("python", written)]))
    chunks = list(client.chat.completions.create(model="qwen", messages=ask, tools=PYTHON_C, stream=True))  # type: ignore[arg-type]
    assert not any(ch.choices[0].delta.tool_calls for ch in chunks if ch.choices)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text.startswith("Let me compute it.\n\n```json\n") and FENCE.findall(text) == [
        '{\n  "name": "python",\n  "arguments": ' + written + "\n}"
    ]
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "1 + 1"}), Call("python", {"code": "2 + 2"})]))
    r = client.responses.create(model="qwen", input="go", tools=[{"type": "function", **PYTHON_C[0]["function"]}])  # type: ignore[list-item]
    assert [o.type for o in r.output] == ["message"]
    assert [json.loads(b)["arguments"]["code"] for b in FENCE.findall(r.output_text)] == ["1 + 1", "2 + 2"]
    fake_openai.small_local_model = False  # the API's calls again, and the default reply
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "3"})]))
    c = client.chat.completions.create(model="qwen", messages=ask, tools=PYTHON_C)  # type: ignore[arg-type]
    assert c.choices[0].message.tool_calls is not None and len(c.choices[0].message.tool_calls) == 1
    assert client.chat.completions.create(model="qwen", messages=ask).choices[0].message.content == "ok"


# --- tool calls ----------------------------------------------------------------------


def test_responses_parallel_tool_calls_and_round_trip(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 2}), Call("add", {"a": 30, "b": 4})]))
    stream = client.responses.create(model="gpt-5", input="add things", tools=TOOLS_R, stream=True)  # type: ignore[arg-type]
    events = list(stream)
    final = events[-1].response  # type: ignore[union-attr]
    calls = [o for o in final.output if o.type == "function_call"]
    assert len(calls) == 2 and all(c.id.startswith("fc_") and c.call_id.startswith("call_") for c in calls)
    for c in calls:
        deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta" and e.item_id == c.id]
        assert len(deltas) > 1 and "".join(deltas) == c.arguments
    assert json.loads(calls[1].arguments) == {"a": 30, "b": 4}
    assert [e.output_index for e in events if e.type == "response.output_item.added"] == [0, 1]

    # Replaying the stored items (with their ids) plus the outputs is valid.
    fake_openai.enqueue(Reply(text="3 and 34"))
    inputs = [
        {"role": "user", "content": "add things"},
        *dump(final.output),
        *(
            {"type": "function_call_output", "call_id": c.call_id, "output": str(sum(json.loads(c.arguments).values()))}
            for c in calls
        ),
    ]
    r = client.responses.create(model="gpt-5", input=inputs, tools=TOOLS_R)  # type: ignore[arg-type]
    assert r.output_text == "3 and 34"


def test_chat_parallel_tool_calls_streamed_and_round_trip(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(
        Reply(
            tool_calls=[
                Call("add", {"a": 1, "b": 2}, call_id="call_one"),
                Call("add", '{"a": 5, "b": oops', call_id="call_two"),
            ]
        )
    )
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "add"}],
            tools=TOOLS_C,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    acc: dict[int, dict[str, str]] = {}
    pieces = 0
    for ch in chunks:
        for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
            slot = acc.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            if tc.id:
                assert slot["id"] == "" and tc.function and tc.function.name  # id + name come first, once
                slot["id"], slot["name"] = tc.id, tc.function.name
            if tc.function and tc.function.arguments:
                slot["arguments"] += tc.function.arguments
                pieces += 1
    assert acc[0] == {"id": "call_one", "name": "add", "arguments": '{"a":1,"b":2}'}
    assert acc[1]["arguments"] == '{"a": 5, "b": oops'  # malformed JSON sent verbatim
    assert pieces > 2
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "tool_calls"

    fake_openai.enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 1})]))
    c = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "add"}])
    msg = c.choices[0].message
    assert c.choices[0].finish_reason == "tool_calls" and msg.content is None
    assert msg.tool_calls and msg.tool_calls[0].type == "function" and msg.tool_calls[0].id.startswith("call_")

    fake_openai.enqueue(Reply(text="2"))
    c = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "user", "content": "add"},
            msg.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": "2"},
        ],
    )
    assert c.choices[0].message.content == "2"


def test_callable_reply_sees_the_request(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    def answer(rec: Recorded) -> Reply:
        outputs = [i for i in rec.body["input"] if i.get("type") == "function_call_output"]
        return Reply(text=f"the tool said {outputs[-1]['output']}")

    fake_openai.enqueue(Reply(tool_calls=[Call("add", {"a": 2, "b": 2}, call_id="call_x")]), answer)
    r1 = client.responses.create(model="gpt-5", input="2+2?", tools=TOOLS_R)  # type: ignore[arg-type]
    r2 = client.responses.create(
        model="gpt-5",
        tools=TOOLS_R,
        input=[  # type: ignore[arg-type]
            {"role": "user", "content": "2+2?"},
            *dump(r1.output),
            {"type": "function_call_output", "call_id": "call_x", "output": "4"},
        ],
    )
    assert r2.output_text == "the tool said 4"


# --- reasoning -------------------------------------------------------------------------


def test_reasoning_encrypted_content_and_stateless_round_trip(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Reply(reasoning="Need the add tool.", tool_calls=[Call("add", {"a": 1, "b": 2})]))
    r = client.responses.create(
        model="gpt-5",
        input="1+2",
        tools=TOOLS_R,
        store=False,  # type: ignore[arg-type]
        include=["reasoning.encrypted_content"],
    )
    rs, fc = r.output
    assert rs.type == "reasoning" and rs.id.startswith("rs_") and rs.encrypted_content
    assert rs.summary[0].text == "Need the add tool."
    assert fc.type == "function_call" and r.store is False

    # What real stateless clients replay (llm cassette): {type, id, encrypted_content, summary} and the
    # function_call without its id.  Accepted with store=false.
    fake_openai.enqueue(Reply(text="3"))
    r2 = client.responses.create(
        model="gpt-5",
        tools=TOOLS_R,
        store=False,  # type: ignore[arg-type]
        include=["reasoning.encrypted_content"],
        input=[
            {"role": "user", "content": "1+2"},
            {"type": "reasoning", "id": rs.id, "encrypted_content": rs.encrypted_content, "summary": []},
            {"type": "function_call", "call_id": fc.call_id, "name": "add", "arguments": fc.arguments},
            {"type": "function_call_output", "call_id": fc.call_id, "output": "3"},
        ],
    )
    assert r2.output_text == "3"

    # Without `include` there is no encrypted_content.
    fake_openai.enqueue(Reply(reasoning="hmm", text="x"))
    r3 = client.responses.create(model="gpt-5", input="q")
    assert r3.output[0].type == "reasoning" and r3.output[0].encrypted_content is None


def test_reasoning_summary_streaming_events(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Reply(reasoning="Thinking about the extraordinarily tricky question.", text="done"))
    events = list(
        client.responses.create(model="gpt-5", input="q", stream=True, include=["reasoning.encrypted_content"])
    )
    types = [e.type for e in events]
    assert types[2:5] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
    ]
    i = types.index("response.reasoning_summary_text.done")
    assert types[i + 1 : i + 3] == ["response.reasoning_summary_part.done", "response.output_item.done"]
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    assert summary == "Thinking about the extraordinarily tricky question."
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert done[0].type == "reasoning" and done[0].encrypted_content and done[1].type == "message"


# --- history rules: responses ---------------------------------------------------------------


def bad(client: openai.OpenAI, status: int, **kw: Any) -> openai.APIStatusError:
    kw.setdefault("model", "gpt-5")
    with pytest.raises(openai.APIStatusError) as ei:
        client.responses.create(**kw)
    assert ei.value.status_code == status, ei.value
    return ei.value


def err(e: openai.APIStatusError) -> dict[str, Any]:
    return e.body  # type: ignore[return-value]  # the SDK hands over the "error" object


def test_function_call_output_without_call(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Reply(text="kept for later"))
    e = bad(
        client,
        400,
        input=[
            {"role": "user", "content": "x"},
            {"type": "function_call_output", "call_id": "call_nope", "output": "1"},
        ],
    )
    assert isinstance(e, openai.BadRequestError)
    assert err(e) == {
        "message": "No tool call found for function call output with call_id call_nope.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }
    # The rejected request did not consume the scripted reply.
    assert fake_openai.pending == 1
    assert client.responses.create(model="gpt-5", input="x").output_text == "kept for later"
    assert [r.status for r in fake_openai.requests] == [400, 200]


def test_function_call_without_output(client: openai.OpenAI) -> None:
    e = bad(
        client,
        400,
        input=[
            {"role": "user", "content": "x"},
            {"type": "function_call", "call_id": "call_a", "name": "add", "arguments": "{}"},
        ],
    )
    assert e.message.endswith("No tool output found for function call call_a.")
    assert err(e)["message"] == "No tool output found for function call call_a."


def test_stored_items_need_their_reasoning(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(
        Reply(
            reasoning="r",
            text="commentary",
            phase="commentary",
            tool_calls=[Call("add", {"a": 1, "b": 1}, call_id="call_r")],
        )
    )
    r = client.responses.create(model="gpt-5", input="q", tools=TOOLS_R)  # type: ignore[arg-type]
    rs, msg, fc = r.output
    out = {"type": "function_call_output", "call_id": "call_r", "output": "2"}
    user = {"role": "user", "content": "q"}

    e = bad(
        client,
        400,
        tools=TOOLS_R,
        input=[user, msg.model_dump(exclude_none=True), fc.model_dump(exclude_none=True), out],
    )
    assert err(e)["message"] == (
        f"Item '{msg.id}' of type 'message' was provided without its required 'reasoning' item: '{rs.id}'."
    )
    e = bad(client, 400, tools=TOOLS_R, input=[user, {"type": "item_reference", "id": fc.id}, out])
    assert err(e)["message"] == (
        f"Item '{fc.id}' of type 'function_call' was provided without its required 'reasoning' item: '{rs.id}'."
    )
    # With the reasoning (inline or by reference) it is fine.
    fake_openai.enqueue(Reply(text="2"), Reply(text="2 again"))
    assert (
        client.responses.create(
            model="gpt-5",
            tools=TOOLS_R,
            input=[  # type: ignore[arg-type]
                user,
                *dump(r.output),
                out,
            ],
        ).output_text
        == "2"
    )
    assert (
        client.responses.create(
            model="gpt-5",
            tools=TOOLS_R,
            input=[  # type: ignore[arg-type]
                user,
                *({"type": "item_reference", "id": i.id} for i in r.output),
                out,
            ],
        ).output_text
        == "2 again"
    )


def test_reasoning_needs_a_following_item(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Reply(reasoning="r", text="The meaning of life is 42"))
    r = client.responses.create(model="gpt-5", input="meaning?", include=["reasoning.encrypted_content"])
    rs = r.output[0]
    # As recorded (pydantic-ai ..._thinking_with_modified_history.yaml): an assistant
    # message without id after the reasoning item does not count as its following item.
    e = bad(
        client,
        400,
        input=[
            {"role": "user", "content": "meaning?"},
            {"type": "reasoning", "id": rs.id, "encrypted_content": rs.encrypted_content, "summary": []},  # type: ignore[union-attr]
            {"role": "assistant", "content": "The meaning of life is 42"},
            {"role": "user", "content": "Anything to add?"},
        ],
    )
    assert err(e) == {
        "message": f"Item '{rs.id}' of type 'reasoning' was provided without its required following item.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }
    e = bad(client, 400, input=[{"role": "user", "content": "q"}, {"type": "item_reference", "id": rs.id}])
    assert "without its required following item" in err(e)["message"]

    # Stateless replay the way Codex CLI does it: reasoning with encrypted_content, then the
    # assistant output_text message without id/status.  Accepted with store=false.
    fake_openai.enqueue(Reply(reasoning="r", text="42"), Reply(text="nothing to add"))
    r = client.responses.create(model="gpt-5", input="meaning?", store=False, include=["reasoning.encrypted_content"])
    rs, msg = r.output
    r2 = client.responses.create(
        model="gpt-5",
        store=False,
        include=["reasoning.encrypted_content"],
        input=[
            {"role": "user", "content": "meaning?"},
            {"type": "reasoning", "id": rs.id, "encrypted_content": rs.encrypted_content, "summary": []},  # type: ignore[union-attr]
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "42"}]},
            {"role": "user", "content": "Anything to add?"},
        ],
    )
    assert r2.output_text == "nothing to add"


def test_unknown_ids_and_store_false(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    e = bad(client, 404, input=[{"type": "item_reference", "id": "msg_never"}])
    assert isinstance(e, openai.NotFoundError)
    assert err(e)["message"] == "Item with id 'msg_never' not found."
    e = bad(
        client,
        404,
        input=[
            {"role": "user", "content": "x"},
            {"type": "function_call", "id": "fc_never", "call_id": "c", "name": "add", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "1"},
        ],
    )
    assert err(e)["message"] == "Item with id 'fc_never' not found."

    store_false = (
        "Item with id '{}' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input."
    )
    fake_openai.enqueue(Reply(reasoning="r", tool_calls=[Call("add", {"a": 1, "b": 1}, call_id="call_s")]))
    r = client.responses.create(model="gpt-5", input="q", tools=TOOLS_R, store=False)  # type: ignore[arg-type]
    rs, fc = r.output
    assert fake_openai.stored_item(fc.id) is None  # store=false keeps nothing
    e = bad(client, 404, store=False, input=[{"type": "item_reference", "id": rs.id}])
    assert err(e)["message"] == store_false.format(rs.id)
    # A reasoning item without encrypted_content cannot be replayed statelessly.
    e = bad(
        client,
        404,
        store=False,
        tools=TOOLS_R,
        input=[
            {"role": "user", "content": "q"},
            {"type": "reasoning", "id": rs.id, "summary": []},
            fc.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": "call_s", "output": "2"},
        ],
    )
    assert err(e)["message"] == store_false.format(rs.id)
    e = bad(
        client,
        404,
        store=False,
        tools=TOOLS_R,
        input=[
            {"role": "user", "content": "q"},
            fc.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": "call_s", "output": "2"},
        ],
    )
    assert err(e)["message"] == store_false.format(fc.id)
    assert fake_openai.pending == 0 and [q.status for q in fake_openai.requests] == [404, 404, 200, 404, 404, 404]


def test_item_reference_success_and_previous_response_id(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 1}, call_id="call_ref")]))
    r = client.responses.create(model="gpt-5", input="q", tools=TOOLS_R)  # type: ignore[arg-type]
    fc = r.output[0]
    assert fake_openai.stored_item(fc.id)["call_id"] == "call_ref"  # type: ignore[index]
    fake_openai.enqueue(Reply(text="2"))
    r2 = client.responses.create(
        model="gpt-5",
        tools=TOOLS_R,
        input=[  # type: ignore[arg-type]
            {"role": "user", "content": "q"},
            {"type": "item_reference", "id": fc.id},
            {"type": "function_call_output", "call_id": "call_ref", "output": "2"},
        ],
    )
    assert r2.output_text == "2" and fake_openai.last_request.status == 200

    # previous_response_id: the earlier conversation counts as context.
    fake_openai.enqueue(Reply(text="chained"))
    r3 = client.responses.create(
        model="gpt-5",
        tools=TOOLS_R,
        previous_response_id=r.id,  # type: ignore[arg-type]
        input=[{"type": "function_call_output", "call_id": "call_ref", "output": "2"}],
    )
    assert r3.output_text == "chained"
    e = bad(client, 400, previous_response_id=r.id, input="forgot the output")
    assert err(e)["message"] == "No tool output found for function call call_ref."
    e = bad(client, 400, previous_response_id="resp_unknown", input="x")
    assert err(e)["param"] == "previous_response_id"


# --- history rules: chat --------------------------------------------------------------------


def chat_bad(
    client: openai.OpenAI, messages: list[dict[str, Any]], model: str = "gpt-4o-mini"
) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as ei:
        client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
    return ei.value


def test_chat_tool_message_rules(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    e = chat_bad(client, [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "call_z", "content": "1"}])
    assert e.status_code == 400 and err(e)["message"] == (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
    )
    calls = [{"id": f"call_{i}", "type": "function", "function": {"name": "add", "arguments": "{}"}} for i in (1, 2)]
    e = chat_bad(
        client,
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "call_1", "content": "1"},
            {"role": "user", "content": "and?"},
        ],
    )
    assert e.status_code == 400 and err(e)["message"] == (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_2"
    )
    e = chat_bad(client, [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": calls}])
    assert err(e)["message"].endswith("did not have response messages: call_1, call_2")
    assert [r.status for r in fake_openai.requests] == [400, 400, 400]


def test_chat_refuses_responses_only_model(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.responses_only_models = {"gpt-5-codex"}
    e = chat_bad(client, [{"role": "user", "content": "x"}], model="gpt-5-codex")
    assert isinstance(e, openai.NotFoundError)
    assert err(e) == {
        "message": "This model is only supported in v1/responses and not in v1/chat/completions.",
        "type": "invalid_request_error",
        "param": "model",
        "code": None,
    }
    assert client.responses.create(model="gpt-5-codex", input="x").output_text == "ok"


# --- faults ------------------------------------------------------------------------------------


def test_rate_limit_then_retry_succeeds(fake_openai: FakeOpenAI) -> None:
    retrying = openai.OpenAI(api_key="sk-test", base_url=fake_openai.base_url, max_retries=2)
    fake_openai.enqueue(Fault.status(429), Fault.status(500), Reply(text="after the limit"))
    t = time.monotonic()
    assert retrying.responses.create(model="gpt-5", input="x").output_text == "after the limit"
    assert time.monotonic() - t < 1.0  # retry-after-ms keeps retries fast
    assert [r.status for r in fake_openai.requests] == [429, 500, 200]
    assert fake_openai.requests[1].headers["x-stainless-retry-count"] == "1"


def test_error_bodies(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Fault.status(429))
    with pytest.raises(openai.RateLimitError) as ei:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert err(ei.value)["code"] == "rate_limit_exceeded" and err(ei.value)["type"] == "requests"
    assert ei.value.response.headers["retry-after-ms"] == "10"
    fake_openai.enqueue_error(
        400,
        "Unsupported parameter: 'temperature' is not supported with this model.",
        code="unsupported_parameter",
        param="temperature",
    )
    e = bad(client, 400, input="x")
    assert err(e) == {
        "message": "Unsupported parameter: 'temperature' is not supported with this model.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "unsupported_parameter",
    }


def test_cut_stream_raises(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Fault.cut(after_events=3), Fault.cut(after_events=2), Fault.cut())
    seen = []
    with pytest.raises(openai.APIConnectionError):
        for ev in client.responses.create(model="gpt-5", input="x", stream=True):
            seen.append(ev.type)
    assert seen == ["response.created", "response.in_progress", "response.output_item.added"]
    with pytest.raises(openai.APIConnectionError):
        list(
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], stream=True
            )
        )
    with pytest.raises(openai.APIConnectionError):  # non-streaming: closed before any answer
        client.responses.create(model="gpt-5", input="x")
    # A cut stream stored nothing, and the server is still fine.
    assert client.responses.create(model="gpt-5", input="x").output_text == "ok"


def test_malformed_sse_raises(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Fault.malformed_sse(), Fault.malformed_sse(), Fault.malformed_sse(after_events=3))
    seen: list[Any] = []
    with pytest.raises(json.JSONDecodeError):  # default: garbage before any output
        seen.extend(e.type for e in client.responses.create(model="gpt-5", input="x", stream=True))
    assert seen == ["response.created", "response.in_progress"]
    seen.clear()
    with pytest.raises(json.JSONDecodeError):
        seen.extend(
            client.chat.completions.create(
                model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "x"}]
            )
        )
    assert len(seen) == 1 and seen[0].choices[0].delta.role == "assistant"
    seen.clear()
    with pytest.raises(json.JSONDecodeError):
        seen.extend(
            client.chat.completions.create(
                model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "x"}]
            )
        )
    assert [c.choices[0].delta.content for c in seen] == ["", "ok", None]  # role, text, finish chunk


def test_delay_and_client_timeout(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.enqueue(Fault.delay(1.0), Fault.delay(0.05, then=Reply(text="slow but fine")))
    t = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        client.with_options(timeout=0.2).responses.create(model="gpt-5", input="x")
    assert time.monotonic() - t < 0.9
    assert client.responses.create(model="gpt-5", input="x").output_text == "slow but fine"


# --- OpenAPI validation --------------------------------------------------------------------------


def test_validation_catches_a_bad_body(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_openai.expect_invalid = True
    fake_openai.enqueue(Reply(text="not used"))
    e = bad(client, 400, input="x", extra_body={"temperature": "hot"})
    assert err(e)["type"] == "invalid_request_error" and err(e)["param"] == "temperature"
    assert len(fake_openai.validation_errors) == 1
    assert fake_openai.validation_errors[0].startswith("POST /v1/responses temperature: 'hot'")
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "wizard", "content": "x"}])  # type: ignore[misc,list-item]
    assert "messages[0]" in fake_openai.validation_errors[1]
    assert fake_openai.pending == 1  # invalid requests do not consume replies


def test_validation_accepts_real_client_shapes(fake_openai: FakeOpenAI, client: openai.OpenAI) -> None:
    # Shapes real clients send that trip naive validation of the spec (see _patch_spec).
    fake_openai.enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 2}, call_id="call_v")]))
    r = client.responses.create(
        model="gpt-5",
        tools=TOOLS_R,
        instructions="be brief",  # type: ignore[arg-type]
        reasoning={"effort": "low", "summary": "auto"},
        max_output_tokens=100,
        input=[{"role": "user", "content": [{"type": "input_text", "text": "add"}]}],
    )
    fc = r.output[0].model_dump(exclude_none=True)
    fc["status"] = None  # pydantic-ai replays this; the real API accepts it
    fake_openai.enqueue(Reply(text="3"))
    client.responses.create(
        model="gpt-5",
        tools=TOOLS_R,
        input=[  # type: ignore[arg-type]
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add"}]},
            fc,
            {"type": "function_call_output", "call_id": "call_v", "output": "3"},
        ],
    )
    client.chat.completions.create(
        model="gpt-4o-mini",
        tools=TOOLS_C,
        temperature=0.2,  # type: ignore[arg-type]
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "x"}]}],
    )
    assert fake_openai.validation_errors == []
