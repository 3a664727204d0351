"""Real ``%shiro`` turns in real kernels against a real inference engine (issue 32, point 3): llama-cpp-python's
server with SmolLM2-135M (``tests/realengine.py``), pointed at with only ``base_url`` and ``model``.

The engine is where the fake was found wrong: no ``/v1/responses``, no usage in its streams, a context window too
small ending the stream empty, ``chatml-function-calling`` refusing to stream with tools. Asserted on the wire
(the engine's own access log: method, path, status of each request) and on the session record — never on what a
135M model says. The last test sends the same requests to the engine and to the fake that imitates it, and
compares the shape of their answers."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import FakeOpenAI
from kernelutil import Kernel
from realengine import MODEL, Engine

from shiro_kernel.context.rules import check_and_repair
from shiro_kernel.session import Session
from shiro_kernel.store.records import session_from_record
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.timeout(600)


def setup(engine: Engine, *extra: str) -> str:
    """The cells a user types: the extension, the base URL and the model, and nothing else but ``extra``."""
    lines = [
        "%load_ext shiro_kernel",
        f'%config Shiro.base_url = "{engine.base_url}"',
        f'%config Shiro.model = "{MODEL}"',
    ]
    return "\n".join([*lines, *extra])


def records(home: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((home / "sessions").glob("*.json"))]


def consistent(record: dict[str, Any]) -> bool:
    """The record's history needs no repair before it is sent (each call has exactly one result, no orphan)."""
    messages = session_from_record(record).messages
    return check_and_repair(messages, store=False)[1] == []


def calls_and_results(record: dict[str, Any]) -> tuple[list[str], list[str]]:
    parts = [p for m in record["messages"] for p in m["parts"]]
    return [p["callId"] for p in parts if p["type"] == "tool_call"], [
        p["callId"] for p in parts if p["type"] == "tool_result"
    ]


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "home"
    k = Kernel({"SHIRO_HOME": str(home), "SHIRO_NO_WARMUP": "1"}, cwd=str(tmp_path))
    k.home = home  # type: ignore[attr-defined]
    yield k
    k.close()


# -- with only base_url and model set -----------------------------------------------------------------------
def test_only_base_url_and_model_streaming_and_not(real_engine, kernel):
    engine = real_engine(n_ctx=2048)  # a prompt of ~500 tokens leaves the model at most ~1,500 to write
    before = engine.mark()
    kernel.run(setup(engine))
    first = kernel.run("%shiro say hello", timeout=300)
    assert "switched to Chat Completions" in first and "Traceback" not in first
    assert re.search(r"~[\d,]+ in · ~[\d,]+ out tokens \(estimated: the server sent no usage\)", first)
    wire = engine.requests()[before:]
    assert [(r.path, r.status) for r in wire] == [("/v1/responses", 404), ("/v1/chat/completions", 200)]
    (record,) = records(kernel.home)
    assert record["usageEstimated"] is True and record["inputTokens"] > 100 and consistent(record)
    # without streaming, the engine sends its usage: counted as it is, not estimated. In a new session: the first
    # answer may have taken most of the window (its length is the model's choice), and pruning is another test's
    kernel.run("%config Shiro.stream = False\n%config Shiro.max_output_tokens = 24")
    second = kernel.run("%shiro --new and again", timeout=300)
    assert "switched" not in second and "estimated" not in second
    assert re.search(r"[\d,]+ in · [\d,]+ out tokens", second)
    assert [(r.path, r.status) for r in engine.requests()[before + 2 :]] == [("/v1/chat/completions", 200)]
    (plain,) = [r for r in records(kernel.home) if r["id"] != record["id"]]
    assert len(plain["messages"]) == 2 and "usageEstimated" not in plain and consistent(plain)


