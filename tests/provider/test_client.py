"""The provider client against a real local server (the fake OpenAI server, plus answers no real API
gives: keep-alives forever, a stream that stalls, an HTML page, an error inside a stream).

Each hang case asserts its bound: ``timeout_s`` between events, and ``2 × timeout_s`` for a whole call with
its retries (:attr:`Provider.retry_budget_s`)."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fakeopenai import FakeOpenAI, Fault, Reply
from faultlog import record

from shiro_kernel.events import Done, Error, TextDelta
from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.provider.failures import IMAGES_UNSUPPORTED, error_kind, redact, safe_url, seconds_text
from shiro_kernel.transcript import Message

KEY = "sk-client-TEST-key-never-shown-0123456789"
TEXT = "The mean is 2.0, computed from three rows."
SLACK = 0.6  # seconds allowed beyond a bound: thread scheduling on a busy machine


# -- a fake that can also misbehave ------------------------------------------------------------------
@dataclass
class Raw:
    """An answer this test's fake writes itself.

    ``keepalive``: the reply's first ``after_events`` events, then a keep-alive comment every ``seconds``,
    forever. ``stall``: the first ``after_events`` events, then silence. ``slow``: the whole reply, waiting
    ``seconds`` before each event from ``after_events`` on. ``frames``: ``frames`` as SSE data lines.
    ``body``: ``body`` with ``status`` and ``content_type``.
    """

    kind: str
    after_events: int = 0
    seconds: float = 0.05
    frames: tuple[str, ...] = ()
    body: bytes = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"


class MisbehavingFake(FakeOpenAI):
    def _run_item(self, h: Any, rec: Any, item: Any, context: Any) -> None:
        if not isinstance(item, Raw):
            super()._run_item(h, rec, item, context)
            return
        if item.kind == "body":
            self._send_raw(h, rec, item.status, item.body, item.content_type)
            return
        if item.kind == "frames":
            frames = [f"data: {f}\n\n" for f in item.frames]
        elif rec.path == "/v1/responses":
            frames = list(self._response_events(rec, Reply(text=TEXT), context, store=item.kind == "slow"))
        else:
            frames = list(self._chat_chunks(rec, Reply(text=TEXT)))
        rec.status = 200
        h.send_response(200)
        h.send_header("content-type", "text/event-stream; charset=utf-8")
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()

        def chunk(data: bytes) -> None:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        for n, frame in enumerate(frames):
            if n >= item.after_events:
                if item.kind == "keepalive":
                    while not self._stopping.wait(item.seconds):
                        chunk(b": keep-alive\n\n")  # until the client hangs up (a write then fails)
                    return
                if item.kind == "stall":
                    self._stopping.wait(30)
                    return
                if item.kind == "slow":
                    time.sleep(item.seconds)
            chunk(frame.encode())
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[MisbehavingFake]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = MisbehavingFake()
    server.start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.handler_errors and not server.validation_errors


def provider(base_url: str, **settings: Any) -> Provider:
    settings = {"model": "gpt-4o-mini", "max_retries": 2, "timeout_s": 0.5, **settings}
    return Provider(ProviderSettings(base_url=base_url, **settings))


def call(p: Provider, abort: threading.Event | None = None) -> tuple[list[Any], float]:
    started = time.monotonic()
    events = list(p.stream("", [Message.user("hi")], [], abort))
    return events, time.monotonic() - started


def error_of(events: list[Any]) -> Error:
    assert isinstance(events[-1], Error), events
    assert "Traceback" not in events[-1].message and "\n" not in events[-1].message
    assert KEY not in events[-1].message
    return events[-1]


# -- the ordinary path ---------------------------------------------------------------------------------
@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("stream", [True, False])
def test_answers_through_the_untyped_path(fake, api, stream):
    fake.enqueue(Reply(text=TEXT))
    events, _ = call(provider(fake.base_url, api=api, stream=stream))
    assert isinstance(events[-1], Done) and events[-1].message.text == TEXT
    assert [r.status for r in fake.requests] == [200]
    assert fake.requests[0].headers.get("x-stainless-retry-count") == "0"


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_text_reaches_the_consumer_as_it_arrives(fake, api):
    fake.enqueue(Raw("slow", after_events=3, seconds=0.1))
    started, seen = time.monotonic(), []
    for event in provider(fake.base_url, api=api, timeout_s=5).stream("", [Message.user("hi")], []):
        seen.append((time.monotonic() - started, event))
    deltas = [t for t, e in seen if isinstance(e, TextDelta)]
    assert isinstance(seen[-1][1], Done) and seen[-1][1].message.text == TEXT
    assert len(deltas) > 2 and deltas[0] < seen[-1][0] - 0.3  # the first delta long before the end


def test_the_sdk_client_is_shared_by_providers_with_the_same_server(fake):
    a, b = provider(fake.base_url), provider(fake.base_url, model="gpt-4o")
    assert a.client() is b.client()


# -- (1) timeout_s bounds a stream that sends no data ---------------------------------------------------
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_keepalives_forever_end_within_the_timeout(fake, api):
    for _ in range(4):
        fake.enqueue(Raw("keepalive", after_events=1))
    p = provider(fake.base_url, api=api, timeout_s=0.5, max_retries=3)
    events, elapsed = call(p)
    err = error_of(events)
    assert "did not answer within 0.5 s" in err.message and "keep-alives" in err.message
    assert 0.5 <= elapsed <= p.retry_budget_s + SLACK
    record(
        f"a stream of keep-alives forever ({api}), timeout_s = 0.5",
        1,
        0,
        f"ended in {elapsed:.1f} s (retry budget {p.retry_budget_s:.1f} s) with a clean error",
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_stream_crawling_a_byte_at_a_time_is_named_as_such_in_rounded_seconds(fake, api):
    """Issue 39 §7: bytes that never make a whole event are not "only keep-alives", and the seconds are
    rounded (an attempt's timeout is what the retry budget leaves: 2.56607 s was shown)."""
    for _ in range(6):
        fake.enqueue(Fault.trickle(0.05))
    p = provider(fake.base_url, api=api, timeout_s=0.5, max_retries=5)
    events, elapsed = call(p)
    err = error_of(events)
    assert "bytes too slowly to make a whole event" in err.message and "keep-alives" not in err.message
    assert not re.search(r"\d\.\d{2,} s", err.message), err.message
    assert elapsed <= p.retry_budget_s + SLACK


def test_seconds_are_shown_rounded():
    assert [seconds_text(x) for x in (0.5, 2.56607, 0.01, 30.0, 12.4, 1.0)] == ["0.5", "2.6", "0", "30", "12", "1"]


def test_a_server_that_sends_nothing_after_the_headers_ends_within_the_timeout(fake):
    fake.enqueue(Raw("stall"), Raw("stall"), Raw("stall"))
    p = provider(fake.base_url, timeout_s=0.5)
    events, elapsed = call(p)
    assert "did not answer within 0.5 s" in error_of(events).message
    assert elapsed <= p.retry_budget_s + SLACK


@pytest.mark.parametrize("kind", ["stall", "keepalive"])
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_stall_mid_answer_keeps_what_arrived(fake, api, kind):
    fake.enqueue(Raw(kind, after_events=5 if api == "responses" else 3))
    p = provider(fake.base_url, api=api, timeout_s=0.5)
    events, elapsed = call(p)
    err = error_of(events)
    assert "stopped sending in the middle of the answer" in err.message
    done = [e for e in events if isinstance(e, Done)]
    assert len(done) == 1 and done[0].message.text  # the text that arrived is kept
    assert len(fake.requests) == 1  # text was shown: not sent again
    assert elapsed <= 0.5 + SLACK


def test_a_slow_stream_that_keeps_delivering_is_not_cut_by_the_budget(fake):
    fake.enqueue(Raw("slow", after_events=0, seconds=0.15))
    p = provider(fake.base_url, timeout_s=0.5)
    events, elapsed = call(p)
    assert isinstance(events[-1], Done) and events[-1].message.text == TEXT
    assert elapsed > p.retry_budget_s  # longer than the retry budget, and not cut


# -- (2) retries stop at the budget ------------------------------------------------------------------
def test_persistent_timeouts_stop_at_the_budget(fake):
    for _ in range(12):
        fake.enqueue(Fault.delay(5.0))
    p = provider(fake.base_url, timeout_s=0.5, max_retries=10)
    events, elapsed = call(p)
    err = error_of(events)
    assert "did not answer within 0.5 s" in err.message and err.retryable
    assert elapsed <= p.retry_budget_s + SLACK  # was (10 + 1) × 0.5 s plus ~30 s of backoff
    record(
        "persistent timeouts, timeout_s = 0.5, max_retries = 10",
        len(fake.requests),
        0,
        f"stopped after {elapsed:.1f} s (budget {p.retry_budget_s:.1f} s; was ≈ 36 s)",
    )


def test_persistent_500s_stop_at_the_budget(fake):
    for _ in range(200):
        fake.enqueue(Fault.status(500, retry_after=0.05))
    p = provider(fake.base_url, timeout_s=0.5, max_retries=100)
    events, elapsed = call(p)
    err = error_of(events)
    assert err.status == 500 and "(500) after" in err.message
    assert elapsed <= p.retry_budget_s + SLACK
    assert 3 <= len(fake.requests) <= 25
    record(
        "persistent 500s, max_retries = 100",
        len(fake.requests),
        0,
        f"stopped after {elapsed:.1f} s (budget {p.retry_budget_s:.1f} s)",
    )


def test_a_retry_after_beyond_the_budget_is_not_waited_for(fake):
    fake.enqueue(Fault.status(429, retry_after=30), Reply(text="late"))
    events, elapsed = call(provider(fake.base_url, timeout_s=1.0))
    assert error_of(events).status == 429 and elapsed < 1.0
    assert len(fake.requests) == 1


def test_stopping_during_a_retry_wait_ends_at_once(fake):
    fake.enqueue(Fault.status(503, retry_after=3), Reply(text="never"))
    abort = threading.Event()
    threading.Timer(0.2, abort.set).start()
    events, elapsed = call(provider(fake.base_url, timeout_s=5.0), abort)
    assert isinstance(events[-1], Done) and not events[-1].message.parts
    assert elapsed < 1.0


# -- (3) an HTML page says what it is and which base URL to check ------------------------------------------
LOGIN_PAGE = b"""<!DOCTYPE html><html><head><title>Sign in - Corporate Proxy</title></head>
<body><form action="/login"><input name="user"></form></body></html>"""


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "text/plain"])
def test_an_html_200_names_the_page_and_the_base_url(fake, stream, content_type):
    fake.enqueue(*[Raw("body", body=LOGIN_PAGE, content_type=content_type)] * 3)
    events, _ = call(provider(fake.base_url, stream=stream))
    msg = error_of(events).message
    assert "HTTP 200 with an HTML page (Sign in - Corporate Proxy)" in msg
    assert f"Shiro.base_url / OPENAI_BASE_URL ({fake.base_url})" in msg
    assert "Could not reach" not in msg and "<" not in msg
    assert len(fake.requests) == 1  # a login page does not go away by asking again
    record(
        f"HTTP 200 with an HTML body ({'stream' if stream else 'no stream'}, {content_type.split(';')[0]})",
        1,
        0,
        "names the page by its title and the base URL to check; not retried",
    )


