"""A fake OpenAI-compatible HTTP server for tests.

Why a real server: the ``openai`` client (v3.x) is built on ``httpx2``, so httpx
mocks do not intercept it.  Tests point ``openai.OpenAI(base_url=fake.base_url)``
at this server instead and get real HTTP, real SSE and real SDK parsing.

What it imitates (shapes copied from the recorded traffic in ``tests/realdata``):

* ``POST /v1/responses`` and ``POST /v1/chat/completions``, streaming (SSE) and not.
* Scripted replies (:class:`Reply`, :class:`Fault`, or a callable computing either
  from the :class:`Recorded` request), consumed in order across both endpoints.
  When the queue is empty the server answers ``fake.default_reply``
  (by default a plain text ``"ok"``).
* The conversation-history rules of the real API with the real error texts
  (tool call / tool output pairing, reasoning items, stored item ids,
  ``store: false``).  A request that breaks a rule gets the error and does NOT
  consume a scripted reply.
* Request-body validation against the OpenAPI spec (``tests/realdata/openai-openapi.yaml``);
  failures are answered with HTTP 400 and collected in ``fake.validation_errors``
  (the ``fake_openai`` fixture fails the test on them unless ``fake.expect_invalid``).
* Real servers and models where they differ from the API (attributes set on the fake): ``imitate``
  (llama-cpp-python, Ollama), ``chat_template``, ``n_ctx``, ``tool_calls_as`` (calls a server's parser missed)
  and ``small_local_model``: the answers of Qwen2.5-Coder 0.5B/1.5B on llama-server — a scripted call comes
  written in the content as fenced JSON (```` ```json {"name": "python", "arguments": {"code": "…"}} ``` ````,
  no ``tool_calls``), and an unscripted question gets a call-less guess with a made-up number
  (``SMALL_MODEL_GUESS``)::

      fake.small_local_model = True
      fake.enqueue(Reply(tool_calls=[Call("python", {"code": "df.Fare.mean()"})]))  # fenced JSON in the text
      # ... and every request after it: "Based on the data, the mean fare is 16.58."

Example::

    with FakeOpenAI() as fake:
        fake.enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 2})]), Reply(text="3"))
        client = openai.OpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
        ...
"""

from __future__ import annotations

import base64
import collections
import copy
import hashlib
import http.server
import itertools
import json
import os
import re
import secrets
import socket
import string
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "LLAMA_CPP_SYSTEM_FIRST",
    "SMALL_MODEL_GUESS",
    "SMALL_MODEL_NUMBER",
    "SPEC_PATH",
    "TEMPLATE_ERRORS",
    "Call",
    "FakeOpenAI",
    "Fault",
    "Recorded",
    "Reply",
    "load_openapi_spec",
]

SPEC_PATH = Path(__file__).parent / "realdata" / "openai-openapi.yaml"

# ---------------------------------------------------------------------------
# Public data types
# ---------------------------------------------------------------------------


@dataclass
class Call:
    """One tool call the fake model makes.

    ``arguments`` given as a ``str`` is sent verbatim (so a test can send
    malformed JSON); a ``dict`` is JSON-encoded.  ``call_id`` defaults to a fresh
    ``call_…`` id.
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    call_id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"))


@dataclass
class Reply:
    """A scripted model turn.

    ``reasoning`` is a reasoning *summary*: the responses endpoint emits a
    reasoning item ``rs_…`` before the other output items (with
    ``encrypted_content`` only when the request's ``include`` asks for it);
    the chat endpoint sends it as ``reasoning_content`` (as vLLM, llama.cpp and
    DeepSeek do).  ``phase`` sets the responses message ``phase``.
    ``usage`` is ``(input_tokens, output_tokens)``; by default it is estimated
    from the sizes of the request and the reply.
    """

    text: str = ""
    tool_calls: list[Call] = field(default_factory=list)
    reasoning: str | None = None
    phase: str | None = None
    usage: tuple[int, int] | None = None
    model: str | None = None


@dataclass
class Fault:
    """A scripted failure, used as a queue item.  Build it with the classmethods."""

    kind: str  # "error" | "cut" | "malformed" | "delay" | "failed" | "stall" | "trickle"
    # named http_status: a field called `status` would be shadowed by the `status()` builder below
    http_status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    after_events: int | None = 0
    seconds: float = 0.0
    then: ReplyItem | None = None

    @classmethod
    def error(
        cls,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Fault:
        """Answer once with ``status`` and the real error body shape."""
        return cls(
            "error", http_status=status, body=_error_body(message, type, param, code), headers=dict(headers or {})
        )

    @classmethod
    def status(cls, status: int, message: str | None = None, *, retry_after: float = 0.01) -> Fault:
        """A realistic 429 (rate limit) or 5xx (server error) answer.

        ``retry_after`` (seconds) goes into ``retry-after-ms`` / ``retry-after``
        so the SDK's automatic retries wait only that long.
        """
        headers = {
            "retry-after-ms": str(max(1, round(retry_after * 1000))),
            "retry-after": f"{retry_after:g}",
        }
        if status == 429:
            # Shape quoted from a real SDK log (tests/realdata/error-bodies-from-issues.md).
            msg = message or (
                "Rate limit reached for gpt-4o-mini in project proj_fake organization org-fake on requests per min "
                "(RPM): Limit 15, Used 15, Requested 1. Please try again in 4s. Visit "
                "https://platform.openai.com/account/rate-limits to learn more."
            )
            body = _error_body(msg, "requests", None, "rate_limit_exceeded")
            headers.update({"x-ratelimit-limit-requests": "15", "x-ratelimit-remaining-requests": "0"})
        elif status >= 500:
            msg = message or (
                "The server had an error while processing your request. Sorry about that! You can retry your "
                "request, or contact us through our help center at help.openai.com if the error persists."
            )
            body = _error_body(msg, "server_error", None, None)
        else:
            body = _error_body(message or f"Error {status}", "invalid_request_error", None, None)
        return cls("error", http_status=status, body=body, headers=headers)

    @classmethod
    def cut(cls, after_events: int = 0) -> Fault:
        """Close the connection after ``after_events`` SSE events (mid-stream).

        A non-streaming request gets its connection closed without an answer.
        """
        return cls("cut", after_events=after_events)

    @classmethod
    def malformed_sse(cls, after_events: int | None = None) -> Fault:
        """Send ``after_events`` good events, then a garbage ``data:`` line, then end the stream.

        By default the garbage replaces the first output event (after ``response.created`` /
        ``response.in_progress``, or after the chat role chunk), so no text has arrived yet.
        """
        return cls("malformed", after_events=after_events)

    @classmethod
    def failed(cls, after_events: int | None = None) -> Fault:
        """A Responses stream that reports its failure mid-answer: after ``after_events`` events (by default
        before the first output), an ``error`` event and ``response.failed``, then the stream ends (the shapes
        of vercel-ai's openai-error.1.chunks.txt: an exceeded quota)."""
        return cls("failed", after_events=after_events)

    @classmethod
    def stall(cls, after_events: int, seconds: float) -> Fault:
        """A stream of the default reply that stops sending after ``after_events`` events for ``seconds`` (what
        was sent stays shown: a kernel interrupt lands there), then goes on to its end."""
        return cls("stall", after_events=after_events, seconds=seconds)

    @classmethod
    def trickle(cls, seconds: float) -> Fault:
        """A stream that sends its bytes one at a time, ``seconds`` apart (a server crawling: bytes arrive, a
        whole event does not within a client's timeout)."""
        return cls("trickle", seconds=seconds)

    @classmethod
    def delay(cls, seconds: float, then: ReplyItem | None = None) -> Fault:
        """Wait ``seconds`` (for client timeouts), then answer ``then`` or the default reply."""
        return cls("delay", seconds=seconds, then=then)


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]  # lower-case keys
    stream: bool
    status: int = 0  # what was answered; 0 = nothing (yet / connection cut before headers)
    raw: bytes = b""
    port: int = 0  # the client's port: requests with the same port came on one connection
    #: the prompt as a prefix cache sees it (tools, instructions, then each input item, references resolved),
    #: its length, and how much of it an earlier request of this server began with (see ``_cache``)
    prompt_chars: int = 0
    cached_chars: int = 0
    cached_tokens: int = 0


ReplyFn = Callable[[Recorded], Reply | Fault]
ReplyItem = Reply | Fault | ReplyFn


# ---------------------------------------------------------------------------
# Helpers: ids, errors, chunking
# ---------------------------------------------------------------------------

_ALNUM = string.ascii_letters + string.digits


#: OpenAI's answer to an image for a model without vision (OpenHands#7700 and others; see the research notes)
NO_VISION_MESSAGE = "Invalid content type. image_url is only supported by certain models."
#: llama.cpp's answer (HTTP 500) when the model's Jinja template raises for a system message after the first
#: (Qwen3.x: ollama#18241, llama.cpp#27367); vLLM answers 400 with only its last sentence
LLAMA_CPP_SYSTEM_FIRST = (
    "\n------------\nWhile executing CallExpression at line 85, column 32 in source:\n...first %}\u21b5            "
    "{{- raise_exception('System message must be at the beginnin...\n                                           "
    "^\nError: Jinja Exception: System message must be at the beginning."
)
#: the templates ``FakeOpenAI.chat_template`` imitates, and the text each raises (as vLLM answers it, 400)
TEMPLATE_ERRORS = {
    "system-first": "System message must be at the beginning.",
    "alternate": "After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...",
}
#: what ``small_local_model`` answers when nothing is scripted: a guess about data it never looked at, no call
SMALL_MODEL_NUMBER = "16.58"
SMALL_MODEL_GUESS = f"Based on the data, the mean fare is {SMALL_MODEL_NUMBER}."
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"RIFF")


