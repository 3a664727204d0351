"""Numbers of an answer, anchored to the tool outputs they came from (issue 28).

When a turn ends, each number the answer states as a result (integers of 3+ digits, decimals, percentages,
currency amounts, numbers with thousands separators or a scale such as "1.2 million") is looked up in what
the turn's tools returned: their output text and what they displayed (text, HTML tables, Markdown). A
number nobody computed is then visible as such, instead of being read as a result.

* :func:`find_numbers` — the numbers to check in a Markdown answer, as :class:`Claim` (text as written,
  offsets, value, the precision shown).
* :class:`OutputIndex` — the numbers of the outputs, parsed once: add each result as it arrives, so the
  check at the end of the turn only looks claims up (:func:`result_sources` says what is read).
* :func:`anchor` / :func:`check_turn` — claim by claim, found or not, in which call, on which line;
  :func:`check_turn` returns the ``numbers`` list of the turn bundle.
* :func:`not_found_line` / :func:`model_note` — the one line for the user, the note for the model's next turn.

How an output number *x* matches a claim (values compared unsigned, see :func:`_intervals`): *x* rounded
(half-up or half-even) or cut to the digits the answer shows gives the claim's number; for a percentage,
*x* may also be the fraction (0.131417 gives 13.1 %); for a scaled claim ("1.2 million", "$3M", "5k"),
*x* may be the whole value (1,234,567) or the number before the scale (an output already in millions).
Integers of one or two digits in outputs are not read (row labels, parts of dates, counts: they would
anchor a made-up "3 %" to the row labelled 3); "3.0" and "3%" are.

The answer is read as a reader sees it rendered (:func:`visible_text`): characters no one sees (zero-width
spaces, joiners, soft hyphens, bidirectional controls…) are dropped, character references decoded
(``&#49;6.4 %`` shows as 16.4 %), and markup that renders as nothing between the characters of a number
(``1<b></b>6.4``, ``1**6**.4``, a backslash escape) left out; the claim's text and offsets are still those
of the answer as written, so the renderers mark it there.

Not checked (never a :class:`Claim`): years (1900-2100 written as four bare digits), list positions ("1."
at the start of a line, "#3", "step 2", "row 1,200", "Python 3.11"), small counts (integers under 100
with no decimals, %, currency or scale), dates and times (2024-03-01, 03/01/2024, 12:30), versions and
addresses (3.11.7), identifiers (x2, df3, hex ids, ordinals), thresholds ("p < 0.05"), numbers in code
blocks, URLs and HTML tags (but an ``alt`` text, which the labextension shows as the text of the image's
link, is read), and (:func:`check_turn`) numbers of the user's prompt.

Pure: imports nothing of the project but :mod:`.transcript`; every scan is a linear regular expression.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..transcript import ToolResultPart

# -- reading an answer ------------------------------------------------------------------------------------

_GAPS = " \u00a0\u202f\u2009"  # a space, or the no-break and thin spaces numbers are typeset with
_GAP = f"[{_GAPS}]"
# A number starts where it is not glued to a word, a decimal, a path, a time or a tag (x2, 3.11.7's 7,
# data/2024, 12:30's 30, #3): the lookbehind, placed after the first digit so that the engine skips text
# at C speed. Dates, times and versions are matched whole first, so none of their parts becomes a number.
# Every alternative is bounded by the run of digits it starts on: no backtracking blow-up.
_NUMBER = re.compile(
    r"\d(?<![\w.,/\\:#@]\d)(?:"
    r"(?P<skip>\d{3}-\d{1,2}(?:-\d{1,2})?(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?"  # 2024-03, 2024-03-01T12:30
    r"|\d?[/.]\d{1,2}[/.]\d{2,4}"  # 03/01/2024, 1.3.2024
    r"|\d*(?::\d{2})+(?:\.\d+)?"  # 12:30, 1:02:03.5
    r"|\d*(?:\.\d+){2,})(?![\w.])"  # 3.11.7, 10.0.0.1
    r"|(?P<int>\d{0,2}(?P<sep>[,\u00a0\u202f\u2009])\d{3}(?:(?P=sep)\d{3})*(?!\d)|\d*)"
    r"(?P<frac>\.\d+)?(?P<exp>[eE][+\-−]?\d+)?)"
)
_AFTER = re.compile(
    r"(?P<glued>[A-Za-z_]\w*)"
    rf"|{_GAP}?(?P<pct>\\?%)"
    rf"|{_GAP}(?P<word>(?i:percent|per cent|percentage points?|pct|thousand|million|billion|trillion"
    r"|pp|mln|bln|mn|bn|tn))(?!\w)"
)
_CURRENCY_AFTER = re.compile(rf"{_GAP}?(?:[€£¥₹]|(?:USD|EUR|GBP|JPY|CHF|CNY|INR)(?!\w))")
_SYMBOLS = "$€£¥₹"
_CODES = ("USD", "EUR", "GBP", "JPY", "CHF", "CNY", "INR")
_SIGNS = "+-−"
# a glued "m" is a million only after a currency ("£1.2m"); else metres or minutes
_SCALES = {
    **dict.fromkeys(("k", "thousand"), 1e3),
    **dict.fromkeys(("m", "mn", "mln", "million"), 1e6),
    **dict.fromkeys(("b", "bn", "bln", "billion"), 1e9),
    **dict.fromkeys(("tn", "trillion"), 1e12),
}
_GLUED_SCALES = ("k", "K", "M", "B", "bn", "mn", "tn", "mln", "bln")
_PERCENT_WORDS = ("percent", "per cent", "pct", "pp", "percentage point", "percentage points")
_ORDINALS = ("st", "nd", "rd", "th")
# The word before a number that makes it a position, not a quantity: "step 2", "row 1,200", "Python 3.11".
# (Written as words, one string: a list literal of 47 quoted words would take 47 lines.)
_POSITION_WORDS = frozenset(
    "step item row rows line lines cell column col figure fig fig. table section chapter page part case "  # noqa: SIM905
    "option question issue pr ticket no. nr. index position rank top round phase stage epoch iteration "
    "version release v python pandas numpy polars matplotlib sklearn scikit-learn ipython jupyterlab node".split()
)
_RANGE_START = re.compile(r"[0-9][0-9,.]*[ \u00a0]?(?:-|–|to|through)[ \u00a0]?\Z")
_NAME_RUN = re.compile(r"[A-Za-z][\w.]*(?:-[\w.]+)*-\Z")
_THRESHOLDS = ("<", ">", "≤", "≥", "<=", ">=")
# Masked before reading: fenced code (literals are the code's inputs, not its results), URLs, link
# targets and HTML tags. Inline code is masked too unless it holds one number alone (`0.1314`): a lone
# number in backticks is a value copied from an output, an expression (`df[df.x > 100]`) is code.
# The (?!`) after a fence's backticks keeps the engine from trading them with the info string (quadratic).
_MASK = re.compile(
    r"^[ \t]{0,3}(?P<fence>```+(?!`)|~~~+(?!~))[^\n]*\n(?:.*?\n)??[ \t]{0,3}(?P=fence)[ \t]*$"
    r"|^[ \t]{0,3}(?:```+(?!`)|~~~+(?!~))[^\n]*(?:\n.*)?\Z"  # a fence never closed runs to the end
    r"|`(?P<code>[^`\n]*)`"
    r"|https?://[^\s)>\]]+|www\.[^\s)>\]]+|\]\([^()\[\]\s]*\)|</?[A-Za-z][^<>\n]*>",
    re.M | re.S,
)
_LONE_NUMBER = re.compile(r"[ \t]*[+\-−]?[$€£¥]?\d[\d,.]*(?:[eE][+\-−]?\d+)?[ \t]?%?[ \t]*")


@dataclass(frozen=True)
class Claim:
    """One number of the answer. ``value`` is unsigned, in the unit written (percent points for a
    percentage, the scale applied: "1.2 million" is 1.2e6); ``decimals`` are the digits shown after the
    point; ``scale`` is 1 or the factor of the word or suffix (1e3, 1e6, ...); ``step`` is one unit of the
    last digit shown, in the value's unit (1.2 million: 1e5; 16.4 %: 0.1; "1,200": 100, see :func:`_step`)."""

    text: str
    start: int
    end: int
    value: float
    decimals: int
    step: float
    percent: bool = False
    scale: float = 1.0
    currency: str = ""