def test_an_html_error_page_is_summarised_by_its_title(fake):
    page = b"<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center></body></html>"
    fake.enqueue(Raw("body", status=502, body=page))
    events, _ = call(provider(fake.base_url, max_retries=0))
    assert error_of(events).message.endswith("failed (502): an HTML page (502 Bad Gateway).")


def test_a_200_that_is_not_an_event_stream_says_what_came(fake):
    fake.enqueue(*[Raw("body", body=b"upstream connect error", content_type="text/plain")] * 3)
    msg = error_of(call(provider(fake.base_url))[0]).message
    assert "that is not the API's (upstream connect error)" in msg and "Shiro.base_url" in msg


# -- (4) credentials in the base URL are never shown ----------------------------------------------------------
SECRETS = ("alice", "pa55w0rd-SECRET", "QUERYSECRET123", "api-key=")


def with_credentials(base_url: str) -> str:
    return base_url.replace("http://", "http://alice:pa55w0rd-SECRET@") + "?api-key=QUERYSECRET123"


def test_safe_url_strips_userinfo_query_and_fragment():
    assert safe_url("http://u:p@host:8080/v1/?key=s#frag") == "http://host:8080/v1"
    assert safe_url("https://[::1]:9/v1") == "https://[::1]:9/v1"
    assert safe_url("u:p@host/v1?key=s") == "host/v1"
    text = redact("see http://u:secret@h/v1?key=abc and https://x.org/p#t", secrets=("secret",))
    assert text == "see http://h/v1 and https://x.org/p"


