"""A turn as it is shown: events folded into a log, rendered as Markdown, plain text, HTML and the
``application/vnd.shiro.turn+json`` bundle.

The log is the single picture of a turn that every view draws from (the blocking text view, the live
widgets, the static bundle saved in the notebook). A tool row carries the call's full arguments (shown
with their line breaks when the row is expanded) and what the call displayed (:mod:`.outputs`), drawn
under the row.

The model's text is never trusted, whatever the notebook's trust (a notebook the user ran or saved is
trusted, and JupyterLab does not sanitize a trusted output): the answer, a tool row's text, notices and
errors are made inert in every rendering here (see "the model's text is never trusted" below). Only what
the user's approved code displayed (:mod:`.outputs`) keeps the trust of a cell output.
"""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from ..events import (
    Event,
    Notice,
    ReasoningDelta,
    TextDelta,
    ToolEnd,
    ToolProgress,
    ToolStart,
    TurnEnd,
    Usage,
)
from ..text import first_line, one_line
from . import outputs


@dataclass
class ToolRow:
    call_id: str
    name: str
    args: str  # short form, one line
    status: str = "running"  # running | ok | error
    seconds: float | None = None
    output: str = ""
    code: str = ""  # the arguments in full (the code, the command), line breaks kept
    started: float | None = None  # time.monotonic() when the call started (the live row's elapsed time)
    outputs: list[dict[str, Any]] = field(default_factory=list)  # what the call displayed
    progress: str = ""  # the running call's last progress line


@dataclass
class TurnLog:
    entries: list[Any] = field(default_factory=list)  # str (text), ToolRow, Notice
    reasoning_chars: int = 0
    end: TurnEnd | None = None

    def feed(self, event: Event) -> bool:
        """Fold one event in; returns True when the visible picture changed."""
        if isinstance(event, TextDelta):
            if self.entries and isinstance(self.entries[-1], str):
                self.entries[-1] += event.text
            else:
                self.entries.append(event.text)
            return True
        if isinstance(event, ReasoningDelta):
            self.reasoning_chars += len(event.text)
            return False
        if isinstance(event, ToolStart):
            call = event.call
            self.entries.append(
                ToolRow(
                    call.call_id,
                    call.name,
                    short_args(call.arguments),
                    code=full_args(call.arguments),
                    started=time.monotonic(),
                )
            )
            return True
        if isinstance(event, ToolProgress):
            for row in reversed(self.entries):
                if isinstance(row, ToolRow) and row.call_id == event.call_id and row.status == "running":
                    row.progress = one_line(event.text, 120)
                    return True
            return False
        if isinstance(event, ToolEnd):
            for row in reversed(self.entries):
                if isinstance(row, ToolRow) and row.call_id == event.call.call_id:
                    row.status = "error" if event.result.is_error else "ok"
                    row.seconds = event.seconds
                    row.output = event.result.output
                    row.outputs = list(event.result.displays)
                    break
            return True
        if isinstance(event, Notice):
            self.entries.append(event)
            return True
        if isinstance(event, TurnEnd):
            self.end = event
            return True
        return False

    @property
    def answer(self) -> str:
        texts = [e for e in self.entries if isinstance(e, str)]
        return texts[-1] if texts else ""


def short_args(arguments: str, limit: int = 80) -> str:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        value = arguments
    if isinstance(value, dict):
        if len(value) == 1 or "code" in value or "command" in value:
            key = "code" if "code" in value else "command" if "command" in value else next(iter(value), "")
            text = str(value.get(key, ""))
        else:
            text = ", ".join(f"{k}={v!r}" for k, v in value.items() if v is not None)
    else:
        text = str(value)
    return one_line(text, limit)