_ALT = re.compile(r"""(?i)\salt\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""")


def _masked(answer: str) -> str:
    def blank(m: re.Match[str]) -> str:
        code = m.group("code")
        if code is not None and _LONE_NUMBER.fullmatch(code):
            return " " + code + " "  # only the backticks go
        out = re.sub(r"[^\n]", " ", m.group())
        if out.startswith(" ") and m.group().startswith("<"):  # a tag: its alt text is shown (as a link's)
            for alt in _ALT.finditer(m.group()):
                value = next(i for i in (1, 2, 3) if alt.group(i) is not None)
                out = out[: alt.start(value)] + alt.group(value) + out[alt.end(value) :]
        return out

    return _MASK.sub(blank, answer)


# -- what the reader sees ---------------------------------------------------------------------------------

# Characters no renderer shows: Unicode's format characters (Cf: zero-width space and joiners, soft hyphen,
# bidirectional controls, word joiner, BOM, tags…) and the invisible ones of other categories (combining
# grapheme joiner, Hangul fillers, Mongolian and other variation selectors). tests/test_numbers_visible.py
# checks the list holds every Cf character of this Python's Unicode database.
_INVISIBLE = (
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000110bd"
    "\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001-\U000e01ef"
)
# Wide and small forms of a number's characters (１６．４ ％), read as the characters they stand for
_WIDE = "\uff04\uff05\uff0b-\uff0e\uff10-\uff19\ufe50\ufe52\ufe62\ufe63\ufe69\ufe6a"
_SPECIAL = re.compile(f"[&\\\\<*_~`{_INVISIBLE}{_WIDE}]")
_SPECIAL_ASCII = re.compile(r"[&\\<*_~`]")
_IS_INVISIBLE = re.compile(f"[{_INVISIBLE}]+")
_ENTITY = re.compile(r"&(?:#[0-9]{1,8}|#[xX][0-9a-fA-F]{1,7}|[A-Za-z][A-Za-z0-9]{1,31});?")
# Markup that renders as nothing of its own: a tag, a delimiter run of emphasis, strikethrough or code
_TAG_AT = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:[^<>\"']|\"[^\"]*\"|'[^']*')*>")
_DELIMITERS = re.compile(r"\*+|_+|~~+|`+")
_NUMBER_PUNCT = ".,%$+-"