def test_a_base_url_with_credentials_works_and_is_never_shown(fake, monkeypatch):
    url = with_credentials(fake.base_url)
    p = provider(url, max_retries=0)
    assert p.host == fake.base_url
    fake.enqueue(Reply(text="ok"))  # the query goes to every request as parameters, not glued to the path
    assert isinstance(call(p)[0][-1], Done)
    assert fake.requests[-1].path == "/v1/responses"
    leaked = []
    fake.enqueue(
        Fault.error(401, "Incorrect API key provided: sk-client-TEST****6789."),
        Fault.error(400, f"Invalid URL (POST {url}/responses)"),
        Raw("body", body=LOGIN_PAGE),
        Fault.status(500, f"upstream {url} failed"),
    )
    base = fake.base_url  # what is shown of the URL: no userinfo, no query
    for want in (
        f"The server at {base} refused the API key (401): Incorrect API key provided: sk-…. Check OPENAI_API_KEY.",
        f"The model server rejected the request (400): Invalid URL (POST {base}.",  # the query to the space, cut
        f"The server at {base} answered HTTP 200 with an HTML page (Sign in - Corporate Proxy) instead of the "
        f"model's answer: check that Shiro.base_url / OPENAI_BASE_URL ({base}) is the API's base URL (it usually "
        "ends in /v1) and that no proxy or login page is in the way.",
        f"The model server at {base} failed (500): upstream {base} failed.",
    ):
        msg = error_of(call(p)[0]).message
        assert msg == want
        leaked += [s for s in SECRETS if s in msg]
    monkeypatch.setenv("OPENAI_BASE_URL", with_credentials(unused_base_url()))
    msg = error_of(call(provider("", max_retries=0))[0]).message  # from the environment, unreachable
    assert "Could not reach the model server at http://127.0.0.1:" in msg
    leaked += [s for s in SECRETS if s in msg]
    assert leaked == []
    record(
        "credentials in the base URL (`http://user:pass@…?api-key=…`): answers and error texts",
        len(SECRETS),
        len(leaked),
        "requests work; user, password and query never appear in what is shown",
    )


