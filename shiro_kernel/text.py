"""Shortening text, in one place: for the model (a cut that says how much is gone) and for people (one
line with an ellipsis), plus the bounded head-and-tail buffer that tools capture output into.

Every limit is in characters (bytes for :class:`HeadTail` fed with bytes). Nothing here ever builds a
string longer than its limit plus the note.
"""

from __future__ import annotations

import collections
import re
from typing import Generic, TypeVar


def cut(text: str, limit: int, *, tail: int = 0, unit: str = "characters", ellipsis: str | None = None) -> str:
    """``text`` if it fits ``limit``; otherwise its first ``limit - tail`` characters, a note saying how
    many were left out and how many there were, and the last ``tail`` characters. With ``ellipsis``
    (for people, not the model): the first characters ending in it, ``limit`` in all, and no note."""
    if len(text) <= limit:
        return text
    if ellipsis is not None:
        return text[: max(0, limit - len(ellipsis))] + ellipsis
    tail = max(0, min(tail, limit))
    head = text[: limit - tail]
    end = text[len(text) - tail :] if tail else ""
    gone = len(text) - len(head) - len(end)
    note = f"[... {gone:,} {unit} truncated; {len(text):,} in all ...]"
    return f"{head}\n{note}\n{end}" if end else f"{head}\n{note}"


def one_line(text: str, limit: int, ellipsis: str = "...", *, room: bool = True) -> str:
    """Whitespace collapsed to single spaces; over ``limit`` characters it is cut and ends in ``ellipsis``
    — within the limit, or (``room=False``, the seed's title rule: first 60 + ``...``) after it."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return (flat[: max(0, limit - len(ellipsis))] if room else flat[:limit]) + ellipsis


def first_line(text: str, limit: int, ellipsis: str = "...") -> str:
    """The first non-blank line of ``text`` (stripped), whole up to ``limit`` characters, else cut to end
    in ``ellipsis`` within the limit; '' when there is none."""
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: max(0, limit - len(ellipsis))] + ellipsis
    return ""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _shown_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, as os.listdir hands it over: that byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def encodable(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate (what ``os.listdir`` returns for a file name that is
    not UTF-8, ``'caf\\udce9.csv'``) is escaped as Python shows such a name's bytes (``caf\\xe9.csv``), another
    one as ``\\udXXX``; a surrogate pair becomes its character. Anything encodable is returned as it is."""
    if not _SURROGATE.search(text):
        return text
    joined = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")  # pairs → characters
    return _SURROGATE.sub(_shown_surrogate, joined)


S = TypeVar("S", str, bytes)


class HeadTail(Generic[S]):
    """A bounded log of ``str`` or ``bytes`` chunks: keeps the first ``head`` and the last ``tail``
    units, and counts what fell out between them (``dropped``). Memory stays O(head + tail) whatever
    is written."""

    def __init__(self, empty: S, head: int, tail: int) -> None:
        self._empty: S = empty
        self._head: list[S] = []
        self._head_len = 0
        self._head_max = head
        self._tail: collections.deque[S] = collections.deque()
        self._tail_len = 0
        self._tail_max = tail
        self.dropped = 0

    def write(self, chunk: S) -> None:
        if not chunk:
            return
        room = self._head_max - self._head_len
        if room > 0:
            self._head.append(chunk[:room])
            self._head_len += min(room, len(chunk))
            chunk = chunk[room:]
            if not chunk:
                return
        self._tail.append(chunk)
        self._tail_len += len(chunk)
        while self._tail_len > self._tail_max:
            excess = self._tail_len - self._tail_max
            first = self._tail[0]
            if len(first) <= excess:
                self._tail.popleft()
                self._tail_len -= len(first)
                self.dropped += len(first)
            else:
                self._tail[0] = first[excess:]
                self._tail_len -= excess
                self.dropped += excess

    def parts(self) -> tuple[S, S]:
        """(head, tail) as kept."""
        return self._empty.join(self._head), self._empty.join(self._tail)

    def __len__(self) -> int:
        return self._head_len + self._tail_len


def joined(buffer: HeadTail[str], unit: str = "characters of output") -> str:
    """A text buffer's content, with a note where something was dropped."""
    head, tail = buffer.parts()
    if buffer.dropped:
        return f"{head}\n[... {buffer.dropped:,} {unit} truncated ...]\n{tail}"
    return head + tail


__all__ = ["HeadTail", "cut", "encodable", "first_line", "joined", "one_line"]