def _inside_number(before: str, after: str) -> bool:
    """Do the characters seen around a piece of markup (the two before it, the two after) put it inside a
    number: a digit on each side, a point or a comma between digits, or a % after?"""
    left = before[-1:].isdigit() or (before[-1:] in (".", ",") and before[-2:-1].isdigit())
    right = after[:1].isdigit() or after[:1] == "%" or (after[:1] in (".", ",") and after[1:2].isdigit())
    return left and right


class SourceMap:
    """Where the characters seen of a text come from in the text as written: pieces of what is seen, each
    either copied from the text (character for character) or standing for a span of it (a reference, a
    wide form: each of its characters comes from the whole span)."""

    def __init__(self) -> None:
        self._seen: list[int] = []  # where each piece starts in what is seen
        self._pieces: list[tuple[int, int, bool]] = []  # (start, end) in the text, copied?

    def add(self, seen_at: int, start: int, end: int, copied: bool) -> None:
        self._seen.append(seen_at)
        self._pieces.append((start, end, copied))

    def _at(self, k: int) -> tuple[int, int]:
        """The span of the text the ``k``-th character seen comes from."""
        i = bisect_left(self._seen, k + 1) - 1
        start, end, copied = self._pieces[i]
        return (start + k - self._seen[i], start + k - self._seen[i] + 1) if copied else (start, end)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the text that the characters seen ``start`` to ``end`` (not empty) come from."""
        return self._at(start)[0], self._at(end - 1)[1]


class _Visible:
    """One pass over an answer building what is seen, and where it comes from (see :func:`visible_text`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self.source = SourceMap()
        self.length = 0  # of what is seen so far
        self.changed = False
        self.last = ""  # the last two characters seen so far
        self._close = (len(text) + 1, -1)  # the last search for "-->": (where it started, where found)

    def emit(self, chars: str, start: int, end: int) -> None:
        if chars:
            self.out.append(chars)
            self.source.add(self.length, start, end, copied=False)
            self.length += len(chars)
            self.last = (self.last + chars)[-2:]
        self.changed = True

    def copy(self, start: int, end: int) -> None:
        if end > start:
            self.out.append(self.text[start:end])
            self.source.add(self.length, start, end, copied=True)
            self.length += end - start
            self.last = (self.last + self.text[max(start, end - 2) : end])[-2:]

    def character(self, i: int) -> tuple[str, int]:
        """The character read at ``i`` (a reference decoded, a wide form made plain; '' for one not seen)
        and where the source after it starts."""
        c = self.text[i]
        if c == "&":
            m = _ENTITY.match(self.text, i)
            if m is not None and (decoded := html.unescape(m.group())) != m.group():
                # a decoded character is text: one that is Markdown's or HTML's punctuation must not be read
                # as syntax below (a code span, a tag), so it stands as U+FFFD unless a number uses it
                plain = "".join(
                    ch if ch.isalnum() or ch.isspace() or ch in _NUMBER_PUNCT or not ch.isascii() else "\ufffd"
                    for ch in _IS_INVISIBLE.sub("", decoded)
                )
                return plain, m.end()
        elif c == "\\" and self.text[i + 1 : i + 2] in tuple(_NUMBER_PUNCT):
            return self.text[i + 1], i + 2
        elif (run := _IS_INVISIBLE.match(self.text, i)) is not None:
            return "", run.end()
        elif c >= "\uff00" or "\ufe50" <= c <= "\ufe6f":
            return unicodedata.normalize("NFKC", c), i + 1
        return c, i + 1

    def next_seen(self, i: int) -> str:
        """The next two characters seen at or after ``i`` (fewer at the end), markup passed over."""
        out = ""
        while i < len(self.text) and len(out) < 2:
            if self.text[i] in "<*_~`" and (end := self.markup_end(i)) > i:
                i = end
                continue
            c, i = self.character(i)
            out += c
        return out[:2]

    def markup_end(self, i: int) -> int:
        """Where a run of markup starting at ``i`` ends (``i`` when none starts there)."""
        end = i
        while end < len(self.text):
            if self.text.startswith("<!--", end):
                close = self._comment(end)
                if close < 0:
                    break
                end = close
            elif (m := _TAG_AT.match(self.text, end) or _DELIMITERS.match(self.text, end)) is not None:
                end = m.end()
            else:
                break
        return end

    def _comment(self, i: int) -> int:
        """Where the comment opening at ``i`` ends, or -1. The last search for ``-->`` is remembered, so a
        text of many unclosed comments is still read in one pass."""
        for empty in ("<!-->", "<!--->"):
            if self.text.startswith(empty, i):
                return i + len(empty)
        searched_from, close = self._close
        if not (searched_from <= i + 4 and (close < 0 or close >= i + 4)):
            close = self.text.find("-->", i + 4)
            self._close = (i + 4, close)
        return close + 3 if close >= 0 else -1


def visible_text(text: str) -> tuple[str, SourceMap | None]:
    """``text`` (Markdown, perhaps with HTML in it) as a reader sees it rendered, for reading its numbers:
    characters no renderer shows dropped; character references decoded (as a browser decodes them: ``&#49``
    too); a backslash-escaped ``.``, ``,``, ``%``, ``$``, ``+`` or ``-`` unescaped; wide forms (``１６％``)
    read as plain; and markup that shows nothing of its own (a tag, a comment, a run of ``*``, ``_``,
    ``~~`` or backticks) left out where it stands between the characters of a number (``1<b></b>6.4``).
    With it, where what is seen comes from in ``text`` (:class:`SourceMap`), or None when what is seen is
    ``text`` itself (the common case)."""
    special = _SPECIAL_ASCII if text.isascii() else _SPECIAL  # isascii costs nothing: str knows it
    if special.search(text) is None:
        return text, None
    seen = _Visible(text)
    pos = scan = 0  # text[pos:scan] is seen as written, and copied in one piece when something differs
    while (m := special.search(text, scan)) is not None:
        i = m.start()
        c = text[i]
        if c in "<*_~`":
            before = (seen.last + text[max(pos, i - 2) : i])[-2:]
            if before[-1:].isdigit() or before[-1:] in (".", ","):
                end = seen.markup_end(i)
                if end > i and _inside_number(before, seen.next_seen(end)):
                    seen.copy(pos, i)
                    seen.changed, pos = True, end
                    scan = end
                    continue
            run = _DELIMITERS.match(text, i)
            scan = run.end() if run is not None else i + 1
            continue
        chars, after = seen.character(i)
        if chars != c or after != i + 1:
            seen.copy(pos, i)
            seen.emit(chars, i, after)
            pos = after
        scan = after
    seen.copy(pos, len(text))
    if not seen.changed:
        return text, None
    return "".join(seen.out), seen.source


def _step(digits: str, decimals: int) -> float:
    """One unit of the last digit shown. For an integer ending in zeros, the zeros may be rounding
    ("about 1,200" of 1,234), as long as two significant digits are left: "1,200" steps by 100, "30,000"
    by 1,000, "100" by 10."""
    if decimals:
        return 10.0**-decimals
    significant = digits.lstrip("0") or "0"
    zeros = len(significant) - len(significant.rstrip("0"))
    return 10.0 ** min(zeros, max(len(significant) - 2, 0))


def _scan(answer: str, masked: str, *, exempt: bool) -> list[Claim]:
    claims: list[Claim] = []
    for m in _NUMBER.finditer(masked):
        if m.group("skip") is None:
            claim = _claim(answer, masked, m, exempt)
            if claim is not None:
                claims.append(claim)
    return claims


def _claim(answer: str, masked: str, m: re.Match[str], exempt: bool) -> Claim | None:
    digits_at, end = m.span()
    int_part = masked[digits_at : m.end("int")]  # the first digit is matched before the group
    frac, exp = m.group("frac") or "", m.group("exp") or ""
    if masked[end : end + 1] in (":", "/") and masked[end + 1 : end + 2].isdigit():
        return None  # 24/7, 100:1
    if masked[digits_at - 1 : digits_at] == "-" and _NAME_RUN.search(masked, max(0, digits_at - 40), digits_at):
        return None  # part of a name: GPT-4.1, Llama-3.1-8B, COVID-19 (but 10-20 % is a range)
    start, currency = _before(masked, digits_at)
    # after: %, a scale, a unit (kept out of the text), or letters that make it an identifier
    percent, scale = False, 1.0
    tail = _AFTER.match(masked, end)
    if tail is not None:
        glued, word = tail.group("glued"), tail.group("word")
        if glued is not None:
            low = glued.lower()
            if any(c.isdigit() for c in glued) or (not frac and low in _ORDINALS):
                return None  # 5e3a, 7f3a9c, 3rd
            if low == "pp":
                percent, end = True, tail.end()
            elif glued in _GLUED_SCALES or (glued == "m" and currency):
                scale, end = _SCALES[low], tail.end()
        elif tail.group("pct") is not None or word.lower() in _PERCENT_WORDS:
            percent, end = True, tail.end()
        else:
            scale, end = _SCALES[word.lower()], tail.end()
    if not currency:
        cur = _CURRENCY_AFTER.match(masked, end)
        if cur is not None:
            currency, end = cur.group().strip(_GAPS), cur.end()
    digits = int_part if int_part.isdigit() else "".join(c for c in int_part if c.isdigit())
    if len(digits) + len(frac) > 30 or len(exp) > 5:
        return None  # an id or a hash, not a result
    if exempt:
        bare = not (frac or exp or percent or currency or scale != 1.0)
        if bare and (len(digits) <= 2 or (len(int_part) == 4 and 1900 <= int(digits) <= 2100)):
            return None  # a small count ("3 regions", "top 5") or a year
        if _is_position(masked, start, end, bare, quantity=percent or bool(currency) or scale != 1.0):
            return None
    decimals = len(frac) - 1 if frac else 0
    power = 10.0 ** max(-300, min(300, int(exp[1:].replace("−", "-")))) if exp else 1.0
    value = float(digits + frac) * power * scale
    step = _step(digits, decimals) * power * scale
    return Claim(answer[start:end], start, end, value, decimals, step, percent, scale, currency)


def _before(masked: str, start: int) -> tuple[int, str]:
    """Where the number's text starts, taking in a sign and a currency written before the digits ("−3 %",
    "$5", "$-5", "-$5", "USD 5"), and that currency."""
    currency, signed = "", False
    if start and masked[start - 1] in _SIGNS:
        start, signed = start - 1, True
    if start and masked[start - 1] in _SYMBOLS:
        currency, start = masked[start - 1], start - 1
    elif start >= 4 and masked[start - 1] in _GAPS and masked[start - 4 : start - 1] in _CODES:
        currency, start = masked[start - 4 : start - 1], start - 4
    if currency and not signed and start and masked[start - 1] in _SIGNS:
        start, signed = start - 1, True
    if signed and masked[start] in _SIGNS and start and masked[start - 1].isalnum():
        start += 1  # a minus between two numbers ("10-20"), not a sign
    return start, currency


def _is_position(masked: str, start: int, end: int, bare: bool, quantity: bool) -> bool:
    """A list position ("1." opening a line, "step 2", "Python 3.11") or a bound ("p < 0.05")."""
    line = masked[masked.rfind("\n", 0, start) + 1 : start]
    if bare and not line.strip(" \t>*_#") and masked[end : end + 1] in (".", ")"):
        return True  # "1." or "2)" opening a list item
    head = line[-40:]
    if head[-1:] in ("-", "–") or head.endswith((" to ", " through ")):
        head = _RANGE_START.sub("", head)  # "rows 100-150": the word before the range
    if not quantity and head[-1:] in (" ", "\u00a0"):
        words = head.split()
        if words and words[-1].lower().lstrip("(*_[") in _POSITION_WORDS:
            return True
    bound = line.rstrip(" \t")  # a bound, with something before it: not a "> " quoting the line
    if bound[-1:] not in ("<", ">", "≤", "≥", "="):
        return False
    return any(bound.endswith(op) and bound[: -len(op)].strip(" \t>") for op in _THRESHOLDS)


def find_numbers(answer: str) -> list[Claim]:
    """The numbers to check in a Markdown answer, in order (see the module docstring for what is left out),
    read in what a reader sees of it (:func:`visible_text`); each claim's ``text``, ``start`` and ``end``
    are those of ``answer`` as written (``&#49;6.4 %``, ``1\u200b6.4 %``)."""
    visible, source = visible_text(answer)
    claims = _scan(visible, _masked(visible), exempt=True)
    if source is None:
        return claims
    spans = [source.span(c.start, c.end) for c in claims]
    return [replace(c, text=answer[start:end], start=start, end=end) for c, (start, end) in zip(claims, spans)]


# -- reading the outputs ----------------------------------------------------------------------------------

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
    except ValueError:  # a %, or grouped with , ' or spaces: the whole and each piece (CSV fields, columns)
        odd = set(filter(_ODD.search, tokens))
    plain = tokens - odd
    out = dict(zip(map(float, plain), plain))
    for token in odd:
        number = token.rstrip("%")
        out.setdefault(float(_OUT_SEP.sub("", number)), number)
        for piece in _OUT_SEP.split(number) if number != token or _OUT_SEP.search(number) else ():
            if len(piece) > 2 or "." in piece:
                out.setdefault(float(piece), piece)
    return out


@dataclass(frozen=True)
class Anchor:
    """A claim looked up: ``found``; the call whose output has it — of the output values that give the
    claim, the nearest, in the first call that has that value — and the line of that output it is on
    (spaces collapsed, cut to 200 characters) for a hover."""

    claim: Claim
    found: bool
    call_id: str | None = None
    line: str | None = None


class OutputIndex:
    """The numbers of a turn's tool outputs, parsed once. Add each result as it arrives (one regular
    expression pass over its texts, its values merged into one sorted list); :meth:`anchor` then costs a
    few binary searches per claim, however large the outputs."""

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
            self._first.update(dict.fromkeys([v for v in tokens if v not in self._first], len(self._tokens) - 1))
            self._values.extend(tokens)
        self._values.sort()  # a sorted run and a short new one: mostly a merge

    def anchor(self, claims: Iterable[Claim]) -> list[Anchor]:
        return [self._anchor(claim) for claim in claims]

    def _anchor(self, claim: Claim) -> Anchor:
        """The output value nearest the claim among those that give it (the best evidence to show)."""
        values, best, distance = self._values, None, 0.0
        for center, lo, hi in _intervals(claim):
            i = bisect_left(values, center)
            for value in values[max(i - 1, 0) : i + 1]:
                off = abs(value - center) / (hi - lo)
                if lo <= value <= hi and (best is None or off < distance):
                    best, distance = value, off
        if best is None:
            return Anchor(claim, False)
        at = self._first[best]
        call_id, text = self._texts[at]
        return Anchor(claim, True, call_id, _line_of(text, self._tokens[at][best]))


def _intervals(claim: Claim) -> list[tuple[float, float, float]]:
    """``(center, low, high)``: the unsigned output values that give the claim. Rounded to the claim's step
    it is the claim, or cut to it (a copied digit string: 0.1318 written 13.1 %). Unsigned on both sides:
    an answer says "fell 3 %" of a -0.03, and code and prose sign a change either way, so a sign is never
    held against a number (an explicit "+16.4" matches an output -16.4 too)."""
    low, high = claim.value - claim.step / 2, claim.value + claim.step
    slack = max(abs(claim.value), claim.step) * 1e-9  # float noise at the edges (13.05 stored as 13.0499…)
    out = [(claim.value, low - slack, high + slack)]
    if claim.percent:  # the fraction: 0.131417 for 13.1 %
        out.append((claim.value / 100, (low - slack) / 100, (high + slack) / 100))
    if claim.scale != 1.0:  # the number before the scale: an output already in millions
        out.append((claim.value / claim.scale, (low - slack) / claim.scale, (high + slack) / claim.scale))
    return out


def _line_of(text: str, token: str) -> str:
    at = text.find(token)
    for _ in range(64):  # the first occurrence standing alone (not the 34 of 1234)
        if at < 0:
            break
        before, after = text[at - 1 : at] if at else "", text[at + len(token) : at + len(token) + 1]
        if not (before and (before.isalnum() or before in "._")) and not after.isdigit():
            break
        at = text.find(token, at + 1)
    if at < 0:
        at = text.find(token)
    start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
    line = " ".join(text[start : end if end >= 0 else len(text)].split())
    return line if len(line) <= 200 else line[:199] + "…"


def anchor(claims: Iterable[Claim], sources: Iterable[tuple[str, str]]) -> list[Anchor]:
    """Look each claim up in ``sources``, ``(call_id, text)`` pairs (see :func:`result_sources`)."""
    index = OutputIndex()
    for call_id, text in sources:
        index.add_text(call_id, text)
    return index.anchor(claims)


# -- the turn ---------------------------------------------------------------------------------------------


def _key(value: float) -> float:
    return float(f"{value:.10g}")


def prompt_numbers(prompt: str) -> set[tuple[float, bool]]:
    """Every number of the user's prompt, as ``(unsigned value, is a percentage)``, none exempted."""
    return {(_key(c.value), c.percent) for c in _scan(prompt, prompt, exempt=False)}


def _in_prompt(claim: Claim, numbers: set[tuple[float, bool]]) -> bool:
    if (_key(claim.value), claim.percent) in numbers:
        return True
    return claim.percent and (_key(claim.value / 100), False) in numbers  # asked about 0.15, answered 15 %


def check_turn(
    answer: str,
    prompt: str,
    results: Iterable[ToolResultPart] | OutputIndex,
    *,
    inputs: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The ``numbers`` list of the turn bundle: for each number of the answer (none of the prompt's), in
    order, ``{"text": as written, "found": bool, "call_id": the call whose output has it or None}``, with
    for renderers ``start``/``end`` (offsets of ``text`` in ``answer``) and ``line`` (that call's output
    line holding it, or None). ``results`` may be an :class:`OutputIndex` fed during the turn. ``inputs``
    are more texts whose numbers the turn chose rather than found — the code of its calls, say
    (``df[df.revenue > 1000]`` then "orders above $1,000") — exempt like the prompt's."""
    index = results if isinstance(results, OutputIndex) else OutputIndex(results)
    asked = prompt_numbers("\n".join([prompt, *inputs]))
    claims = [c for c in find_numbers(answer) if not _in_prompt(c, asked)]
    return [
        {
            "text": a.claim.text,
            "found": a.found,
            "call_id": a.call_id,
            "start": a.claim.start,
            "end": a.claim.end,
            "line": a.line,
        }
        for a in index.anchor(claims)
    ]


def _missing(numbers: Sequence[dict[str, Any]]) -> list[str]:
    return [str(n["text"]) for n in numbers if not n.get("found")]


def not_found_line(numbers: Sequence[dict[str, Any]]) -> str | None:
    """The user's one line under the answer: "2 numbers not found in this turn's outputs", or None."""
    missing = len(_missing(numbers))
    if not missing:
        return None
    return f"{missing} number{'s' if missing != 1 else ''} not found in this turn's outputs"


def model_note(numbers: Sequence[dict[str, Any]], limit: int = 8) -> str | None:
    """The note for the model's next turn naming the numbers no tool output had, or None."""
    missing = _missing(numbers)
    if not missing:
        return None
    shown = missing[:limit]
    if len(missing) > limit:
        shown.append(f"{len(missing) - limit} more")
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    if len(missing) == 1:
        return (
            f"Note: in your last answer, {listed} does not appear in any tool output of that turn; check it "
            "with a tool before relying on it, or say it is an estimate."
        )
    return (
        f"Note: in your last answer, {listed} do not appear in any tool output of that turn; check them "
        "with a tool before relying on them, or say they are estimates."
    )


__all__ = [
    "Anchor",
    "Claim",
    "OutputIndex",
    "SourceMap",
    "anchor",
    "check_turn",
    "find_numbers",
    "html_text",
    "model_note",
    "not_found_line",
    "prompt_numbers",
    "result_sources",
    "visible_text",
]
