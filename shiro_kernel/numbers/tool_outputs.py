"""What the tool outputs hold: the numbers of a turn's tool results, parsed once (issue 28).

:func:`result_sources` says which texts of a result are read: its output, then each display's text
(``text/plain`` unless the output already holds it, the cell text of ``text/html``, Markdown, LaTeX, JSON;
images, SVG and chart specs are not read). :class:`OutputIndex` holds every number of those texts, fed one
result at a time as the calls end, so the check at the end of the turn only looks claims up; it says which
values lie either side of a number (:meth:`OutputIndex.around`) and where a value stands
(:meth:`OutputIndex.where`). How a value gives a claim is :mod:`.matching`'s.

Integers of one or two digits in outputs are not read (row labels, parts of dates, counts: they would
anchor a made-up "3 %" to the row labelled 3); "3.0" and "3%" are. Values are unsigned, as the answer's are.

Pure: imports nothing of the project but :mod:`shiro_kernel.transcript`; every scan is one regular expression pass.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

from ..transcript import ToolResultPart

# Every number of an output, unsigned: digits, thousands groups (1,234,567 / 1 234 567 / 1_234_567 /
# 1'234'567), a fraction, an exponent (1.23e+06), a % after it. Not glued to a letter: df3, float64 and hex
# ids add nothing. The lookbehind sits after the first digit so the engine still skips non-digits at C speed.
_OUT_NUMBER = re.compile(
    r"[0-9](?<![A-Za-z_0-9][0-9])[0-9]*(?:[,_' \u00a0\u202f\u2009][0-9]{3}(?![0-9]))*(?:\.[0-9]+)?"
    r"(?:[eE][+-]?[0-9]+)?%?"
)
_OUT_SEP = re.compile(r"[,_' \u00a0\u202f\u2009]")
_SMALL = frozenset(f"{i}" for i in range(100)) | frozenset(f"{i:02d}" for i in range(10))
_ODD = re.compile(r"[, '\u00a0\u202f\u2009%]")  # what float() does not take (it takes 1_234)
_HTML_DROP = re.compile(r"(?is)<(style|script)\b.*?</\1\s*>|<!--.*?-->")
_HTML_ROW = re.compile(r"(?i)</tr\s*>|<br\s*/?>")
_HTML_TAG = re.compile(r"<[^>]*>")
_SPACES = re.compile(r"\s+")
_TEXT_MIMES = ("text/plain", "text/markdown", "text/latex", "application/json")


def _joined(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else json.dumps(value, default=str)


def html_text(html: str) -> str:
    """The text of an HTML display (a DataFrame's table): tags dropped, one line per table row."""
    text = _SPACES.sub(" ", _HTML_DROP.sub(" ", html))
    return _HTML_TAG.sub(" ", _HTML_ROW.sub("\n", text))


def result_sources(result: ToolResultPart) -> list[tuple[str, str]]:
    """The texts of one tool result that numbers are looked up in, as ``(call_id, text)``: its output,
    then each display's text — ``text/plain`` unless the output already holds it, the cell text of
    ``text/html``, Markdown, LaTeX, JSON. Images, SVG and chart specs are not read: their numbers are
    drawing coordinates, not values anyone reads."""
    texts = [result.output]
    for display in result.displays:
        data = display.get("data") or {}
        for mime in _TEXT_MIMES:
            if mime in data:
                text = _joined(data[mime])
                if mime != "text/plain" or text not in result.output:
                    texts.append(text)
        if "text/html" in data:
            texts.append(html_text(_joined(data["text/html"])))
    return [(result.call_id, text) for text in texts if text]


def _numbers_in(text: str) -> dict[float, str]:
    """Each distinct unsigned value of ``text`` and one way it is written there, parsed in bulk (this is the
    per-megabyte cost of the check). Integers of one or two digits are left out, as on the answer's side:
    in an output they are row labels, parts of dates and times, counts, and would anchor a made-up "3 %"
    to the row labelled 3. Written with a decimal point or a % they count ("3.0", "3%")."""
    tokens = set(_OUT_NUMBER.findall(text))
    tokens.difference_update(_SMALL)
    try:
        return dict(zip(map(float, tokens), tokens))
    except ValueError:  # a %, or grouped with , ' or spaces
        odd = set(filter(_ODD.search, tokens))
    plain = tokens - odd
    out = dict(zip(map(float, plain), plain))
    for token in odd:  # the whole, and each piece: a comma or a space may part CSV fields or two columns
        number = token.rstrip("%")
        out.setdefault(float(_OUT_SEP.sub("", number)), number)
        for piece in _OUT_SEP.split(number):
            if len(piece) > 2 or "." in piece:
                out.setdefault(float(piece), piece)
    return out


class OutputIndex:
    """The numbers of a turn's tool outputs, parsed once. Add each result as it arrives (one regular
    expression pass over its texts, its values merged into one sorted list); looking a claim up
    (:func:`.matching.look_up`) then costs a few binary searches, however large the outputs."""

    def __init__(self, results: Iterable[ToolResultPart] = ()) -> None:
        self._texts: list[tuple[str, str]] = []  # (call_id, text), in the order added
        self._tokens: list[dict[float, str]] = []  # per text: value -> how it is written there
        self._values: list[float] = []  # every text's values, sorted (a value held by two texts is twice)
        self._first: dict[float, int] = {}  # value -> the first text holding it
        for result in results:
            self.add_result(result)

    def add_result(self, result: ToolResultPart) -> None:
        self._add(result_sources(result))

    def add_text(self, call_id: str, text: str) -> None:
        self._add([(call_id, text)])

    def _add(self, sources: list[tuple[str, str]]) -> None:
        for call_id, text in sources:
            tokens = _numbers_in(text)
            self._texts.append((call_id, text))
            self._tokens.append(tokens)
            at = len(self._tokens) - 1
            self._first.update(dict.fromkeys([v for v in tokens if v not in self._first], at))  # the first text wins
            self._values.extend(tokens)
        self._values.sort()  # a sorted run and a short new one: mostly a merge

    def around(self, value: float) -> list[float]:
        """The output values either side of ``value``: the greatest below it and the least at or above it
        (fewer at the ends) — the only candidates for the nearest one, found by one binary search."""
        i = bisect_left(self._values, value)
        return self._values[max(i - 1, 0) : i + 1]

    def where(self, value: float) -> tuple[str, str]:
        """Where an output value stands: the call whose output holds it first, and the line of that output
        it is on (spaces collapsed, cut to 200 characters) for a hover."""
        at = self._first[value]
        call_id, text = self._texts[at]
        return call_id, _line_of(text, self._tokens[at][value])


def _line_of(text: str, token: str) -> str:
    """The line of ``text`` holding ``token`` where it first stands alone (not the 34 of 1234; looked for
    among its first 64 occurrences, else the first), spaces collapsed, cut to 200 characters."""
    at = text.find(token)
    for _ in range(64):
        if at < 0:
            break
        before = text[at - 1] if at else ""
        after = text[at + len(token) : at + len(token) + 1]
        if not (before and (before.isalnum() or before in "._")) and not after.isdigit():
            break
        at = text.find(token, at + 1)
    if at < 0:
        at = text.find(token)
    start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
    line = " ".join(text[start : end if end >= 0 else len(text)].split())
    return line if len(line) <= 200 else line[:199] + "…"


__all__ = ["OutputIndex", "html_text", "result_sources"]