def _check_data_url(url: Any, where: str) -> None:
    """A data URL holding a real image, or the real API's 400."""
    import base64
    import binascii

    if not isinstance(url, str) or not url.startswith("data:image/") or ";base64," not in url:
        raise _ApiError(400, f"Invalid image URL at {where}: expected a data:image/...;base64 URL.", param=where)
    try:
        raw = base64.b64decode(url.split(",", 1)[1], validate=True)
    except (binascii.Error, ValueError):
        raise _ApiError(400, "Invalid base64 image_url.", param=where) from None
    if not raw.startswith(_IMAGE_MAGIC):
        raise _ApiError(
            400,
            "You uploaded an unsupported image. Please make sure your image has of one the following formats: "
            "['png', 'jpeg', 'gif', 'webp'].",
            param=where,
            code="invalid_image_format",
        )


#: the quota error of vercel-ai's openai-error.1.chunks.txt (a real stream)
QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more information on this "
    "error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)


def _failed_events(seq: int) -> list[str]:
    """An ``error`` event and ``response.failed``, numbered from ``seq``."""
    err = {"type": "insufficient_quota", "code": "insufficient_quota", "message": QUOTA_MESSAGE, "param": None}
    failed = {"id": _hex_id("resp_"), "object": "response", "status": "failed", "output": []}
    failed["error"] = {"code": "insufficient_quota", "message": QUOTA_MESSAGE}
    return [
        f"event: error\ndata: {_json({'type': 'error', 'sequence_number': seq, 'error': err})}\n\n",
        f"event: response.failed\ndata: {_json({'type': 'response.failed', 'sequence_number': seq + 1, 'response': failed})}\n\n",
    ]


def _hex_id(prefix: str) -> str:
    # Real responses-API ids are the prefix plus 50 hex digits.
    return prefix + secrets.token_hex(25)


def _alnum(n: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


#: the real API's 401 for a request without a key (as the SDK and curl users see it)
NO_KEY_MESSAGE = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
    "auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're "
    "accessing the API from your browser and are prompted for a username. You can obtain an API key from "
    "https://platform.openai.com/account/api-keys."
)
#: what ``GET /v1/models`` lists (with the models a test singles out)
LISTED_MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-5-mini", "gpt-5")


def _error_body(message: str, type: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class _ApiError(Exception):
    """Raised while checking a request; becomes the HTTP error answer."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = "input",
        code: str | None = None,
        type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = _error_body(message, type, param, code)


def _text_deltas(text: str) -> list[str]:
    """Split text roughly like a tokenizer: words with their leading space, long words cut."""
    parts: list[str] = []
    for word in re.findall(r"\s*\S+|\s+", text):
        while len(word.lstrip()) > 8:  # long words arrive in pieces, as tokens would
            cut = len(word) - len(word.lstrip()) + 5
            parts.append(word[:cut])
            word = word[cut:]
        parts.append(word)
    return parts or [""]


def _arg_deltas(arguments: str) -> list[str]:
    return [arguments[i : i + 5] for i in range(0, len(arguments), 5)] or [""]


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (a binary search of slice compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _fenced_call(call: Call) -> str:
    """A call as Qwen2.5-Coder-0.5B writes it in a fenced block on llama-server (its answer, verbatim:
    ``{\n  "name": "python",\n  "arguments": {\n    "code": "17 * 23"\n  }\n}``); ``str`` arguments verbatim."""
    if isinstance(call.arguments, str):
        return f'{{\n  "name": {json.dumps(call.name)},\n  "arguments": {call.arguments}\n}}'
    return json.dumps({"name": call.name, "arguments": call.arguments}, indent=2, ensure_ascii=False)


def _approx_tokens(n_chars: int) -> int:
    return max(1, n_chars // 4)


def _json(obj: Any) -> str:
    # Compact and non-ASCII kept, like the real API.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------
# OpenAPI spec loading and validation
# ---------------------------------------------------------------------------

_spec_lock = threading.Lock()
_spec_cache: dict[str, dict[str, Any]] = {}  # key: sha256 of the YAML
_validators_cache: dict[str, dict[str, Any]] = {}


def _cache_dir() -> Path:
    # Never the real home: an explicit env var, else the system temp dir.
    env = os.environ.get("FAKEOPENAI_CACHE_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "fakeopenai-cache"


def load_openapi_spec(path: Path = SPEC_PATH) -> dict[str, Any]:
    """Parse the OpenAPI YAML once per process, with a JSON cache on disk keyed by its hash.

    Parsing 3 MB of YAML takes ~1 s even with libyaml; the JSON cache loads in ~50 ms.
    """
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    with _spec_lock:
        if digest in _spec_cache:
            return _spec_cache[digest]
        cache_file = _cache_dir() / f"openai-openapi-{digest[:24]}.json"
        spec: dict[str, Any] | None = None
        try:
            spec = json.loads(cache_file.read_text("utf-8"))
        except (OSError, ValueError):
            spec = None
        if spec is None:
            import yaml  # local import: only needed on a cache miss

            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            # default=str: the YAML has a few dates (in examples) that JSON cannot hold.
            spec = json.loads(json.dumps(yaml.load(raw, Loader=loader), default=str))
            try:
                cache_file.parent.mkdir(parents=True, exist_ok=True)
                tmp = cache_file.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(json.dumps(spec), "utf-8")
                os.replace(tmp, cache_file)  # atomic, safe with parallel test workers
            except OSError:
                pass  # a cache is an optimisation only
        _spec_cache[digest] = spec
        return spec


def _patch_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Work around spec quirks that make *valid* requests fail.  Each patch is narrow
    and backed by a recorded 200 from the real API (tests/realdata/cassettes)."""
    spec = copy.deepcopy(spec)
    schemas = spec["components"]["schemas"]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            # OpenAPI `oneOf` + `discriminator` means "dispatch on the tag", but several of
            # these unions have overlapping branches (InputItem: EasyInputMessage vs
            # InputMessage both match {"role":"user","content":[{"type":"input_text",...}]},
            # the SDK's own documented shape), so JSON Schema's exactly-one rule rejects
            # valid requests.  `anyOf` keeps every branch's checks without that rule.
            if "discriminator" in node and "oneOf" in node:
                node["anyOf"] = node.pop("oneOf")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schemas)
    # FunctionTool lists `strict` (and `parameters`) as required because the schema is
    # shared with the Response object; the real API accepts a request tool without
    # `strict` (llm/test_openai_responses/*.yaml: 200, echoed back with strict: true).
    schemas["FunctionTool"]["required"] = [r for r in schemas["FunctionTool"]["required"] if r != "strict"]
    # Replayed function_call items with `status: null` are accepted (pydantic-ai
    # test_openai_responses_requires_function_call_status_none.yaml: 200).
    status = schemas["FunctionToolCall"]["properties"]["status"]
    schemas["FunctionToolCall"]["properties"]["status"] = {"anyOf": [status, {"type": "null"}]}
    # Replayed assistant output_text parts without `logprobs` are accepted (pydantic-ai
    # test_openai_responses_phase_live.yaml second request: 200); Codex CLI replays them as
    # just {"type": "output_text", "text": ...} (no `annotations` either).  Both lists are
    # only always present in API *output*.
    schemas["OutputTextContent"]["required"] = [
        r for r in schemas["OutputTextContent"]["required"] if r not in ("logprobs", "annotations")
    ]
    # OutputMessage requires `id` and `status` (again the response shape).  Stateless clients
    # replay assistant messages as {"type": "message", "role": "assistant", "content":
    # [{"type": "output_text", ...}]} without them; Codex CLI does exactly this (its
    # ResponseItem::Message id is `skip_serializing`) against the real API with store=false,
    # where sending the id would be a 404.  Without this patch no spec-valid way exists to
    # replay assistant output text after a reasoning item with store=false.
    schemas["OutputMessage"]["required"] = [
        r for r in schemas["OutputMessage"]["required"] if r not in ("id", "status")
    ]
    return spec