def unused_base_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


# -- (5) "this model takes no images" --------------------------------------------------------------------
# Verbatim server messages (sources: OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, LiteLLM issues).
NO_IMAGES = [
    "Invalid content type. image_url is only supported by certain models.",
    "Error code: 400 - {'error': {'message': 'Invalid content type. image_url is only supported by certain "
    "models.', 'type': 'invalid_request_error', 'param': 'messages.[1].content.[1].type', 'code': None}}",
    "Invalid value: 'input_image'. Supported values are: 'input_text'.",
    "Invalid value: 'image_url'. Supported values are: 'input_text' and 'input_audio'.",
    "this model does not support image input (ref: b8bd630e-4a39-4b57-82af-9158ee9d5703)",
    '{"error":"this model does not support image input (ref: e1e07aae-e61d-45ad-b4a2-f680e2481657)"}',
    "this model is missing data required for image input",
    "Failed to create new sequence: failed to process inputs: this model is missing data required for image input",
    "facebook/opt-125m is not a multimodal model None",
    "/mnt/modelweights-textgen-0 is not a multimodal model None",
    "Qwen/Qwen3-8B is not a multimodal model",
    "At most 0 image(s) may be provided in one prompt.",
    "At most 0 image(s) may be provided in one request.",
    "Multi-modal processor not available for text-only models",
    "image input is not supported by this server",
    "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj",
    "The server was not compiled for multimodal or the model projector can't be loaded.",
    "Model does not support images. Please use a model that does.",
    "No endpoints found that support image input",
    "litellm.BadRequestError: OpenAIException - Invalid content type. image_url is only supported by certain "
    "models. Received Model Group=deepseek-v4-pro-0813",
    "This model does not support image inputs.",
]
OTHER_ERRORS = [
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130415 tokens. "
    "Please reduce the length of the messages.",
    "The decoder prompt (length 41210) is longer than the maximum model length of 32768. Make sure that "
    "`max_model_len` is no smaller than the number of text tokens plus multimodal tokens.",
    "Input length (133889) exceeds model's maximum context length (131072).",
    "Invalid value: 'text'. Supported values are: 'input_text', 'input_image', 'input_audio', 'output_text', "
    "'refusal', 'input_file', 'computer_screenshot', 'summary_text', and 'encrypted_content'.",
    "Invalid value: 'image_url'. Supported values are: 'input_text', 'input_image', 'output_text', 'refusal', "
    "'input_file', 'computer_screenshot', and 'summary_text'.",
    "Invalid value: 'binary'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', and 'audio'.",
    "Failed to download image from image.jpg. Image URL is invalid.",
    "Invalid image.",
    "invalid image input",
    "image exceeds 5 MB maximum",
    "At most 4 image(s) may be provided in one prompt. Set `--limit-mm-per-prompt` to increase this limit.",
    "At most 1 image(s) may be provided in one request.",
    "this model only supports one image while more than one image requested",
    "Invalid 'messages[3]'. Image URLs are only allowed for messages with role 'user', but this message with "
    "role 'tool' contains an image URL.",
    "audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj",
    'No endpoints found that support tool use. Try disabling "get_current_timestamp".',
    "No endpoints found matching your data policy",
    "`limit_mm_per_prompt` is only supported for multimodal models.",
    "No tool call found for function call output with call_id call_uelfkqtHfJDC4Btqeoozq82e.",
    "Unsupported parameter: 'temperature' is not supported with this model.",
    "Unsupported value: 'messages[0].role' does not support 'developer' with this model.",
    'model "llava" not found, try pulling it first',
    "registry.ollama.ai/library/llama3 does not support tools",
    "model does not support thinking",
]


