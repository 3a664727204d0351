"""What the reader sees of the model's answer: the text its numbers are read in (issue 28, issue 33 #8).

A number is checked as the reader sees it rendered, not as the Markdown spells it, so that no spelling hides
one from the check: characters no one sees (zero-width spaces, joiners, soft hyphens, bidirectional
controls…) are dropped, character references decoded (``&#49;6.4 %`` shows as 16.4 %), wide forms read as
plain (``１６．４ ％``), and markup that renders as nothing between the characters of a number
(``1<b></b>6.4``, ``1**6**.4``, a backslash escape) left out. :class:`SourceMap` keeps where each character
seen comes from, so a claim's text and offsets are still those of the answer as written and the renderers
mark it there.

Pure: imports nothing of the project; one pass over the text, searched only for the characters that can
make what is seen differ from what is written.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_left

# Characters no renderer shows: Unicode's format characters (Cf: zero-width space and joiners, soft hyphen,
# bidirectional controls, word joiner, BOM, tags…) and the invisible ones of other categories (combining
# grapheme joiner, Hangul fillers, Mongolian and other variation selectors). tests/numbers/test_visible.py
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


__all__ = ["SourceMap", "visible_text"]