def _import_jsonschema_fast() -> None:
    """Import jsonschema without its optional ``rfc3987_syntax`` format checker.

    That package compiles a lark grammar at import time (~1.3 s here).  We never check
    ``format`` (the spec's formats are annotations), so we hide it just while jsonschema
    imports (jsonschema skips it on ImportError) and unhide it at once, so other code
    importing ``rfc3987_syntax`` later is unaffected.
    """
    import sys

    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # makes `import` raise ImportError
    try:
        import jsonschema  # noqa: F401
    finally:
        if sys.modules.get("rfc3987_syntax", 0) is None:
            del sys.modules["rfc3987_syntax"]


def _validators(path: Path = SPEC_PATH) -> dict[str, Any]:
    """Build (once per process) Draft 2020-12 validators for the two request bodies."""
    _import_jsonschema_fast()
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    spec = load_openapi_spec(path)
    key = str(path)
    with _spec_lock:
        if key not in _validators_cache:
            patched = _patch_spec(spec)
            uri = "urn:fakeopenai:openapi"
            registry = Registry().with_resource(uri, Resource.from_contents(patched, default_specification=DRAFT202012))

            def make(name: str) -> Any:
                return Draft202012Validator({"$ref": f"{uri}#/components/schemas/{name}"}, registry=registry)

            _validators_cache[key] = {
                "/v1/responses": make("CreateResponse"),
                "/v1/chat/completions": make("CreateChatCompletionRequest"),
            }
        return _validators_cache[key]


def _explain(error: Any) -> Any:
    """Descend from an ``anyOf`` failure to the most telling sub-error.

    A failed union reports only "... is not valid under any of the given schemas" and
    dumps the whole value.  Branches whose ``type`` tag does not match the value are
    skipped (that is what a discriminator would do), and so are branches for another JSON
    type; of the rest, the branch with the fewest errors is the one the client most likely meant.
    """
    while error.context:
        branches: dict[Any, list[Any]] = collections.defaultdict(list)
        for sub in error.context:
            branches[sub.schema_path[0] if sub.schema_path else None].append(sub)

        def wrong_branch(errs: list[Any]) -> bool:
            return any(
                # the value's JSON type is not this branch's (e.g. the string form of `input`)
                (not c.relative_path and c.validator == "type")
                # the `type` (or chat `role`) tag names another branch
                or (list(c.relative_path) in (["type"], ["role"]) and c.validator in ("enum", "const", "anyOf"))
                for c in errs
            )

        candidates = [errs for errs in branches.values() if not wrong_branch(errs)] or list(branches.values())
        fewest = min(candidates, key=len)
        error = max(fewest, key=lambda c: len(c.absolute_path))
    return error


def _param_path(parts: Iterable[Any]) -> str:
    # The real API names params like `input[2].content` / `messages[0].role`.
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


# ---------------------------------------------------------------------------
# History stores
# ---------------------------------------------------------------------------


@dataclass
class _Stored:
    item: dict[str, Any]
    after_reasoning: str | None  # the reasoning item this output item followed in its response


@dataclass
class _Resolved:
    """An input item after resolving references against the store."""

    item: dict[str, Any]
    type: str
    id: str | None
    after_reasoning: str | None = None


# Output item types that may follow a reasoning item (anything the model emits).
_MODEL_ITEM_TYPES = {
    "function_call",
    "custom_tool_call",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "tool_search_call",
}


def _is_output_message(r: _Resolved) -> bool:
    """An assistant message the model produced: it carries its id, or output_text/refusal parts.

    A plain ``{"role": "assistant", "content": "text"}`` is an *input* message and does not
    count as the item following a reasoning item (real 400 recorded in pydantic-ai
    test_openai_responses_thinking_with_modified_history.yaml).  Stateless clients (Codex CLI)
    replay ``{"type": "message", "role": "assistant", "content": [{"type": "output_text", ...}]}``
    without id, which the real API accepts.
    """
    if r.type != "message" or r.item.get("role") != "assistant":
        return False
    content = r.item.get("content")
    parts = content if isinstance(content, list) else []
    return r.id is not None or any(isinstance(p, dict) and p.get("type") in ("output_text", "refusal") for p in parts)


_STORE_FALSE_404 = (
    "Item with id '{id}' not found. Items are not persisted when `store` is set to false. "
    "Try again with `store` set to true, or remove this item from your input."
)


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    # Without this every small write waits for the peer's delayed ACK (~40 ms per call).
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"  # keep-alive, chunked SSE
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        self.server.fake._handle(self)

    def do_GET(self) -> None:
        self.server.fake._handle(self)

    def do_DELETE(self) -> None:
        self.server.fake._handle(self)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for a handler sleeping in Fault.delay
    allow_reuse_address = True
    fake: FakeOpenAI


class _CutConnection(Exception):
    """Internal: the scripted fault closed the connection."""