def full_args(arguments: str) -> str:
    """The arguments as a person reads them: the code or command itself, else indented JSON."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return arguments
    if isinstance(value, dict):
        for key in ("code", "command"):
            if isinstance(value.get(key), str):
                return str(value[key])
        return json.dumps({k: v for k, v in value.items() if v is not None}, indent=2, ensure_ascii=False)
    return str(value)


def refusal_line(row: ToolRow) -> str:
    """The first line of an error result: whole for a refusal (it says how to allow the call), else cut."""
    if row.output.startswith("Error: not approved"):
        return first_line(row.output, 10_000)
    return first_line(row.output, 160)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _row_line(row: ToolRow, markdown: bool) -> str:
    mark = {"running": "…", "ok": "✓", "error": "✗"}[row.status]
    bits = [row.status if row.status != "ok" else "ok"]
    if row.seconds is not None:
        bits.append(_duration(row.seconds))
    elif row.status == "running" and row.started is not None:
        bits.append(f"{time.monotonic() - row.started:.0f} s")
    if row.status == "running" and row.progress:
        bits.append(inert_line(row.progress) if markdown else row.progress)
    if markdown:  # the name, the arguments and the progress come from the model or a server: inert
        name = md_code(f"{mark} {row.name}")
        return f"{name} {md_code(row.args)} · {' · '.join(bits)}" if row.args else f"{name} · {' · '.join(bits)}"
    return f"{mark} {row.name}({row.args}) · {' · '.join(bits)}"


def footer(usage: Usage, extra: str = "") -> str:
    cost = f" · ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
    text = f"{usage.input_tokens:,} in · {usage.output_tokens:,} out tokens{cost}"
    return f"{text} · {extra}" if extra else text


# -- the model's text is never trusted -------------------------------------------------------------------
# JupyterLab and Notebook 7 render a trusted output's text/markdown without sanitizing it, and run its
# <script>s. So model text goes into Markdown with nothing a renderer would turn into markup: every `<` that
# could open a tag (`<` + a letter, `/`, `!` or `?`) becomes `&lt;` (text in Markdown, and in raw HTML too),
# a code span holding one becomes `<code>` with its characters as entities (shown the same), and a link
# target whose scheme is not http, https or mailto (entities and escapes decoded first) gets a leading `#`
# (a fragment: inert). Only fenced code blocks keep their `<`: those the scan is sure every renderer reads
# as code (see `_FenceScan`); once unsure, it escapes the rest of the text, code blocks included.

_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_LINK_TARGET = re.compile(r"\](?:\(|:)[ \t]*(?:\r?\n[ \t]*)?<?")
_PLAIN_SCHEMES = frozenset({"http", "https", "mailto"})
_IMAGE_DATA = re.compile(r"data:image/(?:png|gif|jpeg|webp)[;,]")
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
_CONTAINER_FENCE = re.compile(r"^[ \t]*(?:(?:>|[-*+]|\d{1,9}[.)])[ \t]*)+(`{3,}|~{3,})")


def plain_url(url: str) -> bool:
    """May the model's text link to (or show an image from) ``url``? Relative URLs, http, https and mailto,
    and inline PNG/GIF/JPEG/WebP images; read as a browser reads an attribute (entities and Markdown
    escapes decoded, controls and spaces ignored, any case), so ``JaVa&#115;cript&colon;`` is refused."""
    u = _BACKSLASH_ESCAPE.sub(r"\1", html.unescape(url))
    u = re.sub(r"[\x00-\x20\x7f]", "", u).lower()
    match = re.match(r"([a-z][a-z0-9+.\-]*):", u)
    if match is None:
        return True
    if match.group(1) == "data":
        return _IMAGE_DATA.match(u) is not None
    return match.group(1) in _PLAIN_SCHEMES


def _inert_targets(text: str) -> str:
    """A ``#`` before each link target (``[x](…)``, ``[x]: …``) that is not a plain URL."""
    out: list[str] = []
    last = 0
    for m in _LINK_TARGET.finditer(text):
        start = m.end()
        target = re.match(r"[^\s)>]*", text[start:])
        if target and not plain_url(target.group(0)):
            out.append(text[last:start])
            out.append("#")
            last = start
    out.append(text[last:])
    return "".join(out)


def _entities(text: str) -> str:
    """Every ASCII punctuation character as a numeric entity: inert as Markdown and as HTML."""
    return "".join(f"&#{ord(c)};" if c.isascii() and not c.isalnum() and c != " " else c for c in text)


def md_code(text: str) -> str:
    """``text`` as inline code that shows exactly ``text`` and can hold no markup: a backtick span when that
    is safe, else ``<code>`` with entities."""
    flat = " ".join(text.splitlines())
    if "`" in flat or _TAG_OPEN.search(flat) or not flat.strip():
        return f"<code>{_entities(flat)}</code>" if flat.strip() else ""
    return f"`{flat}`"


