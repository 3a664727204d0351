"""The answer's numbers are read in what a reader sees of it (issue 33, point 8): a number written with
character references, zero-width or other invisible characters, wide forms or markup between its digits is
still a claim, with the text and offsets of the answer as written (so every renderer marks it there); what
is seen as written is read as before."""

from __future__ import annotations

import re
import sys
import unicodedata
from itertools import pairwise

import pytest

from shiro_kernel.numbers.claims import find_numbers
from shiro_kernel.numbers.turn_check import check_turn
from shiro_kernel.numbers.visible import _INVISIBLE, visible_text
from shiro_kernel.transcript import ToolResultPart


def claims(answer: str) -> list[tuple[str, float, bool]]:
    return [(c.text, c.value, c.percent) for c in find_numbers(answer)]


@pytest.mark.parametrize(
    ("answer", "seen"),
    [
        ("&#49;6.4 %", "16.4 %"),
        ("&#x31;6.4 %", "16.4 %"),
        ("16&period;4 %", "16.4 %"),
        ("1&#8203;6.4 %", "16.4 %"),  # a reference to an invisible character: gone too
        ("1\u200b6.4 %", "16.4 %"),
        ("1\u2060\u2060\u20606.4 %", "16.4 %"),
        ("16\u00ad.4 %", "16.4 %"),
        ("\u202e%4.61", "%4.61"),  # a bidi override is dropped: the number is then read, whichever way
        ("1\U000e0031\U000e007f6.4 %", "16.4 %"),  # tag characters
        ("1<b></b>6.4 %", "16.4 %"),
        ('1<span title="a > b">6</span>.4 %', "16.4 %"),
        ("1<!-- x > y -->6.4 %", "16.4 %"),
        ("1<!---->6.4 %", "16.4 %"),
        ("1**6**.4 %", "16.4 %"),
        ("1`6`.4 %", "16.4 %"),
        ("1~~6~~.4 %", "16.4 %"),
        ("1,**234** rows", "1,234** rows"),
        ("1.**5** %", "1.5** %"),
        ("16\\.4 %", "16.4 %"),
        ("１６．４ ％", "16.4 %"),
    ],
)
def test_what_is_seen(answer: str, seen: str) -> None:
    visible, source = visible_text(answer)
    assert visible == seen
    # each character seen comes from a span of the text, in order
    assert source is not None
    spans = [source.span(k, k + 1) for k in range(len(visible))]
    assert all(0 <= a < b <= len(answer) for a, b in spans)
    assert all(p[1] <= q[0] for p, q in pairwise(spans))
    assert all(
        answer[a:b] == c for (a, b), c in zip(spans, visible) if b - a == 1 and answer[a].isascii() and c.isdigit()
    )


@pytest.mark.parametrize(
    "answer",
    [
        "The mean is **2.0**, up 16.4 % on last year.",
        "| region | sales |\n|---|---|\n| north | 1,234 |",
        "`df.x.mean()` gives `0.1314`; see <https://example.com/a_b>.",
        "a_b_c, 3 * 4 and x ~ y, <b>bold</b> & more",
        "R&D spent $1.2M; AT&T too.",
    ],
)
def test_text_seen_as_written_is_read_as_before(answer: str) -> None:
    assert visible_text(answer) == (answer, None)


def test_markup_that_shows_is_kept() -> None:
    """Markup is left out only between the characters of a number: elsewhere it is read as before."""
    assert visible_text("**16.4 %** and *x*")[1] is None
    assert visible_text("10~20 %")[1] is None  # a lone tilde is no strikethrough
    assert visible_text("**2.0**, up; x.**5 %**")[1] is None  # a comma, a point after a letter: not a number's
    assert visible_text("<b>16.4 %</b>")[1] is None
    assert claims("<b>16.4 %</b>") == [("16.4 %", 16.4, True)]


def test_a_disguised_number_is_a_claim_with_the_answers_text_and_offsets() -> None:
    answer = "Coffee grew &#49;6.4 %, tea 1\u200b3.1 % and cocoa 1<b></b>2,345."
    found = find_numbers(answer)
    assert [(c.text, c.value, c.percent) for c in found] == [
        ("&#49;6.4 %", 16.4, True),
        ("1\u200b3.1 %", 13.1, True),
        ("1<b></b>2,345", 12345.0, False),
    ]
    assert all(answer[c.start : c.end] == c.text for c in found)
    # the check finds what it can, marks the rest, as for numbers written plainly
    numbers = check_turn(answer, "", [ToolResultPart("c", "python", "tea 0.131417")])
    assert [(n["text"], n["found"]) for n in numbers] == [
        ("&#49;6.4 %", False),
        ("1\u200b3.1 %", True),
        ("1<b></b>2,345", False),
    ]
    # before (read in the source), each escaped: no claim, or a smaller one
    assert claims("&#49;6.4 %") == [("&#49;6.4 %", 16.4, True)]


def test_a_decoded_character_is_text_not_syntax() -> None:
    """`&#96;` shows a backtick, which opens no code span: the number between two of them is read."""
    assert claims("&#96;x = 16.4 %&#96;") == [("16.4 %", 16.4, True)]
    assert claims("`x = 16.4 %`") == []  # real code is not read


def test_an_images_alt_text_is_read() -> None:
    """The labextension shows a raw <img>'s alt text as the text of the link it becomes."""
    assert claims('<img alt="16.4 %" src="x.png">') == [("16.4 %", 16.4, True)]
    assert claims('<img src="x.png" width="120">') == []


def test_every_format_character_is_invisible() -> None:
    """_INVISIBLE holds every character of Unicode's format category (Cf) this Python knows."""
    invisible = re.compile(f"[{_INVISIBLE}]")
    missing = [
        f"U+{cp:04X}"
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) == "Cf" and not invisible.match(chr(cp))
    ]
    assert not missing, missing
    assert not invisible.match("1") and not invisible.match(" ") and not invisible.match("\u00a0")


@pytest.mark.timeout(60)  # each took about 0.2 s here; a quadratic reading of one takes many minutes
def test_reading_what_is_seen_is_linear_on_hostile_text() -> None:
    hostile = [
        "1<!--" * 20_000,  # comments never closed
        '1<a "' * 20_000,  # tags never closed
        "1*" * 50_000,
        "&#49;" * 30_000,
        "1`" * 30_000,
        "\u200b" * 100_000,
        "1<b></b>" * 20_000,
    ]
    for text in hostile:
        assert find_numbers(text) is not None
