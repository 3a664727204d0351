"""The egress ledger: what each request took off the machine, and to which server (SPEC §13, "The egress ledger").

The provider tells one :class:`Request` per request it sends (a :class:`~shiro_kernel.events.Sent` event, before the
post): the server, the API, the body's exact size as the SDK serialises it, its estimated tokens, and what it
carried that no earlier request of the session had — the tool results (tool, characters), the files read
(path, bytes), the variables whose values a tool showed (rows × columns, the columns), the images — and how many
values it masked (:mod:`shiro_kernel.private`) and secrets it redacted (:mod:`shiro_kernel.redact`). The session
keeps each turn's requests (:class:`Ledger`, in its record); the footer says a turn's in a few words
(:func:`brief`), ``%shiro /egress`` and ``shiro sessions egress ID`` list them (:func:`table`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .ids import now_iso, uuid7
from .transcript import ImageRef, Message, ToolResultPart


@dataclass
class Request:
    """One request as it left."""

    host: str
    api: str
    bytes: int
    tokens: int
    #: ``[tool, characters]`` of each tool result first sent in this request
    results: list[list[Any]] = field(default_factory=list)
    #: ``[path, bytes]`` of each file a tool read into those results
    files: list[list[Any]] = field(default_factory=list)
    #: ``[name, rows, columns, [column names]]`` of each variable whose values those results show
    variables: list[list[Any]] = field(default_factory=list)
    images: int = 0
    image_bytes: int = 0
    masked: int = 0
    redacted: int = 0
    at: str = field(default_factory=now_iso)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v or k in ("host", "api", "bytes", "tokens")}

    @classmethod
    def from_json(cls, data: Any) -> Request | None:
        if not isinstance(data, dict) or not isinstance(data.get("bytes"), int):
            return None
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        try:
            return cls(**known)
        except TypeError:
            return None


@dataclass
class Seen:
    """What earlier requests of one provider carried: the tool results, by call id."""

    calls: set[str] = field(default_factory=set)


def request_of(
    size: int,
    messages: list[Message],
    base_url: str,
    api: str,
    seen: Seen,
    images: Callable[[ImageRef], str | None] | None = None,
    *,
    masked: int = 0,
    redacted: int = 0,
    sent_as: Callable[[ToolResultPart], ToolResultPart] | None = None,
) -> Request:
    """The ledger's entry for a request of ``size`` bytes built from ``messages`` for the server at ``base_url``: the
    tool results it carries that no request before it did (``seen``, updated), their files, variables and — where
    ``images`` gives their data (the model takes images) — images; ``masked`` and ``redacted``: what building it
    masked and redacted; ``sent_as``: a result as it leaves, where that is not as it is (the policy's ``values:
    schema-only``, :func:`~shiro_kernel.private.schema_only.withheld_part`). Only the new results are read: nothing
    here grows with the body."""
    parts = urlsplit(base_url)
    host = (parts.hostname or base_url) + (f":{parts.port}" if parts.port else "")
    request = Request(host, api, size, -(-size // 4), masked=masked, redacted=redacted)  # characters / 4
    for m in messages:
        for part in m.parts if m.role == "tool" else ():
            if type(part) is not ToolResultPart or part.call_id in seen.calls:
                continue
            seen.calls.add(part.call_id)
            if sent_as is not None:
                part = sent_as(part)
            request.results.append([part.name, len(part.output)])
            file = part.meta.get("file")
            if isinstance(file, list) and len(file) == 2:
                request.files.append(list(file))
            shown = part.meta.get("variables")
            if isinstance(shown, list):
                request.variables += [v for v in shown if isinstance(v, list) and len(v) == 4]
            if images is not None:
                for url in filter(None, map(images, part.images)):
                    request.images += 1
                    request.image_bytes += len(url)
    return request


def command_entry(command: str) -> str:
    """The ledger's entry for a command's own model call (``/compact``, ``/memory``): ``"/compact <id>"``, one a call,
    shown by the command's name."""
    return f"{command} {uuid7()}"


