"""The answer's checked numbers marked in each rendering of a turn (issue 28).

A number found in a tool output is left as written in Markdown and plain text, and in HTML becomes a link to
its tool row (``#shiro-call-<id>``, :func:`call_anchor`) whose title shows the call and the line of its output
holding the number. A number found nowhere is followed by :data:`MISSING` (⚠) everywhere — in HTML inside a
span whose title says so — and the footer starts with :func:`numbers_line`.

The marks go in *after* the model's text is made inert (:mod:`.sanitize`), never into it: each number's
place is marked in the raw answer with characters of Unicode's Private Use Area (its own pair per number),
the text is made inert or rendered, and only then are those characters replaced — in HTML only where they
stand in text between tags (a number inside an image's ``alt`` or a link's title gets no mark: a tag there
would break the attribute; a number a tag splits still gets its ⚠ where it ends). A number in inline code is marked after the code span in Markdown and text, so
the marker does not read as part of the code.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..numbers.turn_check import not_found_line
from .sanitize import inert_markdown, md_to_html

MISSING = "⚠"
MISSING_TITLE = "not found in this turn's outputs"
_LIMIT = 3200  # numbers marked in one answer: U+E000 + k opens number k, U+E000 + 3200 + k closes it
_OPEN, _CLOSE = 0xE000, 0xE000 + _LIMIT
_TAG = re.compile(r"<[^>]*>")  # the HTML is mistune's with raw HTML escaped: every "<" opens a real tag
_LINK_OPEN = re.compile(r"<a[\s>]", re.I)
_LINK_CLOSE = re.compile(r"</a\s*>", re.I)


def call_anchor(call_id: str) -> str:
    """The HTML id of a tool row: ``shiro-call-`` and the call id, any character but letters, digits,
    ``-`` and ``_`` written ``_`` (an id and a URL fragment alike)."""
    return "shiro-call-" + re.sub(r"[^A-Za-z0-9_-]", "_", call_id)


def numbers_line(numbers: Sequence[dict[str, Any]] | None) -> str | None:
    """The footer's first part: "⚠ 2 numbers not found in this turn's outputs", or None."""
    line = not_found_line(numbers or [])
    return f"{MISSING} {line}" if line else None