@pytest.mark.parametrize("message", NO_IMAGES)
def test_no_image_messages_are_classified(message):
    assert error_kind(message) == "images_unsupported"


@pytest.mark.parametrize("message", OTHER_ERRORS)
def test_other_messages_are_not(message):
    assert error_kind(message) != "images_unsupported"


def test_item_not_found_still_wins():
    assert IMAGES_UNSUPPORTED  # the pattern is public, for the turn loop's tests
    assert error_kind("Item with id 'rs_1' not found. Items are not persisted when `store` is false.") == (
        "item_not_found"
    )


@pytest.mark.parametrize(
    ("server", "status", "body"),
    [
        (
            "llama.cpp",
            500,
            {
                "error": {
                    "code": 500,
                    "message": "image input is not supported - hint: if this is unexpected, you may need to "
                    "provide the mmproj",
                    "type": "server_error",
                }
            },
        ),
        ("openrouter", 404, {"error": {"message": "No endpoints found that support image input", "code": 404}}),
        ("lm-studio", 400, {"error": "Model does not support images. Please use a model that does."}),
        ("ollama", 400, {"error": "this model does not support image input (ref: c8547643-1111)"}),
        ("vllm-old", 400, {"object": "error", "message": "m is not a multimodal model None", "code": 400}),
    ],
)
def test_a_no_images_answer_is_classified_and_not_retried(fake, server, status, body):
    fake.enqueue(*[Fault("error", http_status=status, body=body)] * 4)
    events, _ = call(provider(fake.base_url, api="chat", max_retries=3))
    err = error_of(events)
    assert err.kind == "images_unsupported" and err.status == status and not err.retryable
    assert len(fake.requests) == 1, server  # llama.cpp's 500 is not sent 4 times


def test_a_no_images_error_inside_a_stream_is_classified(fake):
    chunk = {"error": {"message": "Model does not support images. Please use a model that does."}}
    fake.enqueue(*[Raw("frames", frames=(json.dumps(chunk),))] * 3)
    err = error_of(call(provider(fake.base_url, api="chat"))[0])
    assert err.kind == "images_unsupported" and "Model does not support images" in err.message
    assert len(fake.requests) == 1