class FakeOpenAI:
    """Fake OpenAI API on 127.0.0.1 (see module docstring)."""

    def __init__(
        self,
        *,
        default_reply: ReplyItem | None = None,
        responses_only_models: Iterable[str] = (),
        no_vision_models: Iterable[str] = (),
        validate: bool = True,
        check_inline_ids: bool = True,
        spec_path: Path = SPEC_PATH,
    ) -> None:
        #: Answered when the queue is empty.  Default: plain text "ok".
        self.default_reply: ReplyItem = default_reply if default_reply is not None else Reply(text="ok")
        #: Chat requests for these models get the real "only supported in v1/responses" 404.
        self.responses_only_models: set[str] = set(responses_only_models)
        #: Requests carrying images for these models get the real "image_url is only supported by certain
        #: models" 400 (set ``no_vision_error`` to imitate another server's status and text).
        self.no_vision_models: set[str] = set(no_vision_models)
        self.no_vision_error: tuple[int, str] = (400, NO_VISION_MESSAGE)
        #: A local model's chat template, as a server that renders it answers (both endpoints; the Responses
        #: ``instructions`` are its first system message): "system-first" (Qwen's) refuses a system message
        #: anywhere but first, "alternate" (Mistral's, Gemma's) that and a user message right after a user
        #: message. ``template_error``: the status and text of the refusal (default: vLLM's 400).
        self.chat_template: str | None = None
        self.template_error: tuple[int, str] | None = None
        #: Imitate a real server where its answers differ from OpenAI's (measured against it, TOOLCHAIN.md):
        #: "llama-cpp-python" (its server, 0.3.36): no ``/v1/responses`` (404 ``{"detail": "Not Found"}``), no
        #: usage in a stream whatever ``stream_options`` says, and a request over ``n_ctx`` tokens is a 400
        #: ``context_length_exceeded`` without streaming while its stream ends empty (200, no event);
        #: "ollama": a Responses API that keeps nothing (every answer says ``"store": false``, nothing is stored,
        #: and an ``item_reference`` is its 400 ``unknown input item type: "item_reference"``).
        self.imitate: str | None = None
        #: the model's context window in tokens (estimated as characters / 4 of the messages), or None
        self.n_ctx: int | None = None
        #: where a model whose server's tool parser missed its calls leaves them: "text" or "reasoning" (as
        #: Qwen's and Hermes's templates write them, ``<tool_call>{"name", "arguments"}</tool_call>``), and
        #: ``tool_calls`` comes back empty; "fenced-json": in the text as a fenced JSON block, as the small
        #: Qwen2.5-Coder models write a call on llama-server (see ``small_local_model``); None: as the API's calls
        self.tool_calls_as: str | None = None
        #: Answer as a small local model does (Qwen2.5-Coder 0.5B/1.5B on ``llama-server --jinja``, measured:
        #: ../shared/TOOLCHAIN.md "turn 5", tests/provider/test_llama_server.py): a scripted reply's tool calls
        #: come written in its content as fenced JSON (```` ```json {"name": "python", "arguments": {"code":
        #: "…"}} ``` ````, one block per call, after the reply's text), which the server does not parse, so
        #: ``tool_calls`` is empty (both endpoints, streamed or not; a ``Call`` whose arguments are a ``str``
        #: goes into the block verbatim: the model's Python triple-quoted strings, which are not JSON); and
        #: whatever is asked with nothing scripted is answered with a call-less guess, a made-up number
        #: (:data:`SMALL_MODEL_GUESS`, its number :data:`SMALL_MODEL_NUMBER`) instead of ``default_reply``.
        self.small_local_model = False
        #: llama-cpp-python's ``--chat_format chatml-function-calling``: a streamed request that offers tools ends
        #: its stream empty ("Automatic streaming tool choice is not supported", raised after the headers)
        self.no_tool_streams = False
        #: Validate request bodies against the OpenAPI spec.
        self.validate = validate
        #: 404 for an inline item carrying an ``id`` the server never stored.  Note: one
        #: recording (pydantic-ai ..._history_with_combined_tool_call_id.yaml) shows the real
        #: API accepting an inline function_call with an id it (probably) no longer had;
        #: set False to imitate that leniency.
        self.check_inline_ids = check_inline_ids
        #: Set True in a test that deliberately sends invalid bodies (the fixture then
        #: does not fail on ``validation_errors``).
        self.expect_invalid = False
        #: seconds ``GET /v1/models`` waits before answering (a server slow to answer it)
        self.models_delay = 0.0
        #: every request received, in order, except ``GET /v1/models`` (the kernel's warm-up sends one to
        #: open its connection: a test counting model calls must not count it), which goes to ``listings``
        self.requests: list[Recorded] = []
        self.listings: list[Recorded] = []
        self.validation_errors: list[str] = []
        #: Exceptions raised inside the server (e.g. by a callable reply); the fixture fails on them.
        self.handler_errors: list[str] = []
        self.spec_path = spec_path
        self._queue: collections.deque[ReplyItem] = collections.deque()
        self._lock = threading.RLock()
        self._items: dict[str, _Stored] = {}  # every stored output item by id
        self._prompts: list[str] = []  # every prompt received, for the prefix cache (``_cache``)
        self._contexts: dict[str, list[_Resolved]] = {}  # response id -> full item list, for previous_response_id
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.base_url = ""

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self.validate:
            _validators(self.spec_path)  # load the spec now, not inside the first request's timeout
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeOpenAI:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # wakes handlers sleeping in Fault.delay
        self._server.shutdown()
        self._server.server_close()
        # Keep-alive connections would otherwise keep their handler threads blocked.
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------

    def enqueue(self, *items: ReplyItem) -> None:
        """Queue replies (``Reply``, ``Fault`` or ``callable(Recorded) -> Reply | Fault``), used in order."""
        with self._lock:
            self._queue.extend(items)

    def enqueue_error(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        """Queue one JSON error answer ``{"error": {message, type, param, code}}``."""
        self.enqueue(Fault.error(status, message, type=type, code=code, param=param))

    @property
    def pending(self) -> int:
        """Number of queued replies not yet used."""
        with self._lock:
            return len(self._queue)

    @property
    def last_request(self) -> Recorded:
        with self._lock:
            return self.requests[-1]

    def _cache(self, rec: Recorded) -> None:
        """A prefix cache as OpenAI's works: the longest prefix of this prompt an earlier request began with is
        served from cache, counted from 1,024 tokens in steps of 128 (reported as ``cached_tokens``)."""
        body = rec.body
        items = body.get("input") if isinstance(body.get("input"), list) else body.get("messages") or []
        shown = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("type") == "item_reference" and item.get("id") in self._items:
                item = self._items[item["id"]].item
            shown.append(_json(item))
        text = "\n".join([_json(body.get("tools") or []), str(body.get("instructions") or ""), *shown])
        best = max((_common_prefix(text, seen) for seen in self._prompts), default=0)
        self._prompts.append(text)
        rec.prompt_chars, rec.cached_chars = len(text), best
        tokens = best // 4
        served = 0 if tokens < 1024 else 1024 + (tokens - 1024) // 128 * 128
        rec.cached_tokens = min(served, _approx_tokens(len(rec.raw)))  # never more than the input it reports

    def stored_item(self, item_id: str) -> dict[str, Any] | None:
        """An output item the server stored (store not false), by id."""
        with self._lock:
            s = self._items.get(item_id)
            return copy.deepcopy(s.item) if s else None

    # -- request handling --------------------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _handle(self, h: _Handler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        path = h.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in h.headers.items()}
        body: Any = None
        parse_error = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                parse_error = True
        rec = Recorded(
            method=h.command,
            path=path,
            body=body if isinstance(body, dict) else {},
            headers=headers,
            stream=isinstance(body, dict) and body.get("stream") is True,
            raw=raw,
            port=int(h.client_address[1]),
        )
        with self._lock:
            (self.listings if (rec.method, path) == ("GET", "/v1/models") else self.requests).append(rec)
            if rec.method == "POST" and isinstance(body, dict):
                self._cache(rec)
        try:
            self._answer(h, rec, parse_error or (raw != b"" and not isinstance(body, dict)))
        except _CutConnection:
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            h.close_connection = True  # the client gave up (e.g. its timeout fired)
        except Exception as e:  # a bug in a callable reply, or in the fake itself
            if self._stopping.is_set():
                return  # stop() closed the socket under a handler (e.g. one sleeping in Fault.delay)
            self.handler_errors.append(f"{rec.method} {rec.path}: {type(e).__name__}: {e}")
            try:
                self._send_json(h, rec, 500, _error_body(f"FakeOpenAI handler error: {e}", "server_error", None, None))
            except OSError:
                h.close_connection = True

    def _answer(self, h: _Handler, rec: Recorded, bad_json: bool) -> None:
        endpoint = rec.path
        if rec.method == "GET" and endpoint == "/v1/models":
            self._models(h, rec)
            return
        if self.imitate == "llama-cpp-python" and endpoint == "/v1/responses":
            self._send_json(h, rec, 404, {"detail": "Not Found"})  # FastAPI's answer for a route it lacks
            return
        if rec.method != "POST" or endpoint not in ("/v1/responses", "/v1/chat/completions"):
            self._send_json(
                h, rec, 404, _error_body(f"Invalid URL ({rec.method} {rec.path})", "invalid_request_error", None, None)
            )
            return
        if bad_json:
            self._send_json(
                h,
                rec,
                400,
                _error_body(
                    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
                    "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid "
                    "JSON. If you have trouble figuring out how to fix this, please contact us through our help center "
                    "at help.openai.com.)",
                    "invalid_request_error",
                    None,
                    None,
                ),
            )
            return
        body = rec.body
        try:
            if self.validate:
                self._validate(rec)
            if endpoint == "/v1/chat/completions":
                if body.get("model") in self.responses_only_models:
                    raise _ApiError(
                        404,
                        "This model is only supported in v1/responses and not in v1/chat/completions.",
                        param="model",
                    )
                self._check_chat_history(body)
                context: list[_Resolved] = []
            else:
                context = self._check_responses_history(body)
            self._check_images(body, chat=endpoint == "/v1/chat/completions")
            self._check_template(body, context, chat=endpoint == "/v1/chat/completions")
            self._check_window(rec)
        except _ApiError as e:
            if e.status == 400 and e.body["error"].get("code") == "context_length_exceeded" and rec.stream:
                self._empty_stream(h, rec)  # llama-cpp-python raises after the stream's headers
                return
            self._send_json(h, rec, e.status, e.body)
            return
        if self.imitate == "llama-cpp-python" and endpoint == "/v1/chat/completions":
            refused = self._llama_refuses(body)
            if refused:
                self._send_json(h, rec, 500, _error_body(refused, "internal_server_error", None, None))
                return
        if self.no_tool_streams and rec.stream and body.get("tools"):
            self._empty_stream(h, rec)  # its ValueError, raised after the headers
            return

        # Only a request that passed every check consumes a scripted reply.
        with self._lock:
            item: ReplyItem = self._queue.popleft() if self._queue else self._unscripted()
        self._run_item(h, rec, item, context)

    def _check_window(self, rec: Recorded) -> None:
        """A request over ``n_ctx`` tokens: llama-cpp-python's 400 (0.3.36's words)."""
        if self.n_ctx is None:
            return
        body = rec.body
        tokens = _approx_tokens(len(_json([body.get("instructions") or "", body.get("messages") or body.get("input")])))
        answer = body.get("max_tokens")
        if tokens + (answer or 0) > self.n_ctx:
            raise _ApiError(
                400,
                f"This model's maximum context length is {self.n_ctx} tokens. However, you requested "
                f"{tokens + (answer or 0)} tokens ({tokens} in the messages, {answer} in the completion). Please reduce "
                "the length of the messages or completion.",
                param="messages",
                code="context_length_exceeded",
            )

    @staticmethod
    def _llama_refuses(body: dict[str, Any]) -> str:
        """llama-cpp-python's 500 for an assistant message whose content is null (its request validation) or
        missing (its chat template reads it): '' where it takes the request."""
        for i, m in enumerate(body.get("messages") or []):
            if not isinstance(m, dict) or m.get("role") != "assistant":
                continue
            if "content" not in m:
                return "'dict object' has no attribute 'content'"
            if m["content"] is None:
                return (
                    f"7 validation errors:\n  {{'type': 'string_type', 'loc': ('body', 'messages', {i}, "
                    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', "
                    "'input': None}"
                )
        return ""

    def _empty_stream(self, h: _Handler, rec: Recorded) -> None:
        """A 200 event stream that ends at once with no event, and the connection closed (llama-cpp-python's
        stream of a request its model cannot take)."""
        rec.status = 200
        h.send_response(200)
        h.send_header("content-type", "text/event-stream; charset=utf-8")
        h.send_header("transfer-encoding", "chunked")
        self._common_headers(h)
        h.end_headers()
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
        h.close_connection = True

    def _unscripted(self) -> ReplyItem:
        """The answer when nothing is scripted: ``default_reply``, or a small local model's guess."""
        return Reply(text=SMALL_MODEL_GUESS) if self.small_local_model else self.default_reply

    def _as_text(self, reply: Reply) -> Reply:
        """``reply`` with its tool calls written as text where ``tool_calls_as`` says (a missed tool parser)."""
        where = "fenced-json" if self.small_local_model else self.tool_calls_as
        if where is None or not reply.tool_calls:
            return reply
        if where == "fenced-json":
            blocks = [f"```json\n{_fenced_call(c)}\n```" for c in reply.tool_calls]
            text = "\n\n".join([*([reply.text] if reply.text else []), *blocks])
            return Reply(text=text, reasoning=reply.reasoning, usage=reply.usage, model=reply.model)
        written = "".join(
            f'<tool_call>\n{{"name": {json.dumps(c.name)}, "arguments": {c.arguments_json()}}}\n</tool_call>'
            for c in reply.tool_calls
        )
        if where == "reasoning":
            return Reply(text=reply.text or "", reasoning=(reply.reasoning or "") + written, usage=reply.usage)
        return Reply(text=(reply.text or "") + written, reasoning=reply.reasoning, usage=reply.usage)

    def _run_item(self, h: _Handler, rec: Recorded, item: ReplyItem, context: list[_Resolved]) -> None:
        if callable(item) and not isinstance(item, (Reply, Fault)):
            item = item(rec)
        if isinstance(item, Reply):
            item = self._as_text(item)
        if isinstance(item, Fault):
            if item.kind == "error":
                self._send_json(h, rec, item.http_status, item.body or {}, item.headers)
                return
            if item.kind == "delay":
                self._stopping.wait(item.seconds)
                self._run_item(h, rec, item.then if item.then is not None else self.default_reply, context)
                return
            if not rec.stream:
                if item.kind == "cut":
                    raise _CutConnection()
                # "malformed" without streaming: a 200 whose JSON body is broken.
                self._send_raw(h, rec, 200, b'{"id": "resp_broken", "object": ', "application/json")
                return
            self._stream(h, rec, item, context)
            return
        if not isinstance(item, Reply):
            raise TypeError(f"queue item must be Reply, Fault or a callable returning one, got {item!r}")
        if rec.stream:
            self._stream(h, rec, item, context)
        elif rec.path == "/v1/responses":
            self._send_json(h, rec, 200, self._build_response(rec, item, context))
        else:
            self._send_json(h, rec, 200, self._build_chat(rec, item))

    # -- wire helpers ------------------------------------------------------

    def _common_headers(self, h: _Handler) -> None:
        h.send_header("x-request-id", "req_" + secrets.token_hex(16))
        h.send_header("openai-version", "2020-10-01")
        h.send_header("openai-processing-ms", "1")

    def _send_raw(
        self, h: _Handler, rec: Recorded, status: int, data: bytes, ctype: str, extra: dict[str, str] | None = None
    ) -> None:
        rec.status = status
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(data)))
        self._common_headers(h)
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    def _models(self, h: _Handler, rec: Recorded) -> None:
        """``GET /v1/models`` (listModels): the real 401 without a bearer key, else the list."""
        if self.models_delay and self._stopping.wait(self.models_delay):
            return
        if not rec.headers.get("authorization", "").startswith("Bearer "):
            self._send_json(h, rec, 401, _error_body(NO_KEY_MESSAGE, "invalid_request_error", None, None))
            return
        ids = sorted({*LISTED_MODELS, *self.responses_only_models, *self.no_vision_models})
        data = [{"id": i, "object": "model", "created": 1686935002, "owned_by": "openai"} for i in ids]
        self._send_json(h, rec, 200, {"object": "list", "data": data})

    def _send_json(
        self, h: _Handler, rec: Recorded, status: int, obj: Any, extra: dict[str, str] | None = None
    ) -> None:
        self._send_raw(h, rec, status, _json(obj).encode(), "application/json", extra)

    def _stream(self, h: _Handler, rec: Recorded, item: Reply | Fault, context: list[_Resolved]) -> None:
        fault = item if isinstance(item, Fault) else None
        if fault is not None:
            # A fault on a stream still streams the default reply up to the break point.
            # (default_reply may be a callable; resolve it, ignoring any Fault it returns.)
            d = self.default_reply
            reply = d(rec) if callable(d) and not isinstance(d, (Reply, Fault)) else d
            reply = reply if isinstance(reply, Reply) else Reply(text="ok")
        else:
            assert isinstance(item, Reply)
            reply = item
        if rec.path == "/v1/responses":
            frames = self._response_events(rec, reply, context, store=fault is None)
        else:
            frames = self._chat_chunks(rec, reply)

        rec.status = 200
        h.send_response(200)
        h.send_header("content-type", "text/event-stream; charset=utf-8")
        h.send_header("transfer-encoding", "chunked")
        self._common_headers(h)
        h.end_headers()

        def chunk(data: bytes) -> None:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        break_at = -1
        if fault is not None:
            # None = "before the first output": after the 2 preamble events / the chat role chunk.
            preamble = 2 if rec.path == "/v1/responses" else 1
            break_at = fault.after_events if fault.after_events is not None else preamble
        if fault is not None and fault.kind == "trickle":
            for frame in frames:
                for byte in frame.encode():
                    if self._stopping.wait(fault.seconds):
                        return
                    chunk(bytes([byte]))
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
            return
        for n, frame in enumerate(frames):
            if n == break_at:
                assert fault is not None
                if fault.kind == "stall" and self._stopping.wait(fault.seconds):
                    return
                if fault.kind == "cut":
                    raise _CutConnection()  # no terminating chunk: an incomplete body, like a dropped stream
                if fault.kind == "malformed":
                    chunk(b'data: {"type": "response.output_text.delta", "delta": "oops\n\n')
                    break
                if fault.kind == "failed":
                    for frame in _failed_events(n):
                        chunk(frame.encode())
                    break
            chunk(frame.encode())
        if fault is not None and fault.kind == "cut":
            raise _CutConnection()  # after_events past the end: still never finish the body
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    # -- validation --------------------------------------------------------

    def _validate(self, rec: Recorded) -> None:
        validator = _validators(self.spec_path)[rec.path]
        with _spec_lock:  # referencing resolvers are cheap; a lock keeps this simple and thread-safe
            errors = sorted(validator.iter_errors(rec.body), key=lambda e: list(e.absolute_path))
        if not errors:
            return
        msgs = []
        params = []
        for e in errors:
            deep = _explain(e)
            params.append(_param_path(deep.absolute_path))
            msg = deep.message if len(deep.message) < 300 else deep.message[:300] + "…"
            msgs.append(f"{params[-1] or '(body)'}: {msg}")
        self.validation_errors.extend(f"POST {rec.path} {m}" for m in msgs)
        raise _ApiError(400, f"Invalid request body (OpenAPI schema): {msgs[0]}", param=params[0] or None)

    # -- history rules: responses -------------------------------------------

    def _check_responses_history(self, body: dict[str, Any]) -> list[_Resolved]:
        """Resolve input items against the store and enforce the real API's pairing rules.

        Returns the full resolved item list (previous_response_id context + input).
        """
        store = body.get("store") is not False
        raw_input = body.get("input")
        items: list[Any]
        if raw_input is None:
            items = []
        elif isinstance(raw_input, str):
            items = [{"role": "user", "content": raw_input}]
        else:
            items = list(raw_input)

        context: list[_Resolved] = []
        prev_id = body.get("previous_response_id")
        with self._lock:
            if prev_id:
                if prev_id not in self._contexts:
                    raise _ApiError(
                        400,
                        f"Previous response with id '{prev_id}' not found.",
                        param="previous_response_id",
                        code="previous_response_not_found",
                    )
                context = list(self._contexts[prev_id])
            n_prev = len(context)

            # Pass 1: resolve ids (404s come before pairing errors).
            for it in items:
                if not isinstance(it, dict):
                    continue
                typ = it.get("type")
                item_id = it.get("id")
                is_ref = typ == "item_reference" or (typ is None and "role" not in it and item_id is not None)
                if is_ref and self.imitate == "ollama":
                    raise _ApiError(400, 'unknown input item type: "item_reference"')
                if is_ref:
                    if not store:
                        raise _ApiError(404, _STORE_FALSE_404.format(id=item_id))
                    stored = self._items.get(item_id)
                    if stored is None:
                        raise _ApiError(404, f"Item with id '{item_id}' not found.")
                    context.append(
                        _Resolved(stored.item, stored.item.get("type", "message"), item_id, stored.after_reasoning)
                    )
                    continue
                typ = typ or ("message" if "role" in it else "")
                if item_id is not None:
                    stateless_reasoning = typ == "reasoning" and bool(it.get("encrypted_content"))
                    stored = self._items.get(item_id)
                    if not stateless_reasoning:
                        if not store:
                            raise _ApiError(404, _STORE_FALSE_404.format(id=item_id))
                        if stored is None and self.check_inline_ids:
                            raise _ApiError(404, f"Item with id '{item_id}' not found.")
                    context.append(_Resolved(it, typ, item_id, stored.after_reasoning if stored else None))
                else:
                    context.append(_Resolved(it, typ, None))

        # Pass 2: pairing rules, in order; the first broken rule wins.
        present_ids = {r.id for r in context if r.id}
        for i, r in enumerate(context):
            new = i >= n_prev
            if new and r.type == "reasoning":
                nxt = context[i + 1] if i + 1 < len(context) else None
                follows = nxt is not None and (nxt.type in _MODEL_ITEM_TYPES or _is_output_message(nxt))
                if not follows:
                    raise _ApiError(
                        400, f"Item '{r.id}' of type 'reasoning' was provided without its required following item."
                    )
            if new and r.after_reasoning and r.after_reasoning not in present_ids:
                raise _ApiError(
                    400,
                    f"Item '{r.id}' of type '{r.type}' was provided without its required "
                    f"'reasoning' item: '{r.after_reasoning}'.",
                )
            if new and r.type == "function_call_output":
                call_id = r.item.get("call_id")
                if not any(p.type == "function_call" and p.item.get("call_id") == call_id for p in context[:i]):
                    raise _ApiError(400, f"No tool call found for function call output with call_id {call_id}.")
            if r.type == "function_call":
                call_id = r.item.get("call_id")
                if not any(
                    n.type == "function_call_output" and n.item.get("call_id") == call_id for n in context[i + 1 :]
                ):
                    raise _ApiError(400, f"No tool output found for function call {call_id}.")
        return context

    # -- history rules: chat --------------------------------------------------

    def _check_images(self, body: dict[str, Any], *, chat: bool) -> None:
        """Images as the real API checks them: a data URL must hold a real PNG/JPEG/GIF/WebP, a chat tool
        message may not carry one (the real 400), and a model without vision refuses any."""
        found = 0
        if chat:
            for i, m in enumerate(body.get("messages") or []):
                content = m.get("content") if isinstance(m, dict) else None
                for part in content if isinstance(content, list) else []:
                    if isinstance(part, dict) and part.get("type") == "image_url":
                        if m.get("role") != "user":
                            raise _ApiError(
                                400,
                                f"Invalid 'messages[{i}]'. Image URLs are only allowed for messages with role 'user', "
                                f"but this message with role '{m.get('role')}' contains an image URL.",
                                param=f"messages[{i}]",
                                code="invalid_value",
                            )
                        _check_data_url((part.get("image_url") or {}).get("url"), f"messages[{i}]")
                        found += 1
        else:
            for i, item in enumerate(body.get("input") or [] if isinstance(body.get("input"), list) else []):
                parts: list[Any] = []
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    parts = item["output"] if isinstance(item.get("output"), list) else []
                elif isinstance(item, dict) and isinstance(item.get("content"), list):
                    parts = item["content"]
                for part in parts:
                    if isinstance(part, dict) and part.get("type") == "input_image":
                        _check_data_url(part.get("image_url"), f"input[{i}]")
                        found += 1
        if found and body.get("model") in self.no_vision_models:
            status, message = self.no_vision_error
            raise _ApiError(status, message, code="invalid_value" if status == 400 else None)

    def _check_template(self, body: dict[str, Any], context: list[_Resolved], *, chat: bool) -> None:
        """What a model's chat template raises for the roles of this request (``chat_template``); ``context``:
        a Responses request's items, references resolved."""
        if self.chat_template is None:
            return
        listed = (body.get("messages") or []) if chat else [{**r.item, "type": r.type} for r in context]
        as_role = {"function_call": "assistant", "function_call_output": "tool"}  # as a server renders them
        roles = [
            m.get("role") if m.get("type", "message") == "message" else as_role.get(m.get("type"))
            for m in listed
            if isinstance(m, dict)
        ]
        roles = [r for r in roles if r]
        if not chat and body.get("instructions"):
            roles.insert(0, "system")
        mid_system = any(r in ("system", "developer") for r in roles[1:])
        users_in_a_row = any(a == b == "user" for a, b in itertools.pairwise(roles))
        if mid_system or (self.chat_template == "alternate" and users_in_a_row):
            status, text = self.template_error or (400, TEMPLATE_ERRORS[self.chat_template])
            raise _ApiError(status, text, type="server_error" if status >= 500 else "BadRequestError")

    @staticmethod
    def _check_chat_history(body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        pending: list[str] = []  # tool_call ids still owed a tool message
        answerable: set[str] = set()  # ids of the current assistant tool_calls group
        owner = 0  # index of the assistant message owning `pending`
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            if role == "tool":
                tcid = m.get("tool_call_id")
                if tcid not in answerable:
                    raise _ApiError(
                        400,
                        "Invalid parameter: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.",  # sic: the real API's typo
                        param=f"messages.[{i}].role",
                    )
                if tcid in pending:
                    pending.remove(tcid)
                continue
            if pending:
                raise _ApiError(
                    400,
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                    f"response messages: {', '.join(pending)}",
                    param=f"messages.[{owner}].role",
                )
            answerable = set()
            if role == "assistant" and m.get("tool_calls"):
                pending = [tc.get("id") for tc in m["tool_calls"] if isinstance(tc, dict)]
                answerable = set(pending)
                owner = i
        if pending:
            raise _ApiError(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}",
                param=f"messages.[{owner}].role",
            )

    # -- building answers: responses ----------------------------------------

    def _output_items(self, rec: Recorded, reply: Reply) -> list[dict[str, Any]]:
        body = rec.body
        out: list[dict[str, Any]] = []
        if reply.reasoning is not None:
            rs: dict[str, Any] = {"id": _hex_id("rs_"), "type": "reasoning"}
            if "reasoning.encrypted_content" in (body.get("include") or []):
                # Opaque like the real thing ("gAAAAAB…" Fernet-style token).
                blob = base64.urlsafe_b64encode(("fake-reasoning:" + reply.reasoning).encode()).decode()
                rs["encrypted_content"] = "gAAAAAB" + blob
            rs["summary"] = [{"type": "summary_text", "text": reply.reasoning}] if reply.reasoning else []
            out.append(rs)
        if reply.text or not reply.tool_calls:
            msg: dict[str, Any] = {
                "id": _hex_id("msg_"),
                "type": "message",
                "status": "completed",
                "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": reply.text}],
            }
            if reply.phase is not None:
                msg["phase"] = reply.phase
            msg["role"] = "assistant"
            out.append(msg)
        for call in reply.tool_calls:
            out.append(
                {
                    "id": _hex_id("fc_"),
                    "type": "function_call",
                    "status": "completed",
                    "arguments": call.arguments_json(),
                    "call_id": call.call_id or "call_" + _alnum(24),
                    "name": call.name,
                }
            )
        return out

    def _usage(self, rec: Recorded, reply: Reply) -> tuple[int, int, int]:
        """(input, output, reasoning) token counts."""
        reasoning = _approx_tokens(len(reply.reasoning)) if reply.reasoning else 0
        if reply.usage is not None:
            return reply.usage[0], reply.usage[1], min(reasoning, reply.usage[1])
        out_chars = len(reply.text) + sum(len(c.name) + len(c.arguments_json()) for c in reply.tool_calls)
        return _approx_tokens(len(rec.raw)), _approx_tokens(out_chars) + reasoning, reasoning

    def _response_shell(self, rec: Recorded, reply: Reply, resp_id: str, created: int) -> dict[str, Any]:
        """The Response object fields, as in the recorded responses (llm cassettes)."""
        body = rec.body
        tools = []
        for t in body.get("tools") or []:
            t = dict(t)
            if t.get("type") == "function":
                t.setdefault("strict", True)  # the real API echoes the defaulted strict flag
            tools.append(t)
        reasoning = body.get("reasoning") or {}
        return {
            "id": resp_id,
            "object": "response",
            "created_at": created,
            "status": "in_progress",
            "background": False,
            "completed_at": None,
            "error": None,
            "frequency_penalty": 0.0,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": body.get("max_tool_calls"),
            "model": reply.model or body.get("model") or "gpt-fake",
            "moderation": None,
            "output": [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "presence_penalty": 0.0,
            "previous_response_id": body.get("previous_response_id"),
            "prompt_cache_key": body.get("prompt_cache_key"),
            "prompt_cache_retention": None,
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "safety_identifier": body.get("safety_identifier"),
            "service_tier": "auto",
            "store": body.get("store") is not False and self.imitate != "ollama",
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": tools,
            "top_logprobs": 0,
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation") or "disabled",
            "usage": None,
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    def _complete(
        self,
        rec: Recorded,
        reply: Reply,
        shell: dict[str, Any],
        output: list[dict[str, Any]],
        context: list[_Resolved],
        *,
        store: bool,
    ) -> dict[str, Any]:
        resp = copy.deepcopy(shell)
        inp, out, reasoning = self._usage(rec, reply)
        resp.update(
            {
                "status": "completed",
                "completed_at": int(time.time()),
                "output": output,
                "service_tier": "default",
                "usage": {
                    "input_tokens": inp,
                    "input_tokens_details": {"cached_tokens": min(rec.cached_tokens, inp)},
                    "output_tokens": out,
                    "output_tokens_details": {"reasoning_tokens": reasoning},
                    "total_tokens": inp + out,
                },
            }
        )
        if store and rec.body.get("store") is not False and self.imitate != "ollama":
            self._remember(resp["id"], output, context)
        return resp

    def _remember(self, resp_id: str, output: list[dict[str, Any]], context: list[_Resolved]) -> None:
        with self._lock:
            last_rs: str | None = None
            resolved = list(context)
            for item in output:
                if item["type"] == "reasoning":
                    self._items[item["id"]] = _Stored(copy.deepcopy(item), None)
                    last_rs = item["id"]
                    resolved.append(_Resolved(item, "reasoning", item["id"]))
                else:
                    self._items[item["id"]] = _Stored(copy.deepcopy(item), last_rs)
                    resolved.append(_Resolved(item, item["type"], item["id"], last_rs))
            self._contexts[resp_id] = resolved

    def _build_response(self, rec: Recorded, reply: Reply, context: list[_Resolved]) -> dict[str, Any]:
        shell = self._response_shell(rec, reply, _hex_id("resp_"), int(time.time()))
        return self._complete(rec, reply, shell, self._output_items(rec, reply), context, store=True)

    def _response_events(self, rec: Recorded, reply: Reply, context: list[_Resolved], *, store: bool) -> Iterator[str]:
        """The real SSE sequence (see llm/test_responses_tool_use_streaming.yaml and
        vercel-ai/responses/openai-reasoning-encrypted-content.1.chunks.txt)."""
        shell = self._response_shell(rec, reply, _hex_id("resp_"), int(time.time()))
        output = self._output_items(rec, reply)
        seq = 0

        def ev(typ: str, **data: Any) -> str:
            nonlocal seq
            frame = f"event: {typ}\ndata: {_json({'type': typ, **data, 'sequence_number': seq})}\n\n"
            seq += 1
            return frame

        yield ev("response.created", response=shell)
        yield ev("response.in_progress", response=shell)
        for idx, item in enumerate(output):
            iid = item["id"]
            if item["type"] == "reasoning":
                added = {k: v for k, v in item.items() if k != "summary"}
                added["summary"] = []
                yield ev("response.output_item.added", item=added, output_index=idx)
                for si, part in enumerate(item["summary"]):
                    common = {"item_id": iid, "output_index": idx, "summary_index": si}
                    yield ev(
                        "response.reasoning_summary_part.added", **common, part={"type": "summary_text", "text": ""}
                    )
                    for d in _text_deltas(part["text"]):
                        yield ev("response.reasoning_summary_text.delta", **common, delta=d)
                    yield ev("response.reasoning_summary_text.done", **common, text=part["text"])
                    yield ev("response.reasoning_summary_part.done", **common, part=part)
            elif item["type"] == "message":
                added = dict(item, status="in_progress", content=[])
                yield ev("response.output_item.added", item=added, output_index=idx)
                for ci, part in enumerate(item["content"]):
                    common = {"content_index": ci, "item_id": iid, "output_index": idx}
                    yield ev("response.content_part.added", **common, part=dict(part, text=""))
                    for d in _text_deltas(part["text"]):
                        yield ev("response.output_text.delta", **common, delta=d, logprobs=[])
                    yield ev("response.output_text.done", **common, logprobs=[], text=part["text"])
                    yield ev("response.content_part.done", **common, part=part)
            else:  # function_call
                yield ev(
                    "response.output_item.added", item=dict(item, status="in_progress", arguments=""), output_index=idx
                )
                for d in _arg_deltas(item["arguments"]):
                    yield ev("response.function_call_arguments.delta", delta=d, item_id=iid, output_index=idx)
                yield ev(
                    "response.function_call_arguments.done", arguments=item["arguments"], item_id=iid, output_index=idx
                )
            yield ev("response.output_item.done", item=item, output_index=idx)
        # Stored only once the stream completes (a cut stream leaves nothing to reference).
        yield ev("response.completed", response=self._complete(rec, reply, shell, output, context, store=store))

    # -- building answers: chat ----------------------------------------------

    def _chat_usage(self, rec: Recorded, reply: Reply) -> dict[str, Any]:
        inp, out, _ = self._usage(rec, Reply(text=reply.text, tool_calls=reply.tool_calls, usage=reply.usage))
        return {
            "prompt_tokens": inp,
            "completion_tokens": out,
            "total_tokens": inp + out,
            "prompt_tokens_details": {"cached_tokens": min(rec.cached_tokens, inp), "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    @staticmethod
    def _chat_calls(reply: Reply) -> list[dict[str, Any]]:
        return [
            {
                "id": c.call_id or "call_" + _alnum(24),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json()},
            }
            for c in reply.tool_calls
        ]

    def _build_chat(self, rec: Recorded, reply: Reply) -> dict[str, Any]:
        calls = self._chat_calls(reply)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if (reply.text or not calls) else None,
            "refusal": None,
            "annotations": [],
        }
        if calls:
            message["tool_calls"] = calls
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning  # vLLM's, llama.cpp's and DeepSeek's field
        if self.imitate == "llama-cpp-python":  # its shape: no refusal, annotations, tier or fingerprint
            message = {k: v for k, v in message.items() if k not in ("refusal", "annotations")}
            return {
                "id": "chatcmpl-" + str(secrets.token_hex(16)),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": rec.body.get("model") or "gpt-fake",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": "tool_calls" if calls else "stop",
                    }
                ],
                "usage": {k: v for k, v in self._chat_usage(rec, reply).items() if k.endswith("_tokens")},
            }
        return {
            "id": "chatcmpl-" + _alnum(29),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or rec.body.get("model") or "gpt-fake",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if calls else "stop"}
            ],
            "usage": self._chat_usage(rec, reply),
            "service_tier": "default",
            "system_fingerprint": "fp_" + secrets.token_hex(5),
        }

    def _chat_chunks(self, rec: Recorded, reply: Reply) -> Iterator[str]:
        """Chunks as in pydantic-ai/test_openai/test_run_stream_sync_streams_real_model.yaml."""
        include_usage = bool((rec.body.get("stream_options") or {}).get("include_usage"))
        if self.imitate == "llama-cpp-python":
            include_usage = False  # its streams carry no usage, whatever stream_options says
        base = {
            "id": "chatcmpl-" + _alnum(29),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": reply.model or rec.body.get("model") or "gpt-fake",
            "service_tier": "default",
            "system_fingerprint": "fp_" + secrets.token_hex(5),
        }
        if self.imitate == "llama-cpp-python":  # its chunks: no tier, no fingerprint
            del base["service_tier"], base["system_fingerprint"]
        calls = self._chat_calls(reply)

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            c: dict[str, Any] = dict(
                base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            )
            if include_usage:
                c["usage"] = None
            return f"data: {_json(c)}\n\n"

        yield chunk({"role": "assistant", "content": "" if (reply.text or not calls) else None, "refusal": None})
        if reply.reasoning:
            for d in _text_deltas(reply.reasoning):
                yield chunk({"reasoning_content": d})
        if reply.text:
            for d in _text_deltas(reply.text):
                yield chunk({"content": d})
        for i, call in enumerate(calls):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for d in _arg_deltas(call["function"]["arguments"]):
                yield chunk({"tool_calls": [{"index": i, "function": {"arguments": d}}]})
        yield chunk({}, "tool_calls" if calls else "stop")
        if include_usage:
            yield f"data: {_json(dict(base, choices=[], usage=self._chat_usage(rec, reply)))}\n\n"
        yield "data: [DONE]\n\n"