def aligned(answer: str, numbers: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The numbers with ``start``/``end`` checked against ``answer`` (the log's own answer text): kept when
    ``answer[start:end]`` is the number's text, else the next place the text stands, else None (the number
    then counts in the footer but is not marked)."""
    out: list[dict[str, Any]] = []
    last = 0
    for number in numbers:
        n = dict(number)
        text, start, end = str(n.get("text") or ""), n.get("start"), n.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and text and answer[start:end] == text):
            at = answer.find(text, last) if text else -1
            start, end = (at, at + len(text)) if at >= 0 else (None, None)
        n["start"], n["end"] = start, end
        if end is not None:
            last = end
        out.append(n)
    return out


def _placed(numbers: Sequence[dict[str, Any]], size: int) -> list[tuple[int, int, dict[str, Any]]]:
    """Numbers with offsets inside the text, in order, none overlapping the one before, at most _LIMIT."""
    out: list[tuple[int, int, dict[str, Any]]] = []
    last = 0
    for n in sorted((n for n in numbers if isinstance(n.get("start"), int)), key=lambda n: int(n["start"])):
        start, end = int(n["start"]), int(n["end"])
        if last <= start < end <= size and len(out) < _LIMIT:
            out.append((start, end, n))
            last = end
    return out


def _after_code(text: str, start: int, end: int) -> int:
    """Where a mark after the number goes: after the closing backticks when the number is alone in a code
    span (`` `0.1314` ``), else right after it."""
    j = end
    while j < len(text) and text[j] in " \t":
        j += 1
    i = start
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    if not (j < len(text) and text[j] == "`" and i > 0 and text[i - 1] == "`"):
        return end
    while j < len(text) and text[j] == "`":
        j += 1
    return j


def _ranges(used: int) -> str:
    """The characters marking ``used`` numbers, as the inside of a character class."""
    return f"{chr(_OPEN)}-{chr(_OPEN + used - 1)}{chr(_CLOSE)}-{chr(_CLOSE + used - 1)}"


def _sentinels(text: str, placed: list[tuple[int, int, dict[str, Any]]], *, wrap: bool) -> str:
    """``text`` with number k's place marked: ``wrap``, an opening and a closing character around it (HTML);
    else one closing character where its ⚠ goes, for the numbers not found. The answer's own characters in
    the ranges used become U+FFFD first, so none of them is taken for a mark."""
    if not placed:
        return text
    text = re.sub(f"[{_ranges(len(placed))}]", "\ufffd", text)
    inserts: list[tuple[int, str]] = []
    for k, (start, end, n) in enumerate(placed):
        if wrap:
            inserts += [(start, chr(_OPEN + k)), (end, chr(_CLOSE + k))]
        elif not n.get("found"):
            inserts.append((_after_code(text, start, end), chr(_CLOSE + k)))
    out, last = [], 0
    for at, mark in sorted(inserts, key=lambda x: x[0]):
        out += [text[last:at], mark]
        last = at
    out.append(text[last:])
    return "".join(out)


def _closes_to_missing(text: str, used: int) -> str:
    return re.sub(f"[{chr(_CLOSE)}-{chr(_CLOSE + used - 1)}]", MISSING, text) if used else text


def markdown(answer: str, numbers: Sequence[dict[str, Any]]) -> str:
    """The answer as inert Markdown (:func:`.sanitize.inert_markdown`), each number not found followed by ⚠."""
    placed = _placed(numbers, len(answer))
    return _closes_to_missing(inert_markdown(_sentinels(answer, placed, wrap=False).strip()), len(placed))


def text(answer: str, numbers: Sequence[dict[str, Any]]) -> str:
    """The answer as plain text (stripped, as the text view shows it), each number not found followed by ⚠."""
    placed = _placed(numbers, len(answer))
    return _closes_to_missing(_sentinels(answer, placed, wrap=False).strip(), len(placed))


def _found_open(n: dict[str, Any], calls: Mapping[str, str], in_link: bool) -> tuple[str, str]:
    call_id = str(n.get("call_id") or "")
    where, line = calls.get(call_id, "a tool call"), n.get("line")
    title = html.escape(f"from {where}: {line}" if line else f"from {where}")
    if in_link or call_id not in calls:  # no link inside a link
        return f'<span class="shiro-number" title="{title}">', "</span>"
    href = html.escape(call_anchor(call_id))
    style = "color:inherit;text-decoration:underline dotted"
    return f'<a class="shiro-number" href="#{href}" title="{title}" style="{style}">', "</a>"


def _missing_span(text: str) -> str:
    style = "text-decoration:underline dotted #b8860b"
    return f'<span class="shiro-number-missing" title="{MISSING_TITLE}" style="{style}">{text}{MISSING}</span>'


def _wrapped(segment: str, placed: list[tuple[int, int, dict[str, Any]]], calls: Mapping[str, str], link: bool) -> str:
    """A run of text between tags with its numbers marked: each pair of a number's characters around it
    becomes its mark; a closing character alone (the number split by a tag — ``1<em>6</em>.4 %``, markup
    between its digits) becomes the ⚠ of a number found nowhere, so no split hides it."""

    def one(m: re.Match[str]) -> str:
        k = ord(m.group(1)) - _OPEN
        if ord(m.group(3)) - _CLOSE != k:
            return m.group(2) + m.group(3)  # the closing character is seen again below
        n = placed[k][2]
        if n.get("found"):
            opening, closing = _found_open(n, calls, link)
            return f"{opening}{m.group(2)}{closing}"
        return _missing_span(m.group(2))

    def lone(m: re.Match[str]) -> str:
        return "" if placed[ord(m.group()) - _CLOSE][2].get("found") else _missing_span("")

    used = len(placed)
    opens, closes = f"{chr(_OPEN)}-{chr(_OPEN + used - 1)}", f"{chr(_CLOSE)}-{chr(_CLOSE + used - 1)}"
    paired = re.sub(f"([{opens}])([^{_ranges(used)}]*)([{closes}])", one, segment)
    return re.sub(f"[{closes}]", lone, paired)


def html_answer(answer: str, numbers: Sequence[dict[str, Any]], calls: Mapping[str, str]) -> str:
    """The answer as HTML (:func:`.sanitize.md_to_html`, raw HTML escaped) with its numbers marked: a found
    one links to its tool row, titled ``from <calls[call_id]>: <the output line>``; one found nowhere is a
    span titled "not found in this turn's outputs", followed by ⚠. ``calls``: call id -> how a title
    names the call (``call 1 (python)``)."""
    placed = _placed(numbers, len(answer))
    rendered = md_to_html(_sentinels(answer, placed, wrap=True).strip())
    if not placed:
        return rendered
    out: list[str] = []
    pos, links = 0, 0  # links: how many <a> are open here (a number in a link's text is not made a link)
    for tag in _TAG.finditer(rendered):
        out += [_wrapped(rendered[pos : tag.start()], placed, calls, links > 0), tag.group()]
        if _LINK_OPEN.match(tag.group()):
            links += 1
        elif _LINK_CLOSE.match(tag.group()):
            links = max(links - 1, 0)
        pos = tag.end()
    out.append(_wrapped(rendered[pos:], placed, calls, links > 0))
    return re.sub(f"[{_ranges(len(placed))}]", "", "".join(out))  # a mark in a tag: dropped


__all__ = ["MISSING", "aligned", "call_anchor", "html_answer", "markdown", "numbers_line", "text"]