def test_a_window_too_small_is_named_after_one_plain_request(real_engine, kernel):
    engine = real_engine(n_ctx=256)  # the instructions alone take ~500 of its tokens
    before = engine.mark()
    kernel.run(setup(engine))
    out = kernel.run("%shiro hello", timeout=300)
    assert "The model's context window at" in out and "is 256 tokens" in out and "--n_ctx" in out
    assert "ended the answer before anything arrived" not in out and "Traceback" not in out
    wire = [(r.path, r.status) for r in engine.requests()[before:]]
    # the stream that ends empty, then the same request without streaming: its 400, read; no retries
    assert wire == [("/v1/responses", 404), ("/v1/chat/completions", 200), ("/v1/chat/completions", 400)]


def test_a_long_history_is_pruned_to_the_window_and_the_turn_answers(real_engine, kernel, tmp_path):
    engine = real_engine(n_ctx=2048)
    old = Session()  # a session recorded earlier, with a large old tool result (~4,000 tokens)
    old.messages = [
        Message.user("load the data"),
        Message("assistant", [ToolCallPart("call_1", "python", json.dumps({"code": "print(data)"}))]),
        Message("tool", [ToolResultPart("call_1", "python", "row " * 4000)]),
        Message("assistant", [TextPart("loaded")]),
        *[
            m
            for n in range(3)
            for m in (Message.user(f"question {n}"), Message("assistant", [TextPart(f"answer {n}")]))
        ],
    ]
    SessionStore(kernel.home / "sessions").save(old, model=MODEL)
    before = engine.mark()
    kernel.run(setup(engine, "%config Shiro.max_output_tokens = 24"))
    out = kernel.run(f"%shiro -r {old.id} and now?", timeout=300)
    assert "to fit the model's context window at this server (2,048 tokens)" in out and "Traceback" not in out
    wire = [(r.path, r.status) for r in engine.requests()[before:]]
    assert wire == [
        ("/v1/responses", 404),
        ("/v1/chat/completions", 200),  # ended empty: the request did not fit
        ("/v1/chat/completions", 400),  # the same, without streaming: the window, read
        ("/v1/chat/completions", 200),  # pruned to it: answered
    ]
    record = next(r for r in records(kernel.home) if r["id"] == old.id)
    assert consistent(record) and len(record["messages"]) == len(old.messages) + 2


def killed_mid_answer(engine: Engine, kernel: Any) -> str | None:
    """A turn whose answer the engine is writing when it is SIGKILLed: what the cell said, or None when the
    model ended its answer before the kill could land (a 135M model's "long story" is sometimes a line)."""
    start = len(engine.text())
    out: list[str] = []
    turn = threading.Thread(target=lambda: out.append(kernel.run("%shiro tell me a long story", timeout=300)))
    turn.start()
    assert engine.wait_for(r'"POST /v1/chat/completions HTTP/1\.1" 200', timeout=120, after=start)
    time.sleep(0.5)  # the stream is open and the model writing (about 15 ms a token here)
    if re.search(r"llama_perf_context_print", engine.text()[start:]):  # it has already ended its answer
        turn.join(timeout=300)
        return None
    engine.kill()
    turn.join(timeout=300)
    return out[0]


def test_the_engine_killed_mid_turn_and_started_again(kernel, tmp_path):
    engine = Engine(n_ctx=2048).start()
    try:
        kernel.run(setup(engine, "%config Shiro.max_output_tokens = 120"))  # 1.8 s of writing, and room for 4 answers
        said = next((s for s in (killed_mid_answer(engine, kernel) for _ in range(4)) if s is not None), None)
        assert said is not None, "the model ended each of four answers within half a second"
        assert "Traceback" not in said
        paragraphs = [p for p in said.split("\n\n") if "shiro:" in p]
        assert len(paragraphs) == 1 and re.search(r"broke in the middle|Could not reach|ended the answer", said)
        (record,) = records(kernel.home)
        assert consistent(record)
        engine.start()  # on the same port
        mark = engine.mark()
        again = kernel.run("%config Shiro.max_output_tokens = 16\n%shiro are you back?", timeout=300)
        assert "shiro:" not in again and re.search(r"out tokens", again)
        assert [(r.path, r.status) for r in engine.requests()[mark:]] == [("/v1/chat/completions", 200)]
        (record,) = records(kernel.home)
        assert consistent(record)
    finally:
        engine.stop()


