"""What the answer claims: the numbers of the model's answer that are checked (issue 28).

When a turn ends, each number the answer states as a result (integers of 3+ digits, decimals, percentages,
currency amounts, numbers with thousands separators or a scale such as "1.2 million") is looked up in what
the turn's tools returned. :func:`find_numbers` finds them, as :class:`Claim` (text as written, offsets,
value, the precision shown), in what a reader sees of the answer (:mod:`.visible`: references decoded,
invisible characters and markup between digits left out); the claim's text and offsets are still those of
the answer as written, so the renderers mark it there.

Not checked (never a :class:`Claim`): years (1900-2100 written as four bare digits), list positions ("1."
at the start of a line, "#3", "step 2", "row 1,200", "Python 3.11"), small counts (integers under 100
with no decimals, %, currency or scale), dates and times (2024-03-01, 03/01/2024, 12:30), versions and
addresses (3.11.7), identifiers (x2, df3, hex ids, ordinals), thresholds ("p < 0.05"), numbers in code
blocks, URLs and HTML tags (but an ``alt`` text, which the labextension shows as the text of the image's
link, is read), and numbers the turn chose rather than found (:func:`prompt_numbers`, :func:`in_prompt`:
those of the user's prompt and of the calls' arguments).

Pure: imports nothing of the project but :mod:`.visible`; every scan is a linear regular expression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .visible import visible_text


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


# -- what is read as a number ----------------------------------------------------------------------------

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
_POSITION_WORDS = frozenset(
    (
        # a place in a table, a document or a list
        "step",
        "item",
        "row",
        "rows",
        "line",
        "lines",
        "cell",
        "column",
        "col",
        "figure",
        "fig",
        "fig.",
        "table",
        "section",
        "chapter",
        "page",
        "part",
        "case",
        # a numbered thing, or a place in an order
        "option",
        "question",
        "issue",
        "pr",
        "ticket",
        "no.",
        "nr.",
        "index",
        "position",
        "rank",
        "top",
        # a stage of a run
        "round",
        "phase",
        "stage",
        "epoch",
        "iteration",
        # a version, and software named with its version
        "version",
        "release",
        "v",
        "python",
        "pandas",
        "numpy",
        "polars",
        "matplotlib",
        "sklearn",
        "scikit-learn",
        "ipython",
        "jupyterlab",
        "node",
    )
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
# a tag's alt text, which is read: the labextension shows it as the text of the image's link
_ALT = re.compile(r"""(?i)\salt\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""")


def _masked(answer: str) -> str:
    """``answer`` with what is not read (:data:`_MASK`) blanked out: same length, line breaks kept, so
    offsets stay those of ``answer``."""

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


# -- numbers the turn chose -------------------------------------------------------------------------------


def _key(value: float) -> float:
    return float(f"{value:.10g}")


def prompt_numbers(prompt: str) -> set[tuple[float, bool]]:
    """Every number of the user's prompt, as ``(unsigned value, is a percentage)``, none exempted."""
    return {(_key(c.value), c.percent) for c in _scan(prompt, prompt, exempt=False)}


def in_prompt(claim: Claim, numbers: set[tuple[float, bool]]) -> bool:
    """Is the claim one of ``numbers`` (:func:`prompt_numbers`), or the percentage of one of them?"""
    if (_key(claim.value), claim.percent) in numbers:
        return True
    return claim.percent and (_key(claim.value / 100), False) in numbers  # asked about 0.15, answered 15 %


__all__ = ["Claim", "find_numbers", "in_prompt", "prompt_numbers"]