def _inert_spans(line: str) -> str:
    """One line of prose: `<` escaped, code spans holding a tag opener rewritten (:func:`md_code`)."""
    out: list[str] = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\" and i + 1 < n and line[i + 1] == "`":  # an escaped backtick opens no span
            out.append(line[i : i + 2])
            i += 2
        elif c == "`":
            run = len(line[i:]) - len(line[i:].lstrip("`"))
            closer = re.compile(rf"(?<!`){'`' * run}(?!`)").search(line, i + run)
            if closer is None:
                out.append("`" * run)
                i += run
                continue
            content = line[i + run : closer.start()]
            if _TAG_OPEN.search(content):
                if content.startswith(" ") and content.endswith(" ") and content.strip():
                    content = content[1:-1]
                out.append(f"<code>{_entities(content)}</code>")
            else:
                out.append(line[i : closer.end()])
            i = closer.end()
        elif c == "<" and _TAG_OPEN.match(line, i):
            out.append("&lt;")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _inert_prose(text: str) -> str:
    return "".join(_inert_spans(line) for line in _inert_targets(text).splitlines(keepends=True))


def _columns(lead: str) -> int:
    col = 0
    for c in lead:
        col = col + 4 - col % 4 if c == "\t" else col + 1
    return col


class _FenceScan:
    """Which lines of the model's Markdown are inside a fenced code block, as sure as any renderer
    (CommonMark, marked in JupyterLab, markdown-it) would agree: a fence opens at a line of 3+ backticks or
    tildes indented 0-3 spaces (4+ only after a blank line: an indented code block then, or a fence in a
    list item — code either way), and closes at a closing fence indented at most as far as it, up to 3.
    A line that could end it for one renderer and not another (less indented: a list item may have ended;
    a fence behind a list marker or `>`; a closing fence marked alone accepts; tabs) makes the scan unsure,
    and the rest of the text is then prose, escaped."""

    def __init__(self) -> None:
        self.fence: tuple[str, int, int] | None = None  # (character, length, indentation)
        self.unsure = False
        self.blank_before = True

    def inside(self, line: str) -> bool | None:
        """True: a line of code (kept as is); False: prose; None: a fence line (kept as is)."""
        body = line.rstrip("\r\n")
        blank = not body.strip()
        try:
            if self.unsure:
                return False
            lead = body[: len(body) - len(body.lstrip(" \t"))]
            stripped, indent = body[len(lead) :], _columns(lead)
            if self.fence is not None:
                return self._in_fence(stripped, lead, indent, blank)
            m = _FENCE.match(body)
            if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                if "\t" in lead or (indent > 3 and not self.blank_before):
                    self.unsure = True
                    return False
                self.fence = (m.group(2)[0], len(m.group(2)), indent)
                return None
            if _CONTAINER_FENCE.match(body):
                self.unsure = True
            return False
        finally:
            self.blank_before = blank

    def _in_fence(self, stripped: str, lead: str, indent: int, blank: bool) -> bool | None:
        assert self.fence is not None
        char, length, opened = self.fence
        if blank:
            return True
        closing = re.fullmatch(rf"{re.escape(char)}{{{length},}}[ \t]*", stripped) is not None
        closing_in_marked = re.match(rf"{re.escape(char * length)}[~`]*[ \t]*$", stripped) is not None
        if indent < opened or "\t" in lead:
            self.unsure, self.fence = True, None
            return False
        if closing and opened <= indent <= max(3, opened):
            self.fence = None
            return None
        if (closing or closing_in_marked) and indent <= opened + 3:
            self.unsure, self.fence = True, None
            return False
        return True

    def close(self) -> str:
        """The closing fence to add when the text ended inside a block ('' otherwise)."""
        if self.fence is None:
            return ""
        char, length, opened = self.fence
        return " " * opened + char * length


#: what starts math for JupyterLab, which takes math out of the Markdown before parsing it (up to a blank line)
_MATH = re.compile(r"\$|\\\\[(\[]|\\begin\{")