def test_chatml_function_calling_calls_are_parsed_and_answered(real_engine, kernel):
    engine = real_engine(n_ctx=4096, chat_format="chatml-function-calling")
    before = engine.mark()
    kernel.run(setup(engine, '%config Shiro.approval = "auto"', "%config Shiro.max_output_tokens = 48"))
    out = kernel.run("%shiro use the python tool to compute 2 + 2", timeout=400)
    assert "Traceback" not in out and "shiro:" not in out
    wire = [(r.path, r.status) for r in engine.requests()[before:]]
    assert wire[0] == ("/v1/responses", 404) and all(w == ("/v1/chat/completions", 200) for w in wire[1:])
    (record,) = records(kernel.home)
    calls, results = calls_and_results(record)
    assert sorted(calls) == sorted(results) and len(set(results)) == len(results)  # each call answered once
    assert consistent(record)
    steps = len([m for m in record["messages"] if m["role"] == "assistant"])
    # its format streams a text answer but refuses to stream a tool call it chose (the stream ends empty): then
    # that request is asked once without streaming, said once, and not streamed again
    empty = 1 if "asks it without streaming from now on" in out else 0
    assert empty or not calls
    assert len(wire) == 1 + steps + empty  # the route, one request per step, at most one empty stream


# -- the fake learns from the engine --------------------------------------------------------------------------
def post(url: str, body: dict[str, Any] | None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body or {}).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, answer.headers.get("content-type", ""), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("content-type", ""), exc.read()


def shape(status: int, ctype: str, raw: bytes) -> dict[str, Any]:
    """What an answer is, without its words: status, type, and the keys and kinds of what it holds."""
    out: dict[str, Any] = {"status": status, "type": ctype.split(";")[0]}
    if out["type"] == "text/event-stream":
        events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
        chunks = [json.loads(e) for e in events if e != "[DONE]"]
        out["events"] = len(chunks) > 0
        out["done"] = "[DONE]" in events
        out["usage"] = any(c.get("usage") for c in chunks)
        out["finish"] = any(ch.get("finish_reason") for c in chunks for ch in c.get("choices", []))
        out["keys"] = sorted({k for c in chunks for k in c})
    elif raw:
        body = json.loads(raw)
        out["keys"] = sorted(body)
        if "error" in body:
            out["error"] = {k: body["error"].get(k) for k in ("type", "code", "param")}
            out["said"] = re.sub(r"\d+", "N", body["error"]["message"])
        if "usage" in body:
            out["usage"] = sorted(k for k, v in body["usage"].items() if isinstance(v, int))
        if "choices" in body:
            out["message"] = sorted(k for k, v in body["choices"][0]["message"].items() if v is not None)
    return out


def test_the_fake_answers_as_the_engine_does(real_engine):
    engine = real_engine(n_ctx=512)
    small = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    large = {"model": MODEL, "messages": [{"role": "user", "content": "word " * 700}], "max_tokens": 4}
    cases = [
        ("/responses", {"model": MODEL, "input": "hi"}),
        ("/chat/completions", {**small, "stream": True, "stream_options": {"include_usage": True}}),
        ("/chat/completions", small),
        ("/chat/completions", {**large, "stream": True}),
        ("/chat/completions", large),
    ]
    with FakeOpenAI(validate=False) as fake:
        fake.imitate, fake.n_ctx = "llama-cpp-python", 512
        for path, body in cases:
            real = shape(*post(engine.base_url + path, body))
            imitated = shape(*post(fake.base_url + path, body))
            assert imitated == real, path
