"""Loaders for the recorded real OpenAI traffic under ``tests/realdata/cassettes``.

Every loader yields :class:`Interaction` objects; ``response`` is either the decoded JSON body
(a dict) or, for a streamed body, the list of SSE ``data`` payloads decoded as dicts (``[DONE]``
dropped). Three formats (see ``tests/realdata/README.md``):

* pydantic-ai: YAML, request in ``parsed_body``; response in ``parsed_body`` (JSON) or
  ``body.string`` (SSE text with ``event:``/``data:`` lines);
* simonw/llm: stock vcrpy YAML, request ``body`` is a JSON string, response ``body.string`` is a
  gzip'd ``!!binary`` (SafeLoader turns it into ``bytes``);
* vercel-ai: ``*.chunks.txt`` (one SSE ``data`` JSON per line, several responses concatenated,
  split at each ``response.created``), ``*.json`` (a plain body). No request was recorded.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parent / "realdata" / "cassettes"


@dataclass(frozen=True)
class Interaction:
    source: str  # "pydantic-ai/test_openai_responses/foo.yaml"
    index: int  # position within the cassette (or response within a chunks file)
    api: str  # "responses" or "chat"
    request: dict[str, Any] | None
    response: Any  # dict (JSON body) or list[dict] (SSE events)
    is_stream: bool
    status: int

    @property
    def id(self) -> str:
        return f"{self.source}#{self.index}"


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The ``data:`` payloads of an SSE body, as dicts (multi-line data joined; ``[DONE]`` dropped)."""
    events: list[dict[str, Any]] = []
    data: list[str] = []

    def flush() -> None:
        if data:
            payload = "\n".join(data)
            data.clear()
            if payload.strip() != "[DONE]":
                events.append(json.loads(payload))

    for line in text.splitlines():
        if not line.strip():
            flush()
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    flush()
    return events


def _api(uri: str) -> str:
    return "chat" if "/chat/completions" in uri else "responses"


def _decode_body(raw: Any, content_type: str) -> tuple[Any, bool]:
    if isinstance(raw, bytes):
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        raw = raw.decode("utf-8")
    text = raw or ""
    stripped = text.lstrip()
    if "text/event-stream" in content_type or stripped.startswith(("event:", "data:")):
        return parse_sse(text), True
    return json.loads(text), False


def _header(headers: dict[str, Any] | None, name: str) -> str:
    for k, v in (headers or {}).items():
        if k.lower() == name:
            return v[0] if isinstance(v, list) else str(v)
    return ""


@cache
def load_yaml(rel: str) -> tuple[Interaction, ...]:
    """A pydantic-ai or simonw/llm cassette (the two YAML styles are told apart per field)."""
    doc = yaml.load((ROOT / rel).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    out = []
    for i, inter in enumerate(doc["interactions"]):
        req, resp = inter["request"], inter["response"]
        if "parsed_body" in req:
            request = req["parsed_body"]
        else:
            body = req.get("body") or {}
            body = body.get("string") if isinstance(body, dict) else body
            request = json.loads(body) if body else None
        ctype = _header(resp.get("headers"), "content-type")
        if "parsed_body" in resp:
            response, stream = resp["parsed_body"], False
        else:
            response, stream = _decode_body(resp["body"]["string"], ctype)
        status = int((resp.get("status") or {}).get("code", 200))
        out.append(Interaction(rel, i, _api(req.get("uri", "")), request, response, stream, status))
    return tuple(out)


@cache
def load_vercel(rel: str) -> tuple[Interaction, ...]:
    path = ROOT / rel
    api = "chat" if "/chat/" in rel else "responses"
    if rel.endswith(".json"):
        body = json.loads(path.read_text(encoding="utf-8"))
        status = 400 if isinstance(body, dict) and "error" in body and "output" not in body else 200
        return (Interaction(rel, 0, api, None, body, False, status),)
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    groups: list[list[dict[str, Any]]] = []
    for ev in events:
        if not groups or ev.get("type") == "response.created":
            groups.append([])
        groups[-1].append(ev)
    return tuple(Interaction(rel, i, api, None, g, True, 200) for i, g in enumerate(groups))


def cassette_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file())


def load(rel: str) -> tuple[Interaction, ...]:
    return load_vercel(rel) if rel.startswith("vercel-ai/") else load_yaml(rel)


def openai_interactions(rel: str) -> tuple[Interaction, ...]:
    """Only the interactions that went to OpenAI (one pydantic-ai cassette also holds Gemini calls)."""
    if rel.startswith("vercel-ai/"):
        return load(rel)
    doc_uris = _uris(rel)
    return tuple(x for x, uri in zip(load(rel), doc_uris) if "api.openai.com" in uri)


@cache
def _uris(rel: str) -> tuple[str, ...]:
    doc = yaml.load((ROOT / rel).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    return tuple(i["request"].get("uri", "") for i in doc["interactions"])


def all_interactions() -> list[Interaction]:
    return [x for rel in cassette_files() for x in openai_interactions(rel)]