def inert_markdown(text: str) -> str:
    """The model's Markdown with nothing any renderer would run or turn into markup; ordinary Markdown
    (emphasis, lists, tables, code, links to http/https/mailto) unchanged."""
    scan = _FenceScan()
    # JupyterLab lifts `$…$` (and \\( \\[ \\begin) out of the source before Markdown sees it, across
    # single line breaks: math around a fence line would hide it from the parser. A blank line before each
    # fence and after it stops that (math never crosses one); only added when the text has such delimiters.
    math = _MATH.search(text) is not None
    out: list[str] = []
    prose: list[str] = []
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        kind = scan.inside(line)
        if kind is False:
            prose.append(line)
            continue
        out.append(_inert_prose("".join(prose)))
        prose = []
        if kind is None:  # a fence line: its info string is text in an attribute; escape it all the same
            if math and index > 0 and lines[index - 1].strip() and scan.fence is not None:
                out.append("\n")
            out.append(_TAG_OPEN.sub("&lt;", line).replace("$", "\\$"))
            if math and scan.fence is None and index + 1 < len(lines) and lines[index + 1].strip():
                out.append("\n")
        else:
            out.append(line)
    out.append(_inert_prose("".join(prose)))
    end = scan.close()
    if end:  # so that no block runs on into what follows this text
        out.append(("" if "".join(out).endswith("\n") else "\n") + end)
    return "".join(out)


def inert_line(text: str) -> str:
    """A one-line piece of model text (a notice, an error, a tool's progress) for a Markdown line: on one
    line, so it can open no block, and inert like :func:`inert_markdown`'s prose."""
    return _inert_prose(" ".join(text.splitlines()))


_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain_text(text: str) -> str:
    """Model text for a terminal or text/plain: control characters (ESC and the rest, which a terminal would
    obey: colours, cursor moves, hyperlinks, clipboard writes) shown as U+FFFD; line breaks kept."""
    return _CONTROLS.sub("\ufffd", text.replace("\r\n", "\n"))


def to_markdown(log: TurnLog, extra: str = "") -> str:
    """The turn as Markdown. Model text in it is inert (:func:`inert_markdown`, :func:`inert_line`), so a
    trusted notebook's Markdown renderer runs nothing of it; what approved code displayed is kept as is
    (:func:`.outputs.to_markdown`): that code could display script itself, like any cell."""
    out: list[str] = []
    for entry in log.entries:
        if isinstance(entry, str):
            out.append(inert_markdown(entry.strip()))
        elif isinstance(entry, ToolRow):
            line = _row_line(entry, True)
            if entry.status == "error" and entry.output:
                line += f"  \n  ↳ {inert_line(refusal_line(entry))}"
            out.append(line)
            out.extend(outputs.to_markdown(o) for o in entry.outputs)
        else:
            out.append(f"> *{inert_line(entry.text)}*")
    if log.end is not None:
        if log.end.error:
            out.append(f"**shiro:** {inert_line(log.end.error)}")
        elif log.end.reason == "aborted":
            out.append("*stopped by the user*")
        out.append(f"<sub>{inert_line(footer(log.end.usage, extra))}</sub>")
    return "\n\n".join(s for s in out if s)


def to_text(log: TurnLog, extra: str = "") -> str:
    """The turn as plain text, with no control character a terminal would obey (:func:`plain_text`)."""
    out: list[str] = []
    for entry in log.entries:
        if isinstance(entry, str):
            out.append(entry.strip())
        elif isinstance(entry, ToolRow):
            line = _row_line(entry, False)
            if entry.status == "error" and entry.output:
                line += f"\n  ↳ {refusal_line(entry)}"
            out.append("\n".join([line, *(f"  {outputs.describe(o)}" for o in entry.outputs)]))
        else:
            out.append(f"[{entry.text}]")
    if log.end is not None:
        if log.end.error:
            out.append(f"shiro: {log.end.error}")
        elif log.end.reason == "aborted":
            out.append("stopped by the user")
        out.append(footer(log.end.usage, extra))
    return plain_text("\n\n".join(s for s in out if s))


