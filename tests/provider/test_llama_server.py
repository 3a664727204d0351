"""shiro's provider client against llama.cpp's own ``llama-server --jinja`` with Qwen2.5-Coder-0.5B-Instruct (the
fixture of ``tests/realengine.py``; built and assembled by ``scripts/engines.py``): the paths only reality shows.

What this server and model do, measured (temperature 0, seed 1):

* Asked to use a tool, the model writes the call as a fenced JSON block in the content (```` ```json {"name":
  "python", "arguments": {"code": "…"}} ``` ````); llama-server's parser turns it into no ``tool_calls``, with
  ``tool_choice: "required"`` neither (its grammar lets content come before a call: the model writes the block,
  then pads with newlines to ``max_tokens``). Neither a system prompt asking for ``<tool_call>`` tags, earlier
  calls in the history (it then writes bare JSON), nor a ``logit_bias`` on ``<tool_call>`` (it repeats the tag)
  gave a parsed call.
* It returns a parsed call when the answer is begun for it: an assistant message at the end of the request
  holding ``<tool_call>\\n{"name": "python", "arguments": {"code": "`` (llama-server continues the prefill and
  parses the whole). The recording proxy adds that prefill — the one setting found; shiro never sends one — so
  that llama-server's own ``tool_calls`` (its ids, its stream deltas, its usage) and its template's reading of
  shiro's tool history are tested.
* ``POST /v1/responses`` answers (200), streamed and not, with ``usage`` (``input_tokens``, ``output_tokens``,
  ``input_tokens_details.cached_tokens``) and no ``store`` field.

Asserted on the wire (a recording proxy: each request as sent, each answer as the server gave it) and on shiro's
record (the session saved as the turn saves it), never on the answer's words."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from realengine import LLAMA_MODEL, LlamaServer, WireRecorder

from shiro_kernel.context.rules import check_and_repair
from shiro_kernel.events import Done, Error, Usage
from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.provider.profile import Profiles
from shiro_kernel.session import Session
from shiro_kernel.store.records import session_from_record
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.tools import all_tools
from shiro_kernel.transcript import Message, TextPart, ToolResultPart

pytestmark = pytest.mark.timeout(300)

SYSTEM = "You are a data analyst's assistant in a Jupyter kernel. Use the python tool to run code."
ASK = "Use the python tool to compute 17 * 23."
#: the beginning of an answer after which llama-server returns the model's call parsed (see the docstring)
PREFILL = '<tool_call>\n{"name": "python", "arguments": {"code": "'
FENCE = re.compile(r"```json\s*(\{.*?\})\s*```", re.S)


def python_tool() -> list[dict[str, Any]]:
    return [all_tools()["python"].spec()]


def provider(wire: WireRecorder, tmp_path: Path, *, api: str, stream: bool, max_tokens: int = 48) -> Provider:
    settings = ProviderSettings(
        model=LLAMA_MODEL,
        api=api,
        api_explicit=True,
        base_url=wire.base_url,
        stream=stream,
        max_output_tokens=max_tokens,
        timeout_s=120,
    )
    return Provider(settings, profiles=Profiles(tmp_path / "servers.json"))


def call(p: Provider, messages: list[Message], tools: list[dict[str, Any]]) -> Done:
    events = list(p.stream(SYSTEM, messages, tools))
    errors = [e for e in events if isinstance(e, Error)]
    assert not errors, errors
    (done,) = [e for e in events if isinstance(e, Done)]
    (usage,) = [e for e in events if isinstance(e, Usage)]
    assert usage == done.usage
    return done


def recorded(tmp_path: Path, messages: list[Message]) -> dict[str, Any]:
    """The session as the turn saves it, read back from its file."""
    session = Session()
    session.messages = list(messages)
    SessionStore(tmp_path / "sessions").save(session, model=LLAMA_MODEL)
    (path,) = (tmp_path / "sessions").glob("*.json")
    record: dict[str, Any] = json.loads(path.read_text())
    assert check_and_repair(session_from_record(record).messages, store=True)[1] == []  # no orphan, none unanswered
    return record


def parts(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for m in record["messages"] for p in m["parts"] if p["type"] == kind]


def chat_answer(exchange: Any) -> tuple[dict[str, Any], str | None, dict[str, Any] | None]:
    """(the assistant message, the finish reason, the usage) of a Chat answer, streamed or not, as the server sent
    it: a stream's deltas put together (content joined, each tool call's id, name and arguments)."""
    if not exchange.body.get("stream"):
        data = exchange.json()
        return data["choices"][0]["message"], data["choices"][0]["finish_reason"], data.get("usage")
    message: dict[str, Any] = {"content": ""}
    calls: dict[int, dict[str, Any]] = {}
    finish, usage = None, None
    for event in exchange.events():
        usage = event.get("usage") or usage
        for choice in event.get("choices", []):
            delta = choice.get("delta", {})
            message["content"] += delta.get("content") or ""
            for d in delta.get("tool_calls") or []:
                c = calls.setdefault(d["index"], {"id": None, "name": "", "arguments": ""})
                c["id"] = d.get("id") or c["id"]
                c["name"] += (d.get("function") or {}).get("name") or ""
                c["arguments"] += (d.get("function") or {}).get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
    return message, finish, usage


def the_usage_sent(done: Done, usage: dict[str, Any] | None, *, chat: bool) -> None:
    """shiro counts the usage the server sent, not an estimate."""
    assert usage is not None
    fields = ("prompt_tokens", "completion_tokens") if chat else ("input_tokens", "output_tokens")
    details = usage.get("prompt_tokens_details" if chat else "input_tokens_details") or {}
    assert not done.usage.estimated
    assert (done.usage.input_tokens, done.usage.output_tokens) == (usage[fields[0]], usage[fields[1]])
    assert done.usage.cached_input_tokens == details.get("cached_tokens", 0)


# -- a parsed tool call ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
def test_a_parsed_tool_call_from_llama_server_round_trips(llama_server: LlamaServer, tmp_path: Path, stream: bool):
    def begun(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/v1/chat/completions" and body["messages"][-1]["role"] == "user":
            body["messages"].append({"role": "assistant", "content": PREFILL})
        return body

    with WireRecorder(llama_server.url, rewrite=begun) as wire:
        p = provider(wire, tmp_path, api="chat", stream=stream)
        messages = [Message.user(ASK)]
        done = call(p, messages, python_tool())
        first = wire.posts()[0]
        sent, finish, usage = chat_answer(first)
        assert (first.path, first.status, finish) == ("/v1/chat/completions", 200, "tool_calls")
        (wired,) = sent["tool_calls"]
        assert wired["function"]["name"] == "python" and isinstance(json.loads(wired["function"]["arguments"]), dict)
        # shiro's call is the server's: its id (llama-server's own, no "call_" prefix), name and arguments verbatim
        (made,) = done.message.tool_calls()
        assert (made.call_id, made.name, made.arguments) == (
            wired["id"],
            "python",
            wired["function"]["arguments"],
        )
        assert "code" in made.parsed_arguments()
        the_usage_sent(done, usage, chat=True)

        # the result goes back as shiro sends it, and llama-server's template takes that history
        messages += [done.message, Message("tool", [ToolResultPart(made.call_id, "python", "391")])]
        answer = call(p, messages, python_tool())
        second = wire.posts()[1]
        assert second.status == 200 and len(wire.posts()) == 2
        history = second.body["messages"]
        assistant = [m for m in history if m["role"] == "assistant"]
        assert [c["id"] for m in assistant for c in m.get("tool_calls", [])] == [wired["id"]]
        assert [m["tool_call_id"] for m in history if m["role"] == "tool"] == [wired["id"]]
        the_usage_sent(answer, chat_answer(second)[2], chat=True)
    record = recorded(tmp_path, [*messages, answer.message])
    # the server's call is kept with its id; the model's next answer may be one more call, written as its whole
    # text (the 0.5B often answers so) and read from it (textcalls: meta fromText, an id of shiro's own)
    calls = parts(record, "tool_call")
    assert calls[0]["callId"] == wired["id"]
    assert all(c.get("meta", {}).get("fromText") for c in calls[1:])
    assert [r["callId"] for r in parts(record, "tool_result")] == [wired["id"]]


# -- a call written as fenced JSON ----------------------------------------------------------------------------
@pytest.mark.parametrize("tool_choice", [None, "required"])
def test_a_call_written_as_fenced_json_is_what_the_model_answers(
    llama_server: LlamaServer, tmp_path: Path, tool_choice: str | None
):
    def choose(path: str, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "tool_choice": tool_choice} if tool_choice else body

    with WireRecorder(llama_server.url, rewrite=choose) as wire:
        done = call(provider(wire, tmp_path, api="chat", stream=True), [Message.user(ASK)], python_tool())
    (exchange,) = wire.posts()
    sent, finish, usage = chat_answer(exchange)
    assert exchange.status == 200 and exchange.body.get("tool_choice") == tool_choice and exchange.body["tools"]
    # no tool_calls, even when required: the call is a fenced JSON block in the content
    assert "tool_calls" not in sent and finish in ("stop", "length")
    blocks = [json.loads(b) for b in FENCE.findall(sent["content"])]
    assert [b["name"] for b in blocks] == ["python"] and isinstance(blocks[0]["arguments"]["code"], str)
    the_usage_sent(done, usage, chat=True)
    # shiro's record keeps what the wire carried: the block as the answer's text (today), or — where shiro runs
    # a call written in this form — a call of the same name and arguments; never lost, never both
    record = recorded(tmp_path, [Message.user(ASK), done.message])
    text = "".join(p["text"] for p in parts(record, "text") if p.get("text"))
    made = parts(record, "tool_call")
    if made:
        assert [(c["name"], json.loads(c["arguments"])) for c in made] == [("python", blocks[0]["arguments"])]
        assert not FENCE.search(text)
    else:
        assert [json.loads(b) for b in FENCE.findall(text)] == blocks


# -- the Responses API as llama-server serves it ------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
def test_the_responses_api_with_its_usage(llama_server: LlamaServer, tmp_path: Path, stream: bool):
    with WireRecorder(llama_server.url) as wire:
        p = provider(wire, tmp_path, api="responses", stream=stream, max_tokens=16)
        messages = [Message.user("Say hello.")]
        first = call(p, messages, [])
        messages += [first.message, Message.user("Say it again.")]
        second = call(p, messages, [])
    exchanges = wire.posts()
    assert [(e.path, e.status) for e in exchanges] == [("/v1/responses", 200), ("/v1/responses", 200)]
    answers = []
    for exchange in exchanges:
        if stream:
            done = [e for e in exchange.events() if e.get("type") == "response.completed"]
            assert len(done) == 1, [e.get("type") for e in exchange.events()]
            answers.append(done[0]["response"])
        else:
            answers.append(exchange.json())
    for answer, done in zip(answers, (first, second)):
        assert answer["status"] == "completed" and "store" not in answer  # it says nothing of keeping items
        assert {"input_tokens", "output_tokens", "total_tokens"} <= set(answer["usage"])
        the_usage_sent(done, answer["usage"], chat=False)
        assert done.api == "responses" and any(isinstance(part, TextPart) for part in done.message.parts)
    # a server that did not say it keeps items is sent the history inline, and its prefix cache serves it
    assert not [i for i in exchanges[1].body["input"] if i.get("type") == "item_reference"]
    assert exchanges[1].body.get("previous_response_id") is None
    assert second.usage.cached_input_tokens > 0
    record = recorded(tmp_path, [*messages, second.message])
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "user", "assistant"]