def encoded(body: dict[str, Any]) -> bytes:
    """``body`` as the openai SDK and httpx send it (compact separators, UTF-8, not ASCII-escaped): the ledger's
    size. It serialises the body a second time (the SDK does it again): a cost per request that grows with it."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


@dataclass
class Ledger:
    """A session's requests by turn: ``[{"turn": id, "requests": [...]}, ...]`` as its record keeps them."""

    turns: list[dict[str, Any]] = field(default_factory=list)

    def add(self, turn: str, request: Request) -> None:
        if not self.turns or self.turns[-1].get("turn") != turn:
            self.turns.append({"turn": turn, "requests": []})
        self.turns[-1]["requests"].append(request.to_json())

    def requests(self, turn: str | None = None) -> list[Request]:
        """The requests of ``turn`` (None: of every turn)."""
        out = []
        for entry in self.turns:
            if turn is None or entry.get("turn") == turn:
                out += [r for r in map(Request.from_json, entry.get("requests") or []) if r is not None]
        return out

    @classmethod
    def from_json(cls, data: Any) -> Ledger:
        if not isinstance(data, list):
            return cls()
        return cls([t for t in data if isinstance(t, dict) and isinstance(t.get("requests"), list)])


def size(n: int) -> str:
    """``812 B``, ``3.1 kB``, ``2.4 MB`` (decimal units, as a network counts)."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} kB"
    return f"{n / 1_000_000:.1f} MB"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def brief(requests: list[Request]) -> str:
    """The footer's words: ``sent 3.1 kB to api.openai.com: 2 results, 1 image · 14 values masked``; '' for none."""
    if not requests:
        return ""
    hosts = ", ".join(dict.fromkeys(r.host for r in requests))
    carried = []
    results = sum(len(r.results) for r in requests)
    if results:
        carried.append(_count(results, "result"))
    files = len({f[0] for r in requests for f in r.files})
    if files:
        carried.append(_count(files, "file"))
    images = sum(r.images for r in requests)
    if images:
        carried.append(_count(images, "image"))
    text = f"sent {size(sum(r.bytes for r in requests))} to {hosts}" + (f": {', '.join(carried)}" if carried else "")
    masked, redacted = sum(r.masked for r in requests), sum(r.redacted for r in requests)
    if masked:
        text += f" · {_count(masked, 'value')} masked"
    if redacted:
        text += f" · {_count(redacted, 'secret')} redacted"
    return text


def table(ledger: Ledger) -> str:
    """``%shiro /egress``: each turn's requests, what each carried."""
    if not ledger.turns:
        return "nothing has been sent in this session yet"
    lines = []
    total = 0
    number = 0
    for entry in ledger.turns:
        requests = ledger.requests(entry.get("turn"))
        total += sum(r.bytes for r in requests)
        turn = str(entry.get("turn") or "")
        number += not turn.startswith("/")  # a command's own call (``/compact``) is shown by its name
        lines.append(f"{turn.split()[0] if turn.startswith('/') else f'turn {number}'}: {brief(requests)}")
        for r in requests:
            bits = [f"{r.at[11:19]} {r.api} {size(r.bytes)} (~{r.tokens:,} tokens)"]
            if r.results:
                bits.append("results " + ", ".join(f"{tool} {size(chars)}" for tool, chars in r.results))
            if r.files:
                bits.append("files " + ", ".join(f"{path} {size(n)}" for path, n in r.files))
            if r.variables:
                bits.append(
                    "values of "
                    + ", ".join(f"{v[0]} ({v[1]:,} × {v[2]}: {', '.join(map(str, v[3]))})" for v in r.variables)
                )
            if r.images:
                bits.append(f"{_count(r.images, 'image')} {size(r.image_bytes)}")
            if r.masked or r.redacted:
                bits.append(f"{r.masked:,} masked, {r.redacted:,} redacted")
            lines.append("  " + " · ".join(bits))
    lines.append(f"in all: {size(total)} in {sum(len(t.get('requests') or []) for t in ledger.turns):,} requests")
    return "\n".join(lines)


__all__ = ["Ledger", "Request", "Seen", "brief", "command_entry", "encoded", "request_of", "size", "table"]