class Throttle:
    """Lets a call through at most every ``interval`` seconds (the last one is flushed by the caller)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last = 0.0

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            return True
        return False


# -- static rendering: what stays in the notebook without a kernel ---------------------------------------
TURN_MIME = "application/vnd.shiro.turn+json"
TURN_FORMAT_VERSION = 1
_OUTPUT_KEEP = 4000  # characters of each tool output kept in the saved bundle


def to_bundle_json(
    log: TurnLog,
    *,
    session_id: str | None = None,
    tasks: list[dict[str, Any]] | None = None,
    context_percent: int | None = None,
    resume: str | None = None,
) -> dict[str, Any]:
    """The turn as ``application/vnd.shiro.turn+json`` (documented in docs/turn-format.md)."""
    entries: list[dict[str, Any]] = []
    budget = outputs.TURN_OUTPUT_BYTES
    for entry in log.entries:
        if isinstance(entry, str):
            entries.append({"type": "text", "text": entry})
        elif isinstance(entry, ToolRow):
            kept, budget = outputs.within_budget(entry.outputs, budget)
            output = (
                entry.output
                if len(entry.output) <= _OUTPUT_KEEP
                else (entry.output[:_OUTPUT_KEEP] + f"\n[... {len(entry.output) - _OUTPUT_KEEP} more characters]")
            )
            entries.append(
                {
                    "type": "tool",
                    "callId": entry.call_id,
                    "name": entry.name,
                    "args": entry.args,
                    "status": entry.status,
                    "seconds": entry.seconds,
                    "output": output,
                    "code": entry.code[:_OUTPUT_KEEP],
                    "outputs": kept,
                }
            )
        else:
            entries.append({"type": "notice", "kind": entry.kind, "text": entry.text})
    data: dict[str, Any] = {"version": TURN_FORMAT_VERSION, "entries": entries}
    if session_id:
        data["sessionId"] = session_id
    if tasks is not None:
        data["tasks"] = tasks
    if log.end is not None:
        u = log.end.usage
        data["usage"] = {"inputTokens": u.input_tokens, "outputTokens": u.output_tokens, "costUsd": u.cost_usd}
        data["end"] = {"reason": log.end.reason, "error": log.end.error}
    if context_percent is not None:
        data["contextPercent"] = context_percent
    if resume:
        data["resume"] = resume
    return data


_MARKDOWN: Any = None


def md_to_html(text: str) -> str:
    """Markdown to HTML with mistune (installed with Jupyter Server's nbconvert), else escaped text. Raw
    HTML is escaped (shown, never injected) and a link or image whose URL is not :func:`plain_url` points
    at ``#harmful-link``, whatever mistune's own rule in the installed version."""
    try:
        import mistune
    except ImportError:
        return f'<pre style="white-space:pre-wrap">{html.escape(text)}</pre>'
    global _MARKDOWN
    if _MARKDOWN is None:

        class Renderer(mistune.HTMLRenderer):
            def safe_url(self, url: str) -> str:
                return str(super().safe_url(url)) if plain_url(url) else "#harmful-link"

        _MARKDOWN = mistune.create_markdown(renderer=Renderer(escape=True), plugins=["table", "strikethrough"])
    return str(_MARKDOWN(text))


def to_html(log: TurnLog, extra: str = "") -> str:
    """A self-contained HTML picture of the turn (GitHub, nbviewer): tool rows expand on click. Model text
    is escaped (:func:`entry_html`); what approved code displayed is kept as a cell output would be."""
    out = ['<div class="shiro-turn">']
    budget = outputs.TURN_OUTPUT_BYTES
    for entry in log.entries:
        out.append(entry_html(entry))
        if isinstance(entry, ToolRow) and entry.outputs:
            kept, budget = outputs.within_budget(entry.outputs, budget)
            out.extend(outputs.to_html(o) for o in kept)
    if log.end is not None:
        if log.end.error:
            out.append(f"<p><strong>shiro:</strong> {html.escape(log.end.error)}</p>")
        elif log.end.reason == "aborted":
            out.append("<p><em>stopped by the user</em></p>")
        out.append(f"<p><sub>{html.escape(footer(log.end.usage, extra))}</sub></p>")
    out.append("</div>")
    return "\n".join(out)


def entry_html(entry: Any) -> str:
    """One log entry as HTML: text as Markdown, a tool row as ``<details>`` (output on expand), a notice.
    Every string from the model or a tool is escaped; the live widgets draw these too."""
    if isinstance(entry, str):
        return md_to_html(entry.strip())
    if isinstance(entry, ToolRow):
        summary = html.escape(_row_line(entry, False))
        code = (
            (
                f'<pre class="shiro-tool-code" style="white-space:pre;overflow:auto;max-height:24em">'
                f"{html.escape(entry.code[:_OUTPUT_KEEP])}</pre>"
            )
            if entry.code
            else ""
        )
        body = html.escape(entry.output[:_OUTPUT_KEEP])
        refusal = (
            f'<div class="shiro-tool-error">↳ {html.escape(refusal_line(entry))}</div>'
            if entry.status == "error" and entry.output
            else ""
        )
        return (
            f'<details class="shiro-tool"><summary><code>{summary}</code></summary>{code}'
            f'<pre style="white-space:pre-wrap;max-height:24em;overflow:auto">{body}</pre></details>{refusal}'
        )
    return f"<blockquote><em>{html.escape(entry.text)}</em></blockquote>"
